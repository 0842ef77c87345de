// A later rank of a model split over ranks (k3::Cluster::serve): loads its layers, then
// runs its share of every pass rank 0 starts, holding each sequence's state of its layers
// in a session of its own (a mirror), until rank 0 says stop. A failure here travels on to
// rank 0 as an error message, and every later message is answered with it.
#include <k3/cluster.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include <k3/batch.hpp>
#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/runtime.hpp>

#include "job/cluster_impl.hpp"

namespace k3 {

using cluster::Header;
using cluster::Kind;
using cluster::Message;
using cluster::WireSlice;

namespace {

/// How long a later rank that got the stop signal still waits for rank 0's stop message
/// (mpirun hands every rank the signal; rank 0 then ends the run and says with what code).
constexpr double kStopGraceS = 3.0;

/// This rank's copy of one of rank 0's sequences: the state of its own layers.
struct Mirror {
  std::unique_ptr<Session> session;
  std::optional<std::int64_t> open;  ///< the start of a tentative chunk not settled yet
  std::uint64_t used = 0;            ///< the last pass it was in
};

class Stage {
 public:
  Stage(Runtime& runtime, std::int64_t context, std::size_t keep)
      : model_(runtime.model()),
        context_(context),
        keep_(keep),
        pass_(model_, model_.plan().step_rows == 0 ? 1 : model_.plan().step_rows, context,
              std::max<std::size_t>(1, keep)) {}

  /// Runs one pass message; returns the message for the next rank (pass, or result).
  void run(const Message& m, Header& out_h, std::vector<std::byte>& out) {
    const Header& h = m.header;
    const auto E = static_cast<std::size_t>(model_.config().hidden_size);
    const std::size_t slices_bytes = std::size_t{h.slices} * sizeof(WireSlice);
    const std::size_t token_bytes = std::size_t{h.rows} * 4;
    const std::size_t float_bytes = (1 + std::size_t{h.banked}) * h.rows * E * sizeof(float);
    if (m.payload.size() != slices_bytes + token_bytes + float_bytes || h.slices == 0)
      throw RuntimeError("pass " + std::to_string(h.seq) + " of " + std::to_string(m.payload.size()) +
                         " bytes does not hold its " + std::to_string(h.slices) + " sequences and " +
                         std::to_string(h.rows) + " rows");
    slices_.resize(h.slices);
    std::memcpy(slices_.data(), m.payload.data(), slices_bytes);
    tokens_.resize(h.rows);
    std::memcpy(tokens_.data(), m.payload.data() + slices_bytes, token_bytes);
    in_.resize(float_bytes / sizeof(float));
    std::memcpy(in_.data(), m.payload.data() + slices_bytes + token_bytes, float_bytes);
    feeds_.clear();
    sampling_.resize(slices_.size());  // the feeds point into it
    std::size_t row = 0;
    for (std::size_t i = 0; i < slices_.size(); ++i) {
      const WireSlice& s = slices_[i];
      if (s.rows == 0 || row + s.rows > tokens_.size())
        throw RuntimeError("pass " + std::to_string(h.seq) + ": its sequences do not cover its rows");
      Mirror& mirror = follow(s, h.seq);
      sampling_[i] = {.temperature = s.temperature,
                      .top_k = s.top_k,
                      .top_p = s.top_p,
                      .min_p = s.min_p,
                      .repeat_penalty = s.repeat_penalty,
                      .repeat_last_n = s.repeat_last_n,
                      .seed = s.seed};
      feeds_.push_back({mirror.session.get(), std::span<const std::uint32_t>(tokens_).subspan(row, s.rows),
                        s.all_positions != 0, s.tentative != 0, s.logits != 0, s.pick != 0 ? &sampling_[i] : nullptr});
      row += s.rows;
    }
    std::size_t banked = 0;
    pass_.run_stage(feeds_, in_, h.banked, out_floats_, banked);
    const bool last = model_.plan().holds_head();
    // The last rank answers as one process's pass would: the picks, the logits asked for.
    if (last) pass_.answer(feeds_, out_floats_, answer_);
    for (const WireSlice& s : slices_)
      if (s.tentative != 0) mirrors_[s.sequence].open = s.position;
    check_experts();
    out_h = h;
    out_h.kind = last ? Kind::result : Kind::pass;
    out_h.banked = static_cast<std::uint32_t>(banked);
    out.clear();
    if (last) {
      out_h.slices = 0;
      out_h.rows = static_cast<std::uint32_t>(answer_.picks.size());
      const auto picks = std::as_bytes(std::span<const std::uint32_t>(answer_.picks));
      const auto logits = std::as_bytes(std::span<const float>(answer_.logits));
      out.insert(out.end(), picks.begin(), picks.end());
      out.insert(out.end(), logits.begin(), logits.end());
    } else {
      out.insert(out.end(), m.payload.begin(),
                 m.payload.begin() + static_cast<std::ptrdiff_t>(slices_bytes + token_bytes));
      const auto floats = std::as_bytes(std::span<const float>(out_floats_));
      out.insert(out.end(), floats.begin(), floats.end());
    }
    evict(h.seq);
  }

