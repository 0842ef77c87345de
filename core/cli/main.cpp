// k3host: runs a Kimi K3 pipeline (k3host --config presets/laptop.yaml) and its tools.
// Exit codes (docs/architecture.md): 0 ok, 1 runtime failure, 2 usage/config error, 3 plan does not
// fit, 4 a routed expert failed to load, 5 interrupted, 6 `doctor` found warnings only.
#include <exception>
#include <string>
#include <vector>

#include <k3/error.hpp>
#include <k3/log.hpp>

#include "cli.hpp"
#include "run_job.hpp"

namespace {

/// -i, -cnv, --conversation: `k3host chat` with the same pipeline. Chat has no prompt of its
/// own; a prompt flag given with it would be silently lost, so it is refused.
int run_conversation(const k3::cli::GlobalOptions& global, const std::vector<k3::cli::Command>& commands) {
  for (const char* key : {"job.prompt", "job.prompt_file", "job.ids"})
    if (k3::cli::given_flag(global, key) != nullptr)
      throw k3::UsageError(
          "--conversation (-i, -cnv) starts k3host chat, which takes no prompt: type it at the "
          "chat's prompt (a system prompt: k3host chat --system TEXT)");
  for (const auto& cmd : commands)
    if (cmd.app->get_name() == "chat") return cmd.run();
  throw k3::UsageError("--conversation: this k3host has no chat command");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace k3::cli;
  apply_openmp_wait_policy(argv);  // may re-execute this program once: before anything else
  CLI::App app{
      "k3host — runs Moonshot's Kimi K3 exactly on a CPU in a few GB of RAM,\n"
      "streaming the trunk and the routed experts from storage through plugins.",
      "k3host"};
  app.fallthrough();  // --config/--set may follow a subcommand
  app.require_subcommand(0, 1);
  GlobalOptions global;
  app.add_option("--config", global.config,
                 "Pipeline: a preset name (laptop; see --list-presets) or a YAML file path (presets/laptop.yaml)");
  app.add_option("--set", global.sets, "Override a pipeline key: --set memory.expert_cache_gb=2 (repeatable)")
      ->take_all();
  add_pipeline_flags(app, global);
  HabitFlags habits;
  add_habit_flags(app, habits);
  add_log_options(app, global);

  std::vector<Command> commands;
  commands.push_back(register_plugins(app, global));
  commands.push_back(register_tokenize(app, global));
  commands.push_back(register_make_model(app, global));
  commands.push_back(register_sim(app, global));
  commands.push_back(register_plan(app, global));
  commands.push_back(register_pack_trunk(app, global));
  commands.push_back(register_storage(app, global));
  commands.push_back(register_chat(app, global));
  commands.push_back(register_serve(app, global));
  commands.push_back(register_bench(app, global));
  commands.push_back(register_doctor(app, global));
  commands.push_back(register_perplexity(app, global));
  // After the subcommands: they would inherit the main job's help footer (Ctrl-C, exit 5),
  // which is not their truth; each has its own.
  RunOptions run;
  add_run_options(app, run);

  try {
    // Checked first: CLI11 would read -cnv as -c nv (check_command_line).
    const std::vector<std::string> args = check_command_line(app, argc, argv);
    std::vector<const char*> arg_ptrs;
    for (const auto& a : args) arg_ptrs.push_back(a.c_str());
    app.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  } catch (const k3::UsageError& e) {
    k3::log(k3::LogLevel::error, "", e.what());
    return static_cast<int>(k3::ExitCode::usage);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // In the one log format, like every other error (CLI11 would print its own).
    k3::log(k3::LogLevel::error, "", std::string(e.what()) + " (--help lists the options)");
    return static_cast<int>(k3::ExitCode::usage);
  }

  try {
    start_logging(global);
    global.overrides = pipeline_overrides(global);
    log_openmp_wait_policy();
    note_habit_flags(habits);
    for (const auto& cmd : commands)
      if (cmd.app->parsed()) {
        if (habits.conversation)
          throw k3::UsageError("--conversation (-i, -cnv) starts k3host chat; it does not go with " +
                               cmd.app->get_name());
        return cmd.run();
      }
    if (habits.conversation) return run_conversation(global, commands);
    return run_job(global, run);
  } catch (const k3::Error& e) {
    k3::log(k3::LogLevel::error, "", e.what());  // "[k3host] error: ..." (and into the log file)
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    k3::log(k3::LogLevel::error, "", std::string("internal error: ") + e.what());
    return static_cast<int>(k3::ExitCode::runtime);
  }
}
