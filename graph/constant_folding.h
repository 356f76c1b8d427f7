// Constant folding on an ONNX graph, used by the importer: every node whose inputs are known values
// (initializers with data, Constant nodes, shapes of statically-shaped tensors) and whose op is one
// of the shape-arithmetic ops below is evaluated and replaced by an initializer. This removes the
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains that exporters emit, so that shape
// inference sees constants and every shape becomes static. Values are small (shape vectors,
// scalars); outputs above kMaxFoldElements are left alone. Stateless; thread-safe.
//
// The folder reads the values of an initializer from the file only when the IR carries them anyway
// (CarriedAsConstant: small integer vectors, scalars): initializers are weights, and no value
// derived from a weight may reach the IR, which leaves the machine. Constant nodes are structure
// (masks, shape constants) and are read up to kMaxConstantElements.
//
// Folded ops: Constant, Shape, Size, Identity, Cast, Gather, Unsqueeze, Squeeze, Reshape, Concat,
// Slice, Transpose, Expand, ConstantOfShape, Range, Where, unary
// Neg/Abs/Sqrt/Reciprocal/Floor/Ceil/Not and binary
// Add/Sub/Mul/Div/Mod/Pow/Min/Max/Equal/Less/Greater/LessOrEqual/GreaterOrEqual/And/Or/Xor with
// broadcasting, Sign, and ReduceSum/ReduceProd/ReduceMin/ReduceMax over shape vectors.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"

namespace onnx {
class GraphProto;
class TensorProto;
}  // namespace onnx

namespace fusor {

inline constexpr int64_t kMaxFoldElements = 4096;
// The largest constant whose values the IR reads from the file: a Constant node's value, or an
// initializer the import folded from constants.
inline constexpr int64_t kMaxConstantElements = 65536;
// The largest value FoldConstantNodes computes from constants and carries in the IR in place of
// the nodes that compute it. Its inputs are carried constants already, so it adds no data from
// the file; a broadcast makes it larger than they are. Swin-T builds its first stage's
// shifted-window attention mask from a [64, 49] constant as [64, 49, 49] (153664 elements):
// within this cap it is computed once at import, where under kMaxConstantElements its Sub, Equal,
// Not and Where ran at every inference (Equal and Not through the reference fallback).
inline constexpr int64_t kMaxFoldedElements = 262144;

// double -> int64 without undefined behaviour: NaN is 0, values beyond int64 saturate. Folding
// computes in double, and a file's numbers may be anything.
inline int64_t ToInt64(double x) {
  if (std::isnan(x)) return 0;
  if (x >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
  if (x < -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(x);
}

// A known tensor value. Integers and bools live in `ints`, floating point in `floats`.
struct ConstValue {
  int32_t onnx_type = 0;  // ONNX TensorProto.DataType.
  Shape dims;
  bool is_float = false;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  int64_t size() const { return static_cast<int64_t>(is_float ? floats.size() : ints.size()); }
  double AsDouble(int64_t i) const { return is_float ? floats[i] : static_cast<double>(ints[i]); }
  int64_t AsInt(int64_t i) const { return is_float ? ToInt64(floats[i]) : ints[i]; }
};

// Integer initializers of at most this many elements are constants (shapes, axes, pads, indices).
inline constexpr int64_t kMaxIntConstantElements = 64;

// The data of an initializer or Constant tensor, or nullopt when it is external, missing, larger
// than 65536 elements, or of a type Fusor does not read (strings, float16, complex).
std::optional<ConstValue> ReadConstValue(const onnx::TensorProto& t);

// Whether the IR carries the values of an initializer from the file (an integer vector of up to
// 64 elements, or a scalar); other initializers are weights, carried as dims only. Folding reads
// only these, so a weight's data, present, stripped or external, never changes what import makes
// of a model: with and without its weights a model imports to the same graph and hash.
bool CarriedAsConstant(const ConstValue& v);

// One pass over the graph in node order; returns whether anything was folded. `weights` names the
// file's own initializers: their values are read only when CarriedAsConstant.
StatusOr<bool> FoldConstants(onnx::GraphProto* graph,
                             const std::unordered_set<std::string>& weights);

// Evaluates one node of an IR graph whose inputs are all kConstant tensors: the values of its
// outputs, in the order of Node::outputs, or an error (Unimplemented for an op it does not
// evaluate). The import takes it as a parameter because the evaluator, the reference
// interpreter, lives in runtime/, which graph/ may not depend on.
using ConstantNodeEvaluator =
    std::function<StatusOr<std::vector<AttrTensor>>(const Graph&, NodeId)>;

// Replaces every node whose inputs are all kConstant tensors (that has at least one input and
// writes no graph output) by kConstant outputs carrying the values `evaluate` computes, in node
// order so that chains fold; a node whose evaluation fails or whose outputs exceed
// kMaxFoldedElements stays. Returns the number of nodes folded. The graph is compacted and
// relinked.
StatusOr<int> FoldConstantNodes(Graph* g, const ConstantNodeEvaluator& evaluate);

// The first node FoldConstantNodes would try to fold (every input a kConstant tensor, outputs
// within kMaxFoldedElements, no graph output), or kNoId.
NodeId FirstFoldableNode(const Graph& g);

}  // namespace fusor
