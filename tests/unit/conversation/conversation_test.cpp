// The conversation's id stream: a turn appends exactly the ids the whole conversation's
// rendering has at that place, generated ids stay as generated, a reply cut short is closed
// so that the stream equals the rendering of what it kept.
#include <algorithm>

#include <catch2/catch.hpp>

#include <k3/conversation.hpp>
#include <k3/error.hpp>

#include "../chat/chat_fixture.hpp"

using namespace k3::test;
using k3::chat::Conversation;
using k3::chat::Ending;
using k3::chat::Message;
using k3::chat::RenderOptions;
using k3::chat::Role;
using k3::chat::Segment;

namespace {

using IdVec = std::vector<std::uint32_t>;

IdVec rendered(const std::vector<Message>& messages, RenderOptions options, bool generation_prompt) {
  options.generation_prompt = generation_prompt;
  return chat_tokens().encode(k3::chat::render(messages, options));
}

/// The ids a model following the format exactly would generate for `reply` after the
/// generation prompt of `before`: the rendering of the reply past that prompt.
IdVec generated_ids(const std::vector<Message>& before, const Message& reply, const RenderOptions& options) {
  std::vector<Message> with = before;
  with.push_back(reply);
  RenderOptions o = options;
  o.generation_prompt = false;
  const auto all = k3::chat::render(with, o);
  o.generation_prompt = true;
  const auto prompt = k3::chat::render(before, o);
  REQUIRE(std::equal(prompt.begin(), prompt.end(), all.begin()));
  return chat_tokens().encode(std::span<const Segment>(all).subspan(prompt.size()));
}

Message assistant(const std::string& reasoning, const std::string& content) {
  Message m(Role::assistant, content);
  m.reasoning_content = reasoning;
  return m;
}

void add_all(Conversation& c, const IdVec& ids) {
  for (const auto id : ids) (void)c.add(id);
}

}  // namespace

TEST_CASE("conversation: each turn's ids are the whole conversation's rendering at that place") {
  for (const bool thinking : {true, false}) {
    CAPTURE(thinking);
    RenderOptions opt;
    opt.thinking = thinking;
    Conversation c(chat_tokens());
    const std::vector<Message> turn1{{Role::system, "You are terse."}, {Role::user, "Hello <|open|> there"}};
    const std::size_t n1 = c.begin_reply(turn1, opt);
    CHECK(c.ids() == rendered(turn1, opt, true));
    CHECK(n1 == c.ids().size());
    // Typed control-token text stays text: one <|open|> per message header and the reply's.
    const auto& user = c.entries()[c.entries().size() - 2];
    CHECK(user.message.content == "Hello <|open|> there");
    CHECK(std::count(user.ids.begin(), user.ids.end(), kOpenId) == 1);
    // With thinking on, rendering put the effort message first: an internal entry.
    CHECK(c.entries().front().internal == thinking);

    const Message a1 = assistant(thinking ? "The user greets." : "", "Hi.");
    add_all(c, generated_ids(turn1, a1, opt));
    REQUIRE(c.reply_done());
    const auto& e1 = c.end_reply(Ending::stop);
    CHECK(e1.closing == 0);
    CHECK(e1.message.content == "Hi.");
    std::vector<Message> all = turn1;
    all.push_back(a1);
    if (!thinking) all.back().reasoning_content.clear();
    CHECK(c.ids() == rendered(all, opt, false));
    CHECK(c.messages().size() == 3);

    const std::size_t before = c.ids().size();
    const std::vector<Message> turn2{{Role::user, "And now?"}};
    const std::size_t n2 = c.begin_reply(turn2, opt);
    all.push_back(turn2[0]);
    CHECK(c.ids() == rendered(all, opt, true));
    CHECK(n2 == c.ids().size() - before);
    CHECK(c.unfed(std::span<const std::uint32_t>(c.ids()).first(before)).size() == n2);
  }
}

