#include <omp.h>

#include <k3/error.hpp>

#include "model/model_impl.hpp"

namespace k3 {

Model::Model(const std::filesystem::path& dir, PluginHost& host, const ModelSettings& settings)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.dir = dir;
  if (!std::filesystem::is_directory(dir))
    throw UsageError(dir.string() + ": no checkpoint directory there (make one with k3host make-model)");
  m.config = read_model_config(dir / "config.json");
  m.index.emplace(CheckpointIndex::open(dir));
  m.storage = host.create_storage(settings.storage, settings.storage_params);
  m.kernel_name = settings.kernels == "auto" ? host.best_kernels().name : settings.kernels;
  m.kernels = host.create_kernels(m.kernel_name, settings.kernel_params);
  m.threads = settings.threads > 0 ? settings.threads : omp_get_num_procs();
  m.ops = std::make_unique<model::Ops>(*m.kernels, m.threads);
  m.weights = std::make_unique<model::ResidentWeights>(m.config, *m.index, *m.storage);
  m.source = std::make_unique<ResidentSource>(*m.weights);
}

Model::~Model() = default;

const ModelConfig& Model::config() const noexcept { return impl_->config; }
const std::filesystem::path& Model::dir() const noexcept { return impl_->dir; }
std::string Model::kernel_set() const { return impl_->kernel_name; }
int Model::threads() const noexcept { return impl_->threads; }
std::uint64_t Model::weight_bytes_read() const noexcept { return impl_->weights->bytes_read(); }

}  // namespace k3
