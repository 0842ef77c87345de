// Rollback benchmark: what keeping only a prefix of a checked token and its drafts costs,
// three ways, on one resident model (the forward pass and its state, not storage):
//   replay    Session::feed_tentative (the KDA layers run on a copy and record; the kept
//             tokens' updates are replayed: maths/tentative.hpp), keeping 1 of the chunk;
//   snapshot  Session::snapshot() before an ordinary feed of the chunk, restore() after,
//             then feed the kept token again (a copy of every KDA state each time);
//   recompute an ordinary feed of the chunk, then a reset and a feed of the whole kept
//             sequence (what a run without either would do; at a streamed budget it also
//             reads every weight a second time, which this resident benchmark leaves out).
// Each against the plain feed of the chunk, interleaved, median of REPEATS:
//   k3bench-rollback MODEL_DIR [DRAFTS=4] [PROMPT=256] [REPEATS=9]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <k3/error.hpp>
#include <k3/model.hpp>
#include <k3/plugin_host.hpp>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 5) {
    std::fprintf(stderr, "usage: k3bench-rollback MODEL_DIR [DRAFTS=4] [PROMPT=256] [REPEATS=9]\n");
    return 2;
  }
  const int drafts = argc > 2 ? std::atoi(argv[2]) : 4;
  const int prompt_len = argc > 3 ? std::atoi(argv[3]) : 256;
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 9;
  if (drafts < 1 || prompt_len < 1 || repeats < 1) {
    std::fprintf(stderr, "k3bench-rollback: DRAFTS, PROMPT and REPEATS must be at least 1\n");
    return 2;
  }
  try {
    k3::PluginHost host;
    k3::ModelSettings settings;
    settings.memory.trunk_gb = 1e6;  // resident: the comparison is of compute and copies
    settings.memory.expert_cache_gb = 1e6;
    k3::Model model(argv[1], host, settings);
    const auto vocab = static_cast<std::uint32_t>(model.config().vocab_size);
    std::vector<std::uint32_t> prompt(static_cast<std::size_t>(prompt_len));
    for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<std::uint32_t>((i * 7919 + 13) % vocab);
    std::vector<std::uint32_t> chunk(static_cast<std::size_t>(drafts) + 1);
    for (std::size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<std::uint32_t>((i * 104729 + 5) % vocab);
    const std::int64_t context = prompt_len + drafts + 8;
    k3::Session session(model, context);
    std::vector<float> logits;
    session.feed(prompt, false, logits);
    const k3::SessionSnapshot start = session.snapshot();

    std::vector<double> plain, replay, snapshot, recompute;
    auto time = [](auto&& f) {
      const auto t0 = Clock::now();
      f();
      return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    for (int r = 0; r < repeats; ++r) {
      session.restore(start);
      plain.push_back(time([&] { session.feed(chunk, true, logits); }));
      session.restore(start);
      replay.push_back(time(
          [&] { (void)session.feed_tentative(chunk, logits, [](std::span<const float>) { return std::size_t{1}; }); }));
      session.restore(start);
      snapshot.push_back(time([&] {
        const k3::SessionSnapshot before = session.snapshot();
        session.feed(chunk, true, logits);
        session.restore(before);
        session.feed({chunk.data(), 1}, false, logits);
      }));
      session.restore(start);
      recompute.push_back(time([&] {
        session.feed(chunk, true, logits);
        std::vector<std::uint32_t> kept = prompt;
        kept.push_back(chunk[0]);
        session.reset();
        session.feed(kept, false, logits);
      }));
    }
    const double base = median(plain);
    std::printf("model %s, %d positions, chunk of 1 + %d drafts keeping 1, median of %d, %s\n", argv[1], prompt_len,
                drafts, repeats, model.kernel_set().c_str());
    std::printf("| way | seconds | vs plain feed of the chunk |\n|---|---:|---:|\n");
    std::printf("| plain feed (no rollback) | %.4f | 1.000 |\n", base);
    std::printf("| replay (feed_tentative) | %.4f | %.3f |\n", median(replay), median(replay) / base);
    std::printf("| snapshot + restore + feed kept | %.4f | %.3f |\n", median(snapshot), median(snapshot) / base);
    std::printf("| recompute the kept sequence | %.4f | %.3f |\n", median(recompute), median(recompute) / base);
    std::printf("snapshot size %.1f MB\n", static_cast<double>(start.bytes()) / 1e6);
    return 0;
  } catch (const k3::Error& e) {
    std::fprintf(stderr, "k3bench-rollback: %s\n", e.what());
    return 1;
  }
}
