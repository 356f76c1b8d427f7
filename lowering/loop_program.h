// LoopProgram: one fused loop (runtime/fused_loop.h) as plain data, computed once per loop from
// the graph and read by both sides: the runtime binds memory and kernels to its steps (each step's
// operands and the maps it reads them through are the compiled value's), the cost model
// (costmodel/loop_evaluation.h) prices the same steps by how each operand is read. A loop feature
// is a step kind and an operand read here plus its kernel in the runtime; the cost model prices
// it from the reads, with no list of ops of its own.
//
// A group's programs are built by LowerGroup and kept in its GroupLowering (group_lowering.h): a
// fused loop's, or a reduction's prologue and epilogue loops.
//
// Plain data; LowerLoopProgram is a pure function of the graph and its arguments, thread-safe.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "lowering/affine_map.h"
#include "lowering/loop_lowering.h"

namespace fusor {

// How a step reads one operand over the elements its consumer asks for (a contiguous range or an
// index list of the step's own index space).
enum class OperandRead : uint8_t {
  kSame,    // At the step's own flat indices: the consumer's range or list passes through.
  kScalar,  // One element.
  // A broadcast operand of a binary step with no scalar operand, read run by run from a range: a
  // float leaf in place; a computed one as BroadcastReadOf says at that range (whole once per
  // thread, over its span, or not: then as kMapped). The first of a step's two that streams at a
  // range does; the other is read as kMapped.
  kStreamed,
  // Through `map`: from a range a leaf's runs are copied and a computed value's runs of at least
  // kMinEvaluatedRun (step 1) are evaluated as ranges of their own; else at an index list.
  kMapped,
  kConcatPart,  // A Concat's input: a range is one range of it per run of `runs.length`.
  kPadded,      // A Pad's input: each element's coordinates tested, dim by dim.
  kResized,     // A Resize's input: at a scattered list once per corner blended (`corners`).
  // A Gather's data and indices: a range copied block by block when the Gather copies blocks
  // (LoopStep::copies_blocks, GatherCopiesBlocks), else both at index lists.
  kGatherData,
  kGatherIndices,
};

struct LoopOperand {
  TensorId tensor = kNoId;
  // From the step's index space into the operand's flat indices (identity for kSame; unused by
  // kPadded and kResized, whose steps compute coordinates of their own).
  Affine map;
  OperandRead read = OperandRead::kSame;
  // The runs `map` walks over the step's whole index space (ForEachRun); for kConcatPart, one run
  // of the input per index of the dims before the axis.
  RunShape runs;
  // Produced in the loop (through views): evaluated, not read from memory.
  bool computed = false;
};

// One value the loop computes (output `output` of node `node`).
struct LoopStep {
  TensorId tensor = kNoId;
  NodeId node = kNoId;
  size_t output = 0;
  LoopValue value;  // Kind and chain marks (loop_lowering.h).
  std::vector<LoopOperand> operands;
  bool owns_buffer = false;     // FillsOwnBuffer(value.kind).
  bool evaluated_once = false;  // In LoopLowering::evaluated_once.
  bool copies_blocks = false;   // A Gather that copies ranges block by block.
  int64_t block = 1;            // A Gather's block: its data's elements after the axis.
  double corners = 1;           // A linear Resize: the corners each element blends.
  // Why the loop cannot compile the step (a Slice whose starts are computed); ok when it can.
  // The runtime refuses such a loop with this status; the cost model prices the step's maps as
  // reading no runs.
  Status unbuildable;
};

struct LoopProgram {
  std::vector<TensorId> outputs;
  std::vector<LoopStep> steps;  // In the order of the nodes (ascending ids).
  bool streams = false;         // LoopLowering::streams.
  // Values and leaves evaluated once per thread (LoopLowering::evaluated_once).
  std::unordered_set<TensorId> evaluated_once;

  // The step computing t, or null for a leaf.
  const LoopStep* Find(TensorId t) const;
  // What `t` reads its elements from: through views of the loop to the first tensor that is not
  // one.
  TensorId ViewSource(TensorId t) const;
  bool empty() const { return steps.empty(); }

  std::unordered_map<TensorId, size_t> index;  // Tensor -> its step.
};

// The program of `nodes` (ascending ids) as one loop writing `outputs`.
LoopProgram LowerLoopProgram(const Graph& g, const std::vector<NodeId>& nodes,
                             const std::vector<TensorId>& outputs);

}  // namespace fusor
