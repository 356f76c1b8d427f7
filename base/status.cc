#include "base/status.h"

namespace fusor {

std::string_view CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "OK";
    case Status::Code::kInvalidArgument:
      return "InvalidArgument";
    case Status::Code::kNotFound:
      return "NotFound";
    case Status::Code::kAlreadyExists:
      return "AlreadyExists";
    case Status::Code::kCorruption:
      return "Corruption";
    case Status::Code::kResourceExhausted:
      return "ResourceExhausted";
    case Status::Code::kFailedPrecondition:
      return "FailedPrecondition";
    case Status::Code::kUnimplemented:
      return "Unimplemented";
    case Status::Code::kUnavailable:
      return "Unavailable";
    case Status::Code::kDeadlineExceeded:
      return "DeadlineExceeded";
    case Status::Code::kCancelled:
      return "Cancelled";
    case Status::Code::kPermissionDenied:
      return "PermissionDenied";
    case Status::Code::kUnauthenticated:
      return "Unauthenticated";
    case Status::Code::kInternal:
      return "Internal";
    case Status::Code::kIOError:
      return "IOError";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

}  // namespace fusor
