// The parameter descriptions of plugins, for people: the table `k3host plugins --params`
// prints, and the Markdown that docs/pipelines.md embeds (a ctest test keeps the doc equal
// to it). Both read only the plugins' k3_plugin_params tables.
#include <k3/plugin_host.hpp>

#include <algorithm>
#include <array>

namespace k3 {

namespace {

/// Columns a UTF-8 string takes on a terminal (the en dash of a range is one).
std::size_t width(const std::string& s) {
  std::size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

std::string type_of(const k3::sdk::ParamDescriptor& d) {
  return sdk::detail::is_family(d) ? "forwarded" : sdk::param_type_name(d.type);
}

/// The default as a table cell; `markdown` puts values in code spans.
std::string default_of(const k3::sdk::ParamDescriptor& d, bool markdown) {
  if ((d.flags & K3_PARAM_REQUIRED) != 0) return markdown ? "*required*" : "required";
  if (sdk::detail::is_family(d)) return "";
  if (d.default_value == nullptr) return markdown ? "*unset*" : "unset";
  const std::string v = d.default_value;
  if (v.empty()) return markdown ? "*(empty)*" : "''";
  return markdown ? "`" + v + "`" : v;
}

/// Text in a Markdown table cell: the characters Markdown would read as a cell border, an
/// HTML tag, emphasis or code ("<model.path>", "regex:*") are escaped.
std::string md_cell(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '|' || c == '<' || c == '*' || c == '`' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

constexpr std::array<PluginKind, 5> kKindOrder = {PluginKind::storage, PluginKind::cache, PluginKind::kernels,
                                                  PluginKind::tokenizer, PluginKind::transport};

}  // namespace

std::string plugin_params_text(const PluginInfo& info) {
  std::string out = std::string(to_string(info.kind)) + " " + info.name + " " + info.version + "  " +
                    info.path.string() + "\n";
  if (!info.describes_params) return out + "  (does not describe its parameters)\n";
  if (info.params.empty()) return out + "  (no parameters)\n";
  std::vector<std::array<std::string, 5>> rows{{"KEY", "TYPE", "DEFAULT", "ALLOWED", "MEANING"}};
  for (const auto& d : info.params)
    rows.push_back({d.key, type_of(d), default_of(d, false), sdk::allowed_text(d), d.meaning});
  std::array<std::size_t, 4> widths{};
  for (const auto& r : rows)
    for (std::size_t c = 0; c < widths.size(); ++c) widths[c] = std::max(widths[c], width(r[c]));
  for (const auto& r : rows) {
    std::string line = " ";
    for (std::size_t c = 0; c < widths.size(); ++c) line += " " + r[c] + std::string(widths[c] - width(r[c]) + 1, ' ');
    out += line + " " + r[4] + "\n";
  }
  return out;
}

std::string plugin_params_markdown(const std::vector<PluginInfo>& plugins) {
  std::vector<const PluginInfo*> sorted;
  for (const auto& p : plugins) sorted.push_back(&p);
  auto rank = [](PluginKind k) { return std::find(kKindOrder.begin(), kKindOrder.end(), k) - kKindOrder.begin(); };
  std::stable_sort(sorted.begin(), sorted.end(), [&](const PluginInfo* a, const PluginInfo* b) {
    return rank(a->kind) != rank(b->kind) ? rank(a->kind) < rank(b->kind) : a->name < b->name;
  });

  std::string out;
  for (const PluginInfo* p : sorted) {
    if (!p->describes_params || p->params.empty()) continue;
    out += "#### " + std::string(to_string(p->kind)) + " `" + p->name + "`\n\n";
    out += "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
    for (const auto& d : p->params)
      out += "| `" + std::string(d.key) + "` | " + type_of(d) + " | " + default_of(d, true) + " | " +
             md_cell(sdk::allowed_text(d)) + " | " + md_cell(d.meaning) + " |\n";
    out += "\n";
  }
  // Those without a table, a kind at a time. A kind none of whose plugins takes any is
  // summed up without names, so the text does not depend on which kernel sets this
  // machine builds.
  std::vector<std::string> none, undescribed;
  for (const PluginKind kind : kKindOrder) {
    std::vector<std::string> names, silent;
    std::size_t of_kind = 0;
    for (const PluginInfo* p : sorted) {
      if (p->kind != kind) continue;
      ++of_kind;
      if (!p->describes_params)
        silent.push_back("`" + p->name + "`");
      else if (p->params.empty())
        names.push_back("`" + p->name + "`");
    }
    auto joined = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& n : v) s += (s.empty() ? "" : ", ") + n;
      return s;
    };
    if (!names.empty())
      none.push_back(names.size() < of_kind        ? std::string(to_string(kind)) + " " + joined(names)
                     : kind == PluginKind::kernels ? std::string("every kernel set")
                                                   : "every " + std::string(to_string(kind)) + " plugin");
    if (!silent.empty()) undescribed.push_back(std::string(to_string(kind)) + " " + joined(silent));
  }
  auto sentence = [](const std::vector<std::string>& parts) {
    std::string s;
    for (const auto& part : parts) s += (s.empty() ? "" : "; ") + part;
    return s;
  };
  if (!none.empty()) out += "Take no parameters: " + sentence(none) + ".\n";
  if (!undescribed.empty()) out += "Do not describe their parameters: " + sentence(undescribed) + ".\n";
  return out;
}

}  // namespace k3
