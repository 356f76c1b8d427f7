// Output shapes that ONNX's shape inference leaves unknown but that follow from the constant value
// of one operand (OneHot's depth, Compress's condition, the input of NonZero and Unique, whose
// output sizes depend on its values) or from the operands' shapes (Einsum's equation,
// graph/einsum.h). The import applies them after each
// round of inference (graph/onnx_import.cc FoldToFixpoint), so a model whose operand was given at
// import (--const-input) or folded gets static shapes. Stateless; thread-safe.
#pragma once

namespace onnx {
class GraphProto;
}  // namespace onnx

namespace fusor {

// Adds a value_info with the static shape of the outputs of each OneHot, Compress, Einsum, NonZero
// and Unique whose first output has none, when its input shapes are static and its shape operand
// (if any) is an initializer. True when it added any.
bool AddShapesFromConstantOperands(onnx::GraphProto* g);

}  // namespace fusor
