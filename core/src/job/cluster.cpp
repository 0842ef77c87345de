// k3::Cluster (k3/cluster.hpp): joining a job of ranks, rank 0's link to the later ranks,
// and the end of a run. A later rank's own loop is in cluster_stage.cpp.
#include <k3/cluster.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>

#include <k3/batch.hpp>
#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/model.hpp>
#include <k3/pipeline_plugins.hpp>
#include <k3/runtime.hpp>

#include "job/cluster_impl.hpp"

namespace k3 {

using cluster::Header;
using cluster::Kind;
using cluster::Message;

namespace {

/// What a split model does not do yet, refused on every rank alike before anything loads.
void refuse_unsupported(const Pipeline& p) {
  for (const char* key : {"job.load_state", "job.save_state", "trace.out", "cache.future"})
    if (!p.get_path(key).empty())
      p.refuse(key, "not supported with a model split over ranks (cluster.transport " +
                        p.get_string("cluster.transport") + "): each rank holds the state of its own layers only");
}

}  // namespace

/// Rank 0's passes through the later ranks: each pass message posted to rank 1 (rank 0
/// never blocks on a send, so the last rank can always hand it a result), the logits back
/// from the last rank in the order the passes started: every rank runs its passes in the
/// order they come, and between two ranks messages keep their order.
class Cluster::Impl::Link final : public PassLink {
 public:
  Link(Cluster::Impl& c, std::size_t vocab) : c_(c), vocab_(vocab) {}

  [[nodiscard]] std::size_t stages() const noexcept override { return static_cast<std::size_t>(c_.size); }

  std::uint64_t start(std::span<const LinkedSlice> slices, std::span<const std::uint32_t> tokens,
                      std::span<const float> activations, std::size_t banked) override {
    if (const std::optional<Failure> f = c_.failure_copy())
      throw Error(static_cast<ExitCode>(f->code), f->reason);  // the ring is broken: no pass goes round
    std::vector<cluster::WireSlice>& out = c_.wire_slices;
    out.clear();
    Expected want;
    for (const LinkedSlice& s : slices) {
      const SamplingSettings& k = s.sampling;
      out.push_back({s.sequence, s.position, s.rows, static_cast<std::uint8_t>(s.all_positions),
                     static_cast<std::uint8_t>(s.tentative), static_cast<std::uint8_t>(s.logits),
                     static_cast<std::uint8_t>(s.pick), k.temperature, k.top_p, k.min_p, k.repeat_penalty, k.top_k,
                     k.repeat_last_n, k.seed});
      const std::size_t n = s.all_positions || s.tentative ? s.rows : 1;
      want.picks += s.pick ? n : 0;
      want.logits += s.logits ? n * vocab_ : 0;
    }
    Header h;
    h.kind = Kind::pass;
    h.seq = ++c_.passes;
    h.slices = static_cast<std::uint32_t>(out.size());
    h.rows = static_cast<std::uint32_t>(tokens.size());
    h.banked = static_cast<std::uint32_t>(banked);
    const std::span<const std::byte> parts[] = {std::as_bytes(std::span<const cluster::WireSlice>(out)),
                                                std::as_bytes(tokens), std::as_bytes(activations)};
    c_.wire->progress();
    c_.wire->post(1, h, parts);
    want.pass = h.seq;
    in_flight_.push_back(want);
    most_in_flight_ = std::max(most_in_flight_, in_flight_.size());
    return h.seq;
  }

  void finish(std::uint64_t pass, PassOutput& out) override {
    if (in_flight_.empty() || in_flight_.front().pass != pass)
      throw RuntimeError("pass " + std::to_string(pass) + " is not the oldest in flight");
    const Expected want = in_flight_.front();
    in_flight_.pop_front();  // whatever comes (or not), this pass is over
    const Message m = c_.wire->receive(c_.size - 1);
    if (m.header.kind == Kind::error) c_.failed(m);
    const std::size_t pick_bytes = want.picks * sizeof(std::uint32_t);
    if (m.header.kind != Kind::result || m.header.seq != pass || m.header.rows != want.picks ||
        m.payload.size() != pick_bytes + want.logits * sizeof(float))
      throw RuntimeError("rank " + std::to_string(c_.size - 1) + " answered pass " + std::to_string(pass) +
                         " with an unexpected message");
    out.picks.resize(want.picks);
    std::memcpy(out.picks.data(), m.payload.data(), pick_bytes);
    out.logits.resize(want.logits);
    std::memcpy(out.logits.data(), m.payload.data() + pick_bytes, want.logits * sizeof(float));
  }

  /// The most passes that were in flight at once.
  [[nodiscard]] std::size_t most_in_flight() const noexcept { return most_in_flight_; }

