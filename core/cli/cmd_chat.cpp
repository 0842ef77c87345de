// k3host chat: an interactive terminal chat in K3's format on any pipeline (docs/chat.md).
//
//   k3host chat --config presets/laptop.yaml [--set k=v]... [--history FILE | --resume FILE]
//
// The pipeline is loaded once (k3::Runtime). Each turn appends the user's message and the
// reply's opening to the conversation's id stream (k3/conversation.hpp) and feeds only the
// ids the model has not seen; the reply streams as it is generated, the think channel dimmed
// (or hidden), and a status line follows it. Answers stop at a token limit, and when the
// context would not leave the next one its limit the oldest turns are dropped (said on
// screen) and the rest is fed again. Thinking starts as the model was trained. Line editing
// and history come from libedit. Ctrl-C stops the answer being written (it is kept, closed
// in the id stream), a stalled storage read included; at the prompt it clears the line;
// Ctrl-D at an empty prompt ends the chat.
//
// Under mpirun with cluster.transport set, rank 0 runs the chat over a model split over
// ranks (docs/cluster.md); the model state is then spread over the ranks, so history files
// are written without it and --resume feeds the conversation again.
#include <histedit.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <k3/chat.hpp>
#include <k3/cluster.hpp>
#include <k3/conversation.hpp>
#include <k3/error.hpp>
#include <k3/generate.hpp>
#include <k3/log.hpp>
#include <k3/pipeline.hpp>
#include <k3/plugin_host.hpp>
#include <k3/runtime.hpp>
#include <k3/units.hpp>
#include <k3/user_files.hpp>

#include "cli.hpp"
#include "run_job.hpp"
#include "stop_signal.hpp"

namespace k3::cli {
namespace {

using chat::Conversation;
using chat::Ending;
using chat::Message;
using chat::Role;
using chat::StreamEvent;

/// An answer's default token limit: a few screens of text (the think channel counts), so that
/// one answer does not take the context a conversation needs.
constexpr std::int64_t kDefaultMaxTokens = 1024;

struct ChatOptions {
  std::string history;    ///< --history FILE: append every message to FILE
  std::string resume;     ///< --resume FILE: continue the conversation of FILE (and its state)
  std::string system;     ///< --system TEXT
  bool think = false;     ///< --think
  bool no_think = false;  ///< --no-think
  std::string effort = "max";
  bool hide_thinking = false;
  std::int64_t max_tokens = kDefaultMaxTokens;  ///< 0 = as many as the context holds
};

// --- The terminal ---------------------------------------------------------------------------

/// ANSI styles, only when stdout is a terminal.
struct Style {
  bool tty = ::isatty(STDOUT_FILENO) == 1;
  [[nodiscard]] const char* dim() const { return tty ? "\033[2m" : ""; }
  [[nodiscard]] const char* reset() const { return tty ? "\033[0m" : ""; }
};

void out(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

/// Model text made safe for a terminal: a model can write any byte, and an ESC or a C1 control
/// (U+0080..U+009F) would be taken as a command by the terminal. Control characters other than
/// newline and tab are shown in caret notation (^[), C1 ones as <U+009B>.
std::string printable(std::string_view text) {
  std::string safe;
  safe.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      safe += '^';
      safe += static_cast<char>(c == 0x7f ? '?' : c + 0x40);
    } else if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "<U+%04X>", static_cast<unsigned char>(text[i + 1]));
      safe += buf;
      ++i;
    } else {
      safe += text[i];
    }
  }
  return safe;
}

// Ctrl-C at the prompt: the read returns (no SA_RESTART) and the line is dropped. While an
// answer is written a StopSignal replaces this handler (and puts it back afterwards).
std::atomic<bool> g_prompt_interrupt{false};
void on_prompt_interrupt(int) { g_prompt_interrupt.store(true); }

class PromptInterrupt {
 public:
  PromptInterrupt() {
    struct sigaction sa {};
    sa.sa_handler = on_prompt_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGINT, &sa, &old_);
  }
  ~PromptInterrupt() { sigaction(SIGINT, &old_, nullptr); }
  PromptInterrupt(const PromptInterrupt&) = delete;
  PromptInterrupt& operator=(const PromptInterrupt&) = delete;

 private:
  struct sigaction old_ {};
};

/// libedit's line editor and its history, native API.
class LineEditor {
 public:
  LineEditor() : history_(history_init(), history_end) {
    HistEvent ev;
    history(history_.get(), &ev, H_SETSIZE, 1000);
    history(history_.get(), &ev, H_SETUNIQUE, 1);
    el_.reset(el_init("k3host", stdin, stdout, stderr));
    if (!el_) throw RuntimeError("chat: libedit cannot start on this terminal");
    el_set(el_.get(), EL_CLIENTDATA, this);
    el_set(el_.get(), EL_PROMPT, &LineEditor::prompt_of);
    el_set(el_.get(), EL_EDITOR, "emacs");
    el_set(el_.get(), EL_HIST, history, history_.get());
    el_source(el_.get(), nullptr);  // ~/.editrc, as every libedit program reads it
  }

