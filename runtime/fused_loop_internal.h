// The private types of FusedLoop (runtime/fused_loop.h), shared by its two halves: compiling graph
// nodes into values (fused_loop_compile.cc) and evaluating them tile by tile
// (fused_loop_eval.cc). A Value holds what every kind has (dims, inputs and the maps they are read
// through, uses, chain marks) and one struct of its kind's own fields in a std::variant; the
// evaluator dispatches on it once per value and tile, never per element.
//
// Ownership: a FusedLoop owns its values; a chain head's `chain` points at values of the same loop.
// LoopScratch belongs to one thread. Not a public header: only the fused loop's files include it.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "graph/graph.h"
#include "lowering/loop_program.h"
#include "runtime/affine_map.h"
#include "runtime/fused_loop.h"
#include "runtime/loop_simd.h"
#include "runtime/op_params.h"

namespace fusor {

// The kinds of a loop value, each with its own fields. At namespace scope, not nested in Value:
// a struct with default member initializers is not default-constructible inside the class that
// encloses it until that class is complete, which the std::variant member needs.
namespace loop_value {

// A tensor produced outside the loop, read from the memory bound to it (null until Bind).
struct Leaf {
  const void* data = nullptr;
};
// op(x) with parameters a, b (alpha / beta, clip bounds).
struct Unary {
  UnaryOp op = UnaryOp::kCopy;
  float a = 0, b = 0;
};
struct Binary {
  BinaryOp op = BinaryOp::kAdd;
};
// Where(condition, x, y).
struct Where {};
// BatchNormalization: inputs x, scale, bias, mean, var, the last four read per channel.
struct BatchNorm {
  float epsilon = 0;
};
// Reads its one input at the same flat indices: Reshape and the other views, and a Transpose
// that moves only dims of size 1.
struct View {};
// Reads its one input through maps[0]: a LoopValueKind::kMapped (lowering/loop_lowering.h).
struct Mapped {};
// Input j holds the axis coordinates [offsets[j], offsets[j] + lens[j]).
struct Concat {
  Affine axis_coord;  // The axis coordinate of an element.
  std::vector<int64_t> offsets, lens;
  int64_t axis_len = 0, axis_stride = 0;
};
// Input 0 is the data, input 1 the indices, both read through their maps; an index moves the
// data's flat index by axis_stride per step along an axis of axis_len.
struct Gather {
  int64_t axis_len = 0, axis_stride = 0;
  bool copies_blocks = false;  // GatherCopiesBlocks: a range is copied block by block.
};
// Pads input 0 of dims in_dims by `begin` at the start of each dim. Pads or the constant computed
// at run time are inputs (pads_slot, value_slot), read as the loop runs.
struct Pad {
  PadMode mode = PadMode::kConstant;
  std::vector<int64_t> begin;
  Shape in_dims;
  float value = 0;
  int pads_slot = -1, value_slot = -1;
  std::vector<Affine> coords;  // One coordinate extractor per dim.
};
// Keeps the elements on one side of diagonal k of the last two dims (row, col).
struct Trilu {
  Affine row, col;
  int64_t k = 0;
  bool upper = true;
};
// Resize along one dim: output coordinate x reads input indices i0[x] and i1[x], blended with
// weights 1 - w[x] and w[x] (nearest: i0 only).
struct ResizeTable {
  std::vector<int64_t> i0, i1;
  std::vector<float> w;
  bool blends = false;  // Some w[x] is not 0.
};
struct Resize {
  Shape in_dims;
  std::vector<Affine> coords;       // One coordinate extractor per dim.
  std::vector<ResizeTable> tables;  // Per dim.
};

}  // namespace loop_value

struct FusedLoop::Value {
  using Leaf = loop_value::Leaf;
  using Unary = loop_value::Unary;
  using Binary = loop_value::Binary;
  using Where = loop_value::Where;
  using BatchNorm = loop_value::BatchNorm;
  using View = loop_value::View;
  using Mapped = loop_value::Mapped;
  using Concat = loop_value::Concat;
  using Gather = loop_value::Gather;
  using Pad = loop_value::Pad;
  using Trilu = loop_value::Trilu;
  using ResizeTable = loop_value::ResizeTable;
  using Resize = loop_value::Resize;
  using Kind = std::variant<Leaf, Unary, Binary, Where, BatchNorm, View, Mapped, Concat, Gather,
                            Pad, Trilu, Resize>;

  Kind kind;  // A Leaf until compiled.
  TensorId tensor = kNoId;
  Shape dims;
  bool is_int = false;
  std::vector<TensorId> inputs;
  std::vector<Affine> maps;  // Per operand of the program's step, from this value's index space.
  std::vector<OperandRead> reads;  // Per operand of the step: how it is read (loop_program.h).
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

  template <typename K>
  bool Is() const {
    return std::holds_alternative<K>(kind);
  }
};

using LoopValues = std::unordered_map<TensorId, std::unique_ptr<FusedLoop::Value>>;

// Per-thread buffers, reset for each tile; a memo keyed by (tensor, index-set token) lets values
// shared by several consumers with the same element indices be computed once per tile.
class LoopScratch {
 public:
  float* Floats(int64_t n) {
    ++floats_taken_;
    return Take(&floats_, &used_f_, n);
  }
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
  // While counting (FusedLoop::Observe): the elements each value is evaluated at, memo hits not
  // counted, a chain's values each over the chain's range.
  void StartCounting() {
    counting_ = true;
    evaluated_.clear();
  }
  void Count(TensorId t, int64_t n) {
    if (counting_) evaluated_[t] += n;
  }
  const std::unordered_map<TensorId, int64_t>& evaluated() const { return evaluated_; }
  // Float buffers taken over the scratch's life, and the values kept whole: what
  // FusedLoop::Observe reports.
  int64_t floats_taken() const { return floats_taken_; }
  std::vector<TensorId> hoisted() const {
    std::vector<TensorId> ids;
    for (const auto& [id, data] : hoisted_) ids.push_back(id);
    return ids;
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
  int64_t floats_taken_ = 0;
  bool counting_ = false;
  std::unordered_map<TensorId, int64_t> evaluated_;
  std::vector<std::pair<TensorId, std::vector<float>>> hoisted_;
};

}  // namespace fusor
