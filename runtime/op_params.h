// Attribute and constant-input decoding shared by the reference interpreter and the lowerings:
// sliding windows (with auto_pad and ceil_mode resolved into explicit end padding, and the
// transposed window of ConvTranspose), slice starts and steps, permutations,
// split sizes, pads, Resize's scales and source coordinates, clip bounds. Each function reads one
// node of a validated graph and returns a Status naming the node when the node cannot be decoded
// (for example a Slice whose starts are computed at run time). Pure functions; thread-safe.
// Node labels, axes, constant ints, reduction axes and the softmax axis are in graph/node_attrs.h.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/node_attrs.h"
#include "lowering/affine_map.h"  // RowMajorStrides
#include "runtime/host_tensor.h"

namespace fusor {

// A sliding window over the spatial dims. pad_end is what makes the node's output dims come out
// exactly (it absorbs ceil_mode and auto_pad); `declared_pad_end` is the padding the node states.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pad_begin, pad_end, declared_pad_end;
};
StatusOr<Window> ConvWindow(const Graph& g, const Node& n);  // Kernel from the weight's dims.
StatusOr<Window> PoolWindow(const Graph& g, const Node& n);  // kernel_shape; Global* pools too.
// ConvTranspose: output position o of a spatial dim receives input position i through kernel
// position k when o = i * stride - pad_begin + k * dilation. pad_begin is the stated padding, or
// what auto_pad / output_shape generate (ONNX 1.12 text: SAME_UPPER puts an odd element at the
// end, SAME_LOWER and output_shape at the start); declared_pad_end likewise. pad_end is what makes
// the node's output dims come out exactly in oneDNN's deconvolution terms: the declared end padding
// minus output_padding, negative when output_padding extends the output.
StatusOr<Window> ConvTransposeWindow(const Graph& g, const Node& n);

enum class PadMode : uint8_t { kConstant, kReflect, kEdge };

// Pad's mode, begin padding per dim and constant. Pads and constant_value are read through
// `lookup`; one it does not know (an activation the kernel reads as it runs) is named in
// pads_input / value_input instead. Unimplemented for the 'wrap' mode and an axes input.
struct PadParams {
  PadMode mode = PadMode::kConstant;
  std::vector<int64_t> begin;  // Empty when pads_input is set.
  float value = 0;
  TensorId pads_input = kNoId, value_input = kNoId;
};
StatusOr<PadParams> PadOf(const Graph& g, const Node& n,
                          const std::function<const HostTensor*(TensorId)>& lookup);

// The input index that a padded output position reads along a dim of length `len`, given its
// offset `c` from the begin padding: reflect mirrors c into [0, len) (numpy's 'reflect', repeated
// for pads longer than the dim), edge clamps it; constant returns c, outside [0, len) meaning the
// constant.
int64_t PadSourceIndex(PadMode mode, int64_t c, int64_t len);

// Clip bounds from inputs 1 and 2 (or the old min/max attributes); ±inf when absent.
StatusOr<std::pair<float, float>> ClipBounds(
    const Graph& g, const Node& n, const std::function<const HostTensor*(TensorId)>& lookup);

}  // namespace fusor