  enum class Read { line, interrupted, end };
  /// One line without its '\n'.
  Read read(const std::string& prompt, std::string& line) {
    prompt_ = prompt;
    g_prompt_interrupt.store(false);
    int count = 0;
    const char* got = el_gets(el_.get(), &count);
    if (g_prompt_interrupt.exchange(false)) {
      el_reset(el_.get());
      return Read::interrupted;
    }
    if (got == nullptr || count <= 0) return Read::end;
    line.assign(got, static_cast<std::size_t>(count));
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return Read::line;
  }

  void remember(const std::string& text) {
    HistEvent ev;
    history(history_.get(), &ev, H_ENTER, text.c_str());
  }

 private:
  static char* prompt_of(EditLine* el) {
    void* self = nullptr;
    el_get(el, EL_CLIENTDATA, &self);
    return static_cast<LineEditor*>(self)->prompt_.data();
  }
  std::unique_ptr<History, void (*)(History*)> history_;
  std::unique_ptr<EditLine, void (*)(EditLine*)> el_{nullptr, el_end};
  std::string prompt_;
};

/// What the user typed: a message (continued lines joined) or nothing (Ctrl-C, Ctrl-D).
struct Input {
  enum class Kind { text, interrupted, end } kind = Kind::end;
  std::string text;
};

/// Reads one message: a line; a line ending in '\' continues on the next; a line that is
/// just """ opens a block that the next such line closes.
Input read_turn(LineEditor& editor) {
  Input in;
  std::string line;
  bool block = false, first = true;
  for (;;) {
    const auto r = editor.read(first ? "> " : "... ", line);
    if (r == LineEditor::Read::interrupted) {
      out("^C\n");
      return {Input::Kind::interrupted, {}};
    }
    if (r == LineEditor::Read::end) {
      if (first) return {Input::Kind::end, {}};
      break;  // Ctrl-D inside a continued message sends what there is
    }
    if (first && line == "\"\"\"") {
      block = true;
      first = false;
      continue;
    }
    if (block) {
      if (line == "\"\"\"") break;
      in.text += line + "\n";
      continue;
    }
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      in.text += line + "\n";
      first = false;
      continue;
    }
    in.text += line;
    break;
  }
  if (block && !in.text.empty() && in.text.back() == '\n') in.text.pop_back();
  in.kind = Input::Kind::text;
  return in;
}

// --- The chat -----------------------------------------------------------------------------

/// A token the chat format does not allow: ends generate() from inside its callback.
struct FormatBreak {};

struct TurnStats {
  std::size_t fed = 0;        ///< ids fed this turn (the ids the model had not seen)
  std::size_t generated = 0;  ///< ids the model generated (kept ones)
  double prefill_seconds = 0;
  double tokens_per_second = 0;
  StreamStats before, after;
};

/// A history file and its state are written: both must be places k3host may write
/// (k3/user_files.hpp), checked before anything is.
void check_history_file(const std::filesystem::path& file, const std::string& what,
                        const std::vector<std::filesystem::path>& keep_out) {
  check_output_file(file, what, keep_out);
  check_output_file(chat::history_state_file(file), what + " " + file.string() + ": its state", keep_out);
}

class Chat {
 public:
  /// `resumed`: the history of --resume, read before the model loaded. `cluster`: rank 0
  /// of a model split over ranks, or null.
  Chat(Runtime& runtime, PluginHost& host, const Pipeline& pipeline, const ChatOptions& opt,
       std::optional<chat::History> resumed, Cluster* cluster)
      : runtime_(runtime),
        host_(host),
        cluster_(cluster),
        tokens_(runtime.tokenizer()),
        session_(runtime.model(), pipeline.get_int("memory.context")),
        conversation_(tokens_),
        settings_(generate_settings_of(pipeline, runtime)),
        max_tokens_(opt.max_tokens),
        show_thinking_(!opt.hide_thinking),
        system_(opt.system) {
    // A flag given now wins; else a resumed conversation goes on as it was (load()), and a
    // new one starts as the model was trained (model.thinking, the checkpoint's config.json).
    thinking_given_ = opt.think || opt.no_think;
    render_.thinking = opt.think || (!opt.no_think && runtime.thinking());
    render_.effort = chat::parse_effort(opt.effort);
    settings_.stop_at_eos = true;
    settings_.stop_tokens = tokens_.stop_ids();
    settings_.dump_logits.clear();
    pending_system_ = !system_.empty();
    resume_ = opt.resume;
    resumed_ = std::move(resumed);
    keep_out_ = checkpoint_folders(pipeline);  // --history and --resume were checked against them
    if (!opt.history.empty()) {
      std::error_code ec;
      if (std::filesystem::file_size(opt.history, ec) > 0 && !ec)
        throw UsageError(opt.history + ": holds a conversation already; continue it with --resume " + opt.history);
      history_ = opt.history;
    }
  }

