#include "lowering/reorders.h"

#include <algorithm>

#include "graph/op_registry.h"
#include "lowering/kernel_form.h"
#include "lowering/layout.h"

namespace fusor {
namespace {

// The group's anchor or reduction: the first node, or the one after a reduction's prologue.
NodeId PrimaryNode(const Graph& g, const FusionGroup& group) {
  for (NodeId id : group.nodes) {
    const OpClass c = ClassifyNode(g, g.node(id));
    if (c == OpClass::kAnchor || c == OpClass::kReduction) return id;
  }
  return group.nodes.front();
}

bool OnePixel(const Shape& out) {
  return out.size() > 2 &&
         std::all_of(out.begin() + 2, out.end(), [](int64_t d) { return d == 1; });
}

// A group whose kernel reads and writes plain buffers only (not a blocked conv or pooling).
void PlainKernelReorders(const Graph& g, const FusionGroup& group,
                         const std::vector<TensorId>& inputs,
                         const std::vector<TensorId>& materialized, const LayoutTarget& target,
                         std::vector<LayoutReorder>* out) {
  if (RunsFlatOnBlocked(g, group, inputs, materialized, target)) return;
  for (TensorId t : inputs) {
    if (KeptBlocked(g, t, target)) {
      out->push_back({t, ReorderKind::kPlainCopy, StoredChannelsLast(g, t, target)});
    }
  }
  for (TensorId t : materialized) {
    if (KeptBlocked(g, t, target)) {
      out->push_back({t, ReorderKind::kBlockedOut, StoredChannelsLast(g, t, target)});
    }
  }
}

// A conv's per-element post-op operands (of its output's dims) reordered into its destination
// layout: plain ones, and kept ones stored in the other form (channels-last against blocked), a
// transpose.
void OperandReorders(const Graph& g, const FusionGroup& group, NodeId primary, bool transposed,
                     const LayoutTarget& target, std::vector<LayoutReorder>* out) {
  const Shape& dims = g.tensor(g.node(primary).outputs[0]).dims;
  for (size_t i = 1; i < group.nodes.size(); ++i) {
    if (group.nodes[i] < primary) continue;
    for (TensorId t : g.node(group.nodes[i]).inputs) {
      // Values computed in the group (the chain value; the x a gated pair's Mul reads) are no
      // operands read from memory.
      if (t == kNoId ||
          std::binary_search(group.nodes.begin(), group.nodes.end(), g.tensor(t).producer)) {
        continue;
      }
      if (g.tensor(t).dims != dims) continue;
      if (!KeptBlocked(g, t, target)) {
        out->push_back({t, ReorderKind::kOperand, transposed});
      } else if (StoredChannelsLast(g, t, target) != transposed) {
        out->push_back({t, ReorderKind::kOperand, true});
      }
    }
  }
}

}  // namespace

std::string_view ReorderKindName(ReorderKind kind) {
  switch (kind) {
    case ReorderKind::kPlainCopy:
      return "plain_copy";
    case ReorderKind::kBlockedOut:
      return "blocked_out";
    case ReorderKind::kIn:
      return "in";
    case ReorderKind::kOut:
      return "out";
    case ReorderKind::kOperand:
      return "operand";
  }
  return "?";
}

std::vector<LayoutReorder> LowerReorders(const Graph& g, const FusionGroup& group,
                                         const std::vector<TensorId>& inputs,
                                         const std::vector<TensorId>& materialized,
                                         const LayoutTarget& target) {
  std::vector<LayoutReorder> out;
  const NodeId primary = PrimaryNode(g, group);
  const Node& head = g.node(primary);
  // On a 1x1 image the blocked layout is the plain one: oneDNN picks it and nothing is reordered
  // (EfficientNet's squeeze-and-excite convs); a conv with no blocked kernel on the target runs as
  // gemm on plain buffers.
  const bool conv = (head.op_type == "Conv" || head.op_type == "ConvTranspose") &&
                    !OnePixel(g.tensor(head.outputs[0]).dims) &&
                    !ConvHasNoBlockedKernel(g, head, target);
  if (GlobalPoolReadsKept(g, group, target)) {
    // oneDNN's pooling reads the kept input where it is stored; other inputs are plain copies.
    for (TensorId t : inputs) {
      if (t != head.inputs[0] && KeptBlocked(g, t, target)) {
        out.push_back({t, ReorderKind::kPlainCopy, StoredChannelsLast(g, t, target)});
      }
    }
    return out;
  }
  if (!conv && !PoolingRunsBlocked(g, head, target)) {
    PlainKernelReorders(g, group, inputs, materialized, target, &out);
    return out;
  }
  const TensorId src = head.inputs[0];
  // A pooling writes the layout its input is stored in: channels-last where that is.
  const bool transposed =
      conv ? ConvRunsChannelsLast(g, head, target) : StoredChannelsLast(g, src, target);
  if (primary != group.nodes.front()) {
    // The prologue loop reads plain copies and writes the pooling's input plain to scratch.
    for (TensorId t : inputs) {
      if (KeptBlocked(g, t, target)) {
        out.push_back({t, ReorderKind::kPlainCopy, StoredChannelsLast(g, t, target)});
      }
    }
    out.push_back({src, ReorderKind::kIn, transposed});
  } else if (!KeptBlocked(g, src, target) && !StemConvReadsPlain(g, head, target) &&
             !(conv && g.tensor(src).dims[1] == 1)) {
    // A conv reads a single-channel input as it is: oneDNN's first-layer kernels read it plain,
    // and its channels-last form is the plain one.
    out.push_back({src, ReorderKind::kIn, transposed});
  } else if (conv && KeptBlocked(g, src, target) &&
             StoredChannelsLast(g, src, target) != transposed) {
    // A channel-blocked input of a conv writing partial blocks channels-last (layout.h).
    out.push_back({src, ReorderKind::kIn, true});
  }
  for (TensorId t : materialized) {
    if (!KeptBlocked(g, t, target)) {
      out.push_back({t, ReorderKind::kOut, transposed});
    } else if (StoredChannelsLast(g, t, target) != transposed) {
      // Kept in the other form: a blocked Concat's part written by a channels-last conv.
      out.push_back({t, ReorderKind::kOut, true});
    }
  }
  if (conv) OperandReorders(g, group, primary, transposed, target, &out);
  return out;
}

}  // namespace fusor
