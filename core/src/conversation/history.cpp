// History files: a conversation as JSON Lines, one record per message, appended as the
// chat goes (one write(2) under O_APPEND per record), so a crash can tear only the last line.

#include <nlohmann/json.hpp>

#include <k3/conversation.hpp>
#include <k3/error.hpp>
#include <k3/json_depth.hpp>
#include <k3/user_files.hpp>

#include "util/atomic_file.hpp"

namespace k3::chat {
namespace {

using nlohmann::json;

/// A record's field of type T, or `fallback` when it is absent; UsageError naming it when it
/// has another type.
template <class T>
T field(const json& j, const char* key, T fallback, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw UsageError(where + ": \"" + key + "\" has the wrong type");
  }
}

Entry entry_of(const json& j, const std::string& where) {
  if (!j.is_object()) throw UsageError(where + ": not a JSON object");
  Entry e;
  const auto role = parse_role(field<std::string>(j, "role", "", where));
  if (!role) throw UsageError(where + ": \"role\" must be system, user, assistant or tool");
  e.message.role = *role;
  e.message.content = field<std::string>(j, "content", "", where);
  e.message.name = field<std::string>(j, "name", "", where);
  e.message.reasoning_content = field<std::string>(j, "reasoning_content", "", where);
  e.message.tool_call_id = field<std::string>(j, "tool_call_id", "", where);
  e.internal = field<bool>(j, "internal", false, where);
  e.thinking = field<bool>(j, "thinking", false, where);
  e.dropped = field<bool>(j, "dropped", false, where);
  const auto ids = j.find("ids");
  if (ids == j.end() || !ids->is_array()) throw UsageError(where + ": \"ids\" must be an array of token ids");
  for (const auto& id : *ids) {
    if (!id.is_number_unsigned() || id.get<std::uint64_t>() > 0xFFFFFFFFull)
      throw UsageError(where + ": \"ids\" holds something that is not a token id");
    e.ids.push_back(id.get<std::uint32_t>());
  }
  const std::string ending = field<std::string>(j, "ending", "stop", where);
  const auto parsed = parse_ending(ending);
  if (!parsed) throw UsageError(where + ": unknown \"ending\" '" + ending + "'");
  e.ending = *parsed;
  e.closing = field<std::size_t>(j, "closing", 0, where);
  if (e.closing > e.ids.size()) throw UsageError(where + ": \"closing\" is longer than \"ids\"");
  if (const auto calls = j.find("tool_calls"); calls != j.end()) {
    if (!calls->is_array()) throw UsageError(where + ": \"tool_calls\" must be an array");
    for (const auto& c : *calls) {
      if (!c.is_object()) throw UsageError(where + ": a tool call must be an object");
      e.message.tool_calls.push_back({field<std::string>(c, "id", "", where), field<std::string>(c, "name", "", where),
                                      field<std::string>(c, "arguments", "", where)});
    }
  }
  return e;
}

}  // namespace

std::string history_record(const Entry& e) {
  json j;
  j["role"] = role_name(e.message.role);
  if (!e.message.name.empty()) j["name"] = e.message.name;
  if (e.internal) j["internal"] = true;
  if (e.dropped) j["dropped"] = true;
  j["content"] = e.message.content;
  if (e.message.role == Role::assistant) {
    if (e.thinking) j["reasoning_content"] = e.message.reasoning_content;
    if (!e.message.tool_calls.empty()) {
      json calls = json::array();
      for (const auto& c : e.message.tool_calls)
        calls.push_back({{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
      j["tool_calls"] = calls;
    }
    j["thinking"] = e.thinking;
    j["ending"] = to_string(e.ending);
    j["closing"] = e.closing;
  }
  if (!e.message.tool_call_id.empty()) j["tool_call_id"] = e.message.tool_call_id;
  j["ids"] = e.ids;
  // Invalid UTF-8 (a model may write it) becomes U+FFFD in the text; the ids stay exact.
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

History read_history(const std::filesystem::path& file, std::int64_t vocab_size) {
  const std::string data = read_user_file(file, "", "chat history", kMaxHistoryFileBytes);
  History h;
  std::size_t pos = 0, line = 1;
  for (; pos < data.size(); ++line) {
    const std::size_t eol = data.find('\n', pos);
    const std::string where = file.string() + ":" + std::to_string(line);
    const bool last = eol == std::string::npos;
    const std::string_view text(data.data() + pos, (last ? data.size() : eol) - pos);
    if (const auto deep = sdk::json_too_deep(text)) throw UsageError(sdk::json_depth_message(where, *deep));
    json j;
    try {
      j = json::parse(text);
    } catch (const json::exception& e) {
      if (last) {  // no '\n' and not a whole record: it was being written when the writer stopped
        h.torn_warning = where + ": the last record is incomplete (" + std::to_string(text.size()) +
                         " bytes without their end of line, from a crash or a full disk); it is ignored";
        break;
      }
      throw UsageError(where + ": not a JSON record (" + std::string(e.what()) + ")");
    }
    // A whole record whose '\n' alone is missing is kept (append_record starts the next
    // record on a line of its own).
    h.entries.push_back(entry_of(j, where));
    pos = last ? data.size() : eol + 1;
    h.valid_bytes = pos;
  }
  check_history_ids(file, h, vocab_size);
  return h;
}

void check_history_ids(const std::filesystem::path& file, const History& h, std::int64_t vocab_size) {
  for (std::size_t i = 0; i < h.entries.size(); ++i)  // record i is line i + 1: every line is one
    for (const std::uint32_t id : h.entries[i].ids)
      if (static_cast<std::int64_t>(id) >= vocab_size)
        throw UsageError(file.string() + ":" + std::to_string(i + 1) + ": token id " + std::to_string(id) +
                         " is outside the model's vocabulary of " + std::to_string(vocab_size) +
                         " ids (a history of another model?)");
}

void append_history(const std::filesystem::path& file, const Entry& entry) {
  append_record(file, history_record(entry));
}

void write_history(const std::filesystem::path& file, std::span<const Entry> entries) {
  std::string all;
  for (const Entry& e : entries) all += history_record(e);
  write_file_atomically(file, all);
}

std::filesystem::path history_state_file(const std::filesystem::path& history_file) {
  return std::filesystem::path(history_file.string() + ".state");
}

}  // namespace k3::chat
