// The fusor CLI's exit codes, and the mapping from a Status to one. Stable: scripts depend on them.
#pragma once

#include "base/status.h"

namespace fusor {

enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,         // Anything not listed below (I/O, a corrupt database, internal).
  kExitUsage = 2,         // Bad command line.
  kExitUnavailable = 3,   // Server unreachable or overloaded.
  kExitInvalidModel = 4,  // The model file or graph is malformed or unsupported.
  kExitAuth = 5,          // Missing, wrong or insufficient token.
};

ExitCode ExitCodeFor(const Status& s);

}  // namespace fusor
