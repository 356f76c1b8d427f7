// Attribute and constant-input decoding that rules in graph/ need as well as the runtime: a node's
// label for messages, axis normalisation, integer constant inputs, the axes a reduction reduces,
// whether a reduction reduces rows (a trailing block of axes), which is the form our own row
// reduction loop runs, and a recurrent node's attributes. runtime/op_params.h builds the rest of
// the decoding on these. Pure functions on a validated graph; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"

namespace fusor {

// "node 'conv_3' (Conv)", for messages.
std::string NodeLabel(const Node& n);

int64_t NormalizeAxis(int64_t axis, size_t rank);

// Whether `n` is in a form only the reference interpreter computes: the fused loop and the oneDNN
// kernels compute an op's inference form and its first output, so a LayerNormalization whose Mean
// or InvStdDev is read, a MaxPool over integers or whose Indices is read and a BatchNormalization
// in training mode (batch statistics, running statistics as outputs) are opaque
// (graph/op_registry.h ClassifyNode) and run alone through the reference fallback
// (runtime/reference_kernel.h); so is a cubic Resize (the fused loop resamples nearest and linear).
bool OnlyReferenceComputes(const Graph& g, const Node& n);

// The integer values of input `i` of `n`, which must be a constant tensor.
StatusOr<std::vector<int64_t>> ConstantInts(const Graph& g, const Node& n, size_t i);

// A Gather whose indices are one constant element inside the gathered axis takes one slice of its
// data along that axis (torch's `x[0]`, the Q / K / V split of a packed projection): a strided
// copy like a Slice, not a lookup by index. The index, made non-negative, or -1 for any other
// Gather. The fused loop runs such a Gather as a strided map and the cost model prices it so.
int64_t GatherSliceIndex(const Graph& g, const Node& n);

// Elements of a Gather's data after the gathered axis: the contiguous block one index selects.
int64_t GatherBlock(const Graph& g, const Node& n);

// Sorted, normalised axes a Reduce* node reduces (attribute or constant input; empty = all).
StatusOr<std::vector<int64_t>> ReduceAxes(const Graph& g, const Node& n);

// The softmax axis, and whether the pre-13 "flatten to 2-D at axis" semantics apply.
struct SoftmaxAxis {
  int64_t axis = -1;
  bool coerce_2d = false;
};
SoftmaxAxis SoftmaxAxisOf(const Graph& g, const Node& n);

// A reduction over rows: each output element (or, for Softmax, each output row) comes from `len`
// consecutive input elements. len 0: the node does not reduce a trailing block of axes.
enum class RowOp { kSum, kMean, kMax, kSoftmax };
struct RowReduction {
  RowOp op = RowOp::kSum;
  int64_t len = 0;
};
RowReduction RowReductionOf(const Graph& g, const Node& n);

// The attributes of a recurrent node (ONNX LSTM or GRU), parsed and checked: one decoding for the
// shape rules (graph/op_registry.cc), the reference interpreter and the lowering
// (lowering/rnn_form.h), which decides what runs on oneDNN's RNN primitive.
struct RecurrentAttrs {
  int64_t gates = 4;  // LSTM: i, o, f, c; GRU: z, r, h; RNN: one.
  int64_t directions = 1;
  bool reverse = false;  // direction "reverse" (bidirectional runs the second direction reversed).
  int64_t hidden = 0;    // hidden_size, or R's last dim when the attribute is absent.
  bool batch_first = false;          // layout 1: X [batch, seq, input].
  double clip = 0;                   // 0: no clip.
  bool input_forget = false;         // LSTM only.
  bool linear_before_reset = false;  // GRU only.
  // The first activation that is not the op's default (LSTM: Sigmoid, Tanh, Tanh; GRU: Sigmoid,
  // Tanh; RNN: Tanh; per direction), or "" when all are the defaults.
  std::string non_default_activation;
};

// The attributes of `n`, an LSTM, GRU or RNN with inputs X, W and R; InvalidArgument naming the
// node and the attribute when a value is not one ONNX allows (a direction other than forward,
// reverse or bidirectional, a negative hidden_size, a layout other than 0 or 1).
StatusOr<RecurrentAttrs> RecurrentAttrsOf(const Graph& g, const Node& n);

// Resize (opsets 11-17) in the forms the runtime runs: mode nearest (any nearest_mode) or linear
// (over every dim), coordinate_transformation_mode half_pixel, pytorch_half_pixel, align_corners,
// asymmetric or tf_half_pixel_for_nn, scales or sizes given as constants; and where the caller
// says it computes them (`reference_forms`: the reference interpreter), mode cubic and
// tf_crop_and_resize (a constant roi; positions outside the input give extrapolation_value).
// Anything else is Unimplemented naming the node and the attribute value.
struct ResizeParams {
  bool linear = false;
  bool cubic = false;
  double cubic_coeff_a = -0.75;  // Cubic only: the kernel's a, and whether taps outside the
  bool exclude_outside = false;  // input get weight 0 (the others renormalised).
  std::string coordinate_mode, nearest_mode;
  std::vector<double> scales;  // Per dim: the given scale, or output / input when sizes are given.
  std::vector<double> roi;     // tf_crop_and_resize: the starts, then the ends, per dim.
  double extrapolation_value = 0;
  Shape in, out;
};
StatusOr<ResizeParams> ResizeOf(const Graph& g, const Node& n, bool reference_forms = false);

// The input coordinate output position x of dim d maps to (ONNX's coordinate_transformation_mode).
double ResizeSourceCoordinate(const ResizeParams& p, size_t d, int64_t x);

// The input positions output position x of dim d reads: nearest reads i0 (= i1, w = 0); linear
// blends (1 - w) * in[i0] + w * in[i1], both inside the input (ONNX's edge clamping).
struct ResizeTap {
  int64_t i0 = 0, i1 = 0;
  double w = 0;
};
ResizeTap ResizeTapOf(const ResizeParams& p, size_t d, int64_t x);

// A Slice's first index and step per input dim (the output dims give the counts), starts clamped
// as ONNX does; an error naming the node for a computed start or a zero step.
struct SliceParams {
  std::vector<int64_t> start, step;
};
StatusOr<SliceParams> SliceOf(const Graph& g, const Node& n);

// A Transpose's permutation, the reversal when it has none.
std::vector<int64_t> TransposePerm(const Graph& g, const Node& n);

// Cubic Resize: the four input positions output position x of dim d reads (clamped to the edge,
// as ONNX pads the input with its edge values) and their weights, from the cubic convolution
// kernel with coefficient a (ONNX's definition, onnx/reference/ops/op_resize.py).
struct WeightedTap {
  int64_t i = 0;
  double w = 0;
};
std::array<WeightedTap, 4> CubicResizeTapsOf(const ResizeParams& p, size_t d, int64_t x);

// The cubic convolution kernel's weights for the four samples at offsets -1, 0, 1, 2 from a
// position `t` in [0, 1) past a sample, with coefficient `a` (Resize's cubic_coeff_a; GridSample
// uses -0.75).
std::array<double, 4> CubicWeights(double t, double a);

}  // namespace fusor