 private:
  /// A pass started and the answer it asked for.
  struct Expected {
    std::uint64_t pass = 0;
    std::size_t picks = 0, logits = 0;  ///< ids; floats
  };
  Cluster::Impl& c_;
  std::size_t vocab_;
  std::deque<Expected> in_flight_;  ///< passes started, oldest first
  std::size_t most_in_flight_ = 0;
};

void Cluster::Impl::failed(const Message& error) {
  {
    const std::lock_guard lock(failure_mutex);
    if (!failure) failure = Failure{error.header.code, error.text()};
  }
  throw Error(static_cast<ExitCode>(error.header.code), error.text());
}

std::optional<Cluster::Failure> Cluster::Impl::failure_copy() const {
  const std::lock_guard lock(failure_mutex);
  return failure;
}

std::optional<Cluster::Failure> Cluster::failure() const { return impl_->failure_copy(); }

Cluster::Cluster(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Cluster::~Cluster() = default;

std::unique_ptr<Cluster> Cluster::join(const Pipeline& p) {
  if (p.get_string("cluster.transport") == "none")
    p.refuse("cluster.transport", "a model split over ranks needs a transport (mpi)");
  refuse_unsupported(p);
  auto impl = std::make_unique<Impl>();
  impl->host = std::make_unique<PluginHost>(p.plugin_path());
  impl->transport = create_pipeline_transport(p, *impl->host);
  impl->rank = impl->transport->rank();
  impl->size = impl->transport->size();
  if (impl->size < 2)
    p.refuse("cluster.transport",
             "this process is a job of one rank: start every rank under the launcher, e.g. "
             "mpirun -np 2 k3host --config FILE (or set cluster.transport: none)");
  impl->wire.emplace(*impl->transport, p.get_double("cluster.timeout_s"), nullptr);
  log(LogLevel::info, "cluster",
      "rank " + std::to_string(impl->rank) + " of " + std::to_string(impl->size) + " joined through " +
          p.get_string("cluster.transport"));
  return std::unique_ptr<Cluster>(new Cluster(std::move(impl)));
}

void Cluster::set_stop_flag(const std::atomic<bool>* flag) {
  impl_->host->set_stop_flag(flag);
  impl_->wire->set_stop(flag);
}

int Cluster::rank() const noexcept { return impl_->rank; }
int Cluster::size() const noexcept { return impl_->size; }
std::uint64_t Cluster::bytes_sent() const noexcept { return impl_->wire ? impl_->wire->bytes_sent() : 0; }

LayerRange Cluster::layers_of(const Pipeline& pipeline, const ModelConfig& config) const {
  const std::vector<LayerRange> all = cluster_layer_ranges(pipeline, config, impl_->size);
  const LayerRange mine = all[static_cast<std::size_t>(impl_->rank)];
  log(LogLevel::info, "cluster",
      "rank " + std::to_string(impl_->rank) + " holds layers " + std::to_string(mine.first) + "-" +
          std::to_string(mine.last - 1) + " of " + std::to_string(config.num_hidden_layers));
  return mine;
}

void Cluster::attach(Model& model) {
  Impl& c = *impl_;
  // Every rank has loaded its layers (or says why not) before the first pass.
  // The hello carries the sequences rank 0 runs at once: a later rank must hold as many.
  Header h;
  h.kind = Kind::hello;
  h.slices = static_cast<std::uint32_t>(std::max<std::size_t>(1, model.plan().parallel));
  c.wire->send(1, h, {});
  const Message m = c.wire->receive(c.size - 1);
  if (m.header.kind == Kind::error) c.failed(m);
  if (m.header.kind != Kind::hello)
    throw RuntimeError("rank " + std::to_string(c.size - 1) + " answered hello with an unexpected message");
  c.link = std::make_unique<Impl::Link>(c, static_cast<std::size_t>(model.config().vocab_size));
  model.set_pass_link(c.link.get());  // the link outlives the model: the job's ends first
}

void Cluster::finish(int code, const std::string& reason) noexcept {
  Impl& c = *impl_;
  if (c.finished) return;
  c.finished = true;
  log(LogLevel::info, "cluster",
      "rank 0 sent " + std::to_string(c.wire->bytes_sent()) + " bytes in " + std::to_string(c.passes) +
          " passes, at most " + std::to_string(c.link ? c.link->most_in_flight() : 0) + " in flight at once");
  try {
    // Posted, as the passes: passes still in flight (a run that failed midway) end with
    // their results, which rank 0 takes and drops below while the stop goes round.
    c.wire->post_text(1, Kind::stop, code, reason);
    // The stop goes round: once it is back, every rank has passed it on and is ending.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
      Message m;
      if (left <= 0 || !c.wire->receive_within(c.size - 1, left, m)) {
        log(LogLevel::error, "cluster", "the ranks did not confirm the end of the run within 10 s; ending them");
        c.transport->abort(code == 0 ? 1 : code, "the ranks did not end within 10 s");
        return;
      }
      if (m.header.kind == Kind::stop) {
        c.wire->progress();  // every rank has taken what rank 0 sent
        return;
      }
    }
  } catch (const std::exception& e) {
    log(LogLevel::error, "cluster", std::string("telling the ranks to end failed: ") + e.what());
    c.transport->abort(code == 0 ? 1 : code, e.what());
  }
}

}  // namespace k3
