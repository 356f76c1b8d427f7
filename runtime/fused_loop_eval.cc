// Evaluating a compiled fused loop (runtime/fused_loop.h): a value's elements at an index set,
// pulled through its inputs tile by tile, and the parallel walk over the outputs' tiles.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <variant>

#include <omp.h>

#include "lowering/loop_lowering.h"
#include "lowering/threading.h"
#include "runtime/affine_map.h"
#include "runtime/fused_loop.h"
#include "runtime/fused_loop_internal.h"
#include "runtime/loop_simd.h"
#include "runtime/op_params.h"

namespace fusor {
namespace {

using Value = FusedLoop::Value;

const float* Eval(const LoopValues& values, TensorId t, const IndexSet& idx, LoopScratch* s,
                  float* into = nullptr);

IndexSet MapIdx(const Affine& m, const Shape& dims, const IndexSet& idx, LoopScratch* s) {
  if (m.identity) return idx;
  int64_t* list = s->Ints(idx.n);
  AffineIndices(m, dims, idx, list);
  return {0, idx.n, list, s->NewToken()};
}

// A float leaf read through a non-identity map for a contiguous range of elements (a broadcast
// weight, a transposed or sliced input): one offset per run along the innermost dim, then a copy,
// a fill or a strided read. Building an index list and gathering through it costs ~1 ns per
// element; this is a plain copy.
const float* ReadLeafRuns(const Value::Leaf& leaf, const Affine& m, const Shape& dims,
                          const IndexSet& idx, LoopScratch* s, float* into = nullptr) {
  const float* src = static_cast<const float*>(leaf.data);
  float* out = into != nullptr ? into : s->Floats(idx.n);
  ForEachRun(m, dims, idx.begin, idx.n, [&](int64_t e, int64_t off, int64_t run, int64_t step) {
    if (step == 1) {
      std::memcpy(out + e, src + off, run * sizeof(float));
    } else if (step == 0) {
      std::fill(out + e, out + e + run, src[off]);
    } else {
      for (int64_t j = 0; j < run; ++j) out[e + j] = src[off + j * step];
    }
  });
  return out;
}

// What value `t` reads its elements from: a view (Reshape and the like) reads its input at the
// same flat indices, so through views to the first value that is not one.
const Value* ThroughViews(const LoopValues& values, TensorId t) {
  const Value* v = values.at(t).get();
  while (v->Is<Value::View>()) v = values.at(v->inputs[0]).get();
  return v;
}

// A computed value read through a map that keeps runs of at least kMinEvaluatedRun elements in
// order (a slice of whole rows, a transpose that keeps a long innermost dim): evaluated run by run
// as contiguous ranges, each straight into place, as ConcatRuns does. Through an index list every
// element would be re-indexed and the value's inputs gathered (BERT's Add + Slice of the query
// third of each row took 340 us for 393K elements). Returns nullptr when the runs are shorter.
const float* EvalComputedRuns(const LoopValues& values, TensorId t, const Affine& m,
                              const Shape& dims, const IndexSet& idx, LoopScratch* s, float* into) {
  if (RunStep(m, dims) != 1) return nullptr;
  int64_t runs = 0;
  ForEachRun(m, dims, idx.begin, idx.n, [&](int64_t, int64_t, int64_t, int64_t) { ++runs; });
  if (idx.n < runs * kMinEvaluatedRun) return nullptr;
  float* out = into != nullptr ? into : s->Floats(idx.n);
  ForEachRun(m, dims, idx.begin, idx.n, [&](int64_t e, int64_t off, int64_t run, int64_t) {
    // The run's buffers and memos are of no use to the next run: free them as it ends.
    const LoopScratch::Mark mark = s->Here();
    const float* p = Eval(values, t, {off, run, nullptr, s->NewToken()}, s, out + e);
    if (p != out + e) std::memcpy(out + e, p, run * sizeof(float));
    s->Release(mark);
  });
  return out;
}

// Value `t` at the elements of the consumer's index space `idx` (over `dims`) mapped through `m`.
// A leaf behind views is read run by run too (BERT's head split Reshape -> Transpose was gathered
// element by element), and so is a computed value when the runs are long. `into`, when set, is
// where the caller wants the values, as for Eval: a transpose or a slice that is the loop's output
// is written straight into it (it was copied from a tile). Safe with an output aliasing a leaf as
// long as that leaf is not read through a map, which tiles ahead would read after it was
// overwritten anyway.
const float* EvalMapped(const LoopValues& values, TensorId t, const Affine& m, const Shape& dims,
                        const IndexSet& idx, LoopScratch* s, float* into = nullptr) {
  const Value* read = ThroughViews(values, t);
  bool runs = !read->is_int && idx.list == nullptr && !m.identity && !m.scalar && !dims.empty();
  if (const auto* leaf = std::get_if<Value::Leaf>(&read->kind); runs && leaf != nullptr) {
    return ReadLeafRuns(*leaf, m, dims, idx, s, into);
  }
  if (runs) {
    if (const float* out = EvalComputedRuns(values, t, m, dims, idx, s, into)) return out;
  }
  return Eval(values, t, MapIdx(m, dims, idx, s), s, into);
}

// Evaluates input j of v at the elements `idx` of v's index space.
const float* EvalInput(const LoopValues& values, const Value& v, size_t j, const IndexSet& idx,
                       LoopScratch* s) {
  const Affine& m = v.maps[j];
  if (!m.scalar) return EvalMapped(values, v.inputs[j], m, v.dims, idx, s);
  float x = Eval(values, v.inputs[j], {0, 1, nullptr, s->NewToken()}, s)[0];
  float* out = s->Floats(idx.n);
  std::fill(out, out + idx.n, x);
  return out;
}

const float* EvalLeaf(const Value& v, const Value::Leaf& leaf, const IndexSet& idx,
                      LoopScratch* s) {
  if (!v.is_int && idx.list == nullptr) return static_cast<const float*>(leaf.data) + idx.begin;
  float* out = s->Floats(idx.n);
  for (int64_t e = 0; e < idx.n; ++e) {
    int64_t i = idx.list ? idx.list[e] : idx.begin + e;
    out[e] = v.is_int ? static_cast<float>(static_cast<const int64_t*>(leaf.data)[i])
                      : static_cast<const float*>(leaf.data)[i];
  }
  return out;
}

// A contiguous range of a Concat is a few runs, each a contiguous range of one input (a run ends
// where the input's part of an outer index ends): each input is evaluated as a range, straight
// into place when it is computed, copied when it is a leaf. Testing the axis coordinate of every
// element and gathering each input through an index list cost ~2.7 ns per element (SqueezeNet's
// [1,128,55,55] Concat took 1 ms).
const float* ConcatRuns(const LoopValues& values, const Value& v, const Value::Concat& c,
                        const IndexSet& idx, LoopScratch* s, float* into) {
  const int64_t inner = c.axis_stride, block = c.axis_len * inner;
  float* out = into != nullptr ? into : s->Floats(idx.n);
  for (int64_t e = 0; e < idx.n;) {
    const int64_t flat = idx.begin + e, outer = flat / block, r = flat % block;
    // The last part starting at or before the axis coordinate (empty parts start where the next
    // one does and are skipped).
    size_t j =
        std::upper_bound(c.offsets.begin(), c.offsets.end(), r / inner) - c.offsets.begin() - 1;
    const int64_t part_begin = c.offsets[j] * inner, part_len = c.lens[j] * inner;
    const int64_t run = std::min(idx.n - e, part_begin + part_len - r);
    const IndexSet part{outer * part_len + (r - part_begin), run, nullptr, s->NewToken()};
    const float* p = Eval(values, v.inputs[j], part, s, out + e);
    if (run == idx.n && into == nullptr) return p;  // One run: hand on the input's tile.
    if (p != out + e) std::memcpy(out + e, p, run * sizeof(float));
    e += run;
  }
  return out;
}

// A Concat at an index list: each element's axis coordinate picks its input, and each input is
// evaluated at the list of the elements that come from it.
const float* EvalConcat(const LoopValues& values, const Value& v, const Value::Concat& c,
                        const IndexSet& idx, LoopScratch* s, float* into) {
  if (idx.list == nullptr) return ConcatRuns(values, v, c, idx, s, into);
  int64_t* axis_coord = s->Ints(idx.n);
  AffineIndices(c.axis_coord, v.dims, idx, axis_coord);
  float* out = s->Floats(idx.n);
  int64_t* pos = s->Ints(idx.n);
  int64_t* where = s->Ints(idx.n);
  for (size_t j = 0; j < v.inputs.size(); ++j) {
    int64_t count = 0;
    for (int64_t e = 0; e < idx.n; ++e) {
      if (axis_coord[e] >= c.offsets[j] && axis_coord[e] < c.offsets[j] + c.lens[j])
        pos[count++] = e;
    }
    if (count == 0) continue;
    int64_t* all = s->Ints(idx.n);
    AffineIndices(v.maps[j], v.dims, idx, all);
    for (int64_t c = 0; c < count; ++c) where[c] = all[pos[c]];
    const float* part = Eval(values, v.inputs[j], {0, count, where, s->NewToken()}, s);
    for (int64_t c = 0; c < count; ++c) out[pos[c]] = part[c];
  }
  return out;
}

// The begin padding of a Pad: compiled, or read from its pads input when they are computed at run
// time (integer values travel as floats, exact below 2^24).
std::vector<int64_t> PadBegins(const LoopValues& values, const Value& v, const Value::Pad& pad,
                               LoopScratch* s) {
  if (pad.pads_slot < 0) return pad.begin;
  int64_t rank = static_cast<int64_t>(v.dims.size());
  const float* pads =
      Eval(values, v.inputs[pad.pads_slot], {0, 2 * rank, nullptr, s->NewToken()}, s);
  return std::vector<int64_t>(pads, pads + rank);
}

const float* EvalPad(const LoopValues& values, const Value& v, const Value::Pad& pad,
                     const IndexSet& idx, LoopScratch* s) {
  size_t rank = v.dims.size();
  std::vector<int64_t> in_strides = RowMajorStrides(pad.in_dims),
                       begin = PadBegins(values, v, pad, s);
  float fill = pad.value;
  if (pad.value_slot >= 0)
    fill = Eval(values, v.inputs[pad.value_slot], {0, 1, nullptr, s->NewToken()}, s)[0];
  int64_t* src = s->Ints(idx.n);
  int64_t* pos = s->Ints(idx.n);
  int64_t* coord = s->Ints(idx.n);
  std::vector<char> inside(idx.n, 1);
  std::fill(src, src + idx.n, 0);
  for (size_t d = 0; d < rank; ++d) {
    AffineIndices(pad.coords[d], v.dims, idx, coord);
    for (int64_t e = 0; e < idx.n; ++e) {
      int64_t c = PadSourceIndex(pad.mode, coord[e] - begin[d], pad.in_dims[d]);
      inside[e] = inside[e] && c >= 0 && c < pad.in_dims[d];
      src[e] += c * in_strides[d];
    }
  }
  int64_t count = 0;
  for (int64_t e = 0; e < idx.n; ++e) {
    if (inside[e]) {
      pos[count] = e;
      src[count++] = src[e];
    }
  }
  float* out = s->Floats(idx.n);
  std::fill(out, out + idx.n, fill);
  if (count == 0) return out;
  const float* part = Eval(values, v.inputs[0], {0, count, src, s->NewToken()}, s);
  for (int64_t c = 0; c < count; ++c) out[pos[c]] = part[c];
  return out;
}

// Nearest Resize gathers one input element per output element. Linear Resize blends the 2^k
// corners around each position (k dims that blend): the input is evaluated once per corner, so
// producers fused before a linear Resize are computed that many times per element.
const float* EvalResize(const LoopValues& values, const Value& v, const Value::Resize& resize,
                        const IndexSet& idx, LoopScratch* s) {
  std::vector<int64_t> in_strides = RowMajorStrides(resize.in_dims);
  int64_t* base = s->Ints(idx.n);
  std::fill(base, base + idx.n, 0);
  std::vector<size_t> blend_dims;
  std::vector<const int64_t*> blend_coords;
  for (size_t d = 0; d < v.dims.size(); ++d) {
    int64_t* coord = s->Ints(idx.n);
    AffineIndices(resize.coords[d], v.dims, idx, coord);
    const Value::ResizeTable& t = resize.tables[d];
    if (t.blends) {
      blend_dims.push_back(d);
      blend_coords.push_back(coord);
      continue;
    }
    for (int64_t e = 0; e < idx.n; ++e) base[e] += t.i0[coord[e]] * in_strides[d];
  }
  if (blend_dims.empty()) return Eval(values, v.inputs[0], {0, idx.n, base, s->NewToken()}, s);
  float* out = s->Floats(idx.n);
  float* weight = s->Floats(idx.n);
  int64_t* src = s->Ints(idx.n);
  std::fill(out, out + idx.n, 0.0f);
  for (uint32_t corner = 0; corner < (1u << blend_dims.size()); ++corner) {
    std::copy(base, base + idx.n, src);
    std::fill(weight, weight + idx.n, 1.0f);
    for (size_t j = 0; j < blend_dims.size(); ++j) {
      const Value::ResizeTable& t = resize.tables[blend_dims[j]];
      bool high = (corner >> j) & 1;
      int64_t stride = in_strides[blend_dims[j]];
      for (int64_t e = 0; e < idx.n; ++e) {
        int64_t x = blend_coords[j][e];
        src[e] += (high ? t.i1[x] : t.i0[x]) * stride;
        weight[e] *= high ? t.w[x] : 1.0f - t.w[x];
      }
    }
    const float* in = Eval(values, v.inputs[0], {0, idx.n, src, s->NewToken()}, s);
    for (int64_t e = 0; e < idx.n; ++e) out[e] += weight[e] * in[e];
  }
  return out;
}

// A contiguous range of a Gather whose gathered blocks (the data dims after the axis) are long
// (GatherCopiesBlocks) is a few runs, each a contiguous range of one block of the data: the index
// is read once per run and the block evaluated as a range and copied. Through an index list every
// element is re-indexed and gathered, ~3.6 ns each (an embedding lookup of 128 rows of 768 took
// 0.35 ms).
const float* GatherRuns(const LoopValues& values, const Value& v, const Value::Gather& gather,
                        const IndexSet& idx, LoopScratch* s) {
  const int64_t inner = gather.axis_stride;
  const int64_t block = NumElements(values.at(v.inputs[1])->dims) * inner;
  float* out = s->Floats(idx.n);
  for (int64_t e = 0; e < idx.n;) {
    const int64_t flat = idx.begin + e, outer = flat / block, r = flat % block;
    const int64_t j = r / inner, i = r % inner, run = std::min(idx.n - e, inner - i);
    const LoopScratch::Mark mark = s->Here();
    int64_t k =
        static_cast<int64_t>(Eval(values, v.inputs[1], {j, 1, nullptr, s->NewToken()}, s)[0]);
    if (k < 0) k += gather.axis_len;
    k = std::clamp<int64_t>(k, 0, gather.axis_len - 1);
    const IndexSet part{(outer * gather.axis_len + k) * inner + i, run, nullptr, s->NewToken()};
    const float* p = Eval(values, v.inputs[0], part, s, out + e);
    if (p != out + e) std::memcpy(out + e, p, run * sizeof(float));
    s->Release(mark);
    e += run;
  }
  return out;
}

const float* EvalGather(const LoopValues& values, const Value& v, const Value::Gather& gather,
                        const IndexSet& idx, LoopScratch* s) {
  if (gather.copies_blocks && idx.list == nullptr) {
    return GatherRuns(values, v, gather, idx, s);
  }
  const float* ind = Eval(values, v.inputs[1], MapIdx(v.maps[1], v.dims, idx, s), s);
  int64_t* src = s->Ints(idx.n);
  AffineIndices(v.maps[0], v.dims, idx, src);
  for (int64_t e = 0; e < idx.n; ++e) {
    int64_t k = static_cast<int64_t>(ind[e]);
    if (k < 0) k += gather.axis_len;
    src[e] += std::clamp<int64_t>(k, 0, gather.axis_len - 1) * gather.axis_stride;
  }
  return Eval(values, v.inputs[0], {0, idx.n, src, s->NewToken()}, s);
}

const float* EvalTrilu(const LoopValues& values, const Value& v, const Value::Trilu& trilu,
                       const IndexSet& idx, LoopScratch* s) {
  const float* x = Eval(values, v.inputs[0], idx, s);
  int64_t* row = s->Ints(idx.n);
  int64_t* col = s->Ints(idx.n);
  AffineIndices(trilu.row, v.dims, idx, row);
  AffineIndices(trilu.col, v.dims, idx, col);
  float* out = s->Floats(idx.n);
  for (int64_t e = 0; e < idx.n; ++e) {
    int64_t diff = col[e] - row[e];
    out[e] = (trilu.upper ? diff >= trilu.k : diff <= trilu.k) ? x[e] : 0.0f;
  }
  return out;
}

bool IsArith(const Value& v) {
  return v.Is<Value::Unary>() || v.Is<Value::Binary>() || v.Is<Value::Where>() ||
         v.Is<Value::BatchNorm>();
}

// The tile `in` of v's input j when v may overwrite it: a scratch buffer only v reads (an
// arithmetic value with one use, not an output) through an identity map; the kernels read element
// e before writing it. Reuse keeps a chain in one buffer, so it stays in L1 whatever its length.
float* Reusable(const LoopValues& values, const Value& v, size_t j, const float* in) {
  const Value& u = *values.at(v.inputs[j]);
  bool mine = v.maps[j].identity && IsArith(u) && u.uses == 1 && !u.output && !u.is_int;
  return mine ? const_cast<float*>(in) : nullptr;
}

// Where v's tile goes: `into` when the caller gave one, else input j's tile when reusable, else a
// new scratch buffer.
float* OutputTile(const LoopValues& values, const Value& v, size_t j, const float* in, float* into,
                  const IndexSet& idx, LoopScratch* s) {
  if (into != nullptr) return into;
  if (float* reuse = Reusable(values, v, j, in)) return reuse;
  return s->Floats(idx.n);
}

// Input j of v for a contiguous range read run by run, when the loop's program streams it
// (OperandRead::kStreamed, lowering/loop_program.h), as BroadcastReadOf (lowering/loop_lowering.h)
// says at this range: a float leaf (or views of one) in place; a computed value evaluated whole
// once per scratch (once per thread and run) and kept, or over the span of its elements the range
// reads. Returns the elements and sets `first` to the flat index of the first; nullptr when the
// input is not read this way.
const float* StreamedOperand(const LoopValues& values, const Value& v, size_t j,
                             const IndexSet& idx, LoopScratch* s, int64_t* first) {
  const Affine& m = v.maps[j];
  if (idx.list != nullptr || v.reads[j] != OperandRead::kStreamed) return nullptr;
  const Value* u = ThroughViews(values, v.inputs[j]);
  *first = 0;
  if (const auto* leaf = std::get_if<Value::Leaf>(&u->kind)) {
    return static_cast<const float*>(leaf->data);
  }
  // Kept whole by an earlier range of this thread: also for a range shorter than the value (a
  // loop's last tile), which would otherwise evaluate it again over its span.
  if (const float* kept = s->Hoisted(v.inputs[j])) return kept;
  const int64_t whole = NumElements(u->dims);
  int64_t lo = 0, hi = whole - 1;
  if (whole > idx.n) {
    lo = std::numeric_limits<int64_t>::max();
    hi = -1;
    ForEachRun(m, v.dims, idx.begin, idx.n, [&](int64_t, int64_t off, int64_t run, int64_t st) {
      lo = std::min(lo, off);
      hi = std::max(hi, off + (run - 1) * st);
    });
  }
  const double dwhole = static_cast<double>(whole), span = static_cast<double>(hi - lo + 1);
  switch (BroadcastReadOf(/*computed=*/true, dwhole, span, static_cast<double>(idx.n))) {
    case BroadcastRead::kWholeOnce:
      return s->Hoist(v.inputs[j], Eval(values, v.inputs[j], {0, whole, nullptr, s->NewToken()}, s),
                      whole);
    case BroadcastRead::kSpan:
      *first = lo;
      return Eval(values, v.inputs[j], {lo, hi - lo + 1, nullptr, s->NewToken()}, s);
    default:
      return nullptr;
  }
}

const float* EvalBinary(const LoopValues& values, const Value& v, BinaryOp op, const IndexSet& idx,
                        LoopScratch* s, float* into) {
  for (size_t j = 0; j < 2; ++j) {
    if (!v.maps[j].scalar || v.maps[1 - j].scalar) continue;
    float c = Eval(values, v.inputs[j], {0, 1, nullptr, s->NewToken()}, s)[0];
    const float* x = EvalInput(values, v, 1 - j, idx, s);
    float* out = OutputTile(values, v, 1 - j, x, into, idx, s);
    loop_simd::BinaryScalar(op, x, c, j == 0, out, idx.n);
    return out;
  }
  for (size_t j = 0; j < 2; ++j) {
    int64_t first = 0;
    const float* src = StreamedOperand(values, v, j, idx, s, &first);
    if (src == nullptr) continue;
    const float* x = EvalInput(values, v, 1 - j, idx, s);
    float* out = OutputTile(values, v, 1 - j, x, into, idx, s);
    ForEachRun(v.maps[j], v.dims, idx.begin, idx.n,
               [&](int64_t e, int64_t at, int64_t run, int64_t step) {
                 const int64_t off = at - first;
                 if (step == 0) {
                   loop_simd::BinaryScalar(op, x + e, src[off], j == 0, out + e, run);
                 } else if (j == 1) {
                   loop_simd::Binary(op, x + e, src + off, out + e, run);
                 } else {
                   loop_simd::Binary(op, src + off, x + e, out + e, run);
                 }
               });
    return out;
  }
  const float* x = EvalInput(values, v, 0, idx, s);
  const float* y = EvalInput(values, v, 1, idx, s);
  float* out = into != nullptr ? into : Reusable(values, v, 0, x);
  if (out == nullptr) out = OutputTile(values, v, 1, y, nullptr, idx, s);
  loop_simd::Binary(op, x, y, out, idx.n);
  return out;
}

// A chain's side operand over a contiguous range: a scalar, a tile or leaf read in step with the
// range, or a broadcast read run by run (its runs, from ForEachRun, in `runs` as e, offset, length,
// step, offsets relative to `p`).
struct ChainInput {
  const float* p = nullptr;
  float scalar = 0;
  int64_t* runs = nullptr;
  int64_t at = 0;  // The run the walk is in.
};

ChainInput ChainSideOf(const LoopValues& values, const Value& w, size_t j, const IndexSet& idx,
                       LoopScratch* s) {
  ChainInput in;
  if (w.maps[j].scalar) {
    in.scalar = Eval(values, w.inputs[j], {0, 1, nullptr, s->NewToken()}, s)[0];
    return in;
  }
  int64_t first = 0;
  if (const float* src = StreamedOperand(values, w, j, idx, s, &first)) {
    int64_t count = 0;
    ForEachRun(w.maps[j], w.dims, idx.begin, idx.n,
               [&](int64_t, int64_t, int64_t, int64_t) { ++count; });
    in.runs = s->Ints(4 * count);
    int64_t* r = in.runs;
    ForEachRun(w.maps[j], w.dims, idx.begin, idx.n,
               [&](int64_t e, int64_t off, int64_t run, int64_t step) {
                 *r++ = e;
                 *r++ = off - first;
                 *r++ = run;
                 *r++ = step;
               });
    in.p = src;
    return in;
  }
  in.p = EvalInput(values, w, j, idx, s);
  return in;
}

// Evaluates the chain that ends at `head` (TakeChains) over a contiguous range in one pass.
const float* EvalChain(const LoopValues& values, const Value& head, const IndexSet& idx,
                       LoopScratch* s, float* into) {
  const int k = static_cast<int>(head.chain.size());
  const Value& first = *head.chain[0];
  const size_t src_j = head.chain_source;
  for (int i = 0; i + 1 < k; ++i) s->Count(head.chain[i]->tensor, idx.n);
  const float* src = EvalInput(values, first, src_j, idx, s);
  loop_simd::ChainOp ops[kMaxChain];
  ChainInput sides[kMaxChain];
  for (int i = 0; i < k; ++i) {
    const Value& w = *head.chain[i];
    // TakeChains admits Unary and Binary values only.
    if (const auto* u = std::get_if<Value::Unary>(&w.kind)) {
      ops[i].u = u->op;
      ops[i].p = u->a;
      ops[i].q = u->b;
      continue;
    }
    ops[i].unary = false;
    ops[i].b = std::get_if<Value::Binary>(&w.kind)->op;
    const size_t j = i == 0 ? 1 - src_j : 1 - static_cast<size_t>(w.chain_input);
    ops[i].side_first = j == 0;
    if (static_cast<int>(j) == w.saved_input) {
      ops[i].side = loop_simd::ChainSide::kSaved;
      continue;
    }
    sides[i] = ChainSideOf(values, w, j, idx, s);
  }
  float* out = into != nullptr ? into : Reusable(values, first, src_j, src);
  if (out == nullptr) out = s->Floats(idx.n);
  // Walk the range in pieces over which every side steps evenly: the broadcast sides' runs.
  const float* ptrs[kMaxChain];
  for (int64_t e = 0; e < idx.n;) {
    int64_t end = idx.n;
    for (int i = 0; i < k; ++i) {
      ChainInput& in = sides[i];
      if (ops[i].unary || ops[i].side == loop_simd::ChainSide::kSaved) continue;
      if (in.p == nullptr) {
        ops[i].side = loop_simd::ChainSide::kConstant;
        ptrs[i] = &in.scalar;
      } else if (in.runs == nullptr) {
        ops[i].side = loop_simd::ChainSide::kStream;
        ptrs[i] = in.p + e;
      } else {
        const int64_t* r = in.runs + 4 * in.at;
        while (r[0] + r[2] <= e) r = in.runs + 4 * ++in.at;
        end = std::min(end, r[0] + r[2]);
        ops[i].side = r[3] == 0 ? loop_simd::ChainSide::kConstant : loop_simd::ChainSide::kStream;
        ptrs[i] = in.p + r[1] + (e - r[0]) * r[3];
      }
    }
    loop_simd::Chain(ops, k, src + e, ptrs, out + e, end - e);
    e = end;
  }
  return out;
}

// Evaluates value v, of the kind each operator() takes, at `idx` (see Eval).
struct EvalKind {
  const LoopValues& values;
  const Value& v;
  const IndexSet& idx;
  LoopScratch* s;
  float* into;

