// k3host plugins: lists every plugin on the search path (name, kind, version, path) and
// every library that was refused, with the reason. Exit 2 when any was refused.
// --params [NAME] prints what each plugin (or the plugins called NAME) says about its
// parameters, read from its k3_plugin_params table without creating it; --markdown prints
// that as the Markdown docs/pipelines.md embeds.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <k3/closest_name.hpp>
#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/pipeline.hpp>
#include <k3/plugin_host.hpp>

#include "cli.hpp"

namespace k3::cli {

namespace {

struct PluginsArgs {
  std::string name;  ///< --params NAME; empty: every plugin
  bool markdown = false;
};

/// Logs every refusal; the exit code they make.
int report_problems(const PluginHost& host) {
  for (const auto& pr : host.problems()) log(LogLevel::error, "", "refused " + pr.path.string() + ": " + pr.reason);
  return host.problems().empty() ? 0 : static_cast<int>(ExitCode::usage);
}

int list_plugins(const PluginHost& host) {
  std::printf("search path:\n");
  for (const auto& dir : host.search_path()) std::printf("  %s\n", dir.c_str());
  std::printf("%-10s %-12s %-10s %-6s %s\n", "KIND", "NAME", "VERSION", "SCORE", "PATH");
  for (const auto& p : host.plugins())
    std::printf("%-10s %-12s %-10s %-6d %s\n", to_string(p.kind), p.name.c_str(), p.version.c_str(), p.score,
                p.path.c_str());
  return report_problems(host);
}

/// The plugins called `name` (of any kind); a UsageError naming the closest one when none is.
std::vector<PluginInfo> plugins_named(const PluginHost& host, const std::string& name) {
  std::vector<PluginInfo> out;
  std::vector<std::string> names;
  for (const auto& p : host.plugins()) {
    if (p.name == name) out.push_back(p);
    names.push_back(p.name);
  }
  if (!out.empty()) return out;
  for (const auto& pr : host.problems())
    if (pr.path.filename().string().size() > name.size() + 3 &&
        pr.path.filename().string().ends_with("-" + name + ".so"))
      throw UsageError("plugin '" + name + "': " + pr.path.string() + " was refused: " + pr.reason);
  const std::string near = closest_name(name, names);
  throw UsageError("no plugin named '" + name + "' on the search path" +
                   (near.empty() ? std::string() : " (did you mean '" + near + "'?)") +
                   "; `k3host plugins` lists them");
}

int print_params(const PluginHost& host, const PluginsArgs& args) {
  const std::vector<PluginInfo> chosen = args.name.empty() ? host.plugins() : plugins_named(host, args.name);
  if (args.markdown) {
    std::fputs(plugin_params_markdown(chosen).c_str(), stdout);
  } else {
    for (std::size_t i = 0; i < chosen.size(); ++i)
      std::printf("%s%s", i == 0 ? "" : "\n", plugin_params_text(chosen[i]).c_str());
  }
  // A listing of everything also reports what could not be listed; one plugin asked for by
  // name is all the caller wanted to know about.
  return args.name.empty() ? report_problems(host) : 0;
}

}  // namespace

Command register_plugins(CLI::App& app, GlobalOptions& global) {
  auto* sub = app.add_subcommand(
      "plugins",
      "List the plugins found on the search path (and refused libraries); with --params, what each one's parameters "
      "are. Exit 2 when a library was refused.");
  auto args = std::make_shared<PluginsArgs>();
  auto* params = sub->add_option("--params", args->name,
                                 "Describe the parameters (key, type, default, allowed values, meaning) of every "
                                 "plugin, or of the plugins called NAME; an unknown NAME is exit 2")
                     ->expected(0, 1)
                     ->type_name("[NAME]");
  sub->add_flag("--markdown", args->markdown,
                "With --params: print the Markdown tables that docs/pipelines.md embeds (paths and versions left out)")
      ->needs(params);
  sub->footer("Exit codes: 0 ok, 2 a library was refused (listed with why) or a usage error.");
  return {sub, [&global, args, params]() {
            std::vector<std::filesystem::path> extra;
            if (!global.config.empty()) extra = load_pipeline(global.config, global.overrides).plugin_path();
            PluginHost host(extra);
            if (params->count() == 0) return list_plugins(host);
            return print_params(host, *args);
          }};
}

}  // namespace k3::cli
