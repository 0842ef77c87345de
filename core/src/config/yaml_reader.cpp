#include "config/yaml_reader.hpp"

#include <algorithm>
#include <sstream>
#include <vector>

#include <simdjson.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <k3/error.hpp>
#include <k3/user_files.hpp>

namespace k3::config {

namespace fs = std::filesystem;

namespace {

// A pipeline is a few dozen values. YAML aliases can make a small file expand to an
// enormous tree ("billion laughs"); refuse anything far beyond a real pipeline instead.
constexpr std::size_t kMaxNodes = 100000;
// A real pipeline nests four levels; the bound keeps the recursion far from the stack's end.
constexpr std::size_t kMaxDepth = 64;
// A real pipeline is a few kB; a larger file is refused unread (k3/user_files.hpp).
constexpr std::size_t kMaxFileBytes = 1'000'000;

struct FileContext {
  std::string display;
  fs::path dir;                   // absolute folder of the file
  std::size_t* nodes;             // values converted so far
  std::vector<YAML::Node>* open;  // the maps and lists being converted, outermost first
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
  if (ctx.open->size() >= kMaxDepth)
    fail_at(origin_at(ctx, node.Mark()), "nested more than " + std::to_string(kMaxDepth) + " levels deep");
  if (node.IsMap() || node.IsSequence()) {
    // An alias inside the node it names (a: &a {x: *a}) would expand without end.
    for (const YAML::Node& outer : *ctx.open)
      if (outer.is(node)) fail_at(origin_at(ctx, node.Mark()), "an alias that contains itself");
    ctx.open->push_back(node);
  }
  struct Leave {
    std::vector<YAML::Node>* open;
    bool pushed;
    ~Leave() {
      if (pushed) open->pop_back();
    }
  } leave{ctx.open, node.IsMap() || node.IsSequence()};
  ConfigNode out;
  out.key_origin = key_origin;
  // A null value written as `key:` has no position of its own (yaml-cpp gives the next
  // token's); its key's position is where the user looks.
  out.origin = node.IsNull() ? key_origin : origin_at(ctx, node.Mark());
  const std::string& tag = node.Tag();
  if (!tag.empty() && tag != "?" && tag != "!") out.tag = tag;
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null: out.kind = ConfigNode::Kind::null; break;
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
          fail_at(key_at,
                  "duplicate key '" + key + "' (first set at line " + std::to_string(first->key_origin.line) + ")");
        out.entries.emplace_back(key, convert(entry.second, ctx, key_at));
      }
      break;
  }
  return out;
}

/// Counts documents without building them: yaml-cpp's LoadAll keeps producing empty
/// documents for some one-character files (",") until memory runs out.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  YAML::Mark start;  ///< where the last document began
};

/// The first line (from 1) that is not UTF-8 text; 0 when all are. A newline always ends a
/// character, so each line can be checked alone.
std::size_t first_non_utf8_line(std::string_view text) {
  std::size_t line = 1;
  for (std::size_t begin = 0; begin < text.size(); ++line) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    if (!simdjson::validate_utf8(text.data() + begin, end - begin)) return line;
    begin = end + 1;
  }
  return 0;
}

/// The file's text: a regular file (symbolic links followed) of at most kMaxFileBytes.
std::string read_pipeline_text(const fs::path& path, const std::string& display) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw UsageError("pipeline file '" + display + "' does not exist");
  if (fs::is_directory(path, ec)) throw UsageError("pipeline file '" + display + "' is a folder, not a YAML file");
  // A device, a FIFO or a file over the cap is refused before a byte is read.
  const std::string text = read_user_file(path, "pipeline file", "pipeline file", kMaxFileBytes);
  if (const std::size_t line = first_non_utf8_line(text); line != 0)
    throw UsageError(display + ":" + std::to_string(line) + ": not UTF-8 text; a pipeline file is UTF-8 YAML");
  return text;
}

}  // namespace

ConfigNode read_pipeline_file(const fs::path& path, const std::string& display) {
  const std::string text = read_pipeline_text(path, display);
  std::size_t nodes = 0;
  std::vector<YAML::Node> open;
  const FileContext ctx{display, fs::absolute(path).lexically_normal().parent_path(), &nodes, &open};
  std::vector<YAML::Node> docs;
  try {
    std::istringstream events(text);
    YAML::Parser parser(events);
    DocumentCounter counter;
    for (int n = 0; parser.HandleNextDocument(counter);)
      if (++n > 1) fail_at(origin_at(ctx, counter.start), "a pipeline file holds one YAML document, found a second");
    docs.push_back(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    fail_at(origin_at(ctx, e.mark), "YAML syntax error: " + e.msg);
  }
  Origin top;
  top.file = display;
  top.line = 1;
  top.column = 1;
  top.dir = ctx.dir;
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
  // YAML text is Unicode; a value that is not would not survive Pipeline::dump and reload.
  if (!simdjson::validate_utf8(text.data(), text.size()))
    throw UsageError(where.str() + ": the value is not UTF-8 text");
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw UsageError(where.str() + ": the value is not valid YAML: " + e.msg);
  }
  std::size_t nodes = 0;
  std::vector<YAML::Node> open;
  const FileContext ctx{where.label, where.dir, &nodes, &open};
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
