#include "lowering/group_lowering.h"

#include <algorithm>

#include "graph/node_attrs.h"
#include "graph/op_registry.h"
#include "lowering/concat_in_place.h"
#include "lowering/kernel_form.h"
#include "lowering/layout.h"
#include "lowering/rnn_form.h"
#include "lowering/threading.h"

namespace fusor {
namespace {

// A tensor whose values the runtime has when it builds kernels: weights and constants.
bool Known(const Graph& g, TensorId t) {
  if (t == kNoId) return false;
  const TensorKind kind = g.tensor(t).kind;
  return kind == TensorKind::kWeight || kind == TensorKind::kConstant;
}

// An inference BatchNormalization reading `v` whose parameters are known: a per-channel affine
// map the conv before it folds into its weights and bias.
bool FoldsIntoConv(const Graph& g, const Node& n, TensorId v) {
  if (n.op_type != "BatchNormalization" || n.inputs.empty() || n.inputs[0] != v) return false;
  for (size_t j = 1; j <= 4; ++j) {
    if (!Known(g, n.input(j)) || g.tensor(n.input(j)).dtype != DType::kFloat32) return false;
  }
  return true;
}

// Whether `dims` with ones prepended to the rank of `out` is `out`.
bool SameAfterLeadingOnes(const Shape& dims, const Shape& out) {
  if (dims.size() > out.size()) return false;
  const size_t lead = out.size() - dims.size();
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] != (i < lead ? 1 : dims[i - lead])) return false;
  }
  return true;
}

NodeId FirstOfClass(const Graph& g, const FusionGroup& group, OpClass cls) {
  for (NodeId id : group.nodes) {
    if (ClassifyNode(g, g.node(id)) == cls) return id;
  }
  return kNoId;
}

}  // namespace

std::string_view KernelFormName(KernelForm form) {
  switch (form) {
    case KernelForm::kRnnPrimitive:
      return "rnn_primitive";
    case KernelForm::kReference:
      return "reference";
    case KernelForm::kAnchorPrimitive:
      return "anchor_primitive";
    case KernelForm::kRowReduction:
      return "row_reduction";
    case KernelForm::kReductionPrimitive:
      return "reduction_primitive";
    case KernelForm::kFusedLoop:
      return "fused_loop";
    case KernelForm::kResampling:
      return "resampling";
    case KernelForm::kInstanceNorm:
      return "instance_norm";
    case KernelForm::kInPlaceConcat:
      return "in_place_concat";
  }
  return "?";
}

std::string_view KernelAlternativeName(KernelAlternative alternative) {
  switch (alternative) {
    case KernelAlternative::kNone:
      return "none";
    case KernelAlternative::kPrimitiveChain:
      return "primitive_chain";
    case KernelAlternative::kResidualSum:
      return "residual_sum";
  }
  return "?";
}

bool HasResidualSumForm(const Graph& g, NodeId anchor, const std::vector<NodeId>& chain) {
  const Node& conv = g.node(anchor);
  if (conv.op_type != "Conv" || conv.outputs.empty()) return false;
  TensorId v = conv.outputs[0];
  const Shape& out = g.tensor(v).dims;
  size_t next = 0;
  if (!chain.empty() && FoldsIntoConv(g, g.node(chain[0]), v)) {
    v = g.node(chain[0]).outputs[0];
    next = 1;
  }
  if (next >= chain.size()) return false;
  // The Add must be a binary post-op of the output's shape: x + x is an eltwise post-op instead.
  const Node& add = g.node(chain[next]);
  if (add.op_type != "Add" || add.inputs.size() != 2 || add.outputs.size() != 1) return false;
  if (add.inputs[0] != v && add.inputs[1] != v) return false;
  const TensorId other = add.inputs[0] == v ? add.inputs[1] : add.inputs[0];
  if (other == v) return false;
  const Tensor& operand = g.tensor(other);
  return operand.dtype == DType::kFloat32 && g.tensor(add.outputs[0]).dtype == DType::kFloat32 &&
         g.tensor(add.outputs[0]).dims == out && g.tensor(v).dims == out &&
         SameAfterLeadingOnes(operand.dims, out);
}

