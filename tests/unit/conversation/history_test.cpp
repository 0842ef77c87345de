// History files and resuming: records read back as written, a torn last line ignored with
// a warning, a bad line refused at its line; a conversation resumed from its history and
// model state feeds only the new ids and gives the bits an uninterrupted one gives.
#include <cstring>
#include <fstream>

#include <catch2/catch.hpp>

#include <k3/conversation.hpp>
#include <k3/error.hpp>
#include <k3/generate.hpp>
#include <k3/model.hpp>

#include "../chat/chat_fixture.hpp"

using namespace k3::test;
using k3::chat::Conversation;
using k3::chat::Ending;
using k3::chat::Entry;
using k3::chat::Message;
using k3::chat::RenderOptions;
using k3::chat::Role;

namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The tiny model's tokenizer's ids: every id a history of it holds is below.
std::int64_t vocab() { return chat_tokenizer().vocab_size(); }

void append_raw(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::app) << bytes;
}

k3::ModelSettings scalar() {
  k3::ModelSettings s;
  s.kernels = "scalar";
  s.threads = 1;
  return s;
}

/// A reply as the chat generates it: greedy, ended at the stop id, at the token limit or at
/// the first token the format refuses (left out, not fed). Returns the ids it fed.
std::size_t reply(k3::Session& s, Conversation& c, std::int64_t max_tokens) {
  k3::GenerateSettings g;
  // The conversation's ids the model has not seen are fed first, as the session's pending ids.
  const auto unfed = c.unfed(s.tokens());
  s.set_pending(std::vector<std::uint32_t>(unfed.begin(), unfed.end()));
  const std::size_t fed = unfed.size();  // the span ends with the conversation's growth
  g.max_new_tokens = max_tokens;
  g.stop_tokens = chat_tokens().stop_ids();
  struct Refused {};
  bool refused = false;
  try {
    k3::generate(s, g, [&](std::uint32_t id) {
      try {
        (void)c.add(id);
      } catch (const k3::RuntimeError&) {
        refused = true;
        throw Refused{};
      }
    });
  } catch (const Refused&) {
  }
  c.end_reply(c.reply_done() ? Ending::stop : refused ? Ending::format_error : Ending::length);
  return fed;
}

/// The logits after the whole stream: what the model would see next.
std::vector<float> next_logits(k3::Session& s, const Conversation& c) {
  std::vector<float> logits;
  s.feed(c.unfed(s.tokens()), false, logits);
  return logits;
}

}  // namespace

TEST_CASE("history: records read back as written, a torn last line is ignored with a warning") {
  const auto file = scratch_dir() / "history.jsonl";
  std::filesystem::remove(file);
  Conversation c(chat_tokens());
  RenderOptions opt;
  c.begin_reply(std::vector<Message>{{Role::system, "Be brief."}, {Role::user, "Hi \"you\"\n\xc3\xa9"}}, opt);
  const auto think = plain_ids("hmm");
  for (const auto id : think) (void)c.add(id);
  c.end_reply(Ending::interrupted);
  for (const auto& e : c.entries()) k3::chat::append_history(file, e);

  const auto h = k3::chat::read_history(file, vocab());
  CHECK_FALSE(h.torn_warning.has_value());
  REQUIRE(h.entries.size() == c.entries().size());
  CHECK(h.entries == c.entries());
  CHECK(h.valid_bytes == std::filesystem::file_size(file));
  Conversation back(chat_tokens());
  for (auto e : h.entries) back.append(std::move(e));
  CHECK(back.ids() == c.ids());

  // A crash in the middle of the next record: its bytes without the end of line.
  const std::string record = k3::chat::history_record(c.entries().back());
  append_raw(file, record.substr(0, record.size() / 2));
  const auto torn = k3::chat::read_history(file, vocab());
  CHECK(torn.entries == c.entries());
  REQUIRE(torn.torn_warning.has_value());
  CHECK_THAT(*torn.torn_warning, Catch::Contains(file.string() + ":" + std::to_string(c.entries().size() + 1)));
  CHECK(torn.valid_bytes == h.valid_bytes);

  // The same bytes in the middle of the file are not a torn tail but a bad record.
  k3::chat::write_history(file, c.entries());
  append_raw(file, record.substr(0, record.size() / 2) + "\n" + record);
  CHECK_THROWS_WITH(k3::chat::read_history(file, vocab()),
                    Catch::Contains(file.string() + ":" + std::to_string(c.entries().size() + 1) +
                                    ": not a JSON record"));
  // write_history replaces the file whole.
  k3::chat::write_history(file, c.entries());
  CHECK(read_all(file).size() == h.valid_bytes);
  CHECK_THROWS_AS(k3::chat::read_history(scratch_dir() / "none.jsonl", vocab()), k3::UsageError);
}

TEST_CASE("history: a whole last record without its end of line is kept, and the next one gets a line of its own") {
  const auto file = scratch_dir() / "no-newline.jsonl";
  std::filesystem::remove(file);
  Conversation c(chat_tokens());
  c.begin_reply(std::vector<Message>{{Role::user, "Hi"}}, RenderOptions{});
  for (const auto id : plain_ids("there")) (void)c.add(id);
  c.end_reply(Ending::length);
  for (const auto& e : c.entries()) k3::chat::append_history(file, e);
  const std::string whole = read_all(file);
  std::filesystem::resize_file(file, whole.size() - 1);  // only the last '\n' is gone

  const auto h = k3::chat::read_history(file, vocab());
  CHECK_FALSE(h.torn_warning.has_value());
  CHECK(h.entries == c.entries());
  CHECK(h.valid_bytes == whole.size() - 1);
  // Appending goes on a new line: the file reads back with one more record.
  k3::chat::append_history(file, c.entries().front());
  const auto more = k3::chat::read_history(file, vocab());
  REQUIRE(more.entries.size() == c.entries().size() + 1);
  CHECK(more.entries.back() == c.entries().front());
  CHECK(read_all(file) == whole + k3::chat::history_record(c.entries().front()));
}

