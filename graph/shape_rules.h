// Output shapes that ONNX's shape inference leaves unknown but that follow from the constant value
// of one operand: OneHot's depth and Compress's condition. The import applies them after each
// round of inference (graph/onnx_import.cc FoldToFixpoint), so a model whose operand was given at
// import (--const-input) or folded gets static shapes. Stateless; thread-safe.
#pragma once

namespace onnx {
class GraphProto;
}  // namespace onnx

namespace fusor {

// Adds a value_info with the static shape of each OneHot and Compress output that has none, when
// its input shapes are static and its shape operand is an initializer. True when it added any.
bool AddShapesFromConstantOperands(onnx::GraphProto* g);

}  // namespace fusor
