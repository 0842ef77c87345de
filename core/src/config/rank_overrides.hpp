// Per-rank settings of a model split over ranks (docs/cluster.md): cluster.ranks.N.KEY sets
// KEY for rank N only, over every file and --set, so machines of different sizes work
// together in one pipeline.
#pragma once
#include <filesystem>

#include "config/config_node.hpp"

namespace k3::config {

/// Checks every cluster.ranks entry of a validated tree: N a rank number, KEY a schema key
/// outside cluster.* (or a plugin parameter), and the tree with that rank's settings over it
/// valid. UsageError at the entry's file:line:col otherwise.
void check_rank_overrides(const ConfigNode& root, const std::filesystem::path& cwd);

/// `root` with every cluster.ranks.<rank>.KEY set over it, validated and completed again.
ConfigNode root_for_rank(const ConfigNode& root, int rank, const std::filesystem::path& cwd);

}  // namespace k3::config
