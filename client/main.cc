// The fusor CLI. Each verb lives in its own file and registers itself here.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <cstdlib>

#include "client/agent_command.h"
#include "client/agents_command.h"
#include "client/db_commands.h"
#include "client/exit_codes.h"
#include "client/inspect_command.h"
#include "client/plan_command.h"
#include "client/run_command.h"
#include "client/targets_command.h"
#include "client/tune_command.h"

int main(int argc, char** argv) {
  // Logs go to stderr so that --json output on stdout stays machine-readable.
  spdlog::set_default_logger(spdlog::stderr_color_mt("fusor"));
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{"fusor: cost-model-driven operator-fusion autotuner"};
  app.require_subcommand(1);
  // Every option's default shows in --help (subcommands inherit this when added below).
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", "fusor 0.1.0");
  int exit_code = fusor::kExitOk;
  fusor::AddTuneCommand(app, &exit_code);
  fusor::AddPlanCommands(app, &exit_code);
  fusor::AddInspectCommand(app, &exit_code);
  fusor::AddRunCommand(app, &exit_code);
  fusor::AddDbCommands(app, &exit_code);
  fusor::AddTargetCommands(app, &exit_code);
  fusor::AddAgentCommand(app, &exit_code);
  fusor::AddAgentsAndJobsCommands(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return fusor::kExitUsage;
  }
  return exit_code;
}
