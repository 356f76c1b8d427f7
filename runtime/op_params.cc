#include "runtime/op_params.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fusor {
namespace {

Shape SpatialDims(const Shape& dims) {
  return dims.size() > 2 ? Shape(dims.begin() + 2, dims.end()) : Shape{};
}

// Fills strides, dilations and padding so that the node's output dims come out exactly.
Status ResolveWindow(const Graph& g, const Node& n, Window* w) {
  const Shape in = SpatialDims(g.tensor(n.input(0)).dims);
  const Shape out = SpatialDims(g.tensor(n.outputs[0]).dims);
  size_t s = in.size();
  if (w->kernel.size() != s || out.size() != s) {
    return Status::InvalidArgument(NodeLabel(n) + ": kernel has " +
                                   std::to_string(w->kernel.size()) + " dims, input has " +
                                   std::to_string(s) + " spatial dims");
  }
  w->strides = n.GetInts("strides");
  w->dilations = n.GetInts("dilations");
  std::vector<int64_t> pads = n.GetInts("pads");
  if (w->strides.size() != s) w->strides.assign(s, 1);
  if (w->dilations.size() != s) w->dilations.assign(s, 1);
  if (pads.size() != 2 * s) pads.assign(2 * s, 0);
  std::string auto_pad = n.GetString("auto_pad", "NOTSET");
  w->pad_begin.assign(pads.begin(), pads.begin() + s);
  w->declared_pad_end.assign(pads.begin() + s, pads.end());
  for (size_t i = 0; i < s; ++i) {
    int64_t extent = (w->kernel[i] - 1) * w->dilations[i] + 1;
    int64_t needed = std::max<int64_t>((out[i] - 1) * w->strides[i] + extent - in[i], 0);
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t small = needed / 2;
      w->pad_begin[i] = auto_pad == "SAME_UPPER" ? small : needed - small;
      w->declared_pad_end[i] = needed - w->pad_begin[i];
    } else if (auto_pad == "VALID") {
      w->pad_begin[i] = w->declared_pad_end[i] = 0;
    }
  }
  w->pad_end = w->declared_pad_end;
  for (size_t i = 0; i < s; ++i) {
    // ceil_mode: the last window may hang over the end; pad just enough to cover it.
    int64_t extent = (w->kernel[i] - 1) * w->dilations[i] + 1;
    int64_t cover = (out[i] - 1) * w->strides[i] + extent - in[i] - w->pad_begin[i];
    w->pad_end[i] = std::max(w->pad_end[i], cover);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Window> ConvWindow(const Graph& g, const Node& n) {
  Window w;
  w.kernel = SpatialDims(g.tensor(n.input(n.op_type == "QLinearConv" ? 3 : 1)).dims);
  FUSOR_RETURN_IF_ERROR(ResolveWindow(g, n, &w));
  return w;
}

StatusOr<Window> PoolWindow(const Graph& g, const Node& n) {
  Window w;
  w.kernel = n.GetInts("kernel_shape");
  if (n.op_type.rfind("Global", 0) == 0) w.kernel = SpatialDims(g.tensor(n.input(0)).dims);
  FUSOR_RETURN_IF_ERROR(ResolveWindow(g, n, &w));
  return w;
}

StatusOr<Window> ConvTransposeWindow(const Graph& g, const Node& n) {
  const Shape in = SpatialDims(g.tensor(n.input(0)).dims);
  const Shape out = SpatialDims(g.tensor(n.outputs[0]).dims);
  Window w;
  w.kernel = SpatialDims(g.tensor(n.input(1)).dims);
  size_t s = in.size();
  if (w.kernel.size() != s || out.size() != s) {
    return Status::InvalidArgument(NodeLabel(n) + ": kernel has " +
                                   std::to_string(w.kernel.size()) + " dims, input has " +
                                   std::to_string(s) + " spatial dims");
  }
  w.strides = n.GetInts("strides");
  w.dilations = n.GetInts("dilations");
  std::vector<int64_t> pads = n.GetInts("pads"), extra = n.GetInts("output_padding");
  if (w.strides.size() != s) w.strides.assign(s, 1);
  if (w.dilations.size() != s) w.dilations.assign(s, 1);
  if (pads.size() != 2 * s) pads.assign(2 * s, 0);
  if (extra.size() != s) extra.assign(s, 0);
  std::string auto_pad = n.GetString("auto_pad", "NOTSET");
  bool generated =
      auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER" || n.FindAttr("output_shape") != nullptr;
  for (size_t i = 0; i < s; ++i) {
    int64_t extent = (w.kernel[i] - 1) * w.dilations[i] + 1;
    int64_t full = w.strides[i] * (in[i] - 1) + extra[i] + extent;
    int64_t begin = pads[i], end = pads[i + s];
    if (auto_pad == "VALID") {
      begin = end = 0;
    } else if (generated) {
      // ONNX's reference halves the total with floor division: an output_shape one longer than
      // the kernels reach (total -1) pads the end by -1, extending the output there.
      const int64_t total = full - out[i];
      const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
      begin = auto_pad == "SAME_UPPER" ? half : total - half;
      end = total - begin;
    }
    if (begin < 0 || (end < 0 && !generated) || full - begin - end != out[i]) {
      return Status::InvalidArgument(NodeLabel(n) + ": spatial dim " + std::to_string(i) +
                                     " of the output has length " + std::to_string(out[i]) +
                                     "; strides, kernel, output_padding and pads give " +
                                     std::to_string(full - begin - end) + " (pads " +
                                     std::to_string(begin) + ", " + std::to_string(end) + ")");
    }
    w.pad_begin.push_back(begin);
    w.declared_pad_end.push_back(end);
    w.pad_end.push_back(end - extra[i]);
  }
  return w;
}

StatusOr<PadParams> PadOf(const Graph& g, const Node& n,
                          const std::function<const HostTensor*(TensorId)>& lookup) {
  PadParams p;
  std::string mode = n.GetString("mode", "constant");
  if (mode == "reflect") {
    p.mode = PadMode::kReflect;
  } else if (mode == "edge") {
    p.mode = PadMode::kEdge;
  } else if (mode != "constant") {
    return Status::Unimplemented(NodeLabel(n) + ": pad mode '" + mode +
                                 "' is not supported; constant, reflect and edge are");
  }
  if (n.input(3) != kNoId) {
    return Status::Unimplemented(NodeLabel(n) + ": Pad with an axes input is not supported");
  }
  const Shape& in = g.tensor(n.input(0)).dims;
  size_t rank = in.size();
  std::vector<int64_t> pads = n.GetInts("pads");
  if (TensorId t = n.input(1); t != kNoId) {
    const HostTensor* v = lookup(t);
    if (!IsInteger(g.tensor(t).dtype)) {
      return Status::InvalidArgument(NodeLabel(n) + ": pads '" + g.tensor(t).name +
                                     "' must be int64");
    }
    pads.clear();
    for (int64_t e = 0; v != nullptr && e < v->num_elements(); ++e) {
      pads.push_back(static_cast<int64_t>(v->at(e)));
    }
    if (v == nullptr) p.pads_input = t;  // Computed at run time: the kernel reads it.
  }
  int64_t count = p.pads_input != kNoId ? g.tensor(p.pads_input).num_elements()
                                        : static_cast<int64_t>(pads.size());
  if (count != static_cast<int64_t>(2 * rank)) {
    return Status::InvalidArgument(NodeLabel(n) + ": pads has " + std::to_string(count) +
                                   " values, expected " + std::to_string(2 * rank));
  }
  if (p.pads_input == kNoId) {
    const Shape& out = g.tensor(n.outputs[0]).dims;
    for (size_t d = 0; d < rank; ++d) {
      if (in[d] + pads[d] + pads[d + rank] != out[d]) {
        return Status::InvalidArgument(NodeLabel(n) + ": pads give dim " + std::to_string(d) +
                                       " length " +
                                       std::to_string(in[d] + pads[d] + pads[d + rank]) +
                                       ", the output has " + std::to_string(out[d]));
      }
    }
    p.begin.assign(pads.begin(), pads.begin() + rank);
  }
  p.value = static_cast<float>(n.GetFloat("value", 0.0));
  if (TensorId t = n.input(2); t != kNoId) {
    const HostTensor* v = lookup(t);
    if (g.tensor(t).num_elements() != 1) {
      return Status::InvalidArgument(NodeLabel(n) + ": constant_value '" + g.tensor(t).name +
                                     "' must be a scalar");
    }
    if (v != nullptr) {
      p.value = static_cast<float>(v->at(0));
    } else {
      p.value_input = t;
    }
  }
  return p;
}

int64_t PadSourceIndex(PadMode mode, int64_t c, int64_t len) {
  if (mode == PadMode::kConstant || (c >= 0 && c < len)) return c;
  if (mode == PadMode::kEdge || len == 1) return std::clamp<int64_t>(c, 0, len - 1);
  int64_t period = 2 * (len - 1);  // ... a b c b | a b c | b a b c ...: mirrored copies repeat.
  c %= period;
  if (c < 0) c += period;
  return c < len ? c : period - c;
}

StatusOr<std::pair<float, float>> ClipBounds(
    const Graph& /*g*/, const Node& n, const std::function<const HostTensor*(TensorId)>& lookup) {
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  lo = static_cast<float>(n.GetFloat("min", lo));
  hi = static_cast<float>(n.GetFloat("max", hi));
  for (size_t i = 1; i <= 2; ++i) {
    if (n.input(i) == kNoId) continue;
    const HostTensor* v = lookup(n.input(i));
    if (v == nullptr || v->num_elements() != 1) {
      return Status::Unimplemented(NodeLabel(n) +
                                   ": Clip bounds must be scalars known before the run");
    }
    (i == 1 ? lo : hi) = static_cast<float>(v->at(0));
  }
  return std::make_pair(lo, hi);
}

}  // namespace fusor
