// `fusor agent`: a measurement agent on a target machine (client/measurement_agent.h). It needs
// --server and a token with the 'agent' role; it calibrates this machine first unless its tuning
// database (--local-db) holds a current calibration, registers, and measures jobs until SIGTERM
// or SIGINT (or --max-jobs).
#pragma once

#include <CLI/CLI.hpp>

namespace fusor {

void AddAgentCommand(CLI::App& app, int* exit_code);

}  // namespace fusor
