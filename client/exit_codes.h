// The fusor CLI's exit codes, the mapping from a Status to one, and how a failed command says so.
// Stable: scripts depend on them.
#pragma once

#include <string_view>

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

// Prints "fusor COMMAND: MESSAGE" to stderr (COMMAND as the user typed it: "tune", "db export")
// and returns ExitCodeFor(s): every verb reports a failure this one way.
int ReportError(std::string_view command, const Status& s);

// A command line that parses but cannot work as given (a flag another needs, a flag this verb
// does not take): prints "fusor COMMAND: MESSAGE" and returns kExitUsage, as a parse error does.
int ReportUsageError(std::string_view command, std::string_view message);

}  // namespace fusor
