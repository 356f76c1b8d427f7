// `fusor run MODEL.onnx [--db DB | --plan PLAN.json | --unfused]`: runs a model on this CPU with
// oneDNN under a fusion plan on seeded random inputs and weights (or its own), and prints where the
// plan came from, each group's lowering and median time, the whole plan's median time and its peak
// memory. The plan is the one the tuning database (--db, else the default one when it exists)
// stores for the model's graph on this CPU's target, else the rules plan; --plan and --unfused
// choose another. The lookup is the engine's (engine/plan_source.h).
#pragma once

#include <CLI/CLI.hpp>

namespace fusor {

// Registers `fusor run`; its callback stores its exit code in *exit_code (client/exit_codes.h).
void AddRunCommand(CLI::App& app, int* exit_code);

}  // namespace fusor
