// How our fused loop (runtime/fused_loop.h) evaluates a group, as counts the cost model prices.
// The walk reads the group's loop program (lowering/loop_program.h), the record the runtime
// compiles: each step's operands, the maps and runs they are read through and how each is read;
// it holds no list of ops of its own.
// The loop pulls each tile of an output through the expression: a node is evaluated at the
// elements its consumer asks for, so a value upstream of a Gather, or of a broadcast whose span
// per tile is long, is evaluated once per element of the consumer's index space, not once per
// element of its own. (A binary node evaluates a computed broadcast operand of at most a tile
// whole once per thread, and one whose span per tile is at most a quarter of the tile once over
// that span: the squeeze-and-excite Sigmoid of a [1,C,1,1] tensor that a Mul broadcasts over
// [1,C,H,W] runs about once per channel.) Index work is counted
// per element:
//   - a map from a contiguous range (broadcast, transpose, slice of a leaf; the coordinates a
//     Pad tests) walks the range run by run: one index (or one copied element) each;
//   - a Concat asked for a range asks each input for its runs as ranges (one evaluation call per
//     run; a leaf input copied, one indexed element each); asked at a list, it tests each
//     element's coordinate and asks each input at a list;
//   - a computed value read from a range through a map that keeps runs of at least 64 elements in
//     order (a slice of whole rows, a transpose that keeps the innermost dim) is evaluated run by
//     run, each run a range of its own: one evaluation call per run for it and for each value it
//     reads (counted with the run calls and the evaluation calls), no index work;
//   - a map applied to a list of consecutive runs steps along it, and a leaf read at an index
//     list is a gather: one element at a time (gathered);
//   - a map applied to a scattered index list divides every index back into coordinates, one
//     divide and modulo per dimension of the map's space (RunShape::rank, a split map's split):
//     `rank` per element (remapped);
//   - a broadcast leaf operand of a binary arithmetic node (bias, layer-norm weights, a per-row
//     scale) is read in place from a range: no index work, one kernel call per innermost run,
//     counted with the pulls.
// A reduction group's prologue is evaluated over the reduction's whole input, a block of rows
// per pull when rows are shorter than a tile, else a chunk of a row; its epilogue runs as oneDNN
// post-ops or on the reduced rows, once per element. Each pull costs a fixed amount per value it
// touches (scratch lookups, the dispatch on the value's kind).
//
// Pure functions of the graph and the group; thread-safe.
#pragma once

#include <unordered_map>
#include <unordered_set>

#include "graph/graph.h"
#include "graph/plan.h"
#include "lowering/group_lowering.h"

namespace fusor {

struct LoopEvaluation {
  // Elements at which each value computed by the group is evaluated, over the whole run (each
  // request with a new index list counts again; identical requests share one evaluation).
  std::unordered_map<TensorId, double> evaluated;
  double indexed_elements = 0;   // Indices walked from ranges, run by run (copies, fills).
  double gathered_elements = 0;  // Elements handled one by one: gathers, lists stepped along.
  double remapped_elements = 0;  // Element-dimensions of maps applied to index lists.
  // Elements read from a leaf with a stride whose cache lines stay in L1 from one output row to
  // the next: one indexed load each, no line fill (strided reads over longer rows are remapped).
  double strided_elements = 0;
  double eval_calls = 0;  // Values pulled, times the tiles or row chunks they are pulled for.
  // Kernel calls per run of a streamed broadcast operand or of a Concat's inputs: short calls
  // that copy or combine one run (a 7x7 plane of a squeeze-and-excite scale is 49 elements).
  double run_calls = 0;
  // Values whose kind fills a buffer of their own (LoopStep::owns_buffer): a loop output reaching
  // one through views is a copy of that buffer.
  std::unordered_set<TensorId> own_buffers;
  // Values the loop hands on without a tile of their own (views, transposes of unit dims): their
  // consumers read their input's tile.
  std::unordered_set<TensorId> passed_through;
  // Values computed inside a single-pass chain (lowering/loop_lowering.h): carried in
  // registers from the value that reads them, with no tile and no evaluation call of their own.
  std::unordered_set<TensorId> chained;
  // Element-steps of those chains: each value of a chain (its head too) times its elements.
  double chain_steps = 0;
  // Computed values each thread evaluates whole once and keeps (broadcast operands of at most a
  // tile, streamed run by run): evaluated once per thread, not per tile.
  std::unordered_set<TensorId> hoisted;
  // Pulls of the expression over the whole run: the loop's tiles, or a row reduction's pulls.
  double pulls = 0;
  // No tile takes a buffer (LoopLowering::streams): every value is chained or written straight
  // into an output, operands read in place. The loop then walks longer tiles
  // (StreamingTileElements), so fewer pulls.
  bool streams = false;
};

// The loops of a group's lowering (GroupLowering::loop, or a reduction's prologue and epilogue),
// walked step by step as their programs read each operand (lowering/loop_program.h); `threads`
// the loop's team (1 for a group that runs serially); `l1d_bytes` a core's L1 data cache.
LoopEvaluation EvaluateLoop(const Graph& g, const GroupLowering& lowering, int threads,
                            int64_t l1d_bytes = int64_t{32} << 10);
// The same for `group` lowered with `leaving` materialized (LowerGroup); a group the lowering
// runs as no loop of ours has no program, and nothing is counted.
LoopEvaluation EvaluateLoop(const Graph& g, const FusionGroup& group,
                            const std::vector<TensorId>& leaving, int threads,
                            int64_t l1d_bytes = int64_t{32} << 10);

}  // namespace fusor