TEST_CASE("conversation: a reply cut short is closed into what rendering its text gives") {
  RenderOptions opt;
  const std::vector<Message> turn{{Role::user, "Think first."}};
  const std::string head = "Let me see.", tail = " Done now.";
  // The cut falls where the tokenizer cuts anyway, so the kept text re-encodes to the same ids.
  IdVec whole_think = plain_ids(head + tail), head_ids = plain_ids(head);
  REQUIRE(std::equal(head_ids.begin(), head_ids.end(), whole_think.begin()));
  const IdVec gen = generated_ids(turn, assistant(head + tail, "Yes."), opt);

  SECTION("inside the think channel") {
    Conversation c(chat_tokens());
    c.begin_reply(turn, opt);
    add_all(c, IdVec(gen.begin(), gen.begin() + static_cast<long>(head_ids.size())));
    const auto& e = c.end_reply(Ending::interrupted);
    CHECK(e.ending == Ending::interrupted);
    CHECK(e.message.reasoning_content == head);
    CHECK(e.message.content.empty());
    CHECK(e.closing > 0);
    std::vector<Message> all = turn;
    all.push_back(assistant(head, ""));
    CHECK(c.ids() == rendered(all, opt, false));
  }
  SECTION("inside a tag header: <|close|>think without its <|sep|>") {
    Conversation c(chat_tokens());
    c.begin_reply(turn, opt);
    const auto close_at = std::find(gen.begin(), gen.end(), kCloseId);
    REQUIRE(close_at != gen.end());
    const auto think = plain_ids("think");
    add_all(c, IdVec(gen.begin(), close_at + 1 + static_cast<long>(think.size())));
    c.end_reply(Ending::length);
    std::vector<Message> all = turn;
    all.push_back(assistant(head + tail, ""));
    CHECK(c.ids() == rendered(all, opt, false));
  }
  SECTION("at a token the format does not allow, which is left out") {
    Conversation c(chat_tokens());
    c.begin_reply(turn, opt);
    add_all(c, IdVec(gen.begin(), gen.begin() + static_cast<long>(head_ids.size())));
    const auto size = c.ids().size();
    CHECK_THROWS_AS(c.add(kBos), k3::RuntimeError);
    CHECK(c.ids().size() == size);
    CHECK_THROWS_AS(c.end_reply(Ending::stop), k3::UsageError);
    c.end_reply(Ending::format_error);
    std::vector<Message> all = turn;
    all.push_back(assistant(head, ""));
    CHECK(c.ids() == rendered(all, opt, false));
  }
  SECTION("in the response channel, then the next turn follows the closed message") {
    Conversation c(chat_tokens());
    c.begin_reply(turn, opt);
    // Everything up to the response text, then the cut.
    const auto yes = plain_ids("Yes.");
    const auto at = std::search(gen.begin(), gen.end(), yes.begin(), yes.end());
    REQUIRE(at != gen.end());
    add_all(c, IdVec(gen.begin(), at + static_cast<long>(yes.size())));
    c.end_reply(Ending::interrupted);
    c.begin_reply(std::vector<Message>{{Role::user, "Go on."}}, opt);
    std::vector<Message> all = turn;
    all.push_back(assistant(head + tail, "Yes."));
    all.emplace_back(Role::user, "Go on.");
    CHECK(c.ids() == rendered(all, opt, true));
  }
}

TEST_CASE("conversation: a turn that does not fit can be taken back, misuse is refused") {
  RenderOptions opt;
  Conversation c(chat_tokens());
  CHECK_THROWS_AS(c.add(1), k3::UsageError);
  CHECK_THROWS_AS(c.begin_reply(std::vector<Message>{{Role::assistant, "x"}}, opt), k3::UsageError);
  c.begin_reply(std::vector<Message>{{Role::user, "one"}}, opt);
  CHECK_THROWS_AS(c.begin_reply(std::vector<Message>{{Role::user, "two"}}, opt), k3::UsageError);
  c.abandon_reply();
  CHECK(c.ids().empty());
  CHECK(c.entries().empty());
  // A state of another conversation is refused.
  c.begin_reply(std::vector<Message>{{Role::user, "one"}}, opt);
  IdVec other = c.ids();
  other[1] ^= 1;
  CHECK_THROWS_AS(c.unfed(other), k3::UsageError);
  CHECK(c.unfed({}).size() == c.ids().size());
}