  /// The prompt loop; returns the exit code.
  int run() {
    LineEditor editor;
    PromptInterrupt prompt_interrupt;
    if (!resume_.empty()) {
      load(resume_, std::move(resumed_));
      history_ = resume_;
    }
    out(std::string("k3host chat: ") + runtime_.model_uri() + " | thinking " + (render_.thinking ? "on" : "off") +
        " | answers up to " + limit_text() + " | /help for commands, Ctrl-D to quit\n");
    for (;;) {
      const Input in = read_turn(editor);
      if (in.kind == Input::Kind::interrupted) continue;
      if (in.kind == Input::Kind::end) break;
      if (in.text.empty()) continue;
      editor.remember(in.text);
      if (in.text[0] == '/' && in.text.compare(0, 2, "//") != 0) {
        if (!command(in.text)) break;
        continue;
      }
      try {
        turn(in.text[0] == '/' ? in.text.substr(1) : in.text);
      } catch (const UsageError& e) {
        // Ids the model refuses (a history of another model): nothing of the turn is kept,
        // and the model state starts over, so the next turn feeds the conversation whole.
        if (conversation_.replying()) conversation_.abandon_reply();
        session_.reset();
        out(std::string("[") + e.what() + "]\n");
      }
      if (quit_) break;
    }
    out("\n");
    finish();
    return quit_ ? static_cast<int>(ExitCode::interrupted) : 0;  // quit_: SIGTERM stopped an answer
  }

 private:
  // --- a turn ---
  using Clock = std::chrono::steady_clock;

  /// How generating an answer went.
  struct Answer {
    GenerateResult result;
    std::string format_error;  ///< the model wrote a token the format does not allow there
    bool think_shown = false, response_started = false;
    bool stopped = false;  ///< Ctrl-C or SIGTERM
    int stop_signal = 0;
    Clock::time_point first{}, last{};  ///< the first and last generated token
  };

  void turn(const std::string& text) {
    std::vector<Message> messages;
    if (pending_system_) messages.emplace_back(Role::system, system_);
    messages.emplace_back(Role::user, text);
    if (!begin_turn(messages)) return;
    pending_system_ = false;

    // The conversation's ids the model has not seen are the session's pending ids: generate()
    // feeds them first (and leaves what it did not feed there).
    const auto unfed = conversation_.unfed(session_.tokens());
    session_.set_pending(std::vector<std::uint32_t>(unfed.begin(), unfed.end()));
    TurnStats st;
    st.fed = unfed.size();
    st.before = runtime_.model().stream_stats();
    const auto t0 = Clock::now();
    const Answer a = stream_answer(st);
    // A storage wait cut short left part of a forward pass in the model state: it starts over,
    // and the next turn feeds the conversation again (the answer so far is kept).
    if (!a.result.cut.empty()) session_.reset();
    const bool in_think = conversation_.reply_in_think();
    const Ending ending = conversation_.reply_done() ? Ending::stop
                          : !a.format_error.empty()  ? Ending::format_error
                          : a.stopped                ? Ending::interrupted
                                                     : Ending::length;
    conversation_.end_reply(ending);
    write_history();  // the turn's messages and the reply, once the reply is whole
    st.after = runtime_.model().stream_stats();
    st.prefill_seconds = std::chrono::duration<double>((st.generated > 0 ? a.first : Clock::now()) - t0).count();
    const double decode = std::chrono::duration<double>(a.last - a.first).count();
    st.tokens_per_second = st.generated > 1 && decode > 0 ? static_cast<double>(st.generated - 1) / decode : 0;
    last_ = st;
    if (ending == Ending::interrupted) {
      out(std::string(a.response_started || a.think_shown ? "\n" : "") + "[stopped]");
      if (!a.result.cut.empty()) out(" [a storage read was cut short; the next message feeds the conversation again]");
    }
    if (ending == Ending::length) {
      const bool at_limit = max_tokens_ > 0 && static_cast<std::int64_t>(st.generated) >= max_tokens_;
      out(std::string("\n[") +
          (at_limit ? "token limit: " + limit_text() + " (/max-tokens N to change it)" : "the context is full") +
          (in_think ? "; it ended inside the think channel, before any answer: /think off, or a higher limit" : "") +
          "]");
    }
    if (ending == Ending::format_error)
      out("\n[the answer ends here: the model broke K3's chat format: " + printable(a.format_error) + "]");
    out("\n" + std::string(style_.dim()) + status_line(st) + style_.reset() + "\n");
    if (a.stop_signal == SIGTERM) quit_ = true;
  }

