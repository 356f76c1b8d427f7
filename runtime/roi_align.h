// RoiAlign in the reference interpreter: for each region of interest (rois [R, 4] as x1, y1, x2,
// y2, scaled by spatial_scale, on image batch_indices[r] of X [N, C, H, W]), each of the
// output_height x output_width bins averages (mode avg) or takes the largest of (mode max)
// bilinear samples on a sampling_ratio grid (adaptive when 0), as ONNX Runtime computes them;
// coordinate_transformation_mode half_pixel shifts by half a pixel, output_half_pixel does not.
// Stateless; thread-safe.
#pragma once

#include "base/status.h"
#include "graph/graph.h"
#include "runtime/host_tensor.h"

namespace fusor {

// Fills `out` ([R, C, output_height, output_width], allocated to the output's dims).
// InvalidArgument naming the node for a batch index outside X.
Status RunRoiAlign(const Node& n, const HostTensor& x, const HostTensor& rois,
                   const HostTensor& batch_indices, HostTensor* out);

}  // namespace fusor
