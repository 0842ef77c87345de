// Private parts of k3::Model and k3::Session.
#pragma once
#include <memory>
#include <optional>

#include <k3/checkpoint.hpp>
#include <k3/model.hpp>

#include <k3/plan.hpp>

#include "maths/forward.hpp"
#include "streaming/expert_cache.hpp"
#include "streaming/layer_loader.hpp"
#include "streaming/stream_counters.hpp"
#include "streaming/streamed_trunk.hpp"
#include "streaming/tensor_reader.hpp"

namespace k3 {

/// Resident weights served as both weight and expert source.
class ResidentSource final : public maths::WeightSource, public maths::ExpertSource {
 public:
  /// `max_ids`: the most distinct experts one request() names (the experts of a layer), so
  /// remembering them never allocates on the token path.
  ResidentSource(const streaming::ResidentWeights& w, std::size_t max_ids) : w_(w) { ids_.reserve(max_ids); }
  const maths::GlobalWeights& global() override { return w_.global(); }
  const maths::LayerWeights& acquire_layer(std::size_t layer) override { return w_.layer(layer); }
  void release_layer(std::size_t) override {}
  void request(std::size_t, std::span<const std::uint32_t> ids) override { ids_.assign(ids.begin(), ids.end()); }
  maths::ExpertWeights wait_one(std::size_t layer, std::size_t i) override { return w_.layer(layer).experts[ids_[i]]; }
  void release(std::size_t) override {}

 private:
  const streaming::ResidentWeights& w_;
  std::vector<std::uint32_t> ids_;
};

struct Model::Impl {
  std::string uri;
  ModelConfig config;
  std::optional<CheckpointIndex> index;
  CheckpointIdentity identity;
  std::shared_ptr<sdk::StorageBackend> storage;
  std::shared_ptr<sdk::KernelSet> kernels;
  std::string kernel_name;
  std::string storage_name;  ///< the storage plugin's name
  std::string cache_name;    ///< the cache policy's name (empty without one)
  int threads = 1;
  std::unique_ptr<maths::Ops> ops;
  MemoryPlan plan;
  std::unique_ptr<streaming::StreamCounters> counters;
  std::unique_ptr<streaming::PackedLocations> packed;  ///< model.packed_trunk, when set
  // Either resident (the plan holds everything) ...
  std::unique_ptr<streaming::ResidentWeights> weights;
  std::unique_ptr<ResidentSource> source;
  // ... or streamed (runtime/streamed_trunk, cache/expert_cache).
  std::unique_ptr<streaming::StreamedTrunk> trunk;
  std::unique_ptr<streaming::ExpertCache> expert_cache;
  std::unique_ptr<streaming::StreamedExperts> streamed_experts;
  PassLink* link = nullptr;  ///< rank 0 of a model split over ranks: the later ranks

  [[nodiscard]] maths::WeightSource& weight_source();
  [[nodiscard]] maths::ExpertSource& expert_source();
};

}  // namespace k3
