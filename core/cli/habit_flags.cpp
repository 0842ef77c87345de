// What people type from other engines (llama-cli, llama-server) and what it means here
// (docs/pipelines.md, "Flags of other engines"). Flags that stand for a pipeline key are in
// pipeline_flags.cpp; this file holds the rest: -i/-cnv starts chat, -ngl is accepted with a
// note that there is no GPU, and the command line is checked before CLI11 reads it, because
// CLI11 reads "-cnv" as "-c nv" and "-ngl 99" as "-n gl 99": a single-dash flag of several
// letters is taken whole here, renamed when it means something, refused naming it otherwise.
#include <array>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include <k3/closest_name.hpp>
#include <k3/error.hpp>
#include <k3/log.hpp>

#include "cli.hpp"

namespace k3::cli {

namespace {

/// Other engines' single-dash flags of several letters that mean something here.
struct Alias {
  std::string_view flag, long_name;
};
constexpr std::array kAliases = {
    Alias{"-cnv", "--conversation"}, Alias{"-if", "--conversation"}, Alias{"-no-cnv", "--no-conversation"},
    Alias{"-ngl", "--n-gpu-layers"}, Alias{"-md", "--model-draft"},  Alias{"-np", "--parallel"},
};

/// Flags of llama.cpp that have no meaning in k3host, and why: refused on the main command
/// line (a subcommand's own flags of the same name, serve's --port, are its own).
struct Refused {
  std::string_view flags;  ///< space-separated
  std::string_view why;
};
constexpr std::array kRefused = {
    Refused{"-tb --threads-batch -tbd --threads-batch-draft",
            "-t/--threads sets the threads of the prompt and of generation alike"},
    Refused{"-ub --ubatch-size", "the prompt is fed in chunks of -b/--batch-size tokens (job.prefill_chunk)"},
    Refused{"--mlock", "k3host does not lock memory: its memory plan decides what stays resident (memory.* keys)"},
    Refused{"--no-mmap --mmap",
            "storage.plugin chooses how the checkpoint is read (posix, mmap, direct ...; "
            "k3host plugins)"},
    Refused{"-fa --flash-attn", "attention is computed as docs/model-spec.md specifies; there is no other to choose"},
    Refused{"-ctk --cache-type-k -ctv --cache-type-v",
            "the cache keeps the model's own values; no other cache type exists"},
    Refused{"--presence-penalty --frequency-penalty", "not implemented; the repeat penalty is --repeat-penalty"},
    Refused{"--mirostat --mirostat-lr --mirostat-ent --typical --typical-p --dynatemp-range --dynatemp-exp "
            "--xtc-probability --xtc-threshold --dry-multiplier --dry-base --dry-allowed-length "
            "--dry-penalty-last-n --top-nsigma --sampling-seq --samplers",
            "not implemented; k3host samples with --temp, --top-k, --top-p, --min-p and --repeat-penalty"},
    Refused{"-r --reverse-prompt",
            "the job ends at the model's EOS or after -n tokens; k3host serve takes stop strings"},
    Refused{"-e --escape --no-escape", "a prompt is taken exactly as written: give a real newline, or -f FILE"},
    Refused{"-sys --system-prompt", "k3host chat --system TEXT sets the system prompt"},
    Refused{"-hf -hfr --hf-repo -hff --hf-file -mu --model-url",
            "-m takes a checkpoint folder or its http(s) URL (docs/storage.md); nothing is fetched from a hub"},
    Refused{"--lora --lora-scaled --control-vector", "adapters are not supported"},
    Refused{"--grammar --grammar-file -j --json-schema", "constrained sampling is not supported"},
    Refused{"--host --port", "k3host serve --host ADDRESS --port N serves the model (docs/serve.md)"},
    Refused{"-dev --device -sm --split-mode -mg --main-gpu -ts --tensor-split -nkvo --no-kv-offload -ngld "
            "--n-gpu-layers-draft",
            "there is no GPU: k3host runs on the CPU"},
    Refused{"--numa", "k3host does not place memory by NUMA node"},
    Refused{"--keep --context-shift", "there is no context shift: a run stops when the context is full (-c)"},
    Refused{"-st --single-turn", "the job is one turn; k3host chat goes on until /quit or Ctrl-D"},
    Refused{"--no-display-prompt", "-q prints only the generated text"},
    Refused{"--jinja --chat-template --chat-template-file", "K3's chat format is built in (docs/chat.md)"},
    Refused{"-cb --cont-batching -nocb --no-cont-batching",
            "continuous batching is how k3host serve and --prompts run: --parallel N sets how many sequences are "
            "decoded together (1: one at a time)"},
    Refused{"-co --color", "the job prints plain text; k3host chat styles its own screen"},
    Refused{"--log-disable", "--log-level off"},
};

std::string_view refusal(std::string_view flag) {
  for (const Refused& r : kRefused) {
    std::string_view rest = r.flags;
    while (!rest.empty()) {
      const std::size_t end = std::min(rest.find(' '), rest.size());
      if (rest.substr(0, end) == flag) return r.why;
      rest.remove_prefix(std::min(end + 1, rest.size()));
    }
  }
  return {};
}

/// "-1", "-0.5", "32", "4e3": a value, never a flag.
bool is_number(std::string_view s) {
  if (s.starts_with('-') || s.starts_with('+')) s.remove_prefix(1);
  if (s.empty() || (std::isdigit(static_cast<unsigned char>(s[0])) == 0 && s[0] != '.')) return false;
  for (const char c : s)
    if (std::isdigit(static_cast<unsigned char>(c)) == 0 && c != '.' && c != 'e' && c != 'E' && c != '-' && c != '+')
      return false;
  return true;
}

/// The option named `name` ("-n", "--model") where the arguments are being read: the
/// subcommand, else its parents (flags fall through to them).
const CLI::Option* find_option(const CLI::App* scope, const std::string& name) {
  for (const CLI::App* app = scope; app != nullptr; app = app->get_parent())
    if (const CLI::Option* opt = app->get_option_no_throw(name)) return opt;
  return nullptr;
}

const CLI::App* find_subcommand(const CLI::App* scope, const std::string& name) {
  for (const CLI::App* sub : scope->get_subcommands([](const CLI::App*) { return true; }))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

/// Every flag name where the arguments are being read, for "did you mean".
std::vector<std::string> flag_names(const CLI::App* scope) {
  std::vector<std::string> names;
  for (const CLI::App* app = scope; app != nullptr; app = app->get_parent())
    for (const CLI::Option* opt : app->get_options()) {
      for (const auto& s : opt->get_snames()) names.push_back("-" + s);
      for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
    }
  for (const Alias& a : kAliases) names.emplace_back(a.flag);
  return names;
}

[[noreturn]] void unknown_flag(const CLI::App* scope, const std::string& flag, const std::string& hint) {
  const std::string near = closest_name(flag, flag_names(scope));
  throw UsageError("unknown flag " + flag + hint + (near.empty() ? "" : " (did you mean " + near + "?)") +
                   "; --help lists the flags");
}

/// How many of the following arguments `opt` takes, as CLI11 counts them: its minimum
/// whatever they look like, then more up to its maximum while they are not flags.
std::size_t values_taken(const CLI::Option* opt, bool value_attached, const std::vector<std::string>& args,
                         std::size_t next, const CLI::App* scope) {
  const int most = opt->get_items_expected_max();
  if (most == 0) return 0;
  int least = std::min(opt->get_type_size_min(), opt->get_items_expected_min());
  int taken = value_attached ? 1 : 0;
  std::size_t n = 0;
  for (; taken < least && next + n < args.size(); ++taken) ++n;
  for (; taken < most && next + n < args.size(); ++taken) {
    const std::string& a = args[next + n];
    if ((a.starts_with('-') && !is_number(a)) || find_subcommand(scope, a) != nullptr) break;
    ++n;
  }
  return n;
}

}  // namespace

void add_habit_flags(CLI::App& app, HabitFlags& habits) {
  app.add_flag("-i,--interactive,--conversation", habits.conversation,
               "Chat in the terminal: the same as `k3host chat` (also -cnv, as in llama-cli)");
  app.add_flag("--no-conversation", habits.no_conversation,
               "Run the batch job, which k3host does anyway (llama-cli's -no-cnv)");
  app.add_flag("--no-warmup", habits.no_warmup, "Accepted: k3host runs no warm-up pass anyway");
  habits.gpu_layers = app.add_option("--n-gpu-layers,--gpu-layers", habits.gpu_layers_value,
                                     "Accepted and ignored (also -ngl): there is no GPU, every layer runs on the CPU")
                          ->type_name("N");
}

void note_habit_flags(const HabitFlags& habits) {
  if (habits.gpu_layers != nullptr && habits.gpu_layers->count() > 0)
    log(LogLevel::info, "",
        "--n-gpu-layers " + habits.gpu_layers_value + ": there is no GPU here; k3host runs every layer on the CPU");
  if (habits.no_warmup) log(LogLevel::debug, "", "--no-warmup: k3host runs no warm-up pass");
}

std::vector<std::string> check_command_line(const CLI::App& app, int argc, const char* const* argv) {
  std::vector<std::string> args(argv, argv + argc);
  const CLI::App* scope = &app;
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") break;  // the rest are values
    if (!a.starts_with('-') || a == "-" || is_number(a)) {
      if (const CLI::App* sub = find_subcommand(scope, a)) scope = sub;
      continue;
    }
    const std::size_t eq = a.find('=');
    std::string name = a.substr(0, eq);
    const bool long_flag = a.starts_with("--");
    // A single dash and several letters: another engine's flag, or a mistake; never -x yz.
    if (!long_flag && name.size() > 2)
      for (const Alias& alias : kAliases)
        if (name == alias.flag) name = std::string(alias.long_name);
    const CLI::Option* opt = nullptr;
    if (long_flag || name.size() == 2 || name.starts_with("--")) {
      opt = find_option(scope, name);
      if (opt == nullptr) {
        if (const std::string_view why = refusal(name); !why.empty() && scope == &app)
          throw UsageError(name + ": " + std::string(why));
        unknown_flag(scope, name, "");
      }
      if (!long_flag && name.starts_with("--")) a = name + (eq == std::string::npos ? "" : a.substr(eq));
      i += values_taken(opt, eq != std::string::npos, args, i + 1, scope);
      continue;
    }
    // -XYZ that no engine names: CLI11 would read it as -X with YZ, so only a few are that.
    if (const std::string_view why = refusal(name); !why.empty() && scope == &app)
      throw UsageError(name + ": " + std::string(why));
    opt = find_option(scope, name.substr(0, 2));
    if (opt == nullptr) unknown_flag(scope, name, " (a flag of several letters after one dash is read whole)");
    if (opt->get_items_expected_max() == 0) {
      // Flags without a value may be grouped (-vv): every letter must be one.
      for (std::size_t k = 1; k < a.size(); ++k) {
        const CLI::Option* letter = find_option(scope, std::string("-") + a[k]);
        if (letter == nullptr || letter->get_items_expected_max() != 0)
          unknown_flag(scope, a, " (a flag of several letters after one dash is read whole)");
      }
      continue;
    }
    // A value glued to its flag only when it is a number (-n32, -t8): -cnv is not -c nv.
    if (!is_number(a.substr(2)))
      unknown_flag(scope, a,
                   " (a flag of several letters after one dash is read whole, never as " + a.substr(0, 2) + " " +
                       a.substr(2) + ")");
    i += values_taken(opt, true, args, i + 1, scope);
  }
  return args;
}

}  // namespace k3::cli
