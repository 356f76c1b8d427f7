// Where the fusor CLI keeps its local tuning database when no --db is given, after the XDG Base
// Directory spec: $XDG_DATA_HOME/fusor/tuning.db, or ~/.local/share/fusor/tuning.db when
// XDG_DATA_HOME is unset or not an absolute path. Reads the environment; safe from any thread
// that does not modify it.
#pragma once

#include <string>

#include "base/status.h"

namespace fusor::db {

// The default database path; with create_directories, its parent directories are created too.
StatusOr<std::string> DefaultDatabasePath(bool create_directories);

}  // namespace fusor::db
