// The id stream of a conversation, turn by turn. A turn is rendered as part of the whole
// conversation (so its ids are exactly those K3's renderer gives at that place), but only
// the segments after the conversation so far are encoded and appended; what the model
// generated stays as it was generated, never replaced by a re-rendering of its text.
#include <k3/conversation.hpp>

#include <algorithm>

#include <k3/error.hpp>

namespace k3::chat {

std::string_view to_string(Ending ending) {
  switch (ending) {
    case Ending::stop: return "stop";
    case Ending::interrupted: return "interrupted";
    case Ending::length: return "length";
    case Ending::format_error: return "format_error";
  }
  return "stop";
}

std::optional<Ending> parse_ending(std::string_view text) {
  for (const Ending e : {Ending::stop, Ending::interrupted, Ending::length, Ending::format_error})
    if (to_string(e) == text) return e;
  return std::nullopt;
}

namespace {

bool is_control(const Segment& s, std::string_view text) { return s.allow_special && s.text == text; }

/// The text of one rendered message: its text segments after the header's <|sep|> and
/// before its last <|close|>.
std::string message_text(std::span<const Segment> segments) {
  std::size_t begin = 0, end = segments.size();
  while (begin < segments.size() && !is_control(segments[begin], "<|sep|>")) ++begin;
  while (end > begin && !is_control(segments[end - 1], "<|close|>")) --end;
  std::string out;
  for (std::size_t i = begin + 1; i + 1 < end; ++i)
    if (!segments[i].allow_special) out += segments[i].text;
  return out;
}

}  // namespace

struct Conversation::Reply {
  Reply(const ChatTokens& tokens, bool thinking, std::size_t entries, std::size_t ids)
      : parser(tokens, thinking), entries_before(entries), ids_before(ids) {}
  CompletionParser parser;
  std::size_t entries_before, ids_before;  // the conversation before the turn
};

Conversation::Conversation(const ChatTokens& tokens) : tokens_(&tokens) {}
Conversation::~Conversation() = default;
Conversation::Conversation(Conversation&&) noexcept = default;
Conversation& Conversation::operator=(Conversation&&) noexcept = default;

std::size_t Conversation::begin_reply(std::span<const Message> messages, const RenderOptions& options) {
  if (reply_) throw UsageError("chat: a reply is still open; end it before the next turn");
  for (const Message& m : messages)
    if (m.role != Role::system && m.role != Role::user)
      throw UsageError("chat: a turn holds system and user messages only");
  std::vector<Message> all = this->messages();
  const std::size_t before = all.size();
  all.insert(all.end(), messages.begin(), messages.end());

  RenderOptions opts = options;
  opts.generation_prompt = true;
  const std::vector<Segment> whole = render(all, opts);
  std::size_t skip = 0;
  // A conversation with a stream has what the options put first already (or started
  // without it), even when every message of it was dropped and only that is left.
  if (before > 0 || !ids_.empty()) {
    opts.generation_prompt = false;
    const std::vector<Segment> so_far = render(std::span<const Message>(all.data(), before), opts);
    if (so_far.size() > whole.size() || !std::equal(so_far.begin(), so_far.end(), whole.begin()))
      throw UsageError(
          "chat: these render options put text after the messages (tool_choice), so the "
          "conversation cannot grow turn by turn");
    skip = so_far.size();
  }
  const std::span<const Segment> turn(whole.data() + skip, whole.size() - skip);

  // Cut the turn at each <|end_of_msg|>: its messages (any the options added first), then
  // the opening of the reply.
  std::vector<std::span<const Segment>> parts;
  std::size_t at = 0;
  for (std::size_t i = 0; i < turn.size(); ++i)
    if (is_control(turn[i], "<|end_of_msg|>")) {
      parts.push_back(turn.subspan(at, i + 1 - at));
      at = i + 1;
    }
  if (parts.size() < messages.size())
    throw RuntimeError("chat: the rendered turn holds fewer messages than it was given");
  const std::size_t internal = parts.size() - messages.size();
  const std::size_t old_size = ids_.size(), old_entries = entries_.size();
  for (std::size_t i = 0; i < parts.size(); ++i) {
    Entry e;
    if (i < internal) {
      e.internal = true;
      e.message = Message(Role::system, message_text(parts[i]));
    } else {
      e.message = messages[i - internal];
    }
    e.ids = tokens_->encode(parts[i]);
    ids_.insert(ids_.end(), e.ids.begin(), e.ids.end());
    entries_.push_back(std::move(e));
  }
  Entry reply;
  reply.message.role = Role::assistant;
  reply.thinking = options.thinking;
  reply.ids = tokens_->encode(turn.subspan(at));
  ids_.insert(ids_.end(), reply.ids.begin(), reply.ids.end());
  entries_.push_back(std::move(reply));
  reply_ = std::make_unique<Reply>(*tokens_, options.thinking, old_entries, old_size);
  return ids_.size() - old_size;
}

std::vector<StreamEvent> Conversation::add(std::uint32_t id) {
  if (!reply_) throw UsageError("chat: no reply is open");
  std::vector<StreamEvent> events = reply_->parser.feed(id);  // throws before anything is kept
  entries_.back().ids.push_back(id);
  ids_.push_back(id);
  return events;
}

bool Conversation::replying() const noexcept { return reply_ != nullptr; }

bool Conversation::reply_done() const { return reply_ && reply_->parser.done(); }

bool Conversation::reply_in_think() const { return reply_ && reply_->parser.in_think(); }

Completion Conversation::reply() const {
  if (!reply_) throw UsageError("chat: no reply is open");
  return reply_->parser.result();
}

const Entry& Conversation::end_reply(Ending ending) {
  if (!reply_) throw UsageError("chat: no reply is open");
  const bool done = reply_->parser.done();
  if (done != (ending == Ending::stop))
    throw UsageError(done ? "chat: a complete reply ends with Ending::stop"
                          : "chat: a reply without its stop id cannot end with Ending::stop");
  Entry& e = entries_.back();
  const std::vector<std::uint32_t> closing = tokens_->encode(reply_->parser.closing());
  e.ids.insert(e.ids.end(), closing.begin(), closing.end());
  ids_.insert(ids_.end(), closing.begin(), closing.end());
  e.closing = closing.size();
  e.ending = ending;
  e.message = to_message(reply_->parser.result());
  reply_.reset();
  return e;
}

void Conversation::abandon_reply() {
  if (!reply_) throw UsageError("chat: no reply is open");
  entries_.resize(reply_->entries_before);
  ids_.resize(reply_->ids_before);
  reply_.reset();
}

std::optional<DroppedTurn> Conversation::drop_oldest_turn() {
  if (reply_) throw UsageError("chat: a reply is still open");
  auto kept = [&](std::size_t i) { return !entries_[i].dropped; };
  std::size_t first = 0;
  while (first < entries_.size() && (!kept(first) || entries_[first].message.role == Role::system)) ++first;
  // The turn runs to the next user message after one of the assistant's replies.
  std::size_t end = first;
  bool replied = false;
  for (; end < entries_.size(); ++end) {
    if (!kept(end)) continue;
    const Role role = entries_[end].message.role;
    if (role == Role::user && replied) break;
    replied = replied || role == Role::assistant;
  }
  if (first >= entries_.size() || !replied) return std::nullopt;
  DroppedTurn d;
  d.first = first;
  d.last = end - 1;
  for (std::size_t i = first; i < end; ++i) {
    Entry& e = entries_[i];
    if (e.dropped || e.message.role == Role::system) continue;
    if (d.user_text.empty() && e.message.role == Role::user) d.user_text = e.message.content;
    e.dropped = true;
    ++d.messages;
    d.ids += e.ids.size();
  }
  ids_.clear();
  for (const Entry& e : entries_)
    if (!e.dropped) ids_.insert(ids_.end(), e.ids.begin(), e.ids.end());
  return d;
}

const std::vector<std::uint32_t>& Conversation::ids() const noexcept { return ids_; }

const std::vector<Entry>& Conversation::entries() const noexcept { return entries_; }

std::vector<Message> Conversation::messages() const {
  std::vector<Message> out;
  const std::size_t n = entries_.size() - (reply_ ? 1 : 0);
  for (std::size_t i = 0; i < n; ++i)
    if (!entries_[i].internal && !entries_[i].dropped) out.push_back(entries_[i].message);
  return out;
}

std::span<const std::uint32_t> Conversation::unfed(std::span<const std::uint32_t> fed) const {
  if (fed.size() > ids_.size() || !std::equal(fed.begin(), fed.end(), ids_.begin())) {
    const auto first = std::mismatch(fed.begin(), fed.end(), ids_.begin(), ids_.end()).first - fed.begin();
    throw UsageError("chat: the model state holds " + std::to_string(fed.size()) +
                     " tokens that are not the start of this conversation's " + std::to_string(ids_.size()) +
                     " (they differ from token " + std::to_string(first) + "): a state of another conversation");
  }
  return std::span<const std::uint32_t>(ids_).subspan(fed.size());
}

void Conversation::append(Entry entry) {
  if (reply_) throw UsageError("chat: a reply is still open");
  if (!entry.dropped) ids_.insert(ids_.end(), entry.ids.begin(), entry.ids.end());
  entries_.push_back(std::move(entry));
}

void Conversation::clear() {
  entries_.clear();
  ids_.clear();
  reply_.reset();
}

}  // namespace k3::chat