  /// Generates the open reply from the session's pending ids, showing it as it comes.
  Answer stream_answer(TurnStats& st) {
    Answer a;
    GenerateSettings g = settings_;
    g.prompt.clear();
    const std::int64_t room = context_room();
    g.max_new_tokens = max_tokens_ > 0 ? std::min(max_tokens_, room) : room;
    StopSignal stop;  // Ctrl-C now stops the answer at the next token
    g.stop = &stop.flag();
    // ... and cuts a storage wait short (a stalled http read): the plugins see the flag.
    const StopFlagScope storage_stop(host_, &stop.flag());
    // ... and a wait for another rank of a split model.
    const ClusterStopScope cluster_stop(cluster_, &stop.flag());
    try {
      a.result = generate(session_, g, [&](std::uint32_t id) {
        a.last = Clock::now();
        if (st.generated == 0) a.first = a.last;
        std::vector<StreamEvent> events;
        try {
          events = conversation_.add(id);
        } catch (const RuntimeError& e) {
          a.format_error = e.what();
          throw FormatBreak{};
        }
        ++st.generated;
        for (const auto& ev : events) show(ev, a);
      });
    } catch (const FormatBreak&) {
    }
    a.stopped = stop.requested();
    a.stop_signal = stop.signal_number();
    return a;
  }

  void show(const StreamEvent& ev, Answer& a) {
    if (ev.kind == StreamEvent::Kind::think_text && show_thinking_) {
      out(std::string(style_.dim()) + printable(ev.text) + style_.reset());
      a.think_shown = true;
    } else if (ev.kind == StreamEvent::Kind::response_text) {
      if (!a.response_started && a.think_shown) out("\n\n");
      a.response_started = true;
      out(printable(ev.text));
    } else if (ev.kind == StreamEvent::Kind::tool_call) {
      out("\n[tool call " + printable(ev.call.name + " " + ev.call.arguments) + " (not run: chat runs no tools)]");
    }
  }

  /// Ids kept free after an answer to close it, should it be cut short.
  static constexpr std::int64_t kClosingRoom = 32;

  /// The room the context leaves for the answer being begun (the session holds a prefix of
  /// the stream, so what it still needs fed and what it holds are the stream).
  [[nodiscard]] std::int64_t context_room() const {
    return session_.max_positions() - static_cast<std::int64_t>(conversation_.ids().size()) - kClosingRoom;
  }

  /// Begins the turn's reply. When the context would leave the answer less than its limit
  /// (at most a quarter of the context: dropping turns means feeding the rest again, so it
  /// is not done while a long answer still fits), the oldest turns are dropped first, and the
  /// screen and the history file say so. False (nothing begun) when the message does not fit
  /// even alone.
  bool begin_turn(const std::vector<Message>& messages) {
    const std::int64_t context = session_.max_positions();
    const std::int64_t want = std::min(max_tokens_ > 0 ? max_tokens_ : context, context / 4);
    // What dropping every old turn would leave: the system messages and this turn.
    std::size_t kept = 0;
    for (const auto& e : conversation_.entries())
      if (!e.dropped && e.message.role == Role::system) kept += e.ids.size();
    const std::size_t turn_ids = conversation_.begin_reply(messages, render_);
    if (context_room() >= want) return true;
    kept += turn_ids;
    conversation_.abandon_reply();
    if (context - static_cast<std::int64_t>(kept) - kClosingRoom < 1) {
      out("[this message does not fit the context (" + std::to_string(turn_ids) + " tokens with the reply's opening, " +
          std::to_string(context) + " in all, memory.context): shorten it, or raise memory.context]\n");
      return false;
    }
    std::vector<chat::DroppedTurn> dropped;
    while (context - static_cast<std::int64_t>(conversation_.ids().size() + turn_ids) - kClosingRoom < want) {
      auto d = conversation_.drop_oldest_turn();
      if (!d) break;
      dropped.push_back(std::move(*d));
    }
    if (!dropped.empty()) after_drop(dropped);
    conversation_.begin_reply(messages, render_);
    return true;
  }

