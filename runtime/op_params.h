// Attribute and constant-input decoding shared by the reference interpreter and the lowerings:
// sliding windows (with auto_pad and ceil_mode resolved into explicit end padding), reduction axes,
// slice starts and steps, permutations, split sizes, pads, clip bounds. Each function reads one
// node of a validated graph and returns a Status naming the node when the node cannot be decoded
// (for example a Slice whose starts are computed at run time). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "runtime/host_tensor.h"

namespace fusor {

// "node 'conv_3' (Conv)", for messages.
std::string NodeLabel(const Node& n);

int64_t NormalizeAxis(int64_t axis, size_t rank);
// Row-major strides of a shape.
std::vector<int64_t> RowMajorStrides(const Shape& dims);

// The integer values of input `i` of `n`, which must be a constant tensor.
StatusOr<std::vector<int64_t>> ConstantInts(const Graph& g, const Node& n, size_t i);

// A sliding window over the spatial dims. pad_end is what makes the node's output dims come out
// exactly (it absorbs ceil_mode and auto_pad); `declared_pad_end` is the padding the node states.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pad_begin, pad_end, declared_pad_end;
};
StatusOr<Window> ConvWindow(const Graph& g, const Node& n);  // Kernel from the weight's dims.
StatusOr<Window> PoolWindow(const Graph& g, const Node& n);  // kernel_shape; Global* pools too.

// Sorted, normalised axes a Reduce* node reduces (attribute or constant input; empty = all).
StatusOr<std::vector<int64_t>> ReduceAxes(const Graph& g, const Node& n);

// Per input dim: first index and step; the output dims give the counts.
struct SliceParams {
  std::vector<int64_t> start, step;
};
StatusOr<SliceParams> SliceOf(const Graph& g, const Node& n);

std::vector<int64_t> TransposePerm(const Graph& g, const Node& n);

// Begin padding per dim and the constant; Unimplemented for non-constant modes.
struct PadParams {
  std::vector<int64_t> begin;
  float value = 0;
};
StatusOr<PadParams> PadOf(const Graph& g, const Node& n,
                          const std::function<const HostTensor*(TensorId)>& lookup);

// Clip bounds from inputs 1 and 2 (or the old min/max attributes); ±inf when absent.
StatusOr<std::pair<float, float>> ClipBounds(
    const Graph& g, const Node& n, const std::function<const HostTensor*(TensorId)>& lookup);

// The softmax axis, and whether the pre-13 "flatten to 2-D at axis" semantics apply.
struct SoftmaxAxis {
  int64_t axis = -1;
  bool coerce_2d = false;
};
SoftmaxAxis SoftmaxAxisOf(const Graph& g, const Node& n);

}  // namespace fusor
