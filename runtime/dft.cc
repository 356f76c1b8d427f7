#include "runtime/dft.h"

#include <cmath>
#include <numbers>
#include <string>

#include "graph/narrow_float.h"
#include "graph/node_attrs.h"

namespace fusor {

Status RunDft(const Node& n, const HostTensor& x, const HostTensor* dft_length,
              const HostTensor* axis_input, HostTensor* out) {
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  int64_t axis = n.op_version >= 20 ? -2 : n.GetInt("axis", 1);
  if (axis_input != nullptr) axis = static_cast<int64_t>(axis_input->at(0));
  if (axis < 0) axis += rank;
  const int64_t components = x.dims.back();
  if (rank < 2 || axis < 0 || axis >= rank - 1 || (components != 1 && components != 2)) {
    return Status::InvalidArgument(NodeLabel(n) + ": axis " + std::to_string(axis) + " of input " +
                                   ShapeString(x.dims) +
                                   " is not a signal axis of a real [..., 1] or complex [..., 2] "
                                   "signal");
  }
  const int64_t in_len = x.dims[axis], out_len = out->dims[axis];
  const int64_t length = dft_length != nullptr ? static_cast<int64_t>(dft_length->at(0)) : in_len;
  if (length < 1) {
    return Status::InvalidArgument(NodeLabel(n) + ": dft_length " + std::to_string(length) +
                                   " must be 1 or more");
  }
  const bool inverse = n.GetInt("inverse", 0) != 0;
  const double sign = inverse ? 1.0 : -1.0;
  const int64_t outer = NumElements(Shape(x.dims.begin(), x.dims.begin() + axis));
  const int64_t inner = NumElements(Shape(x.dims.begin() + axis + 1, x.dims.end() - 1));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t k = 0; k < out_len; ++k) {
        double re = 0, im = 0;
        for (int64_t t = 0; t < std::min(in_len, length); ++t) {
          const int64_t at = ((o * in_len + t) * inner + i) * components;
          const double xr = x.f[at], xi = components == 2 ? x.f[at + 1] : 0.0;
          const double phase = sign * 2 * std::numbers::pi * static_cast<double>(k * t % length) /
                               static_cast<double>(length);
          re += xr * std::cos(phase) - xi * std::sin(phase);
          im += xr * std::sin(phase) + xi * std::cos(phase);
        }
        if (inverse) {
          re /= static_cast<double>(length);
          im /= static_cast<double>(length);
        }
        const int64_t at = ((o * out_len + k) * inner + i) * 2;
        out->f[at] = RoundToDType(static_cast<float>(re), out->dtype);
        out->f[at + 1] = RoundToDType(static_cast<float>(im), out->dtype);
      }
    }
  }
  return Status::Ok();
}

}  // namespace fusor
