// A strict reader of the Prometheus text exposition format 0.0.4 for tests: every sample line must
// belong to a family declared by a TYPE line before it (a histogram's _bucket, _sum and _count
// belong to it), label values are unescaped, and values parse as numbers (or +Inf, -Inf, NaN).
// Used by the registry's unit test and by the test that scrapes a real fusord. Pure functions.
#pragma once

#include <map>
#include <string>

#include "base/status.h"

namespace fusor::testing {

struct Exposition {
  std::map<std::string, std::string> types;  // Family name -> counter, gauge, histogram, ...
  std::map<std::string, std::string> help;   // Family name -> help text (unescaped).
  // Series -> value; a series is written `name{a="x",b="y"}` with labels sorted by name and
  // values unescaped, or `name` alone.
  std::map<std::string, double> samples;

  // The value of a series, 0 when absent (a counter not incremented yet).
  double Value(const std::string& series) const;
};

// InvalidArgument naming the line and what is wrong with it.
StatusOr<Exposition> ParseExposition(const std::string& text);

}  // namespace fusor::testing
