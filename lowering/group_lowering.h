// GroupLowering: what one fusion group of a plan becomes on the oneDNN backend, as one plain-data
// record decided once from the graph. The runtime builds the kernel the record names (and the
// alternative it names, timed against it when the executor is created); the cost model prices the
// record's form, and both read the group's loops from the loop programs it holds
// (loop_program.h). The finer decisions stay in the headers this record gathers: a fused loop's
// chains and streaming (loop_lowering.h), the primitive-chain and row-reduction forms
// (kernel_form.h), the RNN primitive (rnn_form.h), in-place concats (concat_in_place.h), serial
// groups (threading.h).
//
// tests/lowering checks, for every group of every bundled model under several plans, that the
// runtime builds the form and the alternative the record names; tests/runtime/group_record_test
// that it builds the reorders and post-ops the record lists.
//
// Plain data; LowerGroup is a pure function of the graph and its arguments, thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "graph/plan.h"
#include "lowering/loop_program.h"
#include "lowering/reorders.h"
#include "lowering/rnn_form.h"

namespace fusor {

enum class KernelForm : uint8_t {
  kRnnPrimitive,     // A recurrent kernel for one LSTM / GRU node: ours or oneDNN's (rnn_form.h).
  kReference,        // The reference interpreter's kernel for one node: no lowering.
  kAnchorPrimitive,  // A Conv / ConvTranspose / MatMul / Gemm primitive, the rest as post-ops.
  kRowReduction,     // Our row-reduction loop, prologue inside, epilogue as a second loop.
  kReductionPrimitive,  // A oneDNN reduction / pooling / softmax primitive (a prologue loop first).
  kFusedLoop,           // Our fused loop (loop_lowering.h).
  kResampling,          // oneDNN's resampling primitive for one linear Resize (RunsAsResampling).
  kInstanceNorm,  // oneDNN's layer normalization + a binary affine for an InstanceNormalization.
  // A lone Concat whose producers wrote its inputs into their slices of its output
  // (concat_in_place.h): nothing runs.
  kInPlaceConcat,
};
std::string_view KernelFormName(KernelForm form);

// A second kernel the group also has, built beside the first and timed against it once when the
// executor is created (the faster is kept): the cost model prices `form`.
enum class KernelAlternative : uint8_t {
  kNone,
  // A fused loop that also has the form of one oneDNN eltwise / binary primitive with post-ops
  // (HasPrimitiveChainForm).
  kPrimitiveChain,
  // A Conv whose first post-op is a per-element Add of a computed tensor: oneDNN's sum post-op on
  // a copy of it in dst, which some implementations take where they refuse a binary post-op
  // (HasResidualSumForm).
  kResidualSum,
};
std::string_view KernelAlternativeName(KernelAlternative alternative);

struct GroupLowering {
  KernelForm form = KernelForm::kFusedLoop;
  // The anchor, reduction, RNN or reference node; kNoId for a fused loop.
  NodeId center = kNoId;
  // The group's nodes before and after `center` (a loop's nodes are all in `after`).
  std::vector<NodeId> before, after;
  KernelAlternative alternative = KernelAlternative::kNone;
  // Built and run on the calling thread alone (RunsSerially).
  bool serial = false;
  // kRnnPrimitive: which recurrent kernel runs it (rnn_form.h RnnImplementationFor).
  RnnImplementation rnn = RnnImplementation::kLoop;
  // Kernels launched per run of `form`: primitives (anchors, oneDNN reductions) and our loops (a
  // row reduction with an epilogue runs it as a second loop; a oneDNN reduction with a prologue
  // runs the prologue as a loop into scratch first).
  int primitives = 0, loops = 0;
  // The loops of the group as the runtime builds them and the cost model prices them
  // (loop_program.h): kFusedLoop's loop; a reduction's prologue (`before`, into the reduction's
  // input) and its epilogue (`after`, a loop of its own in a row reduction, oneDNN post-ops where
  // they take it after a reduction primitive). Empty where the group has none.
  LoopProgram prologue, loop;
  // The graph `loop` is over where it is not the model's: a loop of flat elementwise nodes with
  // broadcast operands over kept tensors runs over their stored form's dims (lowering/layout.h
  // StoredFormView), which the runtime builds it from and the cost model prices it by. Null
  // otherwise.
  std::shared_ptr<const Graph> storage_view;
  // A reduction's pulls of its prologue over the reduction's input (RowReductionPulls): a block
  // of rows per pull when rows are shorter than a tile, else a chunk of a row. 0 without one.
  int64_t prologue_pulls = 0;
  // The reorders between plain and blocked layouts the group runs (reorders.h), each a oneDNN
  // kernel over its tensor. Empty when lowered without a layout target.
  std::vector<LayoutReorder> reorders;
  // The chain nodes after an anchor or a reduction primitive that run as its oneDNN post-ops (a
  // BatchNormalization after a conv among them, folded into its weights); none in a kSingle group.
  std::vector<NodeId> post_ops;
  // Thread teams the group wakes per run: one per primitive, loop and reorder, less the regions
  // our row reduction does not enter (RowReductionForks; an epilogue loop over one tile); 0 when
  // it runs serially.
  int parallel_regions = 0;
};

// Whether `anchor` (a Conv) followed by `chain` takes its first post-op, a per-element Add of a
// computed tensor (after a BatchNormalization the conv folds), as oneDNN's sum post-op.
bool HasResidualSumForm(const Graph& g, NodeId anchor, const std::vector<NodeId>& chain);

// The record for `group` of a plan, reading `inputs` from other groups (AllGroupInputs) and whose
// outputs are `materialized` (AllMaterializedOutputs), on a target of layout `target`. `rnn`
// forces the recurrent kernel of an LSTM / GRU group (benchmarks comparing them); unset, the
// lowering's choice.
GroupLowering LowerGroup(const Graph& g, const FusionGroup& group,
                         const std::vector<TensorId>& inputs,
                         const std::vector<TensorId>& materialized, const LayoutTarget& target,
                         std::optional<RnnImplementation> rnn = std::nullopt);
// The same with every tensor plain (no layout target): no reorders.
GroupLowering LowerGroup(const Graph& g, const FusionGroup& group,
                         const std::vector<TensorId>& materialized,
                         std::optional<RnnImplementation> rnn = std::nullopt);

}  // namespace fusor
