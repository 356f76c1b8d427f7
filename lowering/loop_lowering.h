// LoopLowering: what a set of elementwise, broadcast and injective nodes becomes as one of our
// fused loops (runtime/fused_loop.h), decided once from the graph and read by both the runtime
// (which compiles the loop from it) and the cost model (which prices it).
//
// Single-pass chains: a float unary or binary value that only one arithmetic value of the loop
// reads, at the same elements, and that is not an output, is computed inside its reader's chain
// (blocks of vectors carried through every step in registers) and gets no tile. Each chainable
// value links to the first of its inputs that qualifies; chains are cut every kMaxChain values. A
// chain's source that only the chain's own steps read, at the same elements, joins the chain as
// its first value (kept in registers for the steps that read it again) when it heads no chain of
// its own and the chain has room.
//
// Streaming: a loop streams (no tile takes a buffer, so it walks longer tiles) when every value
// it computes per tile is float unary or binary arithmetic (or a view) carried inside a chain or
// written straight into an output nothing in the loop reads, and each operand outside a chain's
// own link is a leaf read in place at the same elements, a scalar, or a streamed broadcast operand.
// Values evaluated once per thread (computed broadcast operands of at most a tile that binary
// values read only as streamed operands, values of one element, and what only those read) are
// not computed per tile and do not stop a loop from streaming.
//
// Plain data; LowerLoop is a pure function of the graph and its arguments, thread-safe.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "lowering/affine_map.h"

namespace fusor {

// Values in one single-pass chain, at most: the chain kernel's per-step arrays are this long.
inline constexpr int kMaxChain = 16;

// Elements per run, at least, for the fused loop to read a value in runs rather than through an
// index list: a computed value read through a map that keeps runs this long in order is evaluated
// run by run (a range per run), and a Gather whose gathered blocks (its data's dims after the axis)
// are this long copies each block as a range (an embedding lookup's rows). Both the runtime's
// evaluation and the cost model's account of it take this one number.
inline constexpr int64_t kMinEvaluatedRun = 64;

// Whether the fused loop copies a range of Gather `n`'s output block by block (a contiguous range
// of the data per index, read once per block) rather than element by element through an index
// list: a float Gather, not one slice (GatherSliceIndex, graph/node_attrs.h), whose blocks (the
// data dims after the axis) are at least kMinEvaluatedRun long. Index lists asked of it still go
// element by element.
bool GatherCopiesBlocks(const Graph& g, const Node& n);

// How a binary value of the loop reads a broadcast operand (one its map reads in runs stepping by 0
// or 1) over a contiguous range of `range` elements: a leaf in place, run by run; a computed value
// of `whole` elements evaluated whole once per thread and kept, when it fits the range (layer
// norm's per-row divisor, a squeeze-and-excite gate); else evaluated over the `span` of its
// elements the range reads, when that is at most a quarter of the range; else not streamed
// (evaluated at an index list into a tile). Evaluating the gate again in every tile made a fused
// Sigmoid+Mul over 1x32x112x112 take 35 us against 29 us for the Mul alone; span by span rather
// than whole, 1x1152x7x7 took 16 us against 12 (AVX-512 EPYC). The runtime reads so
// (StreamedOperand, runtime/fused_loop_eval.cc); the streaming rule (LowerLoop) and the cost
// model ask the same question.
enum class BroadcastRead : uint8_t { kNotStreamed, kInPlace, kWholeOnce, kSpan };
BroadcastRead BroadcastReadOf(bool computed, double whole, double span, double range);

// How the fused loop compiles a node's value (runtime/fused_loop_internal.h has a struct per kind).
enum class LoopValueKind : uint8_t {
  kOther,  // Not a value the loop computes.
  // Read at the same flat indices as its input: Reshape and its kin, a Transpose that moves only
  // dims of size 1.
  kView,
  kUnary,   // Float or integer unary arithmetic; a Pow by a constant 2, 0.5 or 1 is unary.
  kBinary,  // Add, Sub, Mul, Div, Pow.
  kWhere,
  kBatchNorm,
  // Reads its one input through one affine map: Transpose, Slice, Split, Expand, DepthToSpace,
  // SpaceToDepth, Tile, and a Gather of one constant index (GatherSliceIndex, graph/node_attrs.h).
  kMapped,
  kConcat,
  kGather,  // Any other Gather: each element looked up through the indices.
  kPad,
  kTrilu,
  kResize,
};
LoopValueKind LoopValueKindOf(const Graph& g, const Node& n);

// The map through which a kMapped value (output `output` of `n`) reads its one input: the
// runtime's loop reads through it, the cost model counts the runs it walks. An error naming the
// node when its parameters cannot be decoded (a Slice whose starts are computed).
StatusOr<Affine> MappedReadOf(const Graph& g, const Node& n, size_t output);

// Whether the loop evaluates a value of `kind` into a buffer of its own rather than into the one
// its caller hands it: then a loop output that reaches the value through views is a copy of that
// buffer, not the buffer the value is computed into. Gathers by index, pads, Trilus and resizes
// fill their own; arithmetic, maps and concats write where they are asked.
bool FillsOwnBuffer(LoopValueKind kind);

// The lowering of one value the loop computes (a node's first output).
struct LoopValue {
  LoopValueKind kind = LoopValueKind::kOther;
  // The input this value continues its chain through (computed inside this value's chain), or -1.
  int chain_input = -1;
  // The input that reads the chain's first value again (kept in registers for it), or -1.
  int saved_input = -1;
  // Computed inside its reader's chain: no tile, no evaluation of its own.
  bool chained = false;
  // The last value of this value's chain (itself for the head); kNoId outside chains.
  TensorId chain_head = kNoId;
  // On a chain's head: the input of the chain's first value that the chain walks.
  int chain_source = 0;
};

struct LoopLowering {
  // Every value the loop's nodes compute, by tensor.
  std::unordered_map<TensorId, LoopValue> values;
  // No tile takes a buffer: the loop walks longer tiles (StreamingTileElements).
  bool streams = false;
  // Values evaluated once per thread and run, not per tile (see the header), and the leaves read
  // only while those are evaluated. The runtime's loop evaluates them so (StreamedOperand keeps
  // the operands whole); the cost model counts one evaluation of each.
  std::unordered_set<TensorId> evaluated_once;

  int chained_values() const;
};

// The lowering of `nodes` (ascending ids) as one loop writing `outputs`.
LoopLowering LowerLoop(const Graph& g, const std::vector<NodeId>& nodes,
                       const std::vector<TensorId>& outputs);

}  // namespace fusor
