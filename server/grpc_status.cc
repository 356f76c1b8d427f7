#include "server/grpc_status.h"

#include <string>

namespace fusor {
namespace {

grpc::StatusCode WireCode(Status::Code code) {
  using C = Status::Code;
  switch (code) {
    case C::kOk:
      return grpc::StatusCode::OK;
    case C::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case C::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case C::kAlreadyExists:
      return grpc::StatusCode::ALREADY_EXISTS;
    case C::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case C::kFailedPrecondition:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case C::kUnimplemented:
      return grpc::StatusCode::UNIMPLEMENTED;
    case C::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case C::kDeadlineExceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case C::kCancelled:
      return grpc::StatusCode::CANCELLED;
    case C::kPermissionDenied:
      return grpc::StatusCode::PERMISSION_DENIED;
    case C::kUnauthenticated:
      return grpc::StatusCode::UNAUTHENTICATED;
    default:
      return grpc::StatusCode::INTERNAL;
  }
}

Status FromWire(grpc::StatusCode code, std::string msg) {
  using G = grpc::StatusCode;
  switch (code) {
    case G::OK:
      return Status::Ok();
    case G::INVALID_ARGUMENT:
    case G::OUT_OF_RANGE:
      return Status::InvalidArgument(std::move(msg));
    case G::NOT_FOUND:
      return Status::NotFound(std::move(msg));
    case G::ALREADY_EXISTS:
      return Status::AlreadyExists(std::move(msg));
    case G::RESOURCE_EXHAUSTED:
      return Status::ResourceExhausted(std::move(msg));
    case G::FAILED_PRECONDITION:
    case G::ABORTED:
      return Status::FailedPrecondition(std::move(msg));
    case G::UNIMPLEMENTED:
      return Status::Unimplemented(std::move(msg));
    case G::UNAVAILABLE:
      return Status::Unavailable(std::move(msg));
    case G::DEADLINE_EXCEEDED:
      return Status::DeadlineExceeded(std::move(msg));
    case G::CANCELLED:
      return Status::Cancelled(std::move(msg));
    case G::PERMISSION_DENIED:
      return Status::PermissionDenied(std::move(msg));
    case G::UNAUTHENTICATED:
      return Status::Unauthenticated(std::move(msg));
    default:
      return Status::Internal(std::move(msg));
  }
}

}  // namespace

grpc::Status ToGrpcStatus(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(WireCode(s.code()), s.message());
}

Status FromGrpcStatus(const grpc::Status& s, std::string_view context) {
  if (s.ok()) return Status::Ok();
  std::string msg = s.error_message();
  if (msg.empty()) msg = "gRPC status " + std::to_string(static_cast<int>(s.error_code()));
  if (!context.empty()) msg = std::string(context) + ": " + msg;
  return FromWire(s.error_code(), std::move(msg));
}

std::string_view GrpcCodeName(grpc::StatusCode code) {
  static constexpr std::string_view kNames[] = {"OK",
                                                "CANCELLED",
                                                "UNKNOWN",
                                                "INVALID_ARGUMENT",
                                                "DEADLINE_EXCEEDED",
                                                "NOT_FOUND",
                                                "ALREADY_EXISTS",
                                                "PERMISSION_DENIED",
                                                "RESOURCE_EXHAUSTED",
                                                "FAILED_PRECONDITION",
                                                "ABORTED",
                                                "OUT_OF_RANGE",
                                                "UNIMPLEMENTED",
                                                "INTERNAL",
                                                "UNAVAILABLE",
                                                "DATA_LOSS",
                                                "UNAUTHENTICATED"};
  int i = static_cast<int>(code);
  return i >= 0 && i < static_cast<int>(std::size(kNames)) ? kNames[i] : "UNKNOWN";
}

}  // namespace fusor
