// Trace-generator presets (configs/traces/*.yaml): a flat map of generator settings.
#include <string>
#include <type_traits>

#include <yaml-cpp/yaml.h>

#include <k3/error.hpp>
#include <k3/sim.hpp>
#include <k3/user_files.hpp>

namespace k3 {

namespace {

template <class T>
T read_scalar(const YAML::Node& node, const std::string& where) {
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    throw UsageError(where + ": expected a " + (std::is_integral_v<T> ? "whole number" : "number") + ", got '" +
                     node.Scalar() + "'");
  }
}

}  // namespace

TraceGenSettings load_trace_preset(const std::filesystem::path& file, TraceGenSettings g) {
  const std::string name = file.string();
  const std::string text = read_user_file(file, "--trace-preset", "trace preset", kMaxSmallYamlBytes);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw UsageError(name + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) + ": " +
                     e.msg);
  }
  if (!root.IsMap()) throw UsageError(name + ": a trace preset is a map of generator settings");
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    const std::string where = name + ":" + std::to_string(kv.first.Mark().line + 1) + ":" +
                              std::to_string(kv.first.Mark().column + 1) + ": " + key;
    const YAML::Node& v = kv.second;
    if (key == "layers")
      g.layers = read_scalar<std::uint32_t>(v, where);
    else if (key == "experts")
      g.experts = read_scalar<std::uint32_t>(v, where);
    else if (key == "top_k")
      g.top_k = read_scalar<std::uint32_t>(v, where);
    else if (key == "tokens")
      g.tokens = read_scalar<std::uint32_t>(v, where);
    else if (key == "zipf")
      g.zipf = read_scalar<double>(v, where);
    else if (key == "reuse")
      g.reuse = read_scalar<double>(v, where);
    else if (key == "recompute_prompt")
      g.recompute_prompt = read_scalar<std::uint32_t>(v, where);
    else if (key == "seed")
      g.seed = read_scalar<std::uint64_t>(v, where);
    else if (key == "expert_bytes")
      g.expert_bytes = read_scalar<std::uint64_t>(v, where);
    else
      throw UsageError(
          where +
          ": unknown key (known: layers, experts, top_k, tokens, zipf, reuse, recompute_prompt, seed, expert_bytes)");
  }
  return g;
}

}  // namespace k3
