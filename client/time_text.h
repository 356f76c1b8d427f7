// Times as the CLI shows them in tables: local ISO 8601 with the UTC offset
// ("2026-11-26T09:05:12+01:00"), so a reader in any time zone reads them unambiguously; `--json`
// keeps milliseconds since the Unix epoch. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace fusor {

// "-" for 0 (never).
std::string LocalIsoTime(int64_t unix_ms);

}  // namespace fusor
