// The key reference of docs/pipelines.md, generated from the schema so the two cannot
// drift (a unit test compares them; `k3host --print-schema` prints it).
#include <k3/pipeline.hpp>

#include "config/schema.hpp"

namespace k3 {

namespace {

std::string shown_default(const config::KeySpec& spec) {
  const std::string_view d = spec.default_yaml;
  if (d == "''") return "*(empty)*";
  return "`" + std::string(d) + "`";
}

}  // namespace

std::vector<std::string> pipeline_keys() {
  std::vector<std::string> keys;
  for (const auto& spec : config::schema()) keys.emplace_back(spec.key);
  return keys;
}

std::string pipeline_schema_markdown() {
  std::string out =
      "| key | type | default | allowed | meaning; why this default |\n"
      "|---|---|---|---|---|\n";
  for (const auto& spec : config::schema()) {
    const std::string range = config::range_text(spec);
    out += "| `" + std::string(spec.key) + "` | " + std::string(config::type_name(spec.type)) + " | " +
           shown_default(spec) + " | " + range + " | " + std::string(spec.doc) +
           ". *Default: " + std::string(spec.why) + ".* |\n";
  }
  return out;
}

}  // namespace k3
