// `fusor plan show MODEL.onnx` and `fusor plan explain MODEL.onnx`: the stored plan of a model on a
// target (table, --json, --dot for Graphviz with each group a cluster, --svg when dot is
// installed), and which cost terms decided each fusion.
#pragma once

#include <CLI/CLI.hpp>

namespace fusor {

void AddPlanCommands(CLI::App& app, int* exit_code);

}  // namespace fusor