  // A value a chain ends at is evaluated as the chain over a contiguous range (TakeChains).
  bool Chained() const { return idx.list == nullptr && v.chain_input >= 0; }

  const float* operator()(const Value::Leaf& leaf) const { return EvalLeaf(v, leaf, idx, s); }
  const float* operator()(const Value::Unary& u) const {
    if (Chained()) return EvalChain(values, v, idx, s, into);
    const float* x = EvalInput(values, v, 0, idx, s);
    float* out = OutputTile(values, v, 0, x, into, idx, s);
    loop_simd::Unary(u.op, u.a, u.b, x, out, idx.n);
    return out;
  }
  const float* operator()(const Value::Binary& b) const {
    if (Chained()) return EvalChain(values, v, idx, s, into);
    return EvalBinary(values, v, b.op, idx, s, into);
  }
  const float* operator()(const Value::Where&) const {
    float* out = into != nullptr ? into : s->Floats(idx.n);
    const float* c = EvalInput(values, v, 0, idx, s);
    const float* x = EvalInput(values, v, 1, idx, s);
    const float* y = EvalInput(values, v, 2, idx, s);
    for (int64_t e = 0; e < idx.n; ++e) out[e] = c[e] != 0 ? x[e] : y[e];
    return out;
  }
  const float* operator()(const Value::BatchNorm& bn) const {
    float* out = into != nullptr ? into : s->Floats(idx.n);
    const float* p[5];
    for (size_t j = 0; j < 5; ++j) p[j] = EvalInput(values, v, j, idx, s);
    loop_simd::BatchNorm(p[0], p[1], p[2], p[3], p[4], bn.epsilon, out, idx.n);
    return out;
  }
  const float* operator()(const Value::View&) const {
    return Eval(values, v.inputs[0], idx, s, into);
  }
  const float* operator()(const Value::Mapped&) const {
    return EvalMapped(values, v.inputs[0], v.maps[0], v.dims, idx, s, into);
  }
  const float* operator()(const Value::Concat& c) const {
    return EvalConcat(values, v, c, idx, s, into);
  }
  const float* operator()(const Value::Gather& g) const { return EvalGather(values, v, g, idx, s); }
  const float* operator()(const Value::Pad& p) const { return EvalPad(values, v, p, idx, s); }
  const float* operator()(const Value::Trilu& t) const { return EvalTrilu(values, v, t, idx, s); }
  const float* operator()(const Value::Resize& r) const { return EvalResize(values, v, r, idx, s); }
};

// `into`, when set, is where the caller wants the values (idx.n floats): arithmetic values are
// computed straight into it instead of a scratch buffer; other kinds may ignore it, so the caller
// copies when the returned pointer differs.
const float* Eval(const LoopValues& values, TensorId t, const IndexSet& idx, LoopScratch* s,
                  float* into) {
  if (const float* hit = s->Find(t, idx.token)) return hit;
  s->Count(t, idx.n);
  const Value& v = *values.at(t);
  const float* out = std::visit(EvalKind{values, v, idx, s, into}, v.kind);
  s->Put(t, idx.token, out);
  return out;
}

}  // namespace

void FusedLoop::Bind(TensorId t, void* data) {
  auto it = values_.find(t);
  if (it != values_.end()) {
    if (auto* leaf = std::get_if<Value::Leaf>(&it->second->kind)) leaf->data = data;
  }
  if (std::find(outputs_.begin(), outputs_.end(), t) != outputs_.end()) output_data_[t] = data;
}

bool FusedLoop::IsBound() const {
  for (TensorId t : leaves_) {
    if (std::get_if<Value::Leaf>(&values_.at(t)->kind)->data == nullptr) return false;
  }
  return output_data_.size() == outputs_.size();
}

void FusedLoop::RunTile(const std::vector<TensorId>& outs, int64_t total, int64_t begin, int64_t n,
                        LoopScratch* s) const {
  s->Reset();
  IndexSet idx{begin, std::min(n, total - begin), nullptr, s->NewToken()};
  for (TensorId o : outs) {
    void* dst = output_data_.at(o);
    const bool is_int = values_.at(o)->is_int;
    // The last node writes its tile straight into the output (one pass less over the tile); safe
    // with an output aliasing a leaf, as the arithmetic reads element e before writing it.
    float* into = is_int ? nullptr : static_cast<float*>(dst) + idx.begin;
    const float* p = Eval(values_, o, idx, s, into);
    if (is_int) {
      int64_t* d = static_cast<int64_t*>(dst) + idx.begin;
      for (int64_t e = 0; e < idx.n; ++e) d[e] = static_cast<int64_t>(p[e]);
    } else if (p != static_cast<float*>(dst) + idx.begin) {
      std::memmove(static_cast<float*>(dst) + idx.begin, p, idx.n * sizeof(float));
    }
  }
}

void FusedLoop::RunOutputs(const std::vector<TensorId>& outs, int64_t total) const {
  const int64_t tile = LoopTileElements(streams_, total, omp_get_max_threads());
  int64_t tiles = (total + tile - 1) / tile;
  // Waking the thread team costs microseconds (more with passive waiting); one tile is not worth
  // it. Nor is entering a parallel region that will not fork (`if (false)`): libgomp still sets
  // up a team of one, measured at ~2.5 us per call here.
  if (tiles <= 1) {
    LoopScratch s;
    if (tiles == 1) RunTile(outs, total, 0, tile, &s);
    return;
  }
#pragma omp parallel
  {
    LoopScratch s;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < tiles; ++i) RunTile(outs, total, i * tile, tile, &s);
  }
}

