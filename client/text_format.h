// Text the CLI prints for people, in one place so every verb shows a duration, a ratio, a byte
// amount, a time or a table the same way: aligned tables (TextTable), durations in the unit that
// reads best, speed-ups as "1.23x", bytes in binary units (base/host_memory.h ByteString), and
// times as local ISO 8601 with the UTC offset ("2026-11-26T09:05:12+01:00"), so a reader in any
// time zone reads them unambiguously; `--json` output keeps raw numbers (nanoseconds, bytes,
// milliseconds since the Unix epoch). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/host_memory.h"

namespace fusor {

// Columns padded to their widest cell, two spaces apart; the first row is the header.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out, std::string_view indent = "") const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// "850 ns", "12.5 us", "3.250 ms", "1.200 s"; "-" for 0 or less (not measured).
std::string DurationText(double ns);

// before / after as "1.23x"; "-" when either is 0 or less (not known).
std::string RatioText(double before, double after);

// "-" for 0 (never).
std::string LocalIsoTime(int64_t unix_ms);

// How long before now `unix_ms` was, in the largest unit that fits: "12 s ago", "5 min ago",
// "3 h ago", "2 d ago"; a time after now reads "in 40 s"; "-" for 0 (never). Both times by one
// clock (the database's, for agents and jobs).
std::string AgoText(int64_t unix_ms, int64_t now_unix_ms);

// The cost model a plan was chosen with: "analytical-34 + learned residual (120 timings)", or
// "analytical-34 alone" when the residual's training set size is 0 (none).
std::string CostModelText(std::string_view version, int64_t residual_training_samples);

}  // namespace fusor
