// The fusor CLI. Each verb lives in its own file and registers itself here.
#include <CLI/CLI.hpp>

#include "client/exit_codes.h"
#include "client/inspect_command.h"

int main(int argc, char** argv) {
  CLI::App app{"fusor: cost-model-driven operator-fusion autotuner"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fusor 0.1.0");
  int exit_code = fusor::kExitOk;
  fusor::AddInspectCommand(app, &exit_code);
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