TEST_CASE("history: an id outside the model's vocabulary is refused at its file:line") {
  const auto file = scratch_dir() / "foreign.jsonl";
  std::filesystem::remove(file);
  Conversation c(chat_tokens());
  c.begin_reply(std::vector<Message>{{Role::user, "Hi"}}, RenderOptions{});
  c.end_reply(Ending::length);
  for (const auto& e : c.entries()) k3::chat::append_history(file, e);
  Entry foreign = c.entries().front();
  foreign.ids.push_back(static_cast<std::uint32_t>(vocab()));
  k3::chat::append_history(file, foreign);
  CHECK_THROWS_WITH(k3::chat::read_history(file, vocab()),
                    file.string() + ":" + std::to_string(c.entries().size() + 1) + ": token id " +
                        std::to_string(vocab()) + " is outside the model's vocabulary of " + std::to_string(vocab()) +
                        " ids (a history of another model?)");
}

TEST_CASE("history: a resumed conversation feeds only the new ids and gives the same bits") {
  k3::PluginHost host;
  k3::Model m(test_model("tiny"), host, scalar());
  RenderOptions opt;
  const std::vector<Message> turn1{{Role::system, "Short answers."}, {Role::user, "Name a color."}};
  const std::vector<Message> turn2{{Role::user, "Another one?"}};

  // Uninterrupted: both turns in one session.
  k3::Session live(m, 512);
  Conversation c(chat_tokens());
  c.begin_reply(turn1, opt);
  (void)reply(live, c, 6);
  const auto file = scratch_dir() / "resume.jsonl";
  std::filesystem::remove(file);
  for (const auto& e : c.entries()) k3::chat::append_history(file, e);
  live.save(k3::chat::history_state_file(file));
  const std::size_t after_turn1 = c.ids().size();
  c.begin_reply(turn2, opt);
  const std::size_t fed_live = reply(live, c, 6);
  const auto logits_live = next_logits(live, c);

  // Resumed: the history and the state, in a new session.
  const auto h = k3::chat::read_history(file, vocab());
  Conversation r(chat_tokens());
  for (auto e : h.entries) r.append(std::move(e));
  REQUIRE(r.ids() == std::vector<std::uint32_t>(c.ids().begin(), c.ids().begin() + static_cast<long>(after_turn1)));
  k3::Session resumed(m, 512);
  resumed.load(k3::chat::history_state_file(file));
  CHECK(resumed.position() > 0);
  std::vector<std::uint32_t> held = resumed.tokens();
  held.insert(held.end(), resumed.pending().begin(), resumed.pending().end());
  CHECK_NOTHROW(r.unfed(held));
  const auto in_state = static_cast<std::size_t>(resumed.position());
  r.begin_reply(turn2, opt);
  const std::size_t turn2_end = r.ids().size();
  const std::size_t fed_resumed = reply(resumed, r, 6);
  const auto logits_resumed = next_logits(resumed, r);
  CHECK(r.ids() == c.ids());
  CHECK(fed_resumed == fed_live);
  // Only what the state did not hold was fed: not the old turns again.
  CHECK(fed_resumed == turn2_end - in_state);
  CHECK(fed_resumed < after_turn1);
  REQUIRE(logits_resumed.size() == logits_live.size());
  CHECK(std::memcmp(logits_resumed.data(), logits_live.data(), logits_live.size() * sizeof(float)) == 0);

  // And the whole stream fed at once to a fresh session: the same bits again.
  k3::Session fresh(m, 512);
  std::vector<float> logits_fresh;
  fresh.feed(c.ids(), false, logits_fresh);
  REQUIRE(logits_fresh.size() == logits_live.size());
  CHECK(std::memcmp(logits_fresh.data(), logits_live.data(), logits_live.size() * sizeof(float)) == 0);

  // A state of another conversation is refused against this history.
  Conversation other(chat_tokens());
  other.begin_reply(std::vector<Message>{{Role::user, "Something else entirely."}}, opt);
  CHECK_THROWS_AS(other.unfed(resumed.tokens()), k3::UsageError);
}

TEST_CASE("history: dropped records are kept for the record and left out of the stream") {
  const auto file = scratch_dir() / "dropped.jsonl";
  std::filesystem::remove(file);
  RenderOptions opt;
  Conversation c(chat_tokens());
  for (const char* text : {"One", "Two", "Three"}) {
    c.begin_reply(std::vector<Message>{{Role::user, text}}, opt);
    for (const auto id : plain_ids("ok")) (void)c.add(id);
    c.end_reply(Ending::length);
  }
  REQUIRE(c.drop_oldest_turn().has_value());
  k3::chat::write_history(file, c.entries());
  CHECK(read_all(file).find("\"dropped\":true") != std::string::npos);
  const auto h = k3::chat::read_history(file, vocab());
  CHECK(h.entries == c.entries());
  Conversation back(chat_tokens());
  for (auto e : h.entries) back.append(std::move(e));
  CHECK(back.ids() == c.ids());
  CHECK(back.messages() == c.messages());
  CHECK(back.messages().front().content == "Two");
}