 private:
  /// The mirror of sequence `s`, brought to its position: a tentative chunk settled with
  /// the count rank 0 kept (the position says it), a sequence started again reset (even
  /// right after a verification: a --prompts slot's next prompt).
  Mirror& follow(const WireSlice& s, std::uint64_t seq) {
    Mirror& m = mirrors_[s.sequence];
    m.used = seq;
    if (!m.session) m.session = std::make_unique<Session>(model_, context_);
    if (m.open) {
      const std::int64_t pos0 = *m.open;
      m.open.reset();
      if (s.position == 0) {
        // Started again (rank 0 reused its session for another prompt) right after a
        // verification: none of the chunk is kept, and the reset below clears the rest.
        m.session->keep_tentative(0);
      } else {
        if (s.position < pos0 || s.position > m.session->position())
          throw RuntimeError("a sequence at position " + std::to_string(s.position) + " after a tentative chunk at " +
                             std::to_string(pos0) + "-" + std::to_string(m.session->position()));
        m.session->keep_tentative(static_cast<std::size_t>(s.position - pos0));
      }
    }
    if (m.session->position() != s.position) {
      if (s.position != 0)
        throw RuntimeError("a sequence at position " + std::to_string(s.position) + " where this rank's copy is at " +
                           std::to_string(m.session->position()) +
                           ": a split model follows a conversation forward only (no states or snapshots)");
      m.session->reset();
    }
    return m;
  }

  /// A routed expert this rank could not read makes the ids unsound: the run ends with
  /// exit 4 rather than going on with a zero contribution nobody at rank 0 would see.
  void check_experts() {
    const StreamStats st = model_.stream_stats();
    if (!st.expert_failures.empty())
      throw Error(ExitCode::expert_failure, std::to_string(st.expert_failures.size()) +
                                                " routed expert read(s) failed, first " + st.expert_failures.front());
  }

  /// Mirrors of sequences rank 0 no longer runs: beyond twice the sequences of a pass, the
  /// ones used longest ago go.
  void evict(std::uint64_t seq) {
    const std::size_t most = 2 * keep_ + 2;
    while (mirrors_.size() > most) {
      auto oldest = mirrors_.begin();
      for (auto it = mirrors_.begin(); it != mirrors_.end(); ++it)
        if (it->second.used < oldest->second.used) oldest = it;
      if (oldest->second.used == seq) break;
      mirrors_.erase(oldest);
    }
  }