TEST_CASE("conversation: dropping the oldest turns leaves the rendering of the kept messages") {
  for (const bool thinking : {true, false}) {
    CAPTURE(thinking);
    RenderOptions opt;
    opt.thinking = thinking;
    Conversation c(chat_tokens());
    const Message system(Role::system, "Be brief.");
    std::vector<Message> all;  // what the stream renders, as it grows
    auto answer = [&](const std::vector<Message>& turn, const std::string& reasoning, const std::string& text) {
      c.begin_reply(turn, opt);
      all.insert(all.end(), turn.begin(), turn.end());
      const Message a = assistant(thinking ? reasoning : "", text);
      add_all(c, generated_ids(all, a, opt));
      REQUIRE(c.reply_done());
      c.end_reply(Ending::stop);
      all.push_back(a);
    };
    answer({system, {Role::user, "First question"}}, "Hmm.", "One.");
    answer({{Role::user, "Second question"}}, "Well.", "Two.");
    answer({{Role::user, "Third question"}}, "So.", "Three.");
    REQUIRE(c.ids() == rendered(all, opt, false));
    const std::size_t entries = c.entries().size();

    const auto d = c.drop_oldest_turn();
    REQUIRE(d.has_value());
    CHECK(d->messages == 2);  // the user message and its answer; the system message stays
    CHECK(d->user_text == "First question");
    const std::vector<Message> kept{system, all[3], all[4], all[5], all[6]};
    CHECK(c.messages() == kept);
    // The stream is exactly K3's rendering of the kept messages, and grows from there.
    CHECK(c.ids() == rendered(kept, opt, false));
    CHECK(c.entries().size() == entries);  // kept for the record, marked
    std::size_t dropped_ids = 0;
    for (const auto& e : c.entries()) dropped_ids += e.dropped ? e.ids.size() : 0;
    CHECK(dropped_ids == d->ids);
    const std::vector<Message> turn4{{Role::user, "Fourth"}};
    c.begin_reply(turn4, opt);
    std::vector<Message> with4 = kept;
    with4.push_back(turn4[0]);
    CHECK(c.ids() == rendered(with4, opt, true));
    CHECK_THROWS_AS(c.drop_oldest_turn(), k3::UsageError);  // a reply is open
    c.abandon_reply();

    // Every turn dropped: the system message (and the effort message) alone, once.
    CHECK(c.drop_oldest_turn().has_value());
    CHECK(c.drop_oldest_turn().has_value());
    CHECK_FALSE(c.drop_oldest_turn().has_value());
    CHECK(c.ids() == rendered({system}, opt, false));
    c.begin_reply(turn4, opt);
    CHECK(c.ids() == rendered({system, turn4[0]}, opt, true));
  }
}

TEST_CASE("conversation: with every turn dropped and no system message, the effort message is not rendered twice") {
  RenderOptions opt;  // thinking on: the conversation starts with the effort message
  Conversation c(chat_tokens());
  const std::vector<Message> turn{{Role::user, "Hello"}};
  c.begin_reply(turn, opt);
  add_all(c, generated_ids(turn, assistant("Hm.", "Hi."), opt));
  c.end_reply(Ending::stop);
  REQUIRE(c.drop_oldest_turn().has_value());
  CHECK(c.messages().empty());
  CHECK(c.ids() == rendered({}, opt, false));  // the effort message
  const std::vector<Message> next{{Role::user, "Again"}};
  c.begin_reply(next, opt);
  CHECK(c.ids() == rendered(next, opt, true));
}
