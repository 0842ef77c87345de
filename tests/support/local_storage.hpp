// Reading a test checkpoint the way k3host does: through the posix storage plugin (core
// never opens checkpoint files itself).
#pragma once
#include <filesystem>
#include <memory>

#include <k3/checkpoint.hpp>
#include <k3/model_config.hpp>
#include <k3/plugin_host.hpp>

namespace k3::test {

/// One posix backend per test process (its host keeps the library loaded).
inline sdk::StorageBackend& local_storage() {
  static PluginHost host;
  static const std::shared_ptr<sdk::StorageBackend> storage = host.create_storage("posix", {});
  return *storage;
}

/// config.json of the checkpoint folder `dir`.
inline ModelConfig read_config(const std::filesystem::path& dir) {
  return read_model_config(local_storage(), dir.string());
}

/// The shard index of the checkpoint folder `dir`.
inline CheckpointIndex open_index(const std::filesystem::path& dir) {
  return CheckpointIndex::open(local_storage(), dir.string());
}

/// The checkpoint identity of the folder `dir` (k3/checkpoint.hpp), as a run computes it.
inline std::uint64_t identity_of(const std::filesystem::path& dir) {
  return checkpoint_identity(read_config(dir), open_index(dir));
}

}  // namespace k3::test
