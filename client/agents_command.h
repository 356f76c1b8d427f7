// `fusor agents list` and `fusor jobs list`: a fusord's measurement agents (live or silent, when
// last heard from) and its measurement job queue (waiting, held by which agent until when, taken
// over after an expired lease), for a farm operator; a token with the 'read' role. Without
// --server they read the local tuning database's agents and jobs.
#pragma once

#include <CLI/CLI.hpp>

namespace fusor {

void AddAgentsAndJobsCommands(CLI::App& app, int* exit_code);

}  // namespace fusor