  /// Says which turns went, and keeps the files consistent: the model state of the old stream
  /// no longer matches (the session starts over), the history file is rewritten with those
  /// records marked dropped, and a state file beside it is removed first (a crash between the
  /// two then leaves the old history without a state, which resumes).
  void after_drop(const std::vector<chat::DroppedTurn>& dropped) {
    std::size_t messages = 0, ids = 0;
    for (const auto& d : dropped) messages += d.messages, ids += d.ids;
    auto quote = [](std::string text) {
      if (text.size() > 40) text = text.substr(0, 40 - 3) + "...";  // bytes; printable() shows a cut character safely
      for (char& c : text)
        if (c == '\n') c = ' ';
      return "\"" + printable(text) + "\"";
    };
    std::string which = quote(dropped.front().user_text);
    if (dropped.size() > 1) which = "from " + which + " to " + quote(dropped.back().user_text);
    session_.reset();
    if (!history_.empty()) {
      std::error_code ec;
      std::filesystem::remove(chat::history_state_file(history_), ec);
      chat::write_history(history_, conversation_.entries());
      written_ = conversation_.entries().size();
    }
    out("[the context is full: dropped the " +
        (dropped.size() == 1 ? std::string("oldest turn") : std::to_string(dropped.size()) + " oldest turns") + " (" +
        std::to_string(messages) + " messages, " + std::to_string(ids) + " tokens: " + which +
        "); the kept conversation is fed again" +
        (history_.empty() ? "" : ", and " + history_.string() + " marks them dropped") + "]\n");
  }

  /// The answer limit as the screen says it.
  [[nodiscard]] std::string limit_text() const {
    return max_tokens_ > 0 ? std::to_string(max_tokens_) + " tokens" : "what the context holds";
  }

  std::string status_line(const TurnStats& st) const {
    char buf[512];
    const auto& a = st.before;
    const auto& b = st.after;
    std::string experts;
    if (!runtime_.model().streaming()) {
      experts = "experts resident";
    } else {
      const auto req = b.expert_requests - a.expert_requests, hits = b.expert_hits - a.expert_hits;
      std::snprintf(buf, sizeof buf, "expert hit rate %.1f%% (%llu/%llu)",
                    req ? 100.0 * static_cast<double>(hits) / static_cast<double>(req) : 0.0,
                    static_cast<unsigned long long>(hits), static_cast<unsigned long long>(req));
      experts = buf;
    }
    std::snprintf(
        buf, sizeof buf,
        "-- %zu tokens, %.1f tokens/s | fed %zu tokens, prefill %.3f s | %s | I/O wait %.3f s | context %zu/%lld",
        st.generated, st.tokens_per_second, st.fed, st.prefill_seconds, experts.c_str(),
        b.io_wait_seconds - a.io_wait_seconds, conversation_.ids().size(),
        static_cast<long long>(session_.max_positions()));
    return buf;
  }

  // --- commands ---
  /// Runs a /command; false ends the chat.
  bool command(const std::string& line) {
    std::string name = line, arg;
    if (const auto sp = line.find_first_of(" \t\n"); sp != std::string::npos) {
      name = line.substr(0, sp);
      arg = line.substr(line.find_first_not_of(" \t\n", sp) == std::string::npos ? line.size()
                                                                                 : line.find_first_not_of(" \t\n", sp));
    }
    try {
      if (name == "/quit" || name == "/exit") return false;
      if (name == "/help") {
        out(help_text());
      } else if (name == "/reset") {
        conversation_.clear();
        session_.reset();
        pending_system_ = !system_.empty();
        if (!history_.empty())
          out("[new conversation; " + history_.string() +
              " keeps the old one and is no longer written: /save FILE for this one]\n");
        else
          out("[new conversation]\n");
        history_.clear();
        written_ = 0;
      } else if (name == "/save") {
        if (arg.empty()) throw UsageError("/save FILE");
        save(arg);
      } else if (name == "/load") {
        if (arg.empty()) throw UsageError("/load FILE");
        load(arg);
        history_ = arg;
      } else if (name == "/stats") {
        out(stats_text());
      } else if (name == "/system") {
        if (arg.empty()) {
          out(system_.empty() ? "[no system prompt]\n" : "[system prompt: " + system_ + "]\n");
        } else {
          system_ = arg;
          pending_system_ = true;
          out("[system prompt set; it goes with your next message]\n");
        }
      } else if (name == "/think") {
        if (arg != "on" && arg != "off") throw UsageError("/think on|off");
        render_.thinking = arg == "on";
        out(std::string("[thinking ") + arg + " from the next answer]\n");
      } else if (name == "/max-tokens") {
        set_max_tokens(arg);
      } else if (name == "/reasoning") {
        if (arg != "show" && arg != "hide") throw UsageError("/reasoning show|hide");
        show_thinking_ = arg == "show";
        out("[reasoning " + std::string(show_thinking_ ? "shown" : "hidden") + "]\n");
      } else {
        out("[unknown command " + name + "; /help lists them]\n");
      }
    } catch (const Error& e) {
      out(std::string("[") + e.what() + "]\n");
    }
    return true;
  }

