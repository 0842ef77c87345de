// A chat conversation kept as the exact id stream the model saw: what was fed plus what it
// generated, message by message (docs/chat.md, "k3host chat"). Old turns are never rendered
// again; a new turn appends only its own ids, so a live Session's tokens are always a prefix
// of the stream and the next turn feeds just the ids after them. Also the history file: one
// JSON record per message, appended as the conversation goes, read back to resume it.
//
//   Conversation c(tokens);
//   c.begin_reply(std::vector<Message>{{Role::user, "Hello"}}, options);  // user turn + reply opening
//   generate over c.unfed(session.tokens()), and for each generated id: c.add(id)
//   c.end_reply(c.reply_done() ? Ending::stop : Ending::interrupted);
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <k3/chat.hpp>

namespace k3::chat {

/// How an assistant message ended. Every ending but `stop` is a message cut short, which
/// the conversation closed itself (CompletionParser::closing()) so the next turn starts at a
/// message boundary.
enum class Ending {
  stop,          ///< the model wrote the closure and its stop id
  interrupted,   ///< a stop request (Ctrl-C, SIGTERM)
  length,        ///< the token limit of the reply (a set limit, or what the context holds)
  format_error,  ///< the model wrote a token K3's format does not allow there (left out)
};
std::string_view to_string(Ending ending);
/// The inverse of to_string; nullopt for anything else.
std::optional<Ending> parse_ending(std::string_view text);

/// One message and its part of the id stream.
struct Entry {
  Message message;
  /// A system message rendering added from the options (thinking effort, tool declaration),
  /// not one anybody typed. Its content is the message's text, for reading only.
  bool internal = false;
  /// Exactly the ids this message added to the stream. An assistant message's start with
  /// the generation prompt and hold what was generated, then any closing ids.
  std::vector<std::uint32_t> ids;
  bool thinking = false;         ///< assistant: generated with the think channel open
  Ending ending = Ending::stop;  ///< assistant
  std::size_t closing = 0;       ///< assistant: trailing ids of `ids` the conversation added
  /// Dropped to make room when the context filled (Conversation::drop_oldest_turn): kept for
  /// the record (the history file), no longer part of the id stream or the messages.
  bool dropped = false;
  bool operator==(const Entry&) const = default;
};

/// What Conversation::drop_oldest_turn took out of the stream.
struct DroppedTurn {
  std::size_t first = 0, last = 0;  ///< entry indices, inclusive (system messages among them stay)
  std::size_t messages = 0;         ///< entries dropped
  std::size_t ids = 0;              ///< ids they held
  std::string user_text;            ///< the turn's first user message (for saying which)
};

class Conversation {
 public:
  /// `tokens` must outlive the conversation.
  explicit Conversation(const ChatTokens& tokens);
  ~Conversation();
  Conversation(Conversation&&) noexcept;
  Conversation& operator=(Conversation&&) noexcept;

  /// Appends `messages` (this turn's system and user messages) and the opening of the
  /// assistant's reply. They are rendered as K3 renders the whole conversation with
  /// `options`, and the part after the messages already here is appended: a new
  /// conversation gets the options' own system messages (thinking effort) first. Returns
  /// the number of ids appended. UsageError while a reply is open, or for options whose
  /// rendering of the conversation so far is not a prefix of the whole (tool_choice), or
  /// a message that is not system or user.
  std::size_t begin_reply(std::span<const Message> messages, const RenderOptions& options);
  /// One generated id: parsed and appended; returns what it produced (think or response
  /// text, a tool call, done). A token the format does not allow there throws RuntimeError
  /// and is not appended (the reply can still be ended, Ending::format_error).
  std::vector<StreamEvent> add(std::uint32_t id);
  [[nodiscard]] bool replying() const noexcept;
  /// The stop id has arrived (the reply is complete).
  [[nodiscard]] bool reply_done() const;
  /// The reply is still inside its think channel (CompletionParser::in_think): cut now, it
  /// would hold reasoning and no answer.
  [[nodiscard]] bool reply_in_think() const;
  /// What the reply holds so far (reasoning, content, complete tool calls).
  [[nodiscard]] Completion reply() const;
  /// Ends the reply: a reply that is not done is closed (its closing ids appended) and
  /// kept with what it holds. `ending` must be stop exactly when reply_done(). Returns the
  /// assistant's entry.
  const Entry& end_reply(Ending ending);

