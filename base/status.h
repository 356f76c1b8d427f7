// Status and StatusOr<T>: the one error type inside Fusor (after LevelDB's). A Status is either ok
// or a code with a message that names what is wrong and what would be right. It becomes a
// grpc::Status only in server/ and an exit code only in client/. Values are immutable and safe to
// share across threads; copying copies the message.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace fusor {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,
    kNotFound,
    kAlreadyExists,
    kCorruption,
    kResourceExhausted,
    kFailedPrecondition,
    kUnimplemented,
    kUnavailable,
    kDeadlineExceeded,
    kCancelled,
    kPermissionDenied,
    kUnauthenticated,
    kInternal,
    kIOError,
  };

  Status() = default;

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status AlreadyExists(std::string msg) { return {Code::kAlreadyExists, std::move(msg)}; }
  static Status Corruption(std::string msg) { return {Code::kCorruption, std::move(msg)}; }
  static Status ResourceExhausted(std::string msg) {
    return {Code::kResourceExhausted, std::move(msg)};
  }
  static Status FailedPrecondition(std::string msg) {
    return {Code::kFailedPrecondition, std::move(msg)};
  }
  static Status Unimplemented(std::string msg) { return {Code::kUnimplemented, std::move(msg)}; }
  static Status Unavailable(std::string msg) { return {Code::kUnavailable, std::move(msg)}; }
  static Status DeadlineExceeded(std::string msg) {
    return {Code::kDeadlineExceeded, std::move(msg)};
  }
  static Status Cancelled(std::string msg) { return {Code::kCancelled, std::move(msg)}; }
  static Status PermissionDenied(std::string msg) {
    return {Code::kPermissionDenied, std::move(msg)};
  }
  static Status Unauthenticated(std::string msg) {
    return {Code::kUnauthenticated, std::move(msg)};
  }
  static Status Internal(std::string msg) { return {Code::kInternal, std::move(msg)}; }
  static Status IOError(std::string msg) { return {Code::kIOError, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "InvalidArgument: node 'conv_1': ..." — for logs and CLI output.
  std::string ToString() const;

  // Returns a copy whose message is "context: message"; ok stays ok.
  Status WithContext(std::string_view context) const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}

  Code code_ = Code::kOk;
  std::string message_;
};

std::string_view CodeName(Status::Code code);

// A value or the Status explaining why there is none.
template <typename T>
class StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design.
    assert(!status_.ok() && "StatusOr needs a value or a non-ok status");
    if (status_.ok()) status_ = Status::Internal("StatusOr constructed from an ok status");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design.

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace fusor

// Early return on error: FUSOR_RETURN_IF_ERROR(DoThing());
#define FUSOR_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::fusor::Status fusor_status_ = (expr);        \
    if (!fusor_status_.ok()) return fusor_status_; \
  } while (0)

#define FUSOR_CONCAT_INNER(a, b) a##b
#define FUSOR_CONCAT(a, b) FUSOR_CONCAT_INNER(a, b)
#define FUSOR_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

// FUSOR_ASSIGN_OR_RETURN(Graph g, ImportOnnx(path));
#define FUSOR_ASSIGN_OR_RETURN(lhs, expr) \
  FUSOR_ASSIGN_OR_RETURN_IMPL(FUSOR_CONCAT(fusor_statusor_, __LINE__), lhs, expr)
