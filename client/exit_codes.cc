#include "client/exit_codes.h"

#include <iostream>

namespace fusor {

ExitCode ExitCodeFor(const Status& s) {
  using C = Status::Code;
  switch (s.code()) {
    case C::kOk:
      return kExitOk;
    case C::kInvalidArgument:
      return kExitInvalidModel;
    case C::kUnavailable:
    case C::kResourceExhausted:
    case C::kDeadlineExceeded:
      return kExitUnavailable;
    case C::kUnauthenticated:
    case C::kPermissionDenied:
      return kExitAuth;
    default:
      return kExitError;
  }
}

int ReportError(std::string_view command, const Status& s) {
  std::cerr << "fusor " << command << ": " << s.message() << "\n";
  return ExitCodeFor(s);
}

int ReportUsageError(std::string_view command, std::string_view message) {
  std::cerr << "fusor " << command << ": " << message << "\n";
  return kExitUsage;
}

}  // namespace fusor
