// Constant folding on an ONNX graph, used by the importer: every node whose inputs are known values
// (initializers with data, Constant nodes, shapes of statically-shaped tensors) and whose op is one
// of the shape-arithmetic ops below is evaluated and replaced by an initializer. This removes the
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains that exporters emit, so that shape
// inference sees constants and every shape becomes static. Values are small (shape vectors,
// scalars); outputs above kMaxFoldElements are left alone. Stateless; thread-safe.
//
// Folded ops: Constant, Shape, Size, Identity, Cast, Gather, Unsqueeze, Squeeze, Reshape, Concat,
// Slice, Expand, ConstantOfShape, Range, Where, unary Neg/Abs/Sqrt/Reciprocal/Floor/Ceil/Not and
// binary Add/Sub/Mul/Div/Mod/Pow/Min/Max/Equal/Less/Greater/And/Or with broadcasting.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"

namespace onnx {
class GraphProto;
class TensorProto;
}  // namespace onnx

namespace fusor {

inline constexpr int64_t kMaxFoldElements = 4096;

// A known tensor value. Integers and bools live in `ints`, floating point in `floats`.
struct ConstValue {
  int32_t onnx_type = 0;  // ONNX TensorProto.DataType.
  Shape dims;
  bool is_float = false;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  int64_t size() const { return static_cast<int64_t>(is_float ? floats.size() : ints.size()); }
  double AsDouble(int64_t i) const { return is_float ? floats[i] : static_cast<double>(ints[i]); }
  int64_t AsInt(int64_t i) const { return is_float ? static_cast<int64_t>(floats[i]) : ints[i]; }
};

// Integer initializers of at most this many elements are constants (shapes, axes, pads, indices).
inline constexpr int64_t kMaxIntConstantElements = 64;

// Whether an initializer's value is a constant that may shape the graph (integers of at most
// kMaxIntConstantElements, float scalars) rather than a weight. Folding reads only these, so a
// weight's data, present, stripped or external, never changes what import makes of a model: with
// and without its weights a model imports to the same graph and hash.
bool IsConstantInitializer(const ConstValue& v);

// The data of an initializer or Constant tensor, or nullopt when it is external, missing, larger
// than 65536 elements, or of a type Fusor does not read (strings, float16, complex).
std::optional<ConstValue> ReadConstValue(const onnx::TensorProto& t);

// One pass over the graph in node order; returns whether anything was folded.
StatusOr<bool> FoldConstants(onnx::GraphProto* graph);

}  // namespace fusor
