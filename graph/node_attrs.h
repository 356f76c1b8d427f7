// Attribute and constant-input decoding that rules in graph/ need as well as the runtime: a node's
// label for messages, axis normalisation, integer constant inputs, the axes a reduction reduces,
// and whether a reduction reduces rows (a trailing block of axes), which is the form our own row
// reduction loop runs. runtime/op_params.h builds the rest of the decoding on these. Pure
// functions on a validated graph; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"

namespace fusor {

// "node 'conv_3' (Conv)", for messages.
std::string NodeLabel(const Node& n);

int64_t NormalizeAxis(int64_t axis, size_t rank);

// The integer values of input `i` of `n`, which must be a constant tensor.
StatusOr<std::vector<int64_t>> ConstantInts(const Graph& g, const Node& n, size_t i);

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

// Whether an LSTM node has the form oneDNN's LSTM primitive computes (runtime/rnn_kernel.h):
// layout 0, the default activations, no clip, no input_forget, no peepholes, float32, and
// sequence_lens absent or a constant of the full length. Unimplemented, naming the node and what
// stands in the way, otherwise; such a node runs through the reference fallback. The runtime
// lowers by it and the cost model prices by it.
Status LstmPrimitiveForm(const Graph& g, const Node& n);

}  // namespace fusor
