// The `fusor db` subcommands on local tuning database files: query, show, stats, export, import.
// Each reads --db PATH (default: the embedded database under the user's XDG data directory, see
// db/default_path.h); query, show, stats and export also read any --snapshot PATH files as
// read-only layers under it. Output is a table for people, or JSON with --json for scripts.
// Registration only stores callbacks on the app; not thread-safe (CLI setup is single-threaded).
#pragma once

#include <CLI/CLI.hpp>

namespace fusor {

// Registers `fusor db query|show|stats|export|import` on app. Each subcommand's callback stores its
// exit code in *exit_code (kExitOk etc. from client/exit_codes.h) and prints errors to stderr.
void AddDbCommands(CLI::App& app, int* exit_code);

}  // namespace fusor
