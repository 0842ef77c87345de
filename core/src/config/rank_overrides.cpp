// cluster.ranks.N.KEY: one rank's settings over the pipeline (config/rank_overrides.hpp).
#include "config/rank_overrides.hpp"

#include <charconv>
#include <string>
#include <vector>

#include <k3/error.hpp>

#include "config/schema.hpp"
#include "config/validate.hpp"

namespace k3::config {
namespace {

constexpr int kMaxRank = 65535;

struct Setting {
  std::string key;          ///< "memory.trunk_gb"
  const ConfigNode* value;  ///< a scalar or list, with the origin that wrote it
};

/// The leaves under one rank's entry, their keys joined with '.' (both `memory: {trunk_gb: 4}`
/// and `memory.trunk_gb: 4` are accepted).
void leaves(const ConfigNode& node, const std::string& prefix, std::vector<Setting>& out) {
  if (node.is_map() && !node.entries.empty()) {
    for (const auto& [k, v] : node.entries) leaves(v, prefix.empty() ? k : prefix + "." + k, out);
    return;
  }
  out.push_back({prefix, &node});
}

[[noreturn]] void refuse(const ConfigNode& at, const std::string& key, const std::string& message) {
  throw UsageError(at.origin.str() + ": cluster.ranks." + key + ": " + message);
}

int rank_of(const std::string& text, const ConfigNode& at) {
  int r = -1;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), r);
  if (text.empty() || res.ec != std::errc{} || res.ptr != text.data() + text.size() || r < 0 || r > kMaxRank)
    refuse(at, text, "expected a rank number 0 – " + std::to_string(kMaxRank) + " (cluster.ranks.N.KEY)");
  return r;
}

/// The settings of rank `rank`, each key checked.
std::vector<Setting> settings_of(const ConfigNode& root, int rank) {
  std::vector<Setting> out;
  const ConfigNode* ranks = lookup(root, "cluster.ranks");
  if (ranks == nullptr || !ranks->is_map()) return out;
  for (const auto& [name, entry] : ranks->entries) {
    if (rank_of(name, entry) != rank) continue;
    std::vector<Setting> mine;
    leaves(entry, "", mine);
    for (const Setting& s : mine) {
      const std::string full = name + (s.key.empty() ? "" : "." + s.key);
      if (s.key.empty()) refuse(*s.value, full, "expected KEY: value pairs under the rank (e.g. memory.trunk_gb: 4)");
      if (s.key.rfind("cluster.", 0) == 0 || s.key == "cluster")
        refuse(*s.value, full, "the cluster section is the same on every rank; it cannot be set per rank");
      if (s.key == "extends") refuse(*s.value, full, "extends can only be written in a pipeline file");
      const KeySpec* spec = find_key(s.key);
      if ((spec == nullptr || spec->file_only) && !is_inside_params(s.key)) {
        const std::string near = closest_key(s.key);
        refuse(*s.value, full,
               "unknown key '" + s.key + "'" + (near.empty() ? std::string() : " (did you mean '" + near + "'?)"));
      }
      out.push_back(s);
    }
  }
  return out;
}

/// {a: {b: value}} for the key "a.b".
ConfigNode wrapped(const std::string& key, const ConfigNode& leaf) {
  ConfigNode value = leaf;
  std::size_t end = key.size();
  while (true) {
    const std::size_t dot = key.rfind('.', end - 1);
    const std::size_t begin = dot == std::string::npos ? 0 : dot + 1;
    ConfigNode wrapper;
    wrapper.kind = ConfigNode::Kind::map;
    wrapper.origin = leaf.origin;
    wrapper.key_origin = leaf.origin;
    wrapper.expand_env = false;
    wrapper.entries.emplace_back(key.substr(begin, end - begin), std::move(value));
    value = std::move(wrapper);
    if (dot == std::string::npos) break;
    end = dot;
  }
  return value;
}

}  // namespace

ConfigNode root_for_rank(const ConfigNode& root, int rank, const std::filesystem::path& cwd) {
  const std::vector<Setting> settings = settings_of(root, rank);
  ConfigNode out = root;
  if (settings.empty()) return out;
  for (const Setting& s : settings) merge_into(out, wrapped(s.key, *s.value));
  validate_and_complete(out, cwd);
  return out;
}

void check_rank_overrides(const ConfigNode& root, const std::filesystem::path& cwd) {
  const ConfigNode* ranks = lookup(root, "cluster.ranks");
  if (ranks == nullptr || !ranks->is_map()) return;
  for (const auto& [name, entry] : ranks->entries) (void)root_for_rank(root, rank_of(name, entry), cwd);
}

}  // namespace k3::config
