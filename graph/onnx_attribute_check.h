// What ONNX's shape inference (libonnx 1.12) takes for granted about a node and never checks, so
// that a crafted model would crash it (a division by a zero stride, an index past a short
// attribute list), checked before it runs. Two parts:
//   - CheckAttributesForShapeInference reads the attributes of every node (subgraphs included):
//     strides, dilations and kernel_shape at least 1, pads and output_padding at least 0, all at
//     most 2^31 - 1, their lengths consistent, group and blocksize in [1, 2^31 - 1]. Its errors
//     name the node, the attribute and what it must be.
//   - CheckInputCounts checks every default-domain node's input and output counts against its
//     schema at the model's opset, and that no required input is left empty: inference reads a
//     required input without asking whether the node has it (Gemm-6 with two inputs).
//   - GuardShapeInference wraps the inference functions that index by something only known once
//     the input shapes are (Conv, ConvTranspose, ConvInteger, QLinearConv: the kernel shape comes
//     from W and indexes X's dims; LayerNormalization: `axis` indexes X's dims unchecked;
//     MaxUnpool: the channels come from dim 1 of I whether or not I has a shape; Gemm: dims 0
//     and 1 of A and B whatever their ranks): a rank or axis out of range fails with a message
//     instead of reading past the dims. Shape's data propagation skips an input without a type
//     (what a node whose inference failed leaves) instead of dereferencing it.
// All are thread-safe; the guard installs itself once per process.
#pragma once

#include <onnx/onnx_pb.h>

#include "base/status.h"

namespace fusor {

Status CheckAttributesForShapeInference(const onnx::GraphProto& g);

// The model's default-domain opset must be one libonnx 1.12 has schemas of (at most 17): the
// import checks after graph/opset_conversion.h, and the conversion from older opsets before the
// inference it runs.
Status CheckInputCounts(const onnx::ModelProto& model);

// Installs the guards into libonnx's schema registry (once; later calls do nothing).
void GuardShapeInference();

}  // namespace fusor
