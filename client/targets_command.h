// `fusor calibrate`, `fusor targets list | register`, and `fusor costmodel validate`: hardware
// profiles and the cost model's measured accuracy.
#pragma once

#include <CLI/CLI.hpp>

namespace fusor {

void AddTargetCommands(CLI::App& app, int* exit_code);

}  // namespace fusor
