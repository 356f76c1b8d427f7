// What parsed requests may hold in memory at once. gRPC hands fusord a request as wire bytes;
// parsing them builds one C++ object per sub-message, so a few megabytes of tiny nested
// messages (4 million empty graph nodes in 8 MiB) become gigabytes. EstimateParsedBytes prices a
// request from its wire format alone, without building anything, and ParseBudget holds the
// estimates of the requests being parsed and served: a request whose estimate does not fit is
// refused with ResourceExhausted before it is parsed, so the parsed requests of all calls
// together never hold more than the budget.
//
// ParseBudget is thread-safe; a Hold belongs to one call and returns its bytes when destroyed.
#pragma once

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/zero_copy_stream.h>

#include <cstdint>
#include <mutex>
#include <string_view>

#include "base/status.h"

namespace fusor {

// Bytes the objects parsed from `wire`, a serialised message of `type`, take at most, read from
// the wire format alone: each sub-message costs its type's empty object, each field occurrence
// a string or repeated-field slot, each byte of packed numbers 8 bytes. InvalidArgument when
// `wire` is not a well-formed message (truncated, groups, nested deeper than protobuf parses).
StatusOr<int64_t> EstimateParsedBytes(const google::protobuf::Descriptor& type,
                                      google::protobuf::io::ZeroCopyInputStream* wire);

class ParseBudget {
 public:
  explicit ParseBudget(int64_t bytes) : capacity_(bytes) {}

  // Bytes of the budget held by one call; returned when destroyed.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept;
    Hold& operator=(Hold&& other) noexcept;
    ~Hold();

   private:
    friend class ParseBudget;
    Hold(ParseBudget* budget, int64_t bytes) : budget_(budget), bytes_(bytes) {}
    ParseBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
  };

  // ResourceExhausted naming `what` ("the request, parsed,") and the figures when `bytes` does
  // not fit in what is free now.
  StatusOr<Hold> Reserve(int64_t bytes, std::string_view what);
  int64_t held() const;

 private:
  void Release(int64_t bytes);

  const int64_t capacity_;
  mutable std::mutex mu_;
  int64_t held_ = 0;  // Guarded by mu_.
};

}  // namespace fusor