  /// /max-tokens N: the answer limit from the next answer (0: what the context holds).
  void set_max_tokens(const std::string& arg) {
    std::int64_t n = -1;
    if (!arg.empty() && arg.size() <= 9 && arg.find_first_not_of("0123456789") == std::string::npos)
      n = std::stoll(arg);
    if (n < 0) throw UsageError("/max-tokens N: a number of tokens, 0 for what the context holds");
    max_tokens_ = n;
    out("[answers up to " + limit_text() + " from the next one]\n");
  }

  std::string help_text() const {
    return "Type a message and press Enter. End a line with \\ to continue on the next one, or put\n"
           "a message between two lines that hold only \"\"\". A message starting with / is typed //.\n"
           "Answers are limited to " +
           limit_text() +
           " (--max-tokens, /max-tokens); when the context fills,\n"
           "the oldest turns are dropped (the screen says which) and the rest is fed again.\n"
           "  /help               this text\n"
           "  /reset              start a new conversation (the system prompt stays)\n"
           "  /save FILE          write the conversation to FILE (JSONL) and the model state to FILE.state;\n"
           "                      later messages are appended to FILE\n"
           "  /load FILE          continue the conversation in FILE (with FILE.state when it is there)\n"
           "  /stats              tokens, speed, expert cache and I/O\n"
           "  /system TEXT        set the system prompt (sent with the next message); /system shows it\n"
           "  /think on|off       K3's thinking for the next answers (now " +
           std::string(render_.thinking ? "on" : "off") +
           ")\n"
           "  /max-tokens N       the answer limit from the next answer (0: what the context holds)\n"
           "  /reasoning show|hide  show the think channel (dimmed) or hide it\n"
           "  /quit               end the chat (as does Ctrl-D)\n"
           "Ctrl-C stops an answer (what was written is kept); at the prompt it clears the line.\n";
  }

  std::string stats_text() const {
    std::ostringstream s;
    const StreamStats io = runtime_.model().stream_stats();
    std::size_t messages = 0;
    for (const auto& e : conversation_.entries()) messages += e.internal || e.dropped ? 0 : 1;
    s << "conversation: " << messages << " messages, " << conversation_.ids().size()
      << " tokens; model state: " << session_.position() << " tokens ("
      << (conversation_.ids().size() - static_cast<std::size_t>(session_.position())) << " not fed yet); context "
      << session_.max_positions() << "\n";
    if (last_) s << "last answer: " << status_line(*last_) << "\n";
    s << "since load: read " << format_bytes(io.trunk_bytes + io.expert_bytes + io.table_bytes) << " (experts "
      << format_bytes(io.expert_bytes) << "), expert requests " << io.expert_requests << ", hits " << io.expert_hits
      << ", I/O wait " << io.io_wait_seconds << " s, peak RSS " << format_bytes(peak_rss_bytes()) << "\n";
    s << "thinking " << (render_.thinking ? "on" : "off") << ", reasoning " << (show_thinking_ ? "shown" : "hidden")
      << ", answers up to " << limit_text() << ", history "
      << (history_.empty() ? std::string("none") : history_.string()) << "\n";
    return s.str();
  }

  // --- files ---
  /// Appends the complete entries not yet in the history file.
  void write_history() {
    if (history_.empty()) return;
    const auto& entries = conversation_.entries();
    const std::size_t complete = entries.size() - (conversation_.replying() ? 1 : 0);
    for (; written_ < complete; ++written_) chat::append_history(history_, entries[written_]);
  }

  /// The conversation's ids the model has not seen, as the session's pending ids: a state
  /// file then continues exactly (the chat's own resume, or the batch job's --load-state).
  void sync_pending() {
    const auto unfed = conversation_.unfed(session_.tokens());
    session_.set_pending(std::vector<std::uint32_t>(unfed.begin(), unfed.end()));
  }

  void save(const std::filesystem::path& file) {
    check_history_file(file, "/save", keep_out_);
    chat::write_history(file, conversation_.entries());
    history_ = file;
    written_ = conversation_.entries().size();
    if (!save_state(file)) {
      out("[saved " + file.string() + "; " + kNoStateHere + "]\n");
      return;
    }
    out("[saved " + file.string() + " and " + chat::history_state_file(file).string() + "]\n");
  }

