// Affine index maps of our fused loops (runtime/fused_loop.h): a value reads each of its inputs at
// flat index base + sum_d coord_d(e) * coef[d] of its own element e. Maps are built once per loop
// (BroadcastMap, CoordMap, StridedMap, SplitMap) and walked run by run over a contiguous range
// (ForEachRun): the runtime walks them to read each tile, the cost model
// (costmodel/loop_evaluation.h) to count the runs it prices, so both take the runs from this one
// walk. The runtime's element-by-element
// application over an index list is runtime/affine_map.h. Plain values and pure functions;
// thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace fusor {

// Row-major strides of a shape.
std::vector<int64_t> RowMajorStrides(const Shape& dims);

// out element e of the consumer's index space reads flat index base + sum_d coord_d(e) * coef[d].
// coef has one entry per dim of the space, identity and scalar maps included. The space is the
// consumer's dims, or `split` when set: the consumer's elements in the same row-major order with
// dims split into several (DepthToSpace's [N, C, H, b, W, b] of its [N, C, H*b, W*b], Tile's
// [r, d] of a dim repeating an input dim d r times), which turns a map that divides a coordinate
// into one that is affine. Every walk takes its coordinates in SpaceOf.
struct Affine {
  bool identity = false;
  bool scalar = false;
  int64_t base = 0;
  std::vector<int64_t> coef;
  Shape split;
};

// The dims a map's coordinates are taken in when its consumer's are `dims`.
inline const Shape& SpaceOf(const Affine& m, const Shape& dims) {
  return m.split.empty() ? dims : m.split;
}

// True when reading through `coef` from `out` coordinates is reading the same flat index: the
// coefficients of all dims longer than 1 are the row-major strides (size-1 dims never move).
bool IsIdentity(const std::vector<int64_t>& coef, int64_t base, const Shape& in, const Shape& out);
// How an input of dims `in` broadcast to `out` is read (numpy rules; a one-element input is a
// scalar).
Affine BroadcastMap(const Shape& in, const Shape& out);
// The coordinate of dim `dim` of a rank-`rank` index space.
Affine CoordMap(size_t rank, size_t dim);
// A map with the given coefficients and base from `out` coordinates into a tensor of dims `in`.
Affine StridedMap(const std::vector<int64_t>& coef, int64_t base, const Shape& in,
                  const Shape& out);
// A map with the given coefficients and base from coordinates of `split` (the consumer's dims,
// split; see Affine) into a tensor of dims `in`.
Affine SplitMap(const std::vector<int64_t>& coef, int64_t base, const Shape& in,
                const Shape& split);
// The step of the runs ForEachRun walks over the consumer's `dims`: the coefficient of the
// innermost dim of the map's space longer than 1.
int64_t RunStep(const Affine& m, const Shape& dims);

// Up to 16 integers in place, more on the heap: ForEachRun is called once per run when a value is
// evaluated run by run (a 64-element head of BERT's query split), where three heap allocations
// per call cost more than the run's copy.
class SmallInts {
 public:
  explicit SmallInts(size_t n) {
    if (n > kInline) heap_.resize(n);
  }
  int64_t* data() { return heap_.empty() ? inline_ : heap_.data(); }

 private:
  static constexpr size_t kInline = 16;
  int64_t inline_[kInline];
  std::vector<int64_t> heap_;
};

// The dims of `space` (SpaceOf the consumer's) as ForEachRun walks them through `m`, innermost
// last: dims of size 1 dropped, and each dim merged into the one inside it when the map reads the
// two as one stretch (its coefficient is the inner one's times the inner extent). Writes `dims` and
// `coefs` (room for space.size() + 1 each) and returns how many; at least one.
size_t MergeRunDims(const Affine& m, const Shape& space, int64_t* dims, int64_t* coefs);

// The runs ForEachRun walks over all of the consumer's `dims`: each `length` elements long, reading
// flat indices `step` apart (0: one element repeated, a broadcast). What the cost model prices a
// map's reads by, so that a new map (a split one included) is priced with no edit there.
struct RunShape {
  int64_t length = 1;
  int64_t step = 0;
  // Streams the walk reads side by side: the elements of the map's space inside its innermost dim
  // read at step 1 (1 when the runs step by 1; R for a transpose [R, C] -> [C, R]; a
  // DepthToSpace's blocksize). A strided walk touches that many cache lines before it reads the
  // next element of any (the whole space when no dim is read at step 1).
  int64_t streams = 1;
  // Dims an index list is divided back into through the map (AffineIndices): its space's rank,
  // the split's for a split map.
  int64_t rank = 0;
};
RunShape RunShapeOf(const Affine& m, const Shape& dims);

// Walks the elements [begin, begin + n) of the consumer's `consumer_dims` (rank >= 1) in runs
// along the innermost dims of the map's space: fn(e, off, run, step) for elements e .. e + run - 1,
// which read flat indices off + j * step. Trailing dims the map reads as one (a [C,1,1] scale over
// H x W, a row of weights over [N, W]) make one run: fewer, longer runs.
template <typename Fn>
void ForEachRun(const Affine& m, const Shape& consumer_dims, int64_t begin, int64_t n, Fn&& fn) {
  const Shape& full_dims = SpaceOf(m, consumer_dims);
  SmallInts dims_buf(full_dims.size() + 1), coefs_buf(full_dims.size() + 1),
      coord_buf(full_dims.size() + 1);
  int64_t* dims = dims_buf.data();
  int64_t* coefs = coefs_buf.data();
  int64_t* coord = coord_buf.data();
  const size_t rank = MergeRunDims(m, full_dims, dims, coefs);
  int64_t off = m.base;
  for (size_t d = rank, flat = begin; d-- > 0;) {
    coord[d] = static_cast<int64_t>(flat) % dims[d];
    flat /= dims[d];
    off += coord[d] * coefs[d];
  }
  int64_t inner = dims[rank - 1], step = coefs[rank - 1];
  for (int64_t e = 0; e < n;) {
    int64_t run = std::min(n - e, inner - coord[rank - 1]);
    fn(e, off, run, step);
    e += run;
    coord[rank - 1] += run;
    off += run * step;
    for (size_t d = rank - 1; d > 0 && coord[d] == dims[d]; --d) {
      off += coefs[d - 1] - coord[d] * coefs[d];
      coord[d] = 0;
      ++coord[d - 1];
    }
  }
}

}  // namespace fusor
