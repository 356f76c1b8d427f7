// DFT in the reference interpreter (ONNX DFT-17 and -20): the discrete Fourier transform of a real
// ([..., 1]) or complex ([..., 2]) signal along one axis, of length dft_length (zero-padded or
// truncated), inverse (divided by the length) or forward, the onesided half when asked. Sums in
// double. Stateless; thread-safe.
#pragma once

#include "base/status.h"
#include "graph/graph.h"
#include "runtime/host_tensor.h"

namespace fusor {

// Fills `out` ([..., n, 2], allocated to the output's dims). `dft_length` and `axis` are the
// optional inputs (null when absent); without an axis input the axis is the attribute (DFT-17,
// default 1) or -2 (DFT-20).
Status RunDft(const Node& n, const HostTensor& x, const HostTensor* dft_length,
              const HostTensor* axis, HostTensor* out);

}  // namespace fusor