  /// Loads a history file (or, for --resume, the history already read from it) and its
  /// state; the current conversation stays when the file cannot be read. A state that does
  /// not belong to the history is refused. The conversation goes on with the thinking setting
  /// of its last answer, unless --think or --no-think was given for --resume.
  void load(const std::filesystem::path& file, std::optional<chat::History> read = std::nullopt) {
    check_history_file(file, "/load", keep_out_);  // it is written from now on
    const std::int64_t vocab = runtime_.model().config().vocab_size;
    chat::History h = read ? std::move(*read) : chat::read_history(file, vocab);
    if (read) chat::check_history_ids(file, h, vocab);
    if (h.torn_warning) log(LogLevel::warn, "chat", *h.torn_warning);
    Conversation loaded(tokens_);
    for (auto& e : h.entries) loaded.append(std::move(e));
    const auto state = chat::history_state_file(file);
    std::error_code ec;
    if (cluster_ != nullptr) {
      session_.reset();
      log(LogLevel::info, "chat", file.string() + ": " + kNoStateHere);
    } else if (std::filesystem::exists(state, ec)) {
      try {
        session_.load(state);
        // What the state holds, fed and pending, must be the start of this conversation.
        std::vector<std::uint32_t> held = session_.tokens();
        held.insert(held.end(), session_.pending().begin(), session_.pending().end());
        (void)loaded.unfed(held);
      } catch (const Error&) {
        session_.reset();  // the current conversation's ids are fed again at its next turn
        throw;
      }
    } else {
      session_.reset();
      log(LogLevel::warn, "chat", state.string() + ": no model state; the next turn feeds the whole conversation");
    }
    // Only a history that was read whole and matches its state is rewritten: a torn last
    // record goes, so that later appends do not follow its bytes.
    if (h.torn_warning) {
      try {
        chat::write_history(file, loaded.entries());
      } catch (const Error&) {
        session_.reset();  // the loaded state is not the current conversation's
        throw;
      }
    }
    conversation_ = std::move(loaded);
    written_ = conversation_.entries().size();
    pending_system_ = false;
    const bool keep_flag = thinking_given_ && read.has_value();  // --resume with --think/--no-think
    if (!keep_flag)
      for (auto e = conversation_.entries().rbegin(); e != conversation_.entries().rend(); ++e)
        if (e->message.role == Role::assistant) {
          render_.thinking = e->thinking;
          break;
        }
    std::size_t messages = 0, dropped = 0;
    for (const auto& e : conversation_.entries()) {
      messages += e.internal || e.dropped ? 0 : 1;
      dropped += e.dropped ? 1 : 0;
    }
    out("[loaded " + file.string() + ": " + std::to_string(messages) + " messages, " +
        std::to_string(conversation_.ids().size()) + " tokens, " + std::to_string(session_.position()) +
        " of them in the model state" +
        (dropped ? "; " + std::to_string(dropped) + " older messages were dropped when the context filled" : "") +
        "]\n");
    for (const auto& e : conversation_.entries()) {
      if (e.internal || e.dropped) continue;
      const char* who = e.message.role == Role::user ? "> " : e.message.role == Role::system ? "[system] " : "";
      out(std::string(style_.dim()) + who + printable(e.message.content) + style_.reset() + "\n");
    }
  }

  /// At the end: the model state next to the history file, so --resume feeds nothing old.
  void finish() {
    if (history_.empty()) return;
    if (save_state(history_))
      log(LogLevel::info, "chat", "saved the model state to " + chat::history_state_file(history_).string());
    else
      log(LogLevel::info, "chat", history_.string() + ": " + kNoStateHere);
  }

  static constexpr const char* kNoStateHere =
      "no model state with it: the model is split over ranks, each holding its own layers' state, so the "
      "conversation is fed again when it is continued";

  /// The model state next to `history`, true; under ranks false, and a state file left there
  /// by an earlier run goes (it would not be this conversation's).
  bool save_state(const std::filesystem::path& history) {
    const auto state = chat::history_state_file(history);
    if (cluster_ != nullptr) {
      std::error_code ec;
      std::filesystem::remove(state, ec);
      return false;
    }
    sync_pending();
    session_.save(state);
    return true;
  }

  Runtime& runtime_;
  PluginHost& host_;  ///< its plugins see the stop flag while an answer is written
  Cluster* cluster_;  ///< rank 0 of a model split over ranks, or null
  chat::ChatTokens tokens_;
  Session session_;
  Conversation conversation_;
  GenerateSettings settings_;
  chat::RenderOptions render_;
  std::int64_t max_tokens_;
  bool show_thinking_;
  std::string system_;
  bool pending_system_ = false;
  std::filesystem::path history_;
  std::filesystem::path resume_;                 ///< --resume FILE, loaded when the chat starts
  std::optional<chat::History> resumed_;         ///< its records, read before the model loaded
  bool thinking_given_ = false;                  ///< --think or --no-think: a resumed conversation keeps it
  std::vector<std::filesystem::path> keep_out_;  ///< the checkpoint folders: no history goes there
  std::size_t written_ = 0;                      ///< entries already in history_
  std::optional<TurnStats> last_;
  bool quit_ = false;
  Style style_;
};

