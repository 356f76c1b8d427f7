// The unique slices of a tensor for Unique (and the counts its output shapes need at import):
// without an axis every element is a slice; with one, every index along it. Sorted: in ascending
// lexicographic order of the slices; unsorted: in order of first occurrence. Stateless;
// thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/graph.h"

namespace fusor {

struct UniqueSlices {
  std::vector<int64_t> first;    // Per unique slice, in output order: its first occurrence.
  std::vector<int64_t> inverse;  // Per slice of the input: its unique slice's position.
  std::vector<int64_t> counts;   // Per unique slice: how often it occurs.
};

// `values` row-major over `dims`; `axis` normalised (0 <= axis < rank) when given.
UniqueSlices FindUniqueSlices(const std::vector<double>& values, const Shape& dims,
                              std::optional<int64_t> axis, bool sorted);

}  // namespace fusor
