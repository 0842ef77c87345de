// Index benchmark: times CheckpointIndex::open (through a storage plugin, posix by default,
// as a run reads it) over a header set with the full K3 tensor count, the checkpoint
// identity's samples included. Generate the headers once (sparse files, no tensor data):
//   k3host make-model --geometry k3 --headers-only --out DIR
// then:
//   k3bench-index DIR [REPEATS=5] [STORAGE=posix]
// (STORAGE synthetic: the tensor bytes the identity samples are filled as a run reads them.)
// Prints every run, the identity's samples (bytes, seconds summed over threads) and the
// best/median in seconds and tensors per second.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/plugin_host.hpp>

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: k3bench-index CHECKPOINT_DIR [REPEATS] [STORAGE]\n");
    return 2;
  }
  const int repeats = argc >= 3 ? std::atoi(argv[2]) : 5;
  const std::string plugin = argc == 4 ? argv[3] : "posix";
  if (repeats < 1) {
    std::fprintf(stderr, "k3bench-index: REPEATS must be at least 1\n");
    return 2;
  }
  try {
    k3::PluginHost host;
    const auto storage = host.create_storage(plugin, {});
    std::vector<double> seconds;
    std::size_t tensors = 0, shards = 0;
    for (int i = 0; i < repeats; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const k3::CheckpointIndex index = k3::CheckpointIndex::open(*storage, argv[1]);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      tensors = index.tensors().size();
      shards = index.files().size();
      seconds.push_back(s);
      std::printf(
          "run %d: %zu tensors in %zu shards: %.3f s (%.0f tensors/s); identity samples %.2f MB, %.3f s "
          "summed over threads\n",
          i + 1, tensors, shards, s, static_cast<double>(tensors) / s, static_cast<double>(index.sampled_bytes()) / 1e6,
          index.digest_seconds());
    }
    std::sort(seconds.begin(), seconds.end());
    const double best = seconds.front(), median = seconds[seconds.size() / 2];
    std::printf("best %.3f s (%.0f tensors/s), median %.3f s (%.0f tensors/s) over %d runs\n", best,
                static_cast<double>(tensors) / best, median, static_cast<double>(tensors) / median, repeats);
    return 0;
  } catch (const k3::Error& e) {
    std::fprintf(stderr, "k3bench-index: %s\n", e.what());
    return static_cast<int>(e.code());
  }
}