namespace {

// A reduction's loops: its prologue, written into the reduction's input (a row reduction reads
// it tile by tile instead, with no output), and its epilogue writing the group's last value; and
// the prologue's pulls over the reduction's input, rows of a softmax's last dim or one row per
// reduced element.
void LowerReductionLoops(const Graph& g, GroupLowering* r) {
  const Node& n = g.node(r->center);
  const TensorId in = n.inputs[0];
  const int64_t elements = g.tensor(in).num_elements();
  const int64_t rows = n.op_type == "Softmax"
                           ? elements / std::max<int64_t>(1, g.tensor(in).dims.back())
                           : g.tensor(n.outputs[0]).num_elements();
  r->prologue_pulls = RowReductionPulls(rows, elements / std::max<int64_t>(rows, 1));
  if (!r->before.empty()) {
    const bool row = r->form == KernelForm::kRowReduction;
    r->prologue = LowerLoopProgram(g, r->before, row ? std::vector<TensorId>{} : std::vector{in});
  }
  if (!r->after.empty()) {
    r->loop = LowerLoopProgram(g, r->after, {g.node(r->after.back()).outputs[0]});
  }
}

// The nodes after an anchor or reduction primitive that run as its post-ops.
std::vector<NodeId> PostOpNodes(const Graph& g, const FusionGroup& group, const GroupLowering& r) {
  const bool takes =
      r.form == KernelForm::kAnchorPrimitive || r.form == KernelForm::kReductionPrimitive;
  if (!takes || group.kind == GroupKind::kSingle) return {};
  std::vector<NodeId> out;
  for (NodeId id : r.after) {
    if (ClassifyNode(g, g.node(id)) != OpClass::kReduction) out.push_back(id);
  }
  return out;
}

// Parallel regions our row reduction does not enter, of the one per loop counted: its reduction
// over few elements, and its epilogue loop over one tile (LayerNorm's per-row Add+Sqrt of 128
// values runs on the calling thread).
int RowReductionRegionsSaved(const Graph& g, const FusionGroup& group, const GroupLowering& r) {
  if (group.kind != GroupKind::kReduction || r.form != KernelForm::kRowReduction) return 0;
  const Node& n = g.node(r.center);
  const int64_t len = RowReductionOf(g, n).len;
  if (len <= 0) return 0;
  const int64_t rows = g.tensor(n.inputs[0]).num_elements() / len;
  int saved = RowReductionForks(rows, len) ? 0 : 1;
  if (!r.after.empty()) {  // The epilogue loop.
    const Tensor& out = g.tensor(g.node(group.nodes.back()).outputs[0]);
    saved += out.num_elements() <= kLoopTileElements ? 1 : 0;
  }
  return saved;
}

GroupLowering LowerForm(const Graph& g, const FusionGroup& group,
                        const std::vector<TensorId>& materialized, const LayoutTarget& target,
                        std::optional<RnnImplementation> rnn) {
  GroupLowering r;
  r.serial = RunsSerially(g, group, rnn);
  const Node& first = g.node(group.nodes[0]);
  const OpClass cls = ClassifyNode(g, first);
  const bool alone = group.nodes.size() == 1;
  auto split_around = [&](NodeId center) {
    r.center = center;
    for (NodeId id : group.nodes) {
      if (id < center) r.before.push_back(id);
      if (id > center) r.after.push_back(id);
    }
  };
  if (group.kind == GroupKind::kOpaque || (alone && cls == OpClass::kOpaque)) {
    split_around(group.nodes[0]);
    r.form = RunsAsRnnPrimitive(g, first) ? KernelForm::kRnnPrimitive : KernelForm::kReference;
    r.loops = 1;
    if (RunsAsInstanceNormPrimitive(g, first)) {
      r.form = KernelForm::kInstanceNorm;
      r.loops = 0;
      r.primitives = 2;
    }
    if (r.form == KernelForm::kRnnPrimitive) {
      r.rnn = rnn.value_or(RnnPrimitiveForm(g, first)->implementation);
      // oneDNN's primitive is one launch; ours is a loop region after its input projection, a
      // oneDNN matmul the cost model adds with the steps (AddRecurrentSteps).
      if (r.rnn == RnnImplementation::kPrimitive) {
        r.loops = 0;
        r.primitives = 1;
      }
    }
  } else if (group.kind == GroupKind::kAnchor || (alone && cls == OpClass::kAnchor)) {
    split_around(FirstOfClass(g, group, OpClass::kAnchor));
    r.form = KernelForm::kAnchorPrimitive;
    r.primitives = 1;
    if (HasResidualSumForm(g, r.center, r.after)) r.alternative = KernelAlternative::kResidualSum;
  } else if (group.kind == GroupKind::kReduction || (alone && cls == OpClass::kReduction)) {
    split_around(FirstOfClass(g, group, OpClass::kReduction));
    if (RunsAsRowReduction(g, group, target)) {
      r.form = KernelForm::kRowReduction;
      r.loops = r.after.empty() ? 1 : 2;
    } else {
      r.form = KernelForm::kReductionPrimitive;
      r.primitives = 1;
      r.loops = r.before.empty() ? 0 : 1;
    }
    LowerReductionLoops(g, &r);
  } else if (ConcatRunsInPlace(g, group)) {
    split_around(group.nodes[0]);
    r.form = KernelForm::kInPlaceConcat;
  } else if (alone && RunsAsResampling(g, first)) {
    split_around(group.nodes[0]);
    r.form = KernelForm::kResampling;
    r.primitives = 1;
  } else {
    r.form = KernelForm::kFusedLoop;
    r.after = group.nodes;
    r.loops = 1;
    r.loop = LowerLoopProgram(g, group.nodes, materialized);
    if (HasPrimitiveChainForm(g, group.nodes, materialized)) {
      r.alternative = KernelAlternative::kPrimitiveChain;
    }
  }
  return r;
}

}  // namespace