  Model& model_;
  std::int64_t context_;
  std::size_t keep_;
  BatchForward pass_;
  std::map<std::uint64_t, Mirror> mirrors_;
  std::vector<WireSlice> slices_;
  std::vector<std::uint32_t> tokens_;
  std::vector<float> in_, out_floats_;
  std::vector<SamplingSettings> sampling_;  ///< each slice's, as its feed picks by
  std::vector<BatchFeed> feeds_;
  PassOutput answer_;  ///< the last rank's
};

}  // namespace

int Cluster::serve(const Pipeline& p, const LoadHooks& hooks_in, RunSequences sequences) {
  Impl& c = *impl_;
  const std::string me = "rank " + std::to_string(c.rank);
  const int prev = c.rank - 1;
  const int next = (c.rank + 1) % c.size;
  int failed = 0;
  std::string why;
  auto fail = [&](int code, const std::string& what) {
    if (failed != 0) return;
    failed = code;
    why = me + ": " + what;
    log(LogLevel::error, "cluster", why);
  };
  PluginHost host(p.plugin_path());
  std::unique_ptr<Runtime> runtime;
  std::unique_ptr<Stage> stage;
  try {
    LoadHooks hooks = hooks_in;
    hooks.cluster = this;
    host.set_stop_flag(hooks.stop);
    // Not the transport's own stop flag: that would end a wait at once, without the grace.
    c.wire->set_stop(hooks.stop, kStopGraceS);
    runtime = std::make_unique<Runtime>(p, host, hooks, sequences);
    stage = std::make_unique<Stage>(*runtime, p.get_int("memory.context"), runtime->model().plan().parallel);
  } catch (const Error& e) {
    fail(static_cast<int>(e.code()), e.what());
  } catch (const std::exception& e) {
    fail(static_cast<int>(ExitCode::runtime), std::string("internal error: ") + e.what());
  }
  Header out_h;
  std::vector<std::byte> out;
  try {
    for (;;) {
      const Message m = c.wire->receive(prev);
      switch (m.header.kind) {
        case Kind::stop: {
          c.wire->send_text(next, Kind::stop, m.header.code, m.text());
          // Its own reads: rank 0's report counts only rank 0's (tools/bench/cluster_bench.sh
          // adds these up).
          log(LogLevel::info, "cluster",
              me + " sent " + std::to_string(c.wire->bytes_sent()) + " bytes, read " +
                  std::to_string(runtime ? runtime->model().weight_bytes_read() : 0) + " bytes of weights");
          if (m.header.code != 0)
            log(LogLevel::error, "cluster",
                me + " ends with exit code " + std::to_string(m.header.code) + ": " + m.text());
          // Rank 0 chose the run's code; this rank's own failure counts when rank 0 never
          // heard of it, unless it was the same signal cutting this rank's pass short.
          if (m.header.code != 0) return m.header.code;
          return failed == static_cast<int>(ExitCode::interrupted) ? 0 : failed;
        }
        case Kind::error:  // an earlier rank's failure, on its way to rank 0
          c.wire->send_text(next, Kind::error, m.header.code, m.text());
          break;
        case Kind::hello:
        case Kind::pass: {
          if (failed == 0 && m.header.kind == Kind::hello) {
            // Rank 0 runs hello.slices sequences at once; this rank keeps a copy of each.
            const std::size_t held = std::max<std::size_t>(1, runtime->model().plan().parallel);
            if (held < m.header.slices)
              fail(static_cast<int>(ExitCode::usage),
                   "its plan holds " + std::to_string(held) + " sequences at once, rank 0 runs " +
                       std::to_string(m.header.slices) +
                       ": set serve.parallel to one count for every rank (cluster.ranks.N.serve.parallel sets a rank's "
                       "own)");
          }
          if (failed == 0 && m.header.kind == Kind::pass) {
            try {
              stage->run(m, out_h, out);
            } catch (const Error& e) {
              fail(static_cast<int>(e.code()), e.what());
            } catch (const std::exception& e) {
              fail(static_cast<int>(ExitCode::runtime), std::string("internal error: ") + e.what());
            }
          }
          if (failed != 0) {
            c.wire->send_text(next, Kind::error, failed, why);
          } else if (m.header.kind == Kind::hello) {
            c.wire->send(next, m.header, std::span<const std::span<const std::byte>>());
          } else {
            const std::span<const std::byte> part(out);
            c.wire->send(next, out_h, std::span<const std::span<const std::byte>>(&part, 1));
          }
          break;
        }
        default: throw RuntimeError("an unexpected message from rank " + std::to_string(prev));
      }
    }
  } catch (const Error& e) {
    log(LogLevel::error, "cluster", me + ": " + e.what());
    return failed != 0 ? failed : static_cast<int>(e.code());
  } catch (const std::exception& e) {
    log(LogLevel::error, "cluster", me + ": " + e.what());
    return static_cast<int>(ExitCode::runtime);
  }
}

}  // namespace k3
