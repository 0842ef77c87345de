// A pipeline's plugin parameters checked against the plugin's own description (its
// k3_plugin_params table) before the factory runs, so a refusal can point at the
// parameter's line. The words come from the SDK (params.hpp): the host and the plugin's
// ParamReader refuse the same values in the same way.
#include <k3/closest_name.hpp>
#include <k3/plugin_host.hpp>

#include <span>

namespace k3 {

namespace {

std::string described_keys(const PluginInfo& info) {
  std::string out;
  for (const auto& d : info.params) out += (out.empty() ? "" : ", ") + std::string(d.key);
  return out;
}

std::vector<std::string> plain_keys(const PluginInfo& info) {
  std::vector<std::string> out;
  for (const auto& d : info.params)
    if (!sdk::detail::is_family(d)) out.emplace_back(d.key);
  return out;
}

}  // namespace

std::string unknown_params_message(const PluginInfo& info, const std::vector<std::string>& keys) {
  const std::vector<std::string> known = plain_keys(info);
  std::string names;
  for (const auto& k : keys) {
    const std::string near = closest_name(k, known);
    names += (names.empty() ? "'" : ", '") + k + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)");
  }
  const std::string out = std::string("has no parameter") + (keys.size() > 1 ? "s " : " ") + names;
  if (!info.describes_params) return out + " (it does not describe its parameters)";
  if (info.params.empty()) return out + ": it takes none";
  return out + "; it takes " + described_keys(info) + " (k3host plugins --params " + info.name + ")";
}

namespace {

/// Decorators wrap decorators; deeper than this is a pipeline that wraps itself.
constexpr int kMaxForwarding = 8;

std::vector<ParamIssue> check_at(const PluginInfo& info, const PluginParams& params, const PluginHost* host, int depth);

/// The issues of the keys a family with K3_PARAM_STORAGE_PARAMS forwards ("inner.*"),
/// checked against the storage plugin its name parameter ("inner") names.
std::vector<ParamIssue> check_forwarded(const k3::sdk::ParamDescriptor& family,
                                        const std::span<const k3::sdk::ParamDescriptor> table,
                                        const PluginParams& params, const PluginHost& host, int depth) {
  const std::string prefix(family.key, std::string_view(family.key).size() - 1);  // "inner."
  const std::string name_key = prefix.substr(0, prefix.size() - 1);               // "inner"
  std::string name;
  if (const k3::sdk::ParamDescriptor* named = sdk::find_param(table, name_key);
      named != nullptr && named->default_value)
    name = named->default_value;
  PluginParams inner;
  for (const auto& [key, value] : params) {
    if (key == name_key) name = value;
    if (key.size() > prefix.size() && key.compare(0, prefix.size(), prefix) == 0)
      inner.emplace_back(key.substr(prefix.size()), value);
  }
  if (name.empty()) return {};
  const PluginInfo* inner_info = nullptr;
  try {
    inner_info = &host.find(PluginKind::storage, name);
  } catch (const std::exception& e) {
    return {{name_key, false, e.what()}};
  }
  std::vector<ParamIssue> out = check_at(*inner_info, inner, &host, depth + 1);
  for (auto& issue : out) issue.key = prefix + issue.key;
  return out;
}

std::vector<ParamIssue> check_at(const PluginInfo& info, const PluginParams& params, const PluginHost* host,
                                 int depth) {
  std::vector<ParamIssue> out;
  if (!info.describes_params) return out;
  const std::span<const k3::sdk::ParamDescriptor> table(info.params);
  const std::string who = std::string(to_string(info.kind)) + " plugin '" + info.name + "' ";
  for (const auto& [key, value] : params) {
    const k3::sdk::ParamDescriptor* d = sdk::find_param(table, key);
    if (d == nullptr) {
      out.push_back({key, false, who + unknown_params_message(info, {key})});
      continue;
    }
    if (const std::string problem = sdk::value_problem(*d, value); !problem.empty())
      out.push_back({key, false, problem + " (" + d->meaning + ")"});
  }
  for (const auto& d : table) {
    if ((d.flags & K3_PARAM_STORAGE_PARAMS) != 0 && host != nullptr && depth < kMaxForwarding)
      for (auto& issue : check_forwarded(d, table, params, *host, depth)) out.push_back(std::move(issue));
    if ((d.flags & K3_PARAM_REQUIRED) == 0) continue;
    bool given = false;
    for (const auto& [key, value] : params) given = given || (key == d.key && !value.empty());
    if (!given) out.push_back({d.key, true, std::string("required (") + d.meaning + ")"});
  }
  return out;
}

}  // namespace

std::vector<ParamIssue> check_params(const PluginInfo& info, const PluginParams& params, const PluginHost* host) {
  return check_at(info, params, host, 0);
}

}  // namespace k3
