// k3host plugins: lists every plugin on the search path (name, kind, version, path) and
// every library that was refused, with the reason. Exit 2 when any was refused.
#include <cstdio>

#include <k3/error.hpp>
#include <k3/log.hpp>
#include <k3/pipeline.hpp>
#include <k3/plugin_host.hpp>

#include "cli.hpp"

namespace k3::cli {

Command register_plugins(CLI::App& app, GlobalOptions& global) {
  auto* sub = app.add_subcommand("plugins", "List the plugins found on the search path (and refused libraries)");
  return {sub, [&global]() {
            std::vector<std::filesystem::path> extra;
            if (!global.config.empty()) extra = load_pipeline(global.config, global.overrides).plugin_path();
            PluginHost host(extra);
            std::printf("search path:\n");
            for (const auto& dir : host.search_path()) std::printf("  %s\n", dir.c_str());
            std::printf("%-10s %-12s %-10s %-6s %s\n", "KIND", "NAME", "VERSION", "SCORE", "PATH");
            for (const auto& p : host.plugins())
              std::printf("%-10s %-12s %-10s %-6d %s\n", to_string(p.kind), p.name.c_str(), p.version.c_str(),
                          p.score, p.path.c_str());
            for (const auto& pr : host.problems())
              log(LogLevel::error, "", "refused " + pr.path.string() + ": " + pr.reason);
            return host.problems().empty() ? 0 : static_cast<int>(ExitCode::usage);
          }};
}

}  // namespace k3::cli