  /// Takes the open reply back with the messages of its turn, as if begin_reply had not
  /// been called (a turn that would not fit the context; nothing of it may have been fed).
  void abandon_reply();

  /// The stream: every entry's ids, in order (dropped entries left out).
  [[nodiscard]] const std::vector<std::uint32_t>& ids() const noexcept;
  /// Every entry, dropped ones included (as the history file holds them).
  [[nodiscard]] const std::vector<Entry>& entries() const noexcept;
  /// The messages (internal and dropped ones left out); an open reply is not among them.
  [[nodiscard]] std::vector<Message> messages() const;
  /// The ids of the stream after `fed` (what a Session holding `fed` still has to be given).
  /// UsageError when `fed` is not a prefix of the stream (a model state of another
  /// conversation).
  [[nodiscard]] std::span<const std::uint32_t> unfed(std::span<const std::uint32_t> fed) const;

  /// Drops the oldest turn still in the stream: its user (and tool) messages and the
  /// assistant's replies up to the next user message after a reply; system messages, typed or
  /// internal, stay. The stream is then the kept entries' ids, which is what rendering the
  /// kept messages gives (each message's segments are encoded on their own), so a model state
  /// of the old stream no longer matches it: the caller feeds the conversation again. nullopt
  /// when there is no whole turn to drop; UsageError while a reply is open.
  std::optional<DroppedTurn> drop_oldest_turn();

  /// Appends a complete entry as it was recorded (a history file); its ids are taken as
  /// they are (the model refuses ids outside its vocabulary when they are fed), and a
  /// dropped entry's are not part of the stream. UsageError while a reply is open.
  void append(Entry entry);
  /// Forgets everything (a reply included).
  void clear();

 private:
  struct Reply;
  const ChatTokens* tokens_;
  std::vector<Entry> entries_;
  std::vector<std::uint32_t> ids_;
  std::unique_ptr<Reply> reply_;
};

// --- History files -------------------------------------------------------------------------
//
// JSON Lines, one record per message, each ending in '\n':
//   {"role":"user","content":"Hello","ids":[...]}
//   {"role":"assistant","content":"...","reasoning_content":"...","ids":[...],
//    "thinking":true,"ending":"stop","closing":0}
// plus "name", "internal":true, "dropped":true and "tool_calls" when they apply. The
// concatenated "ids" of the records that are not dropped are the conversation's id stream.

/// One record, '\n' included.
std::string history_record(const Entry& entry);

struct History {
  std::vector<Entry> entries;
  /// A last line without its '\n' that is not a whole JSON record (a crash while it was
  /// written): ignored. The warning names the file and line; `valid_bytes` is where the
  /// good records end. A last line that is a whole record without its '\n' is kept.
  std::optional<std::string> torn_warning;
  std::uint64_t valid_bytes = 0;
};

/// Reads a history file: a regular file of at most kMaxHistoryFileBytes
/// (k3/user_files.hpp), checked before it is read. UsageError naming file:line for a record
/// that is not one (other than a torn last line) and for an id outside a vocabulary of
/// `vocab_size` ids; UsageError for a missing file, a folder, a device or a FIFO.
History read_history(const std::filesystem::path& file, std::int64_t vocab_size);
/// The vocabulary check of read_history on its own, for a history read before the model
/// was known (read with vocab_size INT64_MAX): UsageError naming file:line and the id.
void check_history_ids(const std::filesystem::path& file, const History& history, std::int64_t vocab_size);
/// Appends one record (util's append_record: one write(2) under O_APPEND, on a line of its
/// own even when the file's last record lacks its '\n').
void append_history(const std::filesystem::path& file, const Entry& entry);
/// Writes the whole file (temp + rename), replacing it.
void write_history(const std::filesystem::path& file, std::span<const Entry> entries);
/// Where the model state of a history file is kept: "<file>.state".
std::filesystem::path history_state_file(const std::filesystem::path& history_file);

}  // namespace k3::chat
