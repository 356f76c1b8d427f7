// How much memory this process may still allocate: the least of the kernel's MemAvailable
// (/proc/meminfo) and the room left under a cgroup's memory limit (v2 memory.max minus
// memory.current, or v1 memory.limit_in_bytes minus memory.usage_in_bytes), since a container's
// limit is what the OOM killer enforces, not the host's free memory. CheckHostMemory turns a
// request over that room into a ResourceExhausted that names the amounts, so that a huge model
// refuses to measure or run instead of being killed half way. Stateless; thread-safe (reads the
// files on each call).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace fusor {

// Bytes this process may still allocate; -1 when nothing says (no /proc).
int64_t AvailableMemoryBytes();

// The same from given file contents (any may be empty: absent), for tests.
int64_t AvailableMemoryBytesFrom(std::string_view meminfo, std::string_view cgroup_max,
                                 std::string_view cgroup_current);

// Ok when `bytes` fits in `available` (AvailableMemoryBytes() when negative is passed as
// unknown: then Ok) with a margin of 1/8 left for everything else; else ResourceExhausted naming
// `what`, the bytes it needs and the bytes there are.
Status CheckHostMemory(int64_t bytes, std::string_view what, int64_t available);
inline Status CheckHostMemory(int64_t bytes, std::string_view what) {
  return CheckHostMemory(bytes, what, AvailableMemoryBytes());
}

// "1.5 GiB", "300.0 MiB", "12.0 KiB", "100 B": binary units, one decimal.
std::string ByteString(int64_t bytes);

}  // namespace fusor
