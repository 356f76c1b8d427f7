#include "runtime/fused_loop.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include <omp.h>

#include "graph/op_registry.h"
#include "lowering/loop_lowering.h"
#include "runtime/affine_map.h"
#include "runtime/loop_simd.h"
#include "runtime/op_params.h"
#include "runtime/vector_math.h"

namespace fusor {

enum class LoopKind : uint8_t {
  kLeaf,
  kUnary,
  kBinary,
  kWhere,
  kBatchNorm,
  kPass,
  kAffine,
  kConcat,
  kPad,
  kGather,
  kTrilu,
  kResize
};

// Resize along one dim: output coordinate x reads input indices i0[x] and i1[x], blended with
// weights 1 - w[x] and w[x] (nearest: i0 only).
struct ResizeTable {
  std::vector<int64_t> i0, i1;
  std::vector<float> w;
  bool blends = false;  // Some w[x] is not 0.
};

struct FusedLoop::Value {
  LoopKind kind = LoopKind::kLeaf;
  Shape dims;
  bool is_int = false;
  const void* data = nullptr;  // Leaves.
  UnaryOp unary = UnaryOp::kCopy;
  BinaryOp binary = BinaryOp::kAdd;
  float a = 0, b = 0;  // Unary parameters (alpha/beta, clip bounds), BN epsilon, pad value.
  std::vector<TensorId> inputs;
  std::vector<Affine> maps;    // One per input, from this value's index space.
  std::vector<Affine> coords;  // Coordinate extractors (Concat axis, Trilu row/col, Pad dims).
  std::vector<int64_t> offsets, lens, in_dims;  // Concat parts; Pad begins and input dims.
  int64_t k = 0;                                // Trilu diagonal.
  bool upper = true;
  int64_t axis_len = 0, axis_stride = 0;  // Gather and Concat: the axis and its stride.
  PadMode pad_mode = PadMode::kConstant;
  int pads_slot = -1, value_slot = -1;  // Pad: inputs read as the loop runs (computed pads).
  std::vector<ResizeTable> resize;      // Per dim.
  int uses = 0;         // Reads of this value by the loop's nodes (an input listed twice counts 2).
  bool output = false;  // Written out by the loop (or read by EvalRange's callers).
  // Single-pass chains (see TakeChains): the input this value continues the chain through, and
  // whether its own one reader evaluates it inside a chain (so it never has a tile).
  int chain_input = -1;
  bool in_chain = false;
  // The input that reads the first value of this value's chain, kept in registers for it.
  int saved_input = -1;
  // On a chain's head: its values from the first (bottom) to the head, and which input of the
  // first is the chain's source.
  std::vector<const Value*> chain;
  int chain_source = 0;
};

// Per-thread buffers, reset for each tile; a memo keyed by (tensor, index-set token) lets values
// shared by several consumers with the same element indices be computed once per tile.
class LoopScratch {
 public:
  float* Floats(int64_t n) { return Take(&floats_, &used_f_, n); }
  int64_t* Ints(int64_t n) { return Take(&ints_, &used_i_, n); }
  void Reset() {
    used_f_ = used_i_ = 0;
    memo_.clear();
    next_token_ = 0;
  }
  int NewToken() { return next_token_++; }
  const float* Find(TensorId t, int token) const {
    for (const auto& m : memo_) {
      if (m.t == t && m.token == token) return m.p;
    }
    return nullptr;
  }
  void Put(TensorId t, int token, const float* p) { memo_.push_back({t, token, p}); }
  // Whole values kept for the scratch's life (one thread's share of one run), past Reset.
  const float* Hoisted(TensorId t) const {
    for (const auto& [id, data] : hoisted_) {
      if (id == t) return data.data();
    }
    return nullptr;
  }
  const float* Hoist(TensorId t, const float* p, int64_t n) {
    hoisted_.emplace_back(t, std::vector<float>(p, p + n));
    return hoisted_.back().second.data();
  }
  // A stack mark: Release(mark) frees the buffers taken and forgets the values memoized since.
  struct Mark {
    size_t floats, ints, memo;
  };
  Mark Here() const { return {used_f_, used_i_, memo_.size()}; }
  void Release(const Mark& m) {
    used_f_ = m.floats;
    used_i_ = m.ints;
    memo_.resize(m.memo);
  }

