#include "base/host_memory.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace fusor {
namespace {

std::string ReadSmallFile(const char* path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A non-negative integer at the start of `text` (after blanks), or -1 ("max", empty, junk).
int64_t LeadingInteger(std::string_view text) {
  size_t i = text.find_first_not_of(" \t");
  if (i == std::string_view::npos) return -1;
  int64_t v = 0;
  bool any = false;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (v > (INT64_MAX - 9) / 10) return -1;
    v = v * 10 + (text[i] - '0');
    any = true;
  }
  return any ? v : -1;
}

}  // namespace

int64_t AvailableMemoryBytesFrom(std::string_view meminfo, std::string_view cgroup_max,
                                 std::string_view cgroup_current) {
  int64_t available = -1;
  constexpr std::string_view kKey = "MemAvailable:";
  if (size_t at = meminfo.find(kKey); at != std::string_view::npos) {
    int64_t kib = LeadingInteger(meminfo.substr(at + kKey.size()));
    if (kib >= 0 && kib < INT64_MAX / 1024) available = kib * 1024;
  }
  int64_t limit = LeadingInteger(cgroup_max);
  int64_t used = LeadingInteger(cgroup_current);
  // cgroup v1 reports "no limit" as a huge page-rounded number; anything past 2^60 is none.
  if (limit >= 0 && limit < (int64_t{1} << 60) && used >= 0) {
    int64_t room = std::max<int64_t>(limit - used, 0);
    available = available < 0 ? room : std::min(available, room);
  }
  return available;
}

int64_t AvailableMemoryBytes() {
  std::string max = ReadSmallFile("/sys/fs/cgroup/memory.max");
  std::string current = ReadSmallFile("/sys/fs/cgroup/memory.current");
  if (max.empty()) {
    max = ReadSmallFile("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    current = ReadSmallFile("/sys/fs/cgroup/memory/memory.usage_in_bytes");
  }
  return AvailableMemoryBytesFrom(ReadSmallFile("/proc/meminfo"), max, current);
}

Status CheckHostMemory(int64_t bytes, std::string_view what, int64_t available) {
  if (available < 0 || bytes <= available - available / 8) return Status::Ok();
  return Status::ResourceExhausted(std::string(what) + " needs " + ByteString(bytes) +
                                   "; this host has " + ByteString(available) +
                                   " of memory available (less an eighth kept for the rest)");
}

std::string ByteString(int64_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

}  // namespace fusor