std::vector<std::vector<TensorId>> FusedLoop::Passes() const {
  // Outputs with as many elements share one pass over the same flat tiles, so values common to
  // them are computed once: a tile's token stands for the same flat range in every value reached
  // through identity maps, whatever the outputs' dims ([1,128,768] and its unit-dim transpose
  // [128,1,768]); a value reached through any other map gets a token of its own.
  std::vector<std::vector<TensorId>> passes;
  std::vector<bool> done(outputs_.size(), false);
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (done[i]) continue;
    const int64_t total = NumElements(values_.at(outputs_[i])->dims);
    std::vector<TensorId> pass;
    for (size_t j = i; j < outputs_.size(); ++j) {
      if (!done[j] && NumElements(values_.at(outputs_[j])->dims) == total) {
        pass.push_back(outputs_[j]);
        done[j] = true;
      }
    }
    passes.push_back(std::move(pass));
  }
  return passes;
}

void FusedLoop::Run() const {
  for (const auto& pass : Passes()) RunOutputs(pass, NumElements(values_.at(pass[0])->dims));
}

FusedLoop::Observation FusedLoop::Observe(int threads) const {
  Observation seen;
  LoopScratch s;
  for (const auto& pass : Passes()) {
    const int64_t total = NumElements(values_.at(pass[0])->dims);
    const int64_t tile = LoopTileElements(streams_, total, threads);
    const int64_t tiles = (total + tile - 1) / tile;
    // The first tile once more before counting: the values a thread keeps whole are kept then.
    if (tiles > 0) RunTile(pass, total, 0, tile, &s);
    const int64_t before = s.floats_taken();
    s.StartCounting();
    for (int64_t i = 0; i < tiles; ++i) RunTile(pass, total, i * tile, tile, &s);
    seen.tiles += tiles;
    seen.tile_buffers += s.floats_taken() - before;
    for (const auto& [t, n] : s.evaluated()) {
      if (!values_.at(t)->Is<Value::Leaf>()) seen.evaluated[t] += n;
    }
  }
  seen.hoisted = s.hoisted();
  return seen;
}

const float* FusedLoop::EvalRange(TensorId t, int64_t begin, int64_t n, LoopScratch* s) const {
  s->Reset();
  return Eval(values_, t, {begin, n, nullptr, s->NewToken()}, s);
}

std::unique_ptr<LoopScratch, void (*)(LoopScratch*)> FusedLoop::NewScratch() const {
  return {new LoopScratch(), [](LoopScratch* s) { delete s; }};
}

}  // namespace fusor