 private:
  template <typename T>
  static T* Take(std::vector<std::vector<T>>* pool, size_t* used, int64_t n) {
    if (*used == pool->size()) pool->emplace_back();
    auto& v = (*pool)[(*used)++];
    if (static_cast<int64_t>(v.size()) < n) v.resize(n);
    return v.data();
  }
  struct Memo {
    TensorId t;
    int token;
    const float* p;
  };
  std::vector<std::vector<float>> floats_;
  std::vector<std::vector<int64_t>> ints_;
  size_t used_f_ = 0, used_i_ = 0;
  std::vector<Memo> memo_;
  int next_token_ = 0;
  std::vector<std::pair<TensorId, std::vector<float>>> hoisted_;
};

namespace {

using Value = FusedLoop::Value;
using ValueMap = std::unordered_map<TensorId, std::unique_ptr<Value>>;

const float* Eval(const ValueMap& values, TensorId t, const IndexSet& idx, LoopScratch* s,
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
const float* ReadLeafRuns(const Value& leaf, const Affine& m, const Shape& dims,
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
const Value* ThroughViews(const ValueMap& values, TensorId t) {
  const Value* v = values.at(t).get();
  while (v->kind == LoopKind::kPass) v = values.at(v->inputs[0]).get();
  return v;
}

// Elements per run, at least, for a computed value read through a map to be evaluated run by run.
constexpr int64_t kMinEvaluatedRun = 64;

// A computed value read through a map that keeps runs of at least kMinEvaluatedRun elements in
// order (a slice of whole rows, a transpose that keeps a long innermost dim): evaluated run by run
// as contiguous ranges, each straight into place, as ConcatRuns does. Through an index list every
// element would be re-indexed and the value's inputs gathered (BERT's Add + Slice of the query
// third of each row took 340 us for 393K elements). Returns nullptr when the runs are shorter.
const float* EvalComputedRuns(const ValueMap& values, TensorId t, const Affine& m,
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
const float* EvalMapped(const ValueMap& values, TensorId t, const Affine& m, const Shape& dims,
                        const IndexSet& idx, LoopScratch* s, float* into = nullptr) {
  const Value* leaf = ThroughViews(values, t);
  bool runs = !leaf->is_int && idx.list == nullptr && !m.identity && !m.scalar && !dims.empty();
  if (runs && leaf->kind == LoopKind::kLeaf) return ReadLeafRuns(*leaf, m, dims, idx, s, into);
  if (runs) {
    if (const float* out = EvalComputedRuns(values, t, m, dims, idx, s, into)) return out;
  }
  return Eval(values, t, MapIdx(m, dims, idx, s), s, into);
}

// Evaluates input j of v at the elements `idx` of v's index space.
const float* EvalInput(const ValueMap& values, const Value& v, size_t j, const IndexSet& idx,
                       LoopScratch* s) {
  const Affine& m = v.maps[j];
  if (!m.scalar) return EvalMapped(values, v.inputs[j], m, v.dims, idx, s);
  float x = Eval(values, v.inputs[j], {0, 1, nullptr, s->NewToken()}, s)[0];
  float* out = s->Floats(idx.n);
  std::fill(out, out + idx.n, x);
  return out;
}

const float* EvalLeaf(const Value& v, const IndexSet& idx, LoopScratch* s) {
  if (!v.is_int && idx.list == nullptr) return static_cast<const float*>(v.data) + idx.begin;
  float* out = s->Floats(idx.n);
  for (int64_t e = 0; e < idx.n; ++e) {
    int64_t i = idx.list ? idx.list[e] : idx.begin + e;
    out[e] = v.is_int ? static_cast<float>(static_cast<const int64_t*>(v.data)[i])
                      : static_cast<const float*>(v.data)[i];
  }
  return out;
}

// A contiguous range of a Concat is a few runs, each a contiguous range of one input (a run ends
// where the input's part of an outer index ends): each input is evaluated as a range, straight
// into place when it is computed, copied when it is a leaf. Testing the axis coordinate of every
// element and gathering each input through an index list cost ~2.7 ns per element (SqueezeNet's
// [1,128,55,55] Concat took 1 ms).
const float* ConcatRuns(const ValueMap& values, const Value& v, const IndexSet& idx, LoopScratch* s,
                        float* into) {
  const int64_t inner = v.axis_stride, block = v.axis_len * inner;
  float* out = into != nullptr ? into : s->Floats(idx.n);
  for (int64_t e = 0; e < idx.n;) {
    const int64_t flat = idx.begin + e, outer = flat / block, r = flat % block;
    // The last part starting at or before the axis coordinate (empty parts start where the next
    // one does and are skipped).
    size_t j =
        std::upper_bound(v.offsets.begin(), v.offsets.end(), r / inner) - v.offsets.begin() - 1;
    const int64_t part_begin = v.offsets[j] * inner, part_len = v.lens[j] * inner;
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
const float* EvalConcat(const ValueMap& values, const Value& v, const IndexSet& idx, LoopScratch* s,
                        float* into) {
  if (idx.list == nullptr) return ConcatRuns(values, v, idx, s, into);
  int64_t* axis_coord = s->Ints(idx.n);
  AffineIndices(v.coords[0], v.dims, idx, axis_coord);
  float* out = s->Floats(idx.n);
  int64_t* pos = s->Ints(idx.n);
  int64_t* where = s->Ints(idx.n);
  for (size_t j = 0; j < v.inputs.size(); ++j) {
    int64_t count = 0;
    for (int64_t e = 0; e < idx.n; ++e) {
      if (axis_coord[e] >= v.offsets[j] && axis_coord[e] < v.offsets[j] + v.lens[j])
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
std::vector<int64_t> PadBegins(const ValueMap& values, const Value& v, LoopScratch* s) {
  if (v.pads_slot < 0) return v.offsets;
  int64_t rank = static_cast<int64_t>(v.dims.size());
  const float* pads = Eval(values, v.inputs[v.pads_slot], {0, 2 * rank, nullptr, s->NewToken()}, s);
  return std::vector<int64_t>(pads, pads + rank);
}

const float* EvalPad(const ValueMap& values, const Value& v, const IndexSet& idx, LoopScratch* s) {
  size_t rank = v.dims.size();
  std::vector<int64_t> in_strides = RowMajorStrides(v.in_dims), begin = PadBegins(values, v, s);
  float fill = v.a;
  if (v.value_slot >= 0)
    fill = Eval(values, v.inputs[v.value_slot], {0, 1, nullptr, s->NewToken()}, s)[0];
  int64_t* src = s->Ints(idx.n);
  int64_t* pos = s->Ints(idx.n);
  int64_t* coord = s->Ints(idx.n);
  std::vector<char> inside(idx.n, 1);
  std::fill(src, src + idx.n, 0);
  for (size_t d = 0; d < rank; ++d) {
    AffineIndices(v.coords[d], v.dims, idx, coord);
    for (int64_t e = 0; e < idx.n; ++e) {
      int64_t c = PadSourceIndex(v.pad_mode, coord[e] - begin[d], v.in_dims[d]);
      inside[e] = inside[e] && c >= 0 && c < v.in_dims[d];
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
const float* EvalResize(const ValueMap& values, const Value& v, const IndexSet& idx,
                        LoopScratch* s) {
  std::vector<int64_t> in_strides = RowMajorStrides(v.in_dims);
  int64_t* base = s->Ints(idx.n);
  std::fill(base, base + idx.n, 0);
  std::vector<size_t> blend_dims;
  std::vector<const int64_t*> blend_coords;
  for (size_t d = 0; d < v.dims.size(); ++d) {
    int64_t* coord = s->Ints(idx.n);
    AffineIndices(v.coords[d], v.dims, idx, coord);
    const ResizeTable& t = v.resize[d];
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
      const ResizeTable& t = v.resize[blend_dims[j]];
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

const float* EvalGather(const ValueMap& values, const Value& v, const IndexSet& idx,
                        LoopScratch* s) {
  const float* ind = Eval(values, v.inputs[1], MapIdx(v.maps[1], v.dims, idx, s), s);
  int64_t* src = s->Ints(idx.n);
  AffineIndices(v.maps[0], v.dims, idx, src);
  for (int64_t e = 0; e < idx.n; ++e) {
    int64_t k = static_cast<int64_t>(ind[e]);
    if (k < 0) k += v.axis_len;
    src[e] += std::clamp<int64_t>(k, 0, v.axis_len - 1) * v.axis_stride;
  }
  return Eval(values, v.inputs[0], {0, idx.n, src, s->NewToken()}, s);
}

const float* EvalTrilu(const ValueMap& values, const Value& v, const IndexSet& idx,
                       LoopScratch* s) {
  const float* x = Eval(values, v.inputs[0], idx, s);
  int64_t* row = s->Ints(idx.n);
  int64_t* col = s->Ints(idx.n);
  AffineIndices(v.coords[0], v.dims, idx, row);
  AffineIndices(v.coords[1], v.dims, idx, col);
  float* out = s->Floats(idx.n);
  for (int64_t e = 0; e < idx.n; ++e) {
    int64_t diff = col[e] - row[e];
    out[e] = (v.upper ? diff >= v.k : diff <= v.k) ? x[e] : 0.0f;
  }
  return out;
}

bool IsArith(LoopKind k) {
  return k == LoopKind::kUnary || k == LoopKind::kBinary || k == LoopKind::kWhere ||
         k == LoopKind::kBatchNorm;
}

// The tile `in` of v's input j when v may overwrite it: a scratch buffer only v reads (an
// arithmetic value with one use, not an output) through an identity map; the kernels read element
// e before writing it. Reuse keeps a chain in one buffer, so it stays in L1 whatever its length.
float* Reusable(const ValueMap& values, const Value& v, size_t j, const float* in) {
  const Value& u = *values.at(v.inputs[j]);
  bool mine = v.maps[j].identity && IsArith(u.kind) && u.uses == 1 && !u.output && !u.is_int;
  return mine ? const_cast<float*>(in) : nullptr;
}

// Where v's tile goes: `into` when the caller gave one, else input j's tile when reusable, else a
// new scratch buffer.
float* OutputTile(const ValueMap& values, const Value& v, size_t j, const float* in, float* into,
                  const IndexSet& idx, LoopScratch* s) {
  if (into != nullptr) return into;
  if (float* reuse = Reusable(values, v, j, in)) return reuse;
  return s->Floats(idx.n);
}

// Input j of v for a contiguous range read run by run, when its map steps by 0 or 1 along the
// runs (a broadcast): a float leaf (or views of one) in place; a computed value of at most the
// range's elements (layer norm's Sqrt of the variance, one per row; squeeze-and-excite's
// Sigmoid, one per channel) evaluated whole once per scratch, that is once per thread and run,
// and kept; a larger one evaluated over the span of its elements the range reads, when that span
// is at most a quarter of the range. Either instead of once per element of v through an index
// list. Evaluating the squeeze-and-excite gate again in every tile made the fused Sigmoid+Mul
// over 1x32x112x112 take 35 us against 29 us for the Mul alone; evaluating it span by span, not
// whole, took 1x1152x7x7 16 us against 12 (AVX-512 EPYC, side by side). Returns the
// elements and sets `first` to the flat index of the first; nullptr when the input is not read
// this way.
const float* StreamedOperand(const ValueMap& values, const Value& v, size_t j, const IndexSet& idx,
                             LoopScratch* s, int64_t* first) {
  const Affine& m = v.maps[j];
  if (idx.list != nullptr || m.identity || m.scalar || v.dims.empty()) return nullptr;
  int64_t step = RunStep(m, v.dims);
  if (step != 0 && step != 1) return nullptr;
  const Value* u = ThroughViews(values, v.inputs[j]);
  if (u->is_int) return nullptr;
  *first = 0;
  if (u->kind == LoopKind::kLeaf) return static_cast<const float*>(u->data);
  const int64_t whole = NumElements(u->dims);
  if (whole <= idx.n) {
    if (const float* kept = s->Hoisted(v.inputs[j])) return kept;
    return s->Hoist(v.inputs[j], Eval(values, v.inputs[j], {0, whole, nullptr, s->NewToken()}, s),
                    whole);
  }
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = -1;
  ForEachRun(m, v.dims, idx.begin, idx.n, [&](int64_t, int64_t off, int64_t run, int64_t st) {
    lo = std::min(lo, off);
    hi = std::max(hi, off + (run - 1) * st);
  });
  if (hi < lo || 4 * (hi - lo + 1) > idx.n) return nullptr;
  *first = lo;
  return Eval(values, v.inputs[j], {lo, hi - lo + 1, nullptr, s->NewToken()}, s);
}

const float* EvalBinary(const ValueMap& values, const Value& v, const IndexSet& idx, LoopScratch* s,
                        float* into) {
  for (size_t j = 0; j < 2; ++j) {
    if (!v.maps[j].scalar || v.maps[1 - j].scalar) continue;
    float c = Eval(values, v.inputs[j], {0, 1, nullptr, s->NewToken()}, s)[0];
    const float* x = EvalInput(values, v, 1 - j, idx, s);
    float* out = OutputTile(values, v, 1 - j, x, into, idx, s);
    loop_simd::BinaryScalar(v.binary, x, c, j == 0, out, idx.n);
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
                   loop_simd::BinaryScalar(v.binary, x + e, src[off], j == 0, out + e, run);
                 } else if (j == 1) {
                   loop_simd::Binary(v.binary, x + e, src + off, out + e, run);
                 } else {
                   loop_simd::Binary(v.binary, src + off, x + e, out + e, run);
                 }
               });
    return out;
  }
  const float* x = EvalInput(values, v, 0, idx, s);
  const float* y = EvalInput(values, v, 1, idx, s);
  float* out = into != nullptr ? into : Reusable(values, v, 0, x);
  if (out == nullptr) out = OutputTile(values, v, 1, y, nullptr, idx, s);
  loop_simd::Binary(v.binary, x, y, out, idx.n);
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

ChainInput ChainSideOf(const ValueMap& values, const Value& w, size_t j, const IndexSet& idx,
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
const float* EvalChain(const ValueMap& values, const Value& head, const IndexSet& idx,
                       LoopScratch* s, float* into) {
  const int k = static_cast<int>(head.chain.size());
  const Value& first = *head.chain[0];
  const size_t src_j = head.chain_source;
  const float* src = EvalInput(values, first, src_j, idx, s);
  loop_simd::ChainOp ops[kMaxChain];
  ChainInput sides[kMaxChain];
  for (int i = 0; i < k; ++i) {
    const Value& w = *head.chain[i];
    ops[i].unary = w.kind == LoopKind::kUnary;
    ops[i].u = w.unary;
    ops[i].b = w.binary;
    ops[i].p = w.a;
    ops[i].q = w.b;
    if (ops[i].unary) continue;
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

const float* EvalArith(const ValueMap& values, const Value& v, const IndexSet& idx, LoopScratch* s,
                       float* into) {
  if (idx.list == nullptr && v.chain_input >= 0) return EvalChain(values, v, idx, s, into);
  switch (v.kind) {
    case LoopKind::kUnary: {
      const float* x = EvalInput(values, v, 0, idx, s);
      float* out = OutputTile(values, v, 0, x, into, idx, s);
      loop_simd::Unary(v.unary, v.a, v.b, x, out, idx.n);
      return out;
    }
    case LoopKind::kBinary:
      return EvalBinary(values, v, idx, s, into);
    case LoopKind::kWhere: {
      float* out = into != nullptr ? into : s->Floats(idx.n);
      const float* c = EvalInput(values, v, 0, idx, s);
      const float* x = EvalInput(values, v, 1, idx, s);
      const float* y = EvalInput(values, v, 2, idx, s);
      for (int64_t e = 0; e < idx.n; ++e) out[e] = c[e] != 0 ? x[e] : y[e];
      return out;
    }
    default: {  // kBatchNorm
      float* out = into != nullptr ? into : s->Floats(idx.n);
      const float* p[5];
      for (size_t j = 0; j < 5; ++j) p[j] = EvalInput(values, v, j, idx, s);
      loop_simd::BatchNorm(p[0], p[1], p[2], p[3], p[4], v.a, out, idx.n);
      return out;
    }
  }
}

// `into`, when set, is where the caller wants the values (idx.n floats): arithmetic values are
// computed straight into it instead of a scratch buffer; other kinds may ignore it, so the caller
// copies when the returned pointer differs.
const float* Eval(const ValueMap& values, TensorId t, const IndexSet& idx, LoopScratch* s,
                  float* into) {
  if (const float* hit = s->Find(t, idx.token)) return hit;
  const Value& v = *values.at(t);
  const float* out = nullptr;
  switch (v.kind) {
    case LoopKind::kLeaf:
      out = EvalLeaf(v, idx, s);
      break;
    case LoopKind::kPass:
      out = Eval(values, v.inputs[0], idx, s, into);
      break;
    case LoopKind::kAffine:
      out = EvalMapped(values, v.inputs[0], v.maps[0], v.dims, idx, s, into);
      break;
    case LoopKind::kConcat:
      out = EvalConcat(values, v, idx, s, into);
      break;
    case LoopKind::kPad:
      out = EvalPad(values, v, idx, s);
      break;
    case LoopKind::kGather:
      out = EvalGather(values, v, idx, s);
      break;
    case LoopKind::kTrilu:
      out = EvalTrilu(values, v, idx, s);
      break;
    case LoopKind::kResize:
      out = EvalResize(values, v, idx, s);
      break;
    default:
      out = EvalArith(values, v, idx, s, into);
      break;
  }
  s->Put(t, idx.token, out);
  return out;
}

// Whether the compiled value v can be a step of a chain: float arithmetic the chain kernel has
// (Log, integer casts, Pow and truncating division stay tile kernels). The lowering decides which
// values chain; this is what the compiled loop can run, checked against it.
bool Chains(const Value& v) {
  if (v.is_int) return false;
  if (v.kind == LoopKind::kUnary) {
    return v.unary != UnaryOp::kLog && v.unary != UnaryOp::kTrunc && v.unary != UnaryOp::kBool;
  }
  return v.kind == LoopKind::kBinary && v.binary != BinaryOp::kPow &&
         v.binary != BinaryOp::kDivTrunc;
}

// Whether input `slot` of v is one a chain step reads in registers: an input v has, at v's own
// elements.
bool ReadsInStep(const Value& v, int slot) {
  return slot < 0 || (static_cast<size_t>(slot) < v.inputs.size() && v.maps[slot].identity);
}

// Takes the single-pass chains of the lowering (lowering/loop_lowering.h) into the compiled values:
// each head gets its values from the first to itself. A chain the compiled values cannot run is
// an error naming the value: the lowering and the compiler disagree.
Status TakeChains(const Graph& g, const LoopLowering& lowered, ValueMap* values) {
  for (const auto& [t, lv] : lowered.values) {
    if (lv.chain_head == kNoId) continue;
    Value& v = *values->at(t);
    if (!Chains(v) || !ReadsInStep(v, lv.chain_input) || !ReadsInStep(v, lv.saved_input)) {
      return Status::Internal("fused loop: the lowering chains '" + g.tensor(t).name +
                              "', which the compiled loop cannot run as a chain step");
    }
    v.chain_input = lv.chain_input;
    v.saved_input = lv.saved_input;
    v.in_chain = lv.chained;
  }
  for (const auto& [t, lv] : lowered.values) {
    if (lv.chain_head != t) continue;
    Value& head = *values->at(t);
    for (const Value* w = &head;; w = values->at(w->inputs[w->chain_input]).get()) {
      head.chain.push_back(w);
      if (w->chain_input < 0) break;
    }
    std::reverse(head.chain.begin(), head.chain.end());
    head.chain_source = lv.chain_source;
    if (head.chain.size() > static_cast<size_t>(kMaxChain) ||
        static_cast<size_t>(head.chain_source) >= head.chain[0]->inputs.size()) {
      return Status::Internal("fused loop: the lowering's chain ending at '" + g.tensor(t).name +
                              "' does not fit the chain kernel");
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Compiling nodes into values

bool KnownScalar(const FusedLoop::Lookup& known, TensorId t, float* value) {
  const HostTensor* h = t == kNoId ? nullptr : known(t);
  if (h == nullptr || h->num_elements() != 1) return false;
  *value = static_cast<float>(h->at(0));
  return true;
}

Status CompileUnary(const Graph& g, const Node& n, const FusedLoop::Lookup& known, Value* v) {
  static const std::pair<const char*, UnaryOp> kOps[] = {{"Relu", UnaryOp::kRelu},
                                                         {"LeakyRelu", UnaryOp::kLeakyRelu},
                                                         {"Sigmoid", UnaryOp::kSigmoid},
                                                         {"Tanh", UnaryOp::kTanh},
                                                         {"Exp", UnaryOp::kExp},
                                                         {"Log", UnaryOp::kLog},
                                                         {"Sqrt", UnaryOp::kSqrt},
                                                         {"Erf", UnaryOp::kErf},
                                                         {"HardSigmoid", UnaryOp::kHardSigmoid},
                                                         {"HardSwish", UnaryOp::kHardSwish},
                                                         {"Clip", UnaryOp::kClip}};
  v->kind = LoopKind::kUnary;
  v->inputs = {n.inputs[0]};
  v->maps = {BroadcastMap(g.tensor(n.inputs[0]).dims, v->dims)};
  if (n.op_type == "Cast") {
    bool to_int = !IsFloatingPoint(g.tensor(n.outputs[0]).dtype);
    v->unary = g.tensor(n.outputs[0]).dtype == DType::kBool ? UnaryOp::kBool
               : to_int                                     ? UnaryOp::kTrunc
                                                            : UnaryOp::kCopy;
    return Status::Ok();
  }
  for (const auto& [name, op] : kOps) {
    if (n.op_type == name) v->unary = op;
  }
  v->a = static_cast<float>(n.GetFloat("alpha", n.op_type == "LeakyRelu" ? 0.01 : 0.2));
  v->b = static_cast<float>(n.GetFloat("beta", 0.5));
  if (n.op_type == "Clip") {
    FUSOR_ASSIGN_OR_RETURN(auto bounds, ClipBounds(g, n, known));
    v->a = bounds.first;
    v->b = bounds.second;
  }
  return Status::Ok();
}

Status CompileBinary(const Graph& g, const Node& n, const FusedLoop::Lookup& known, Value* v) {
  static const std::pair<const char*, BinaryOp> kOps[] = {{"Add", BinaryOp::kAdd},
                                                          {"Sub", BinaryOp::kSub},
                                                          {"Mul", BinaryOp::kMul},
                                                          {"Div", BinaryOp::kDiv},
                                                          {"Pow", BinaryOp::kPow}};
  float exponent = 0;
  if (n.op_type == "Pow" && KnownScalar(known, n.input(1), &exponent) &&
      (exponent == 2.0f || exponent == 0.5f || exponent == 1.0f)) {
    // x^2, sqrt and identity are the common exponents; powf does not vectorise.
    v->kind = LoopKind::kUnary;
    v->unary = exponent == 2.0f   ? UnaryOp::kSquare
               : exponent == 0.5f ? UnaryOp::kSqrt
                                  : UnaryOp::kCopy;
    v->inputs = {n.inputs[0]};
    v->maps = {BroadcastMap(g.tensor(n.inputs[0]).dims, v->dims)};
    return Status::Ok();
  }
  v->kind = n.op_type == "Where" ? LoopKind::kWhere : LoopKind::kBinary;
  for (const auto& [name, op] : kOps) {
    if (n.op_type == name) v->binary = op;
  }
  if (v->binary == BinaryOp::kDiv && v->is_int) v->binary = BinaryOp::kDivTrunc;
  for (TensorId in : n.inputs) {
    v->inputs.push_back(in);
    v->maps.push_back(BroadcastMap(g.tensor(in).dims, v->dims));
  }
  return Status::Ok();
}

Status CompileBatchNorm(const Graph& g, const Node& n, Value* v) {
  v->kind = LoopKind::kBatchNorm;
  v->a = static_cast<float>(n.GetFloat("epsilon", 1e-5));
  v->inputs = {n.inputs.begin(), n.inputs.begin() + 5};
  v->maps = {BroadcastMap(g.tensor(n.inputs[0]).dims, v->dims)};
  for (size_t j = 1; j < 5; ++j) v->maps.push_back(CoordMap(v->dims.size(), 1));
  return Status::Ok();
}

Status CompileSliceLike(const Graph& g, const Node& n, size_t output, Value* v) {
  const Shape& in = g.tensor(n.inputs[0]).dims;
  std::vector<int64_t> strides = RowMajorStrides(in), coef(in.size());
  int64_t base = 0;
  v->kind = LoopKind::kAffine;
  v->inputs = {n.inputs[0]};
  if (n.op_type == "Transpose") {
    std::vector<int64_t> perm = TransposePerm(g, n);
    for (size_t d = 0; d < perm.size(); ++d) coef[d] = strides[perm[d]];
  } else if (n.op_type == "Slice") {
    FUSOR_ASSIGN_OR_RETURN(SliceParams p, SliceOf(g, n));
    for (size_t d = 0; d < in.size(); ++d) {
      base += p.start[d] * strides[d];
      coef[d] = p.step[d] * strides[d];
    }
  } else {  // Split
    int64_t axis = NormalizeAxis(n.GetInt("axis", 0), in.size());
    for (size_t j = 0; j < output; ++j) base += g.tensor(n.outputs[j]).dims[axis] * strides[axis];
    coef = strides;
  }
  v->maps = {StridedMap(coef, base, in, v->dims)};
  // A transpose that moves only dims of size 1 reads its input at the same flat indices: handed on
  // like a view, so the value it reads can be computed straight into its output
  // (LoopLowering::streams).
  if (n.op_type == "Transpose" && v->maps[0].identity) {
    v->kind = LoopKind::kPass;
    v->maps.clear();
  }
  return Status::Ok();
}

Status CompileConcat(const Graph& g, const Node& n, Value* v) {
  int64_t axis = NormalizeAxis(n.GetInt("axis", 0), v->dims.size());
  v->kind = LoopKind::kConcat;
  v->coords = {CoordMap(v->dims.size(), axis)};
  v->axis_len = v->dims[axis];
  v->axis_stride = RowMajorStrides(v->dims)[axis];
  int64_t offset = 0;
  for (TensorId in : n.inputs) {
    const Shape& d = g.tensor(in).dims;
    Affine m;
    m.coef = RowMajorStrides(d);
    m.base = -offset * m.coef[axis];
    v->inputs.push_back(in);
    v->maps.push_back(m);
    v->offsets.push_back(offset);
    v->lens.push_back(d[axis]);
    offset += d[axis];
  }
  return Status::Ok();
}

Status CompileGather(const Graph& g, const Node& n, Value* v) {
  const Shape& data = g.tensor(n.inputs[0]).dims;
  const Shape& ind = g.tensor(n.inputs[1]).dims;
  int64_t axis = NormalizeAxis(n.GetInt("axis", 0), data.size());
  if (data[axis] > (int64_t{1} << 24)) {
    return Status::Unimplemented(NodeLabel(n) + ": gathered axis longer than 2^24");
  }
  std::vector<int64_t> ds = RowMajorStrides(data), is = RowMajorStrides(ind);
  int64_t ri = static_cast<int64_t>(ind.size());
  Affine base, pos;
  base.coef.assign(v->dims.size(), 0);
  pos.coef.assign(v->dims.size(), 0);
  for (int64_t d = 0; d < static_cast<int64_t>(v->dims.size()); ++d) {
    if (d < axis) base.coef[d] = ds[d];
    if (d >= axis && d < axis + ri) pos.coef[d] = is[d - axis];
    if (d >= axis + ri) base.coef[d] = ds[d - ri + 1];
  }
  v->kind = LoopKind::kGather;
  v->inputs = {n.inputs[0], n.inputs[1]};
  v->maps = {base, pos};
  v->axis_len = data[axis];
  v->axis_stride = ds[axis];
  return Status::Ok();
}

// One coordinate extractor per dim of v.
void AddCoordMaps(Value* v) {
  for (size_t d = 0; d < v->dims.size(); ++d) v->coords.push_back(CoordMap(v->dims.size(), d));
}

Status CompilePad(const Graph& g, const Node& n, const FusedLoop::Lookup& known, Value* v) {
  FUSOR_ASSIGN_OR_RETURN(PadParams p, PadOf(g, n, known));
  v->kind = LoopKind::kPad;
  v->pad_mode = p.mode;
  v->inputs = {n.inputs[0]};
  if (p.pads_input != kNoId) {
    v->pads_slot = static_cast<int>(v->inputs.size());
    v->inputs.push_back(p.pads_input);
  }
  if (p.value_input != kNoId) {
    v->value_slot = static_cast<int>(v->inputs.size());
    v->inputs.push_back(p.value_input);
  }
  v->offsets = p.begin;
  v->in_dims = g.tensor(n.inputs[0]).dims;
  v->a = p.value;
  AddCoordMaps(v);
  return Status::Ok();
}

Status CompileResize(const Graph& g, const Node& n, Value* v) {
  FUSOR_ASSIGN_OR_RETURN(ResizeParams p, ResizeOf(g, n));
  v->kind = LoopKind::kResize;
  v->inputs = {n.inputs[0]};
  v->in_dims = p.in;
  AddCoordMaps(v);
  for (size_t d = 0; d < p.out.size(); ++d) {
    ResizeTable t;
    for (int64_t x = 0; x < p.out[d]; ++x) {
      ResizeTap tap = ResizeTapOf(p, d, x);
      t.i0.push_back(tap.i0);
      t.i1.push_back(tap.i1);
      t.w.push_back(static_cast<float>(tap.w));
      t.blends = t.blends || tap.w != 0;
    }
    v->resize.push_back(std::move(t));
  }
  return Status::Ok();
}

Status CompileTrilu(const Graph& g, const Node& n, Value* v) {
  v->kind = LoopKind::kTrilu;
  v->inputs = {n.inputs[0]};
  v->maps = {BroadcastMap(v->dims, v->dims)};
  size_t r = v->dims.size();
  v->coords = {CoordMap(r, r - 2), CoordMap(r, r - 1)};
  v->upper = n.GetInt("upper", 1) != 0;
  if (n.input(1) != kNoId) {
    FUSOR_ASSIGN_OR_RETURN(std::vector<int64_t> k, ConstantInts(g, n, 1));
    v->k = k.empty() ? 0 : k[0];
  }
  return Status::Ok();
}

bool IsUnaryOp(const std::string& op) {
  static const char* kOps[] = {"Relu", "LeakyRelu", "Sigmoid",     "Tanh",      "Exp",  "Log",
                               "Sqrt", "Erf",       "HardSigmoid", "HardSwish", "Clip", "Cast"};
  return std::any_of(std::begin(kOps), std::end(kOps), [&](const char* o) { return op == o; });
}

Status CompileValue(const Graph& g, const Node& n, size_t output, const FusedLoop::Lookup& known,
                    Value* v) {
  const std::string& op = n.op_type;
  if (IsUnaryOp(op)) return CompileUnary(g, n, known, v);
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" || op == "Where") {
    return CompileBinary(g, n, known, v);
  }
  if (op == "BatchNormalization") return CompileBatchNorm(g, n, v);
  if (IsViewOp(op)) {
    v->kind = LoopKind::kPass;
    v->inputs = {n.inputs[0]};
    return Status::Ok();
  }
  if (op == "Expand") {
    v->kind = LoopKind::kAffine;
    v->inputs = {n.inputs[0]};
    v->maps = {BroadcastMap(g.tensor(n.inputs[0]).dims, v->dims)};
    if (v->maps[0].scalar)
      v->maps[0] = StridedMap(std::vector<int64_t>(v->dims.size(), 0), 0, {}, v->dims);
    return Status::Ok();
  }
  if (op == "Transpose" || op == "Slice" || op == "Split") return CompileSliceLike(g, n, output, v);
  if (op == "Concat") return CompileConcat(g, n, v);
  if (op == "Gather") return CompileGather(g, n, v);
  if (op == "Pad") return CompilePad(g, n, known, v);
  if (op == "Trilu") return CompileTrilu(g, n, v);
  if (op == "Resize") return CompileResize(g, n, v);
  return Status::Unimplemented(NodeLabel(n) + ": op cannot run in a fused loop");
}

}  // namespace

FusedLoop::~FusedLoop() = default;

Status FusedLoop::AddNode(const Graph& g, const Node& n, const Lookup& known) {
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    const Tensor& t = g.tensor(n.outputs[o]);
    if (!IsSupportedDType(t.dtype)) {
      return Status::Unimplemented(NodeLabel(n) + ": output dtype " +
                                   std::string(DTypeName(t.dtype)) + " is not supported");
    }
    auto v = std::make_unique<Value>();
    v->dims = t.dims;
    v->is_int = !IsFloatingPoint(t.dtype);
    FUSOR_RETURN_IF_ERROR(CompileValue(g, n, o, known, v.get()));
    values_[n.outputs[o]] = std::move(v);
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<FusedLoop>> FusedLoop::Build(const Graph& g,
                                                      const std::vector<NodeId>& nodes,
                                                      const std::vector<TensorId>& outputs,
                                                      const Lookup& known, Tiles tiles) {
  std::unique_ptr<FusedLoop> loop(new FusedLoop());
  loop->outputs_ = outputs;
  for (NodeId id : nodes) FUSOR_RETURN_IF_ERROR(loop->AddNode(g, g.node(id), known));
  // Leaves are the tensors the compiled values read, not every node input: parameters decoded at
  // Build (Clip bounds, pads, Resize scales) are not bound or read as the loop runs.
  std::vector<TensorId> read;
  for (const auto& [t, v] : loop->values_)
    read.insert(read.end(), v->inputs.begin(), v->inputs.end());
  std::sort(read.begin(), read.end());
  read.erase(std::unique(read.begin(), read.end()), read.end());
  for (TensorId in : read) {
    if (in == kNoId || loop->values_.count(in)) continue;
    const Tensor& t = g.tensor(in);
    auto v = std::make_unique<Value>();
    v->dims = t.dims;
    v->is_int = !IsFloatingPoint(t.dtype);
    loop->values_[in] = std::move(v);
    loop->leaves_.push_back(in);
  }
  for (TensorId t : outputs) {
    if (!loop->values_.count(t) || loop->values_.at(t)->kind == LoopKind::kLeaf) {
      return Status::InvalidArgument("fused loop output '" + g.tensor(t).name +
                                     "' is not computed by the loop's nodes");
    }
    loop->values_.at(t)->output = true;
  }
  for (const auto& [t, v] : loop->values_) {
    for (TensorId in : v->inputs) {
      if (in != kNoId) ++loop->values_.at(in)->uses;
    }
  }
  const LoopLowering lowered = LowerLoop(g, nodes, outputs);
  FUSOR_RETURN_IF_ERROR(TakeChains(g, lowered, &loop->values_));
  loop->streams_ = tiles == Tiles::kLongerWhenStreaming && lowered.streams;
  return loop;
}

void FusedLoop::Bind(TensorId t, void* data) {
  auto it = values_.find(t);
  if (it != values_.end() && it->second->kind == LoopKind::kLeaf) it->second->data = data;
  if (std::find(outputs_.begin(), outputs_.end(), t) != outputs_.end()) output_data_[t] = data;
}

int FusedLoop::chained_values() const {
  int n = 0;
  for (const auto& [t, v] : values_) n += v->in_chain ? 1 : 0;
  return n;
}

LoopValue FusedLoop::Lowered(TensorId t) const {
  LoopValue out;
  const Value& v = *values_.at(t);
  switch (v.kind) {
    case LoopKind::kPass:
      out.kind = LoopValueKind::kView;
      break;
    case LoopKind::kUnary:
      out.kind = LoopValueKind::kUnary;
      break;
    case LoopKind::kBinary:
      out.kind = LoopValueKind::kBinary;
      break;
    default:
      out.kind = LoopValueKind::kOther;
      break;
  }
  out.chain_input = v.chain_input;
  out.saved_input = v.saved_input;
  out.chained = v.in_chain;
  return out;
}

bool FusedLoop::IsBound() const {
  for (TensorId t : leaves_) {
    if (values_.at(t)->data == nullptr) return false;
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

void FusedLoop::Run() const {
  // Outputs with as many elements share one pass over the same flat tiles, so values common to
  // them are computed once: a tile's token stands for the same flat range in every value reached
  // through identity maps, whatever the outputs' dims ([1,128,768] and its unit-dim transpose
  // [128,1,768]); a value reached through any other map gets a token of its own.
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
    RunOutputs(pass, total);
  }
}

const float* FusedLoop::EvalRange(TensorId t, int64_t begin, int64_t n, LoopScratch* s) const {
  s->Reset();
  return Eval(values_, t, {begin, n, nullptr, s->NewToken()}, s);
}

std::unique_ptr<LoopScratch, void (*)(LoopScratch*)> FusedLoop::NewScratch() const {
  return {new LoopScratch(), [](LoopScratch* s) { delete s; }};
}

}  // namespace fusor
