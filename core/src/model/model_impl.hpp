// Private parts of k3::Model and k3::Session.
#pragma once
#include <memory>
#include <optional>

#include <k3/checkpoint.hpp>
#include <k3/model.hpp>

#include "model/forward.hpp"
#include "model/weights.hpp"

namespace k3 {

/// Resident weights served as both weight and expert source.
class ResidentSource final : public model::WeightSource, public model::ExpertSource {
 public:
  explicit ResidentSource(const model::ResidentWeights& w) : w_(w) {}
  const model::GlobalWeights& global() override { return w_.global(); }
  const model::LayerWeights& acquire_layer(std::size_t layer) override { return w_.layer(layer); }
  void release_layer(std::size_t) override {}
  void acquire(std::size_t layer, std::span<const std::uint32_t> ids, std::span<model::ExpertWeights> out) override {
    for (std::size_t i = 0; i < ids.size(); ++i) out[i] = w_.layer(layer).experts[ids[i]];
  }
  void release(std::size_t) override {}

 private:
  const model::ResidentWeights& w_;
};

struct Model::Impl {
  std::filesystem::path dir;
  ModelConfig config;
  std::optional<CheckpointIndex> index;
  std::shared_ptr<sdk::StorageBackend> storage;
  std::shared_ptr<sdk::KernelSet> kernels;
  std::string kernel_name;
  int threads = 1;
  std::unique_ptr<model::Ops> ops;
  std::unique_ptr<model::ResidentWeights> weights;
  std::unique_ptr<ResidentSource> source;
};

}  // namespace k3
