// The private parts of k3::Cluster, shared by cluster.cpp (joining, rank 0) and
// cluster_stage.cpp (the later ranks).
#pragma once
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <k3/cluster.hpp>
#include <k3/plugin_host.hpp>

#include "job/cluster_wire.hpp"

namespace k3 {

struct Cluster::Impl {
  class Link;
  std::unique_ptr<PluginHost> host;  ///< the transport's (it stays loaded as long as this)
  std::shared_ptr<sdk::Transport> transport;
  std::optional<cluster::Wire> wire;
  int rank = 0, size = 1;
  std::unique_ptr<Link> link;  ///< rank 0, once attached
  std::uint64_t passes = 0;
  std::vector<cluster::WireSlice> wire_slices;
  bool finished = false;
  mutable std::mutex failure_mutex;
  std::optional<Cluster::Failure> failure;  ///< rank 0: the first error a later rank sent

  /// Rank 0: keeps the first failure a later rank sent, and throws it.
  [[noreturn]] void failed(const cluster::Message& error);
  [[nodiscard]] std::optional<Cluster::Failure> failure_copy() const;
};

}  // namespace k3