/// The chat on this process: one process, or rank 0 of a model split over ranks.
int chat_model(const Pipeline& pipeline, const ChatOptions& opt, Cluster* cluster) {
  // Where the conversation is written, before the model loads, and the conversation to
  // resume read whole (a missing, unreadable or damaged file fails in a moment, not after
  // the model loaded); its ids are checked against the vocabulary once the model is there.
  if (!opt.history.empty()) check_history_file(opt.history, "chat: --history", checkpoint_folders(pipeline));
  std::optional<chat::History> resumed;
  if (!opt.resume.empty()) {
    check_history_file(opt.resume, "chat: --resume", checkpoint_folders(pipeline));
    resumed = chat::read_history(opt.resume, std::numeric_limits<std::int64_t>::max());
  }
  PluginHost host(pipeline.plugin_path());
  LoadHooks hooks;
  hooks.cluster = cluster;
  hooks.on_status = [](const std::string& s) { log(LogLevel::info, "", s); };
  hooks.on_plan = [](const std::string& table) { log_text(LogLevel::debug, table); };
  Runtime runtime(pipeline, host, hooks);
  Chat chat(runtime, host, pipeline, opt, std::move(resumed), cluster);
  return chat.run();
}

int run_chat(const GlobalOptions& global, const ChatOptions& opt) {
  if (global.config.empty())
    throw UsageError("chat: no pipeline given: use --config PRESET or --config FILE (e.g. --config laptop)");
  if (!opt.history.empty() && !opt.resume.empty())
    throw UsageError("chat: --history and --resume both name a file; --resume FILE goes on writing FILE");
  if (opt.think && opt.no_think) throw UsageError("chat: --think and --no-think both given; choose one");
  (void)chat::parse_effort(opt.effort);
  const Pipeline pipeline = load_pipeline(global.config, global.overrides);
  if (pipeline.get_string("cluster.transport") == "none") return chat_model(pipeline, opt, nullptr);
  return run_ranks(pipeline, RunSequences::one,
                   [&](const Pipeline& mine, Cluster& cluster) { return chat_model(mine, opt, &cluster); });
}

}  // namespace

Command register_chat(CLI::App& app, GlobalOptions& global) {
  auto* sub = app.add_subcommand(
      "chat",
      "Chat with the model in the terminal, in K3's chat format (docs/chat.md):\n"
      "  k3host chat --config PIPELINE [--set key=value]... [options]\n"
      "Line editing and history (libedit); end a line with \\ to continue it, or enclose a message in\n"
      "lines of \"\"\". Commands: /help /reset /save FILE /load FILE /stats /system TEXT /think on|off /max-tokens N\n"
      "/reasoning show|hide /quit. Ctrl-C stops an answer (it is kept) or clears the line; Ctrl-D quits.");
  auto opt = std::make_shared<ChatOptions>();
  sub->add_option("--history", opt->history,
                  "Append every message to FILE (JSON Lines; the model state goes to FILE.state at the end, except "
                  "under ranks)")
      ->type_name("FILE");
  sub->add_option("--resume", opt->resume,
                  "Continue the conversation in FILE with its model state FILE.state, and go on appending to FILE")
      ->type_name("FILE");
  sub->add_option("--system", opt->system, "System prompt, sent with the first message");
  sub->add_flag("--think", opt->think,
                "Answer with K3's thinking on (/think off turns it off); default: as the model was trained "
                "(model.thinking), or as a resumed conversation was");
  sub->add_flag("--no-think", opt->no_think, "Answer with K3's thinking off (/think on turns it on)");
  sub->add_option("--effort", opt->effort, "Thinking effort: low, high or max (default max)")->type_name("EFFORT");
  sub->add_flag("--hide-reasoning", opt->hide_thinking, "Do not show the think channel (/reasoning show shows it)");
  sub->add_option("--max-tokens", opt->max_tokens,
                  "At most N generated tokens per answer, the think channel included (0: as many as the context "
                  "holds); /max-tokens N changes it")
      ->capture_default_str()
      ->type_name("N")
      ->check(CLI::NonNegativeNumber);
  sub->footer(
      "Exit codes: 0 after /quit or Ctrl-D, 5 when SIGTERM stopped an answer, 1 runtime failure, 2 a usage or "
      "configuration error, 3 the plan does not fit. Also started by -i or -cnv (k3host --config PIPELINE -cnv). "
      "Under mpirun with cluster.transport: mpi, rank 0 chats over a model split over ranks (docs/cluster.md): "
      "history files then hold no model state, and --resume feeds the conversation again.");
  return {sub, [&global, opt]() { return run_chat(global, *opt); }};
}

}  // namespace k3::cli
