#include <k3/machine.hpp>

#include <algorithm>

#include <k3/error.hpp>
#include <k3/log.hpp>

#include "engine/model_impl.hpp"
#include "model/tensor_table.hpp"

namespace k3 {

ModelPlugins create_model_plugins(PluginHost& host, const ModelSettings& settings) {
  ModelPlugins p;
  p.storage = host.create_storage(settings.storage, settings.storage_params);
  p.kernel_name = settings.kernels == "auto" ? host.best_kernels().name : settings.kernels;
  p.kernels = host.create_kernels(p.kernel_name, settings.kernel_params);
  // The policy is created (and its name and parameters checked) even when everything is
  // resident, so a wrong cache section is refused rather than ignored.
  p.cache = host.create_cache(settings.cache_policy, settings.cache_params);
  p.storage_name = settings.storage;
  p.cache_name = settings.cache_policy;
  return p;
}

Model::Model(const std::string& uri, PluginHost& host, const ModelSettings& settings)
    : Model(
          uri, [&] { return create_model_plugins(host, settings); }, settings) {}

Model::Model(const std::string& uri, ModelPlugins plugins, const ModelSettings& settings)
    : Model(
          uri, [&] { return std::move(plugins); }, settings) {}

Model::Model(const std::string& uri, const std::function<ModelPlugins()>& make_plugins, const ModelSettings& settings)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.uri = uri;
  ModelPlugins plugins = make_plugins();
  if (!plugins.storage || !plugins.kernels) throw UsageError("a model needs a storage backend and a kernel set");
  m.storage_name = std::move(plugins.storage_name);
  m.cache_name = std::move(plugins.cache_name);
  // Every byte of the checkpoint, config.json first, comes through the storage plugin, so
  // the same code reads a local folder or a URL.
  m.storage = std::move(plugins.storage);
  m.config = read_model_config(*m.storage, uri);
  // config.json against the shards before anything proportional to the geometry it
  // declares: a wrong geometry is a bad checkpoint (exit 2), never a plan that does not fit.
  m.index.emplace(CheckpointIndex::open(*m.storage, uri));
  table::require_declared_geometry(*m.index, m.config);
  // What the weights are: the files derived from this checkpoint (a packed trunk, a state,
  // a trace) must carry the same identity.
  m.identity = {checkpoint_identity(m.config, *m.index), m.index->files().size(), m.index->sampled_bytes(),
                m.index->digest_seconds()};
  log(LogLevel::debug, "",
      "checkpoint identity " + identity_hex(m.identity.value) + " of " + uri + " (" +
          std::to_string(m.identity.shards) + " shards, " + std::to_string(m.identity.sampled_bytes) +
          " bytes sampled)");
  // Then the plan: a model that does not fit is refused before the weights are allocated.
  PlanInputs memory = settings.memory;
  memory.lookahead = settings.prefetch_depth > 0;               // router copies serve the lookahead alone
  memory.threads = machine::compute_threads(settings.threads);  // each has its own attention scratch
  if (settings.layers) {  // a rank of a model split over ranks holds its range only
    const auto [first, last] = settings.layers(m.config);
    memory.first_layer = first;
    memory.last_layer = last;
  }
  m.plan = plan_memory(m.config, memory);
  require_fit(m.plan);
  m.kernel_name = std::move(plugins.kernel_name);
  m.kernels = std::move(plugins.kernels);
  m.threads = static_cast<int>(memory.threads);
  m.ops = std::make_unique<maths::Ops>(*m.kernels, m.threads, settings.min_parallel_work);
  m.counters = std::make_unique<streaming::StreamCounters>();
  auto policy = std::move(plugins.cache);
  if (!policy && !m.plan.resident())
    throw UsageError(uri + ": the model does not fit in memory (its plan streams; " + m.plan.summary() +
                     ") and it has no cache policy to stream its experts with: it must be resident");
  // cache.future: a trace of an earlier run of this pipeline, refused when it is of another
  // model; read whole only for a policy that wants the future (streaming/cache_future.hpp).
  std::shared_ptr<const streaming::CacheFuture> future;
  if (policy && policy->wants_future()) {
    if (settings.cache_future.empty())
      throw UsageError("cache policy '" + m.cache_name +
                       "' needs the future request stream of this run (cache.future): record it first with "
                       "--set trace.out=FILE in a run of the same pipeline, then set cache.future: FILE");
    future = std::make_shared<const streaming::CacheFuture>(
        streaming::load_cache_future(settings.cache_future, m.config, m.identity.value));
  } else if (!settings.cache_future.empty()) {
    streaming::check_cache_future(settings.cache_future, m.config, m.identity.value);
  }
  // model.packed_trunk: the trunk and tables from trunk.bin (one aligned read per layer),
  // refused when it was packed from another checkpoint; its bytes are checked as they are read.
  // A partial pack (pack-trunk --layers) holds some layers: the rest come from the shards.
  if (!settings.packed_trunk.empty())
    m.packed = std::make_unique<streaming::PackedLocations>(
        streaming::PackedLocations::of(PackedTrunk::open(*m.storage, settings.packed_trunk.string(), m.identity.value,
                                                         uri, m.config.num_hidden_layers)));
  if (m.plan.resident()) {
    m.weights = std::make_unique<streaming::ResidentWeights>(m.config, *m.index, *m.storage, m.packed.get(),
                                                             m.plan.first_layer, m.plan.last_layer);
    m.source = std::make_unique<ResidentSource>(*m.weights, static_cast<std::size_t>(m.config.num_experts));
    return;
  }
  m.trunk =
      std::make_unique<streaming::StreamedTrunk>(m.config, *m.index, *m.storage, m.plan, *m.counters, m.packed.get());
  m.expert_cache = std::make_unique<streaming::ExpertCache>(m.config, *m.index, *m.storage, std::move(policy),
                                                            std::move(future), m.plan.expert_slots,
                                                            m.plan.expert_slot_bytes, settings.expert_read_attempts,
                                                            *m.counters);
  m.expert_cache->set_prefetch(settings.prefetch_depth, settings.prefetch_bytes_per_token);
  m.streamed_experts = std::make_unique<streaming::StreamedExperts>(*m.expert_cache);
}

