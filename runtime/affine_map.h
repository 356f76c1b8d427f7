// Affine maps applied by the runtime's fused loop (runtime/fused_loop.h) to index sets: the maps
// themselves, and their run-by-run walk over a contiguous range (ForEachRun), are in
// lowering/affine_map.h, shared with the cost model; this header adds what only the runtime
// does, element by element over an explicit index list. Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "graph/graph.h"
#include "lowering/affine_map.h"

namespace fusor {

// A set of element indices in some tensor's flat index space: a range, or an explicit list.
struct IndexSet {
  int64_t begin = 0;
  int64_t n = 0;
  const int64_t* list = nullptr;
  int token = 0;
};

// out[e] = m.base + sum_d coord_d(idx element e) * m.coef[d], coordinates taken in the map's
// space over the consumer's `dims` (SpaceOf).
void AffineIndices(const Affine& m, const Shape& dims, const IndexSet& idx, int64_t* out);

}  // namespace fusor
