// Translation of an elementwise chain after a oneDNN primitive into its post-ops: which ONNX node
// becomes which eltwise / binary / sum post-op, how adjacent linear maps merge, and the
// primitive_attr they make. Not a public header: only the oneDNN kernel files include it
// (runtime/onednn_*.cc); the names live in fusor::onednn so they never meet other files' helpers.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "graph/graph.h"
#include "lowering/plan_legality.h"
#include "runtime/fused_loop.h"

namespace fusor::onednn {

using dnnl::algorithm;
using dnnl::memory;
using Dt = memory::data_type;

// oneDNN dims of `s`, a scalar as [1].
memory::dims Dims(const Shape& s);
// `s` with leading 1s up to `rank` (ONNX's broadcast alignment).
Shape AlignRank(const Shape& s, size_t rank);

struct PostOp {
  bool binary = false;
  bool sum = false;  // A binary_add read as oneDNN's sum: dst (holding the operand) += result.
  algorithm alg = algorithm::eltwise_linear;
  float alpha = 0, beta = 0;
  TensorId operand = kNoId;  // Binary operand read from a tensor buffer...
  std::vector<float> owned;  // ...or values computed here (folded BatchNormalization).
  Shape operand_dims;        // Aligned to the chain value's rank.
};

PostOp Eltwise(algorithm alg, float alpha = 0, float beta = 0);

// Per-channel scale and shift of an inference BatchNormalization with known parameters.
bool BatchNormAffine(const Graph& g, const Node& n, const FusedLoop::Lookup& known,
                     std::vector<float>* scale, std::vector<float>* shift);

// The post-ops of one chain node that reads chain value `v`, or nullopt without a post-op form.
std::optional<std::vector<PostOp>> PostOpsFor(const Graph& g, const Node& n, TensorId v,
                                              const FusedLoop::Lookup& known);

// Appends `ops` to the chain's post-ops so far, or returns false when oneDNN 2.6 would get them
// wrong: its JIT eltwise injector keeps one set of constants per algorithm, so a second eltwise
// post-op of the same algorithm with other parameters silently reuses the first one's (seen with
// two eltwise_linear post-ops on jit:uni binary). Adjacent linear maps are merged instead.
bool AppendPostOps(std::vector<std::vector<PostOp>>* chain, std::vector<PostOp> ops);

// The one eltwise of a gated pair (lowering/plan_legality.h): x * Sigmoid(x) is eltwise_swish
// (alpha 1), x * HardSigmoid(x) is eltwise_hardswish, x * max(0, min(1, alpha * x + beta)), with
// the HardSigmoid's alpha and beta.
PostOp GatePostOp(const Node& gate, GatedPair pair);

// Post-ops for the longest prefix of `chain` (starting from value v) that has a post-op form, one
// entry per node: a gated pair's gate holds its eltwise and its Mul none.
std::vector<std::vector<PostOp>> TranslateChain(const Graph& g, const std::vector<NodeId>& chain,
                                                TensorId v, const FusedLoop::Lookup& known);

// Maps a binary operand's dims (aligned to the chain value) to the primitive's dst dims.
using DstView = std::function<std::optional<memory::dims>(const Shape&)>;

// The memory layout a binary operand with the given (dst-view) dims is read in; plain by default.
using OperandLayout = std::function<memory::desc(const memory::dims&)>;

memory::desc PlainDims(const memory::dims& d);

DstView IdentityView();

// Builds a primitive_attr with the post-ops of `ops`, or nullopt when an operand does not map.
std::optional<dnnl::primitive_attr> MakeAttr(const std::vector<std::vector<PostOp>>& ops, size_t k,
                                             const DstView& view,
                                             const OperandLayout& layout = PlainDims);

}  // namespace fusor::onednn
