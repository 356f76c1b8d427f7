// `fusor inspect MODEL.onnx`: imports a model and prints its summary (graph/summary.h).
#pragma once

#include <CLI/CLI.hpp>

namespace fusor {

// Registers the subcommand; its callback stores its exit code in *exit_code.
void AddInspectCommand(CLI::App& app, int* exit_code);

}  // namespace fusor
