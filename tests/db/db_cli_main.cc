// A scratch `fusor` with only the db subcommands, so db_cli_test can run them before the real
// binary wires them in. Logs go to stderr so --json output stays clean.
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "client/db_commands.h"
#include "client/exit_codes.h"

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_logger_st("fusor"));
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{"fusor (db subcommands only, for tests)"};
  app.require_subcommand(1);
  int exit_code = fusor::kExitOk;
  fusor::AddDbCommands(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? fusor::kExitOk : fusor::kExitUsage;
  }
  return exit_code;
}
