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

#include <cmath>
#include <cstdint>
#include <limits>
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

// The data of an initializer or Constant tensor, or nullopt when it is external, missing, larger
// than 65536 elements, or of a type Fusor does not read (strings, float16, complex).
std::optional<ConstValue> ReadConstValue(const onnx::TensorProto& t);

// One pass over the graph in node order; returns whether anything was folded.
StatusOr<bool> FoldConstants(onnx::GraphProto* graph);

}  // namespace fusor
