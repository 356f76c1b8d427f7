#include "lowering/kernel_form.h"

#include <algorithm>
#include <cmath>

#include "graph/node_attrs.h"
#include "graph/op_registry.h"
#include "lowering/layout.h"
#include "lowering/plan_legality.h"

namespace fusor {
namespace {

bool IsScalarConstant(const Graph& g, TensorId t) {
  return t != kNoId && g.tensor(t).kind == TensorKind::kConstant && g.tensor(t).num_elements() == 1;
}

bool ProducedInside(const Graph& g, const std::vector<NodeId>& nodes, TensorId t) {
  return t != kNoId && g.tensor(t).producer != kNoId &&
         std::binary_search(nodes.begin(), nodes.end(), g.tensor(t).producer);
}

// An operand oneDNN 2.6's JIT binary kernels broadcast: a scalar, the full shape, or one value per
// channel (dim 1). Other broadcasts fall back to reference kernels.
bool JitBroadcastable(const Shape& operand, const Shape& out) {
  if (operand == out) return true;
  int64_t elements = 1;
  for (int64_t d : operand) elements *= d;
  if (elements == 1) return true;
  size_t lead = out.size() - std::min(out.size(), operand.size());
  for (size_t i = 0; i < operand.size(); ++i) {
    if (operand[i] != 1 && lead + i != 1) return false;
  }
  return out.size() > 1;
}

// An operand oneDNN 2.6's JIT binary primitive takes as src1: what its post-ops broadcast, one
// value per position of the last dim (Mul by a [768] bias over [1,128,768]), or the output's shape
// but for a batch dim of 1 (an attention mask [1,128,128] over [12,128,128]; Swin's
// relative-position bias [1,3,49,49] over [64,3,49,49]): all run as jit:uni (tests/lowering). Other
// broadcasts, such as Swin's shift mask [1,64,1,49,49] over [1,64,3,49,49] scores, get a reference
// kernel.
bool JitBinarySource(const Shape& operand, const Shape& out) {
  if (JitBroadcastable(operand, out)) return true;
  const size_t lead = out.size() - std::min(out.size(), operand.size());
  auto dim = [&](size_t i) { return i < lead ? int64_t{1} : operand[i - lead]; };
  bool per_last = true, per_batch = true;
  for (size_t i = 0; i < out.size(); ++i) {
    if (dim(i) != 1 && i != out.size() - 1) per_last = false;
    if (i > 0 && dim(i) != out[i]) per_batch = false;
  }
  return per_last || per_batch;
}

}  // namespace

bool GlobalPoolReadsKept(const Graph& g, const FusionGroup& group, const LayoutTarget& target) {
  // Whether a GlobalAveragePool reads a kept tensor natively is the layout rule's (KeptBlocked).
  const Node& first = g.node(group.nodes.front());
  return first.op_type == "GlobalAveragePool" && KeptBlocked(g, first.inputs[0], target);
}

bool RunsAsRowReduction(const Graph& g, const FusionGroup& group, const LayoutTarget& target) {
  if (GlobalPoolReadsKept(g, group, target)) return false;
  for (size_t i = 0; i < group.nodes.size(); ++i) {
    const Node& n = g.node(group.nodes[i]);
    if (ClassifyNode(g, n) != OpClass::kReduction) continue;
    RowReduction form = RowReductionOf(g, n);
    return form.len > 0 && (i > 0 || form.op != RowOp::kSoftmax);
  }
  return false;
}

bool HasPrimitiveChainForm(const Graph& g, const std::vector<NodeId>& nodes,
                           const std::vector<TensorId>& materialized) {
  if (nodes.empty()) return false;
  if (materialized != std::vector<TensorId>{g.node(nodes.back()).outputs[0]}) return false;
  // The head's second operand is the binary primitive's src1 (JitBinarySource); post-op operands
  // broadcast only as JitBroadcastable says (measured: Mul by a [768] bias over [1,128,768] runs
  // as one jit:uni binary primitive, and as our loop when it follows another op).
  for (size_t i = 1; i < nodes.size(); ++i) {
    const Node& n = g.node(nodes[i]);
    for (TensorId t : n.inputs) {
      if (t == kNoId || ProducedInside(g, nodes, t) || IsScalarConstant(g, t)) continue;
      if (!JitBroadcastable(g.tensor(t).dims, g.tensor(n.outputs[0]).dims)) return false;
    }
  }
  const Node& head = g.node(nodes[0]);
  if (!IsPostOp(g, head) || head.op_type == "BatchNormalization") return false;
  const bool gated = nodes.size() > 1 && GatedPairOf(g, head, g.node(nodes[1])) != GatedPair::kNone;
  // A HardSigmoid alone is eltwise_linear then eltwise_clip_v2: an eltwise primitive with a
  // post-op of its own, which oneDNN's JIT eltwise kernel does not take (see below); gated, it is
  // one eltwise_hardswish.
  if (head.op_type == "HardSigmoid" && !gated) return false;
  if (head.outputs.size() != 1 || head.inputs.empty()) return false;
  const Shape& out = g.tensor(head.outputs[0]).dims;
  if (g.tensor(head.inputs[0]).dims != out) return false;
  size_t first = gated ? 2 : 1;
  if (!gated && head.inputs.size() == 2 && head.op_type != "Pow" &&
      (head.inputs[0] == head.inputs[1] || ProducedInside(g, nodes, head.inputs[1]) ||
       !JitBinarySource(g.tensor(head.inputs[1]).dims, out))) {
    return false;
  }
  std::vector<NodeId> chain(nodes.begin() + static_cast<std::ptrdiff_t>(first), nodes.end());
  // oneDNN 2.6's JIT eltwise kernel takes no post-ops at all: a chain after an eltwise head
  // (a unary op, Clip, swish, or a binary node with a scalar constant, which is eltwise_linear or
  // eltwise_pow) gets a reference kernel, and the runtime runs our loop instead, unless the whole
  // chain is scalar affine maps, which the runtime merges into the head's one eltwise_linear.
  // Measured on avx512_core with the oneDNN backend forced: Relu, Tanh, Add(x, 1) and Mul(x, 2)
  // heads followed by a Mul with a full, per-channel or scalar operand all run as our loop; Add(x,
  // 1) -> Mul(., 0.5) is one eltwise. A binary head takes any post-op.
  auto scalar_operand = [&](const Node& n) {
    return n.inputs.size() == 2 &&
           (IsScalarConstant(g, n.inputs[0]) || IsScalarConstant(g, n.inputs[1]));
  };
  auto affine = [&](const Node& n) {
    bool either = n.op_type == "Add" || n.op_type == "Sub" || n.op_type == "Mul";
    return scalar_operand(n) &&
           (either || (n.op_type == "Div" && IsScalarConstant(g, n.inputs[1])));
  };
  bool eltwise_head =
      gated || head.inputs.size() == 1 || head.op_type == "Clip" || scalar_operand(head);
  if (eltwise_head && !chain.empty()) {
    if (!affine(head)) return false;
    for (NodeId id : chain) {
      if (!affine(g.node(id))) return false;
    }
  }
  return CheckPostOpChain(g, nodes, nodes[first - 1], chain).ok();
}

bool RunsAsResampling(const Graph& g, const Node& n) {
  if (n.op_type != "Resize" || !n.domain.empty() || n.outputs.size() != 1) return false;
  if (g.tensor(n.inputs[0]).dtype != DType::kFloat32 ||
      g.tensor(n.outputs[0]).dtype != DType::kFloat32) {
    return false;
  }
  StatusOr<ResizeParams> p = ResizeOf(g, n);
  if (!p.ok() || !p->linear || p->in.size() < 3 || p->in.size() > 5) return false;
  if (p->coordinate_mode != "half_pixel" && p->coordinate_mode != "pytorch_half_pixel")
    return false;
  if (p->in[0] != p->out[0] || p->in[1] != p->out[1]) return false;
  for (size_t d = 2; d < p->in.size(); ++d) {
    if (p->coordinate_mode == "pytorch_half_pixel" && p->out[d] <= 1) return false;
    const double dims = static_cast<double>(p->out[d]) / static_cast<double>(p->in[d]);
    if (std::fabs(p->scales[d] - dims) > 1e-9 * dims) return false;
  }
  return true;
}

bool RunsAsInstanceNormPrimitive(const Graph& g, const Node& n) {
  if (n.op_type != "InstanceNormalization" || !n.domain.empty() || n.inputs.size() != 3 ||
      n.outputs.size() != 1) {
    return false;
  }
  const Tensor& x = g.tensor(n.inputs[0]);
  if (x.dtype != DType::kFloat32 || g.tensor(n.outputs[0]).dtype != DType::kFloat32) return false;
  if (x.dims.size() < 3 || x.num_elements() == 0) return false;
  for (int i = 1; i <= 2; ++i) {
    const Tensor& p = g.tensor(n.inputs[i]);
    if (p.dtype != DType::kFloat32 || p.dims != Shape{x.dims[1]}) return false;
  }
  return true;
}

bool PoolingRunsBlocked(const Graph& g, const Node& n, const LayoutTarget& target) {
  const int64_t block = target.block;
  if ((n.op_type != "MaxPool" && n.op_type != "AveragePool") || n.inputs.empty()) return false;
  const Shape& x = g.tensor(n.inputs[0]).dims;
  if (x.size() != 4) return false;
  if (x[1] % 8 == 0 && (block != 16 || x[1] % 16 == 0)) return true;
  // Partial blocks kept channels-last (layout.h): pooled in that layout.
  return block > 0 && KeptBlocked(g, n.inputs[0], target);
}

}  // namespace fusor
