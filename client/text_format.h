// Text the CLI prints for people, in one place so every verb shows a duration, a ratio, a byte
// amount, a time or a table the same way: aligned tables (TextTable), durations in the unit that
// reads best, speed-ups as "1.23x", bytes in binary units (base/host_memory.h ByteString), and
// times as local ISO 8601 with the UTC offset ("2026-11-26T09:05:12+01:00"), so a reader in any
// time zone reads them unambiguously; `--json` output keeps raw numbers (nanoseconds, bytes,
// milliseconds since the Unix epoch). Tables fit kTextColumns unless a verb's --wide asks for every
// column whole. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/host_memory.h"

namespace fusor {

// The width the CLI's tables and report lines fit without --wide.
inline constexpr size_t kTextColumns = 100;

// `text` whole when it has at most `width` characters, else its first width - 3 and "...".
std::string CutText(std::string_view text, size_t width);

// `text` broken at spaces into lines of at most `width` characters, each ending "\n"; lines after
// the first start with two spaces. A word longer than a line stays whole.
std::string WrapText(std::string_view text, size_t width = kTextColumns);

// Columns padded to their widest cell, two spaces apart; the first row is the header.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // Numbers line up on their last digit.
  void AlignRight(size_t column) { right_.push_back(column); }
  // The cells of `column` are cut (CutText) so every line fits `width` characters; the column
  // keeps at least its header's width, so a table too wide even then prints wider.
  void FitTo(size_t width, size_t column) { fit_ = Fit{width, column}; }
  void Print(std::ostream& out, std::string_view indent = "") const;

 private:
  struct Fit {
    size_t width, column;
  };
  std::vector<size_t> Widths(size_t indent) const;

  std::vector<std::vector<std::string>> rows_;
  std::vector<size_t> right_;
  std::optional<Fit> fit_;
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