GroupLowering LowerGroup(const Graph& g, const FusionGroup& group,
                         const std::vector<TensorId>& inputs,
                         const std::vector<TensorId>& materialized, const LayoutTarget& target,
                         std::optional<RnnImplementation> rnn) {
  GroupLowering r = LowerForm(g, group, materialized, target, rnn);
  // Its producers wrote every input into its slice of the output: nothing runs.
  if (r.form == KernelForm::kInPlaceConcat) return r;
  if (r.form == KernelForm::kFusedLoop && HasBroadcastOperand(g, group) &&
      RunsFlatOnBlocked(g, group, inputs, materialized, target)) {
    // The loop runs over the kept tensors' stored form, broadcast operands read in place.
    const bool channels_last = std::any_of(inputs.begin(), inputs.end(), [&](TensorId t) {
      return KeptBlocked(g, t, target) && StoredChannelsLast(g, t, target);
    });
    r.storage_view =
        std::make_shared<const Graph>(StoredFormView(g, group, channels_last, target.block));
    r.loop = LowerLoopProgram(*r.storage_view, group.nodes, materialized);
    r.alternative = KernelAlternative::kNone;
  }
  r.reorders = LowerReorders(g, group, inputs, materialized, target);
  r.post_ops = PostOpNodes(g, group, r);
  if (!r.serial) {
    r.parallel_regions = r.primitives + r.loops + static_cast<int>(r.reorders.size()) -
                         RowReductionRegionsSaved(g, group, r);
  }
  return r;
}

GroupLowering LowerGroup(const Graph& g, const FusionGroup& group,
                         const std::vector<TensorId>& materialized,
                         std::optional<RnnImplementation> rnn) {
  return LowerGroup(g, group, {}, materialized, LayoutTarget{}, rnn);
}

}  // namespace fusor
