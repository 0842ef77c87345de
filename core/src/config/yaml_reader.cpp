#include "config/yaml_reader.hpp"

#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include <k3/error.hpp>

namespace k3::config {

namespace fs = std::filesystem;

namespace {

// A pipeline is a few dozen values. YAML aliases can make a small file expand to an
// enormous tree ("billion laughs"); refuse anything far beyond a real pipeline instead.
constexpr std::size_t kMaxNodes = 100000;

struct FileContext {
  std::string display;
  fs::path dir;  // absolute folder of the file
  std::size_t* nodes;  // values converted so far
};

Origin origin_at(const FileContext& ctx, const YAML::Mark& mark) {
  Origin o;
  o.file = ctx.display;
  // yaml-cpp marks are 0-based; a node without a position (an empty document) has -1.
  o.line = mark.line >= 0 ? mark.line + 1 : 1;
  o.column = mark.column >= 0 ? mark.column + 1 : 1;
  o.dir = ctx.dir;
  return o;
}

[[noreturn]] void fail_at(const Origin& where, const std::string& message) {
  throw UsageError(where.str() + ": " + message);
}

ConfigNode convert(const YAML::Node& node, const FileContext& ctx, const Origin& key_origin) {
  if (++*ctx.nodes > kMaxNodes)
    fail_at(origin_at(ctx, node.Mark()), "more than " + std::to_string(kMaxNodes) +
                                             " values (aliases expanding without end?); a pipeline is far smaller");
  ConfigNode out;
  out.key_origin = key_origin;
  // A null value written as `key:` has no position of its own (yaml-cpp gives the next
  // token's); its key's position is where the user looks.
  out.origin = node.IsNull() ? key_origin : origin_at(ctx, node.Mark());
  const std::string& tag = node.Tag();
  if (!tag.empty() && tag != "?" && tag != "!") out.tag = tag;
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      out.kind = ConfigNode::Kind::null;
      break;
    case YAML::NodeType::Scalar:
      out.kind = ConfigNode::Kind::scalar;
      out.text = node.Scalar();
      break;
    case YAML::NodeType::Sequence:
      out.kind = ConfigNode::Kind::sequence;
      for (const auto& item : node) out.items.push_back(convert(item, ctx, origin_at(ctx, item.Mark())));
      break;
    case YAML::NodeType::Map:
      out.kind = ConfigNode::Kind::map;
      for (const auto& entry : node) {
        const Origin key_at = origin_at(ctx, entry.first.Mark());
        if (!entry.first.IsScalar()) fail_at(key_at, "a key must be a plain name, not a list or map");
        const std::string& key = entry.first.Scalar();
        if (const ConfigNode* first = out.find(key))
          fail_at(key_at, "duplicate key '" + key + "' (first set at line " + std::to_string(first->key_origin.line) +
                              ")");
        out.entries.emplace_back(key, convert(entry.second, ctx, key_at));
      }
      break;
  }
  return out;
}

}  // namespace

ConfigNode read_pipeline_file(const fs::path& path, const std::string& display) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw UsageError("pipeline file '" + display + "' does not exist");
  if (fs::is_directory(path, ec)) throw UsageError("pipeline file '" + display + "' is a folder, not a YAML file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot open pipeline file '" + display + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();

  std::size_t nodes = 0;
  const FileContext ctx{display, fs::absolute(path).lexically_normal().parent_path(), &nodes};
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(buffer.str());
  } catch (const YAML::Exception& e) {
    fail_at(origin_at(ctx, e.mark), "YAML syntax error: " + e.msg);
  }
  Origin top;
  top.file = display;
  top.line = 1;
  top.column = 1;
  top.dir = ctx.dir;
  if (docs.size() > 1) fail_at(origin_at(ctx, docs[1].Mark()), "a pipeline file holds one YAML document, found a second");
  if (docs.empty() || docs[0].IsNull()) {
    ConfigNode empty;
    empty.kind = ConfigNode::Kind::map;
    empty.origin = top;
    empty.key_origin = top;
    return empty;
  }
  if (!docs[0].IsMap())
    fail_at(origin_at(ctx, docs[0].Mark()), "a pipeline file must be a YAML map of keys (e.g. 'memory:'), not " +
                                                std::string(docs[0].IsSequence() ? "a list" : "a single value"));
  return convert(docs[0], ctx, top);
}

ConfigNode parse_override_value(const std::string& text, const Origin& where) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw UsageError(where.str() + ": the value is not valid YAML: " + e.msg);
  }
  std::size_t nodes = 0;
  const FileContext ctx{where.label, where.dir, &nodes};
  ConfigNode out = convert(node, ctx, where);
  out.set_origin_recursive(where);
  std::vector<ConfigNode*> stack{&out};
  while (!stack.empty()) {
    ConfigNode* n = stack.back();
    stack.pop_back();
    n->expand_env = false;
    for (auto& item : n->items) stack.push_back(&item);
    for (auto& [k, v] : n->entries) stack.push_back(&v);
  }
  return out;
}

}  // namespace k3::config
