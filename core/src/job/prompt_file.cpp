// Reading a prompts file (k3/prompts.hpp): plain lines, or JSON Lines with settings per
// prompt, every value checked against the range of the pipeline key it stands for.
#include <k3/prompts.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string_view>

#include <nlohmann/json.hpp>

#include <k3/error.hpp>
#include <k3/json_depth.hpp>
#include <k3/user_files.hpp>

namespace k3 {
namespace {

using json = nlohmann::json;

/// The file's lines without their line ends (a last line without one included).
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back(line);
    at = end + 1;
  }
  return out;
}

bool blank(std::string_view s) { return s.find_first_not_of(" \t") == std::string_view::npos; }

/// A JSON line's settings, each checked like the pipeline key it stands for.
class LineReader {
 public:
  LineReader(std::string where) : where_(std::move(where)) {}

  [[noreturn]] void refuse(const std::string& why) const { throw UsageError(where_ + ": " + why); }

  std::int64_t integer(const json& v, const char* key, std::int64_t lo, std::int64_t hi) const {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) ||
        v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi)
      refuse(std::string("\"") + key + "\" must be an integer from " + std::to_string(lo) + " to " +
             std::to_string(hi) + ", got " + v.dump());
    return v.get<std::int64_t>();
  }

  double number(const json& v, const char* key, double lo, double hi, bool lo_open) const {
    const bool ok = v.is_number() && std::isfinite(v.get<double>()) &&
                    (lo_open ? v.get<double>() > lo : v.get<double>() >= lo) && v.get<double>() <= hi;
    if (!ok) {
      char range[96];
      std::snprintf(range, sizeof range, "%s%g to %g", lo_open ? "above " : "from ", lo, hi);
      refuse(std::string("\"") + key + "\" must be a number " + range + ", got " + v.dump());
    }
    return v.get<double>();
  }

  PromptEntry entry(std::string_view text, std::size_t line) const {
    if (const auto deep = sdk::json_too_deep(text))
      refuse("nests deeper than " + std::to_string(sdk::kMaxJsonDepth) + " levels (at byte " + std::to_string(*deep) +
             " of the line)");
    json j;
    try {
      j = json::parse(text);
    } catch (const json::exception& e) {
      refuse(std::string("not a JSON object: ") + e.what());
    }
    if (!j.is_object()) refuse("not a JSON object (a JSON Lines prompts file holds one object per line)");
    PromptEntry e;
    e.line = line;
    for (const auto& [key, v] : j.items()) {
      if (key == "prompt") {
        if (!v.is_string()) refuse("\"prompt\" must be a string");
        e.text = v.get<std::string>();
        if (e.text.empty()) refuse("\"prompt\" is empty");
      } else if (key == "ids") {
        if (!v.is_array() || v.empty()) refuse("\"ids\" must be a non-empty array of token ids");
        for (const auto& id : v) e.ids.push_back(integer(id, "ids", 0, std::numeric_limits<std::uint32_t>::max()));
        e.has_ids = true;
      } else if (key == "max_tokens") {
        e.max_tokens = integer(v, "max_tokens", 0, 1048576);  // job.max_new_tokens
      } else if (key == "temperature") {
        e.temperature = number(v, "temperature", 0, 100, false);
      } else if (key == "top_k") {
        e.top_k = integer(v, "top_k", 0, 1048576);
      } else if (key == "top_p") {
        e.top_p = number(v, "top_p", 0, 1, true);
      } else if (key == "min_p") {
        e.min_p = number(v, "min_p", 0, 1, false);
      } else if (key == "repeat_penalty") {
        e.repeat_penalty = number(v, "repeat_penalty", 0, 100, true);
      } else if (key == "repeat_last_n") {
        e.repeat_last_n = integer(v, "repeat_last_n", -1, 1048576);
      } else if (key == "seed") {
        e.seed = static_cast<std::uint64_t>(integer(v, "seed", 0, std::numeric_limits<std::int64_t>::max()));
      } else {
        refuse("unknown key \"" + key +
               "\" (a prompt takes prompt or ids, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, "
               "repeat_last_n, seed)");
      }
    }
    if (e.has_ids && !e.text.empty()) refuse("both \"prompt\" and \"ids\": give one");
    if (!e.has_ids && e.text.empty()) refuse("no \"prompt\" or \"ids\"");
    return e;
  }

 private:
  std::string where_;
};

}  // namespace

std::vector<PromptEntry> read_prompts(const std::filesystem::path& file, const std::string& what) {
  const std::string text = read_user_file(file, what, "prompts file", kMaxTextFileBytes);
  const std::string at = what + ": " + file.string();
  const std::vector<std::string_view> lines = lines_of(text);
  bool jsonl = false;
  for (std::string_view l : lines)
    if (!blank(l)) {
      jsonl = l.substr(l.find_first_not_of(" \t")).front() == '{';
      break;
    }
  std::vector<PromptEntry> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (blank(lines[i])) continue;
    if (jsonl) {
      out.push_back(LineReader(at + ":" + std::to_string(i + 1)).entry(lines[i], i + 1));
    } else {
      PromptEntry e;
      e.line = i + 1;
      e.text = std::string(lines[i]);
      out.push_back(std::move(e));
    }
  }
  if (out.empty()) throw UsageError(at + ": no prompt in the file");
  return out;
}

}  // namespace k3
