// `fusor tune MODEL.onnx`: converts the model to the graph proto locally (weights never leave the
// machine), tunes it through a TunerApi (in-process, or a fusord with --server), shows progress
// (a bar on a terminal, plain lines otherwise) and a summary; `--save-plan` writes the plan in
// the JSON form `fusor run --plan` reads.
#pragma once

#include <CLI/CLI.hpp>

namespace fusor {

void AddTuneCommand(CLI::App& app, int* exit_code);

}  // namespace fusor
