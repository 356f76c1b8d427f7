// `fusor run MODEL.onnx [--plan PLAN.json | --unfused]`: runs a model on this CPU with oneDNN under
// a fusion plan (the most-fused legal plan by default) on seeded random inputs and weights, and
// prints each group's lowering and median time, the whole plan's median time and its peak memory.
#pragma once

#include <CLI/CLI.hpp>

namespace fusor {

// Registers `fusor run`; its callback stores its exit code in *exit_code (client/exit_codes.h).
void AddRunCommand(CLI::App& app, int* exit_code);

}  // namespace fusor
