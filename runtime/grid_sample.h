// GridSample in the reference interpreter: samples X [N, C, D1, ..., Dr] at the positions
// grid [N, O1, ..., Or, r] holds (normalised to [-1, 1], the last dim innermost first), giving
// [N, C, O1, ..., Or]. Modes nearest, linear (bilinear) and cubic (bicubic), padding zeros, border
// and reflection, align_corners: ONNX's definition (onnx/reference/ops/op_grid_sample.py), summed
// in double. Stateless; thread-safe.
#pragma once

#include "base/status.h"
#include "graph/graph.h"
#include "runtime/host_tensor.h"

namespace fusor {

// Fills `out` (float, allocated to the output's dims). InvalidArgument naming the node for a grid
// whose shape does not fit X; Unimplemented naming the value for an unknown mode.
Status RunGridSample(const Node& n, const HostTensor& x, const HostTensor& grid, HostTensor* out);

}  // namespace fusor
