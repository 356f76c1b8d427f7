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

std::string NodeLabel(const Node& n) { return "node '" + n.name + "' (" + n.op_type + ")"; }

int64_t NormalizeAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

std::vector<int64_t> RowMajorStrides(const Shape& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

StatusOr<std::vector<int64_t>> ConstantInts(const Graph& g, const Node& n, size_t i) {
  TensorId id = n.input(i);
  if (id == kNoId)
    return Status::InvalidArgument(NodeLabel(n) + ": input " + std::to_string(i) + " is missing");
  const Tensor& t = g.tensor(id);
  if (t.kind != TensorKind::kConstant || !IsInteger(t.dtype)) {
    return Status::Unimplemented(NodeLabel(n) + ": input '" + t.name +
                                 "' must be an integer constant; the runtime does not support "
                                 "values computed at run time here");
  }
  if (t.int_data.size() == 1 && t.num_elements() > 1) {
    return std::vector<int64_t>(t.num_elements(), t.int_data[0]);
  }
  return t.int_data;
}

StatusOr<Window> ConvWindow(const Graph& g, const Node& n) {
  Window w;
  w.kernel = SpatialDims(g.tensor(n.input(1)).dims);
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

StatusOr<std::vector<int64_t>> ReduceAxes(const Graph& g, const Node& n) {
  size_t rank = g.tensor(n.input(0)).dims.size();
  std::vector<int64_t> axes = n.GetInts("axes");
  if (n.FindAttr("axes") == nullptr && n.input(1) != kNoId) {
    FUSOR_ASSIGN_OR_RETURN(axes, ConstantInts(g, n, 1));
  }
  if (axes.empty() && n.GetInt("noop_with_empty_axes", 0) != 0) return axes;
  if (axes.empty()) {
    for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  for (auto& a : axes) {
    a = NormalizeAxis(a, rank);
    if (a < 0 || a >= static_cast<int64_t>(rank)) {
      return Status::InvalidArgument(NodeLabel(n) + ": axis out of range for rank " +
                                     std::to_string(rank));
    }
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

StatusOr<SliceParams> SliceOf(const Graph& g, const Node& n) {
  const Shape& in = g.tensor(n.input(0)).dims;
  std::vector<int64_t> starts, axes, steps;
  if (n.input(1) == kNoId) {  // Opset < 10: attributes.
    starts = n.GetInts("starts");
    axes = n.GetInts("axes");
  } else {
    FUSOR_ASSIGN_OR_RETURN(starts, ConstantInts(g, n, 1));
    if (n.input(3) != kNoId) {
      FUSOR_ASSIGN_OR_RETURN(axes, ConstantInts(g, n, 3));
    }
    if (n.input(4) != kNoId) {
      FUSOR_ASSIGN_OR_RETURN(steps, ConstantInts(g, n, 4));
    }
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  SliceParams p{std::vector<int64_t>(in.size(), 0), std::vector<int64_t>(in.size(), 1)};
  for (size_t k = 0; k < starts.size() && k < axes.size(); ++k) {
    int64_t a = NormalizeAxis(axes[k], in.size());
    if (a < 0 || a >= static_cast<int64_t>(in.size()) || steps[k] == 0) {
      return Status::InvalidArgument(NodeLabel(n) + ": bad axis or zero step");
    }
    int64_t dim = in[a], s = starts[k];
    if (s < 0) s += dim;
    // Clamp as ONNX does: [0, dim] for positive steps, [0, dim-1] for negative ones.
    s = steps[k] > 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, 0, dim - 1);
    p.start[a] = s;
    p.step[a] = steps[k];
  }
  return p;
}

std::vector<int64_t> TransposePerm(const Graph& g, const Node& n) {
  std::vector<int64_t> perm = n.GetInts("perm");
  size_t rank = g.tensor(n.input(0)).dims.size();
  if (perm.empty()) {
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  }
  return perm;
}

StatusOr<PadParams> PadOf(const Graph& g, const Node& n,
                          const std::function<const HostTensor*(TensorId)>& lookup) {
  std::string mode = n.GetString("mode", "constant");
  if (mode != "constant") {
    return Status::Unimplemented(NodeLabel(n) + ": pad mode '" + mode +
                                 "' is not supported; only 'constant' is");
  }
  size_t rank = g.tensor(n.input(0)).dims.size();
  std::vector<int64_t> pads = n.GetInts("pads");
  if (n.input(1) != kNoId) {
    FUSOR_ASSIGN_OR_RETURN(pads, ConstantInts(g, n, 1));
  }
  if (n.input(3) != kNoId) {
    return Status::Unimplemented(NodeLabel(n) + ": Pad with an axes input is not supported");
  }
  if (pads.size() != 2 * rank) {
    return Status::InvalidArgument(NodeLabel(n) + ": pads has " + std::to_string(pads.size()) +
                                   " values, expected " + std::to_string(2 * rank));
  }
  PadParams p;
  p.begin.assign(pads.begin(), pads.begin() + rank);
  p.value = static_cast<float>(n.GetFloat("value", 0.0));
  if (n.input(2) != kNoId) {
    const HostTensor* v = lookup(n.input(2));
    if (v == nullptr || v->num_elements() != 1) {
      return Status::Unimplemented(NodeLabel(n) + ": constant_value must be a known scalar");
    }
    p.value = static_cast<float>(v->at(0));
  }
  return p;
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

SoftmaxAxis SoftmaxAxisOf(const Graph& g, const Node& n) {
  size_t rank = g.tensor(n.input(0)).dims.size();
  int64_t version = n.op_version > 0 ? n.op_version : g.opset;
  bool old = version > 0 && version < 13;
  SoftmaxAxis s;
  s.axis = NormalizeAxis(n.GetInt("axis", old ? 1 : -1), rank);
  s.coerce_2d = old;
  return s;
}

}  // namespace fusor