Model::~Model() = default;

void Model::set_pass_link(PassLink* link) noexcept { impl_->link = link; }

maths::WeightSource& Model::Impl::weight_source() {
  if (source) return *source;
  return *trunk;
}

maths::ExpertSource& Model::Impl::expert_source() {
  if (source) return *source;
  return *streamed_experts;
}

const ModelConfig& Model::config() const noexcept { return impl_->config; }
const std::string& Model::uri() const noexcept { return impl_->uri; }
const CheckpointIdentity& Model::identity() const noexcept { return impl_->identity; }
const std::shared_ptr<sdk::StorageBackend>& Model::storage() const noexcept { return impl_->storage; }
std::string Model::kernel_set() const { return impl_->kernel_name; }
const std::shared_ptr<sdk::KernelSet>& Model::kernels() const noexcept { return impl_->kernels; }
const std::string& Model::storage_plugin() const noexcept { return impl_->storage_name; }
const std::string& Model::cache_policy() const noexcept { return impl_->cache_name; }
int Model::threads() const noexcept { return impl_->threads; }
const MemoryPlan& Model::plan() const noexcept { return impl_->plan; }
bool Model::streaming() const noexcept { return !impl_->source; }

std::uint64_t Model::weight_bytes_read() const noexcept {
  if (impl_->weights) return impl_->weights->bytes_read();
  const auto& c = *impl_->counters;
  return c.trunk_bytes + c.expert_bytes + c.table_bytes;
}

StreamStats Model::stream_stats() const {
  StreamStats s;
  auto& c = *impl_->counters;
  if (impl_->weights) {
    s.trunk_bytes = impl_->weights->bytes_read();  // everything, read once at load
    s.verify_seconds = static_cast<double>(impl_->weights->verify_ns()) * 1e-9;
    return s;
  }
  s.trunk_bytes = c.trunk_bytes;
  s.expert_bytes = c.expert_bytes;
  s.table_bytes = c.table_bytes;
  s.expert_requests = c.expert_requests;
  s.expert_hits = c.expert_hits;
  s.prefetch_experts = c.prefetch_experts;
  s.prefetch_bytes = c.prefetch_bytes;
  s.prefetch_used = c.prefetch_used;
  s.prefetch_wasted_bytes = s.prefetch_bytes - std::min<std::uint64_t>(s.prefetch_bytes, c.prefetch_used_bytes);
  s.prefetch_hits = c.prefetch_hits;
  s.lookahead_predicted = c.lookahead_predicted;
  s.lookahead_routed = c.lookahead_routed;
  s.lookahead_correct = c.lookahead_correct;
  s.io_wait_seconds = static_cast<double>(c.io_wait_ns.load()) * 1e-9;
  s.expert_wait_seconds = static_cast<double>(c.expert_wait_ns.load()) * 1e-9;
  s.read_seconds = static_cast<double>(c.read_ns.load()) * 1e-9;
  s.verify_seconds = static_cast<double>(c.verify_ns.load()) * 1e-9;
  std::lock_guard<std::mutex> lk(c.failures_mutex);
  s.expert_failures = c.expert_failures;
  return s;
}

}  // namespace k3
