// Reading a file a person or a program named (a model, a plan, a tensor, a profile, a token): the
// one path every such file goes through, so that a directory, a FIFO, a device, a missing or
// unreadable file and a file over the caller's size limit are each one clear error naming the
// path, never a hang, an exception or a crash. Stateless; thread-safe.
//
// The statuses: a missing file is NotFound, one that is not a regular file (a directory, a FIFO,
// a device) FailedPrecondition, one that cannot be opened or read IOError, and one over the limit
// InvalidArgument (the CLI's exit codes follow from these, client/exit_codes.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace fusor {

// The whole content of the regular file at `path`, at most `max_bytes` long. `what` names the file
// in errors as the user knows it ("model file", "plan file", "tensor file").
StatusOr<std::string> ReadInputFile(const std::string& path, std::string_view what,
                                    int64_t max_bytes);

// `length` bytes of the regular file at `path` from `offset` (external weight data): the same
// checks, and an error when the file ends before offset + length.
StatusOr<std::string> ReadInputFileRange(const std::string& path, std::string_view what,
                                         int64_t offset, int64_t length);

}  // namespace fusor
