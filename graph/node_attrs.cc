#include "graph/node_attrs.h"

#include <algorithm>
#include <cmath>
#include <variant>

#include "graph/dtype.h"

namespace fusor {

std::string NodeLabel(const Node& n) { return "node '" + n.name + "' (" + n.op_type + ")"; }

bool OnlyReferenceComputes(const Graph& g, const Node& n) {
  if (!n.domain.empty()) return false;
  if (n.op_type == "BatchNormalization") return n.GetInt("training_mode", 0) != 0;
  if (n.op_type == "Resize") {
    return n.GetString("mode", "nearest") == "cubic" ||
           n.GetString("coordinate_transformation_mode", "") == "tf_crop_and_resize";
  }
  if (n.op_type == "MaxPool" && !IsFloatingPoint(g.tensor(n.outputs[0]).dtype)) return true;
  if (n.op_type != "LayerNormalization" && n.op_type != "MaxPool") return false;
  for (size_t k = 1; k < n.outputs.size(); ++k) {
    const TensorId t = n.outputs[k];
    if (!g.tensor(t).consumers.empty() || g.IsGraphOutput(t)) return true;
  }
  return false;
}

int64_t NormalizeAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

StatusOr<std::vector<int64_t>> ConstantInts(const Graph& g, const Node& n, size_t i) {
  TensorId id = n.input(i);
  if (id == kNoId)
    return Status::InvalidArgument(NodeLabel(n) + ": input " + std::to_string(i) + " is missing");
  const Tensor& t = g.tensor(id);
  if (t.kind != TensorKind::kConstant || !IsInteger(t.dtype)) {
    const std::string fix = t.kind == TensorKind::kGraphInput
                                ? " (it is a graph input: fix its value at import with "
                                  "--const-input " +
                                      t.name + "=FILE)"
                                : "";
    return Status::Unimplemented(NodeLabel(n) + ": input '" + t.name +
                                 "' must be an integer constant; the runtime does not support "
                                 "values computed at run time here" +
                                 fix);
  }
  if (t.int_data.size() == 1 && t.num_elements() > 1) {
    return std::vector<int64_t>(t.num_elements(), t.int_data[0]);
  }
  return t.int_data;
}

int64_t GatherSliceIndex(const Graph& g, const Node& n) {
  if (n.op_type != "Gather" || !n.domain.empty() || n.inputs.size() != 2) return -1;
  const Tensor& ind = g.tensor(n.inputs[1]);
  if (ind.kind != TensorKind::kConstant || ind.num_elements() != 1) return -1;
  StatusOr<std::vector<int64_t>> k = ConstantInts(g, n, 1);
  if (!k.ok() || k->size() != 1) return -1;
  const Shape& data = g.tensor(n.inputs[0]).dims;
  int64_t axis = NormalizeAxis(n.GetInt("axis", 0), data.size());
  if (axis < 0 || axis >= static_cast<int64_t>(data.size())) return -1;
  int64_t index = (*k)[0] < 0 ? (*k)[0] + data[axis] : (*k)[0];
  return index >= 0 && index < data[axis] ? index : -1;
}

int64_t GatherBlock(const Graph& g, const Node& n) {
  const Shape& data = g.tensor(n.inputs[0]).dims;
  int64_t axis = std::max<int64_t>(NormalizeAxis(n.GetInt("axis", 0), data.size()), 0);
  int64_t block = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < data.size(); ++d) block *= data[d];
  return block;
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

SoftmaxAxis SoftmaxAxisOf(const Graph& g, const Node& n) {
  size_t rank = g.tensor(n.input(0)).dims.size();
  int64_t version = n.op_version > 0 ? n.op_version : g.opset;
  bool old = version > 0 && version < 13;
  SoftmaxAxis s;
  s.axis = NormalizeAxis(n.GetInt("axis", old ? 1 : -1), rank);
  s.coerce_2d = old;
  return s;
}

RowReduction RowReductionOf(const Graph& g, const Node& n) {
  const Shape& x = g.tensor(n.input(0)).dims;
  int64_t rank = static_cast<int64_t>(x.size());
  RowReduction r;
  if (n.op_type == "Softmax") {
    SoftmaxAxis sa = SoftmaxAxisOf(g, n);
    r.op = RowOp::kSoftmax;
    if (sa.coerce_2d || sa.axis == rank - 1)
      r.len = NumElements(Shape(x.begin() + sa.axis, x.end()));
    return r;
  }
  std::vector<int64_t> axes;
  if (n.op_type == "GlobalAveragePool") {
    r.op = RowOp::kMean;
    for (int64_t a = 2; a < rank; ++a) axes.push_back(a);
  } else if (n.op_type == "ReduceMax" || n.op_type == "ReduceSum" || n.op_type == "ReduceMean") {
    auto reduced = ReduceAxes(g, n);
    if (!reduced.ok() || reduced->empty()) return r;
    axes = *reduced;
    r.op = n.op_type == "ReduceMax"   ? RowOp::kMax
           : n.op_type == "ReduceSum" ? RowOp::kSum
                                      : RowOp::kMean;
  } else {
    return r;
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] != rank - static_cast<int64_t>(axes.size() - i)) return r;
  }
  r.len = 1;
  for (int64_t a : axes) r.len *= x[a];
  return r;
}

StatusOr<RecurrentAttrs> RecurrentAttrsOf(const Graph& g, const Node& n) {
  const bool lstm = n.op_type == "LSTM", rnn = n.op_type == "RNN";
  if ((!lstm && !rnn && n.op_type != "GRU") || n.input(0) == kNoId || n.input(1) == kNoId ||
      n.input(2) == kNoId) {
    return Status::InvalidArgument(NodeLabel(n) +
                                   ": not an LSTM, GRU or RNN with inputs X, W and R");
  }
  RecurrentAttrs a;
  a.gates = lstm ? 4 : rnn ? 1 : 3;
  const std::string direction = n.GetString("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return Status::InvalidArgument(NodeLabel(n) + ": direction '" + direction +
                                   "' is not one of forward, reverse, bidirectional");
  }
  a.directions = direction == "bidirectional" ? 2 : 1;
  a.reverse = direction == "reverse";
  const Shape& r = g.tensor(n.inputs[2]).dims;
  a.hidden = n.GetInt("hidden_size", r.empty() ? 0 : r.back());
  if (a.hidden <= 0) {
    return Status::InvalidArgument(NodeLabel(n) + ": hidden_size " + std::to_string(a.hidden) +
                                   " is not positive");
  }
  const int64_t layout = n.GetInt("layout", 0);
  if (layout != 0 && layout != 1) {
    return Status::InvalidArgument(NodeLabel(n) + ": layout " + std::to_string(layout) +
                                   " is not 0 or 1");
  }
  a.batch_first = layout == 1;
  a.clip = n.GetFloat("clip", 0.0);
  a.input_forget = lstm && n.GetInt("input_forget", 0) != 0;
  a.linear_before_reset = !lstm && n.GetInt("linear_before_reset", 0) != 0;
  if (const Attribute* attr = n.FindAttr("activations")) {
    const auto* acts = std::get_if<std::vector<std::string>>(&attr->value);
    const size_t per_direction = lstm ? 3 : rnn ? 1 : 2;
    for (size_t i = 0; acts != nullptr && i < acts->size(); ++i) {
      if ((*acts)[i] != (i % per_direction == 0 && !rnn ? "Sigmoid" : "Tanh")) {
        a.non_default_activation = (*acts)[i];
        break;
      }
    }
  }
  return a;
}

namespace {

// ONNX's coordinate_transformation_mode: the input coordinate output position x maps to.
double SourceCoordinate(const ResizeParams& p, size_t d, int64_t x) {
  double scale = p.scales[d], xr = static_cast<double>(x);
  double in = static_cast<double>(p.in[d]), out = static_cast<double>(p.out[d]);
  const std::string& mode = p.coordinate_mode;
  if (mode == "tf_crop_and_resize") {
    const double start = p.roi[d], end = p.roi[d + p.in.size()];
    return out > 1 ? start * (in - 1) + xr * (end - start) * (in - 1) / (out - 1)
                   : 0.5 * (start + end) * (in - 1);
  }
  if (mode == "asymmetric") return xr / scale;
  if (mode == "tf_half_pixel_for_nn") return (xr + 0.5) / scale;
  // The resized length here is in * scale, not rounded: ONNX's rule when scales are given (equal
  // to the output length when sizes are).
  if (mode == "align_corners") return out > 1 ? xr * (in - 1) / (in * scale - 1) : 0.0;
  if (mode == "pytorch_half_pixel" && out <= 1) return 0.0;
  return (xr + 0.5) / scale - 0.5;  // half_pixel, pytorch_half_pixel.
}

template <size_t N>
bool IsOneOf(const std::string& value, const char* const (&options)[N]) {
  return std::find(std::begin(options), std::end(options), value) != std::end(options);
}

// Resize's mode attributes; Unimplemented naming the value for what the runtime does not run.
Status ReadResizeModes(const Node& n, bool reference_forms, ResizeParams* p) {
  auto unsupported = [&n](const std::string& attr, const std::string& value, const char* ok) {
    return Status::Unimplemented(NodeLabel(n) + ": " + attr + " '" + value +
                                 "' is not supported; " + ok);
  };
  static const char* const kModes[] = {"nearest", "linear"};
  static const char* const kCoordinates[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                             "asymmetric", "tf_half_pixel_for_nn"};
  static const char* const kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                         "ceil"};
  std::string mode = n.GetString("mode", "nearest");
  p->cubic = reference_forms && mode == "cubic";
  if (!IsOneOf(mode, kModes) && !p->cubic) {
    return unsupported("mode", mode,
                       "nearest and linear are, and cubic in the reference interpreter");
  }
  p->linear = mode == "linear";
  p->cubic_coeff_a = n.GetFloat("cubic_coeff_a", -0.75);
  p->exclude_outside = n.GetInt("exclude_outside", 0) != 0;
  p->coordinate_mode = n.GetString("coordinate_transformation_mode", "half_pixel");
  p->extrapolation_value = n.GetFloat("extrapolation_value", 0.0);
  const bool crop = reference_forms && p->coordinate_mode == "tf_crop_and_resize";
  if (!IsOneOf(p->coordinate_mode, kCoordinates) && !crop) {
    return unsupported("coordinate_transformation_mode", p->coordinate_mode,
                       "half_pixel, pytorch_half_pixel, align_corners, asymmetric and "
                       "tf_half_pixel_for_nn are");
  }
  p->nearest_mode = n.GetString("nearest_mode", "round_prefer_floor");
  if (mode == "nearest" && !IsOneOf(p->nearest_mode, kNearest)) {
    return unsupported("nearest_mode", p->nearest_mode,
                       "round_prefer_floor, round_prefer_ceil, floor and ceil are");
  }
  return Status::Ok();
}

// Per-dim scales: output / input when sizes are given, else the constant scales.
Status ReadResizeScales(const Graph& g, const Node& n, ResizeParams* p) {
  TensorId scales = n.input(2), sizes = n.input(3);
  if (sizes != kNoId && g.tensor(sizes).num_elements() > 0) {
    FUSOR_ASSIGN_OR_RETURN(std::vector<int64_t> s, ConstantInts(g, n, 3));
    if (s != p->out) {
      return Status::InvalidArgument(NodeLabel(n) + ": sizes " + ShapeString(s) +
                                     " differ from the output's " + ShapeString(p->out));
    }
    for (size_t d = 0; d < p->in.size(); ++d) {
      p->scales.push_back(static_cast<double>(p->out[d]) / static_cast<double>(p->in[d]));
    }
    return Status::Ok();
  }
  if (scales == kNoId || g.tensor(scales).num_elements() == 0) {
    return Status::InvalidArgument(NodeLabel(n) + ": neither scales nor sizes is given");
  }
  const Tensor& t = g.tensor(scales);
  if (t.kind != TensorKind::kConstant || !IsFloatingPoint(t.dtype)) {
    return Status::Unimplemented(NodeLabel(n) + ": scales '" + t.name +
                                 "' must be a float constant; the runtime does not support "
                                 "scales computed at run time");
  }
  p->scales = t.float_data;
  if (p->scales.size() != p->in.size() ||
      std::any_of(p->scales.begin(), p->scales.end(), [](double s) { return !(s > 0); })) {
    return Status::InvalidArgument(NodeLabel(n) + ": scales must be " +
                                   std::to_string(p->in.size()) + " positive values");
  }
  return Status::Ok();
}

}  // namespace

// tf_crop_and_resize's roi: a float constant of two values per dim.
static Status ReadResizeRoi(const Graph& g, const Node& n, ResizeParams* p) {
  const TensorId roi = n.input(1);
  const Tensor* t = roi == kNoId ? nullptr : &g.tensor(roi);
  if (t == nullptr || t->kind != TensorKind::kConstant || !IsFloatingPoint(t->dtype) ||
      t->float_data.size() != 2 * p->in.size()) {
    return Status::Unimplemented(NodeLabel(n) + ": tf_crop_and_resize needs roi as a float " +
                                 "constant of " + std::to_string(2 * p->in.size()) + " values");
  }
  p->roi = t->float_data;
  return Status::Ok();
}

StatusOr<ResizeParams> ResizeOf(const Graph& g, const Node& n, bool reference_forms) {
  ResizeParams p;
  p.in = g.tensor(n.input(0)).dims;
  p.out = g.tensor(n.outputs[0]).dims;
  FUSOR_RETURN_IF_ERROR(ReadResizeModes(n, reference_forms, &p));
  if (p.coordinate_mode == "tf_crop_and_resize") FUSOR_RETURN_IF_ERROR(ReadResizeRoi(g, n, &p));
  if (p.in.size() != p.out.size()) {
    return Status::InvalidArgument(NodeLabel(n) + ": output rank differs from the input's");
  }
  FUSOR_RETURN_IF_ERROR(ReadResizeScales(g, n, &p));
  return p;
}

double ResizeSourceCoordinate(const ResizeParams& p, size_t d, int64_t x) {
  return SourceCoordinate(p, d, x);
}

ResizeTap ResizeTapOf(const ResizeParams& p, size_t d, int64_t x) {
  double pos = SourceCoordinate(p, d, x);
  int64_t last = p.in[d] - 1;
  ResizeTap tap;
  if (p.linear) {
    pos = std::clamp(pos, 0.0, static_cast<double>(last));
    tap.i0 = static_cast<int64_t>(std::floor(pos));
    tap.i1 = std::min(tap.i0 + 1, last);
    tap.w = pos - static_cast<double>(tap.i0);
    return tap;
  }
  double below = std::floor(pos), frac = pos - below;
  bool up = false;  // Whether the position rounds to below + 1.
  if (frac > 0) {
    const std::string& m = p.nearest_mode;
    up = m == "ceil" || (m == "round_prefer_floor" && frac > 0.5) ||
         (m == "round_prefer_ceil" && frac >= 0.5);
  }
  tap.i0 = tap.i1 = std::clamp<int64_t>(static_cast<int64_t>(below) + (up ? 1 : 0), 0, last);
  return tap;
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

std::array<double, 4> CubicWeights(double t, double a) {
  auto near = [a](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [a](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };  // 1 < |x| < 2
  return {far(1 + t), near(t), near(1 - t), far(2 - t)};
}

std::array<WeightedTap, 4> CubicResizeTapsOf(const ResizeParams& p, size_t d, int64_t x) {
  const double pos = SourceCoordinate(p, d, x), below = std::floor(pos);
  const std::array<double, 4> w = CubicWeights(pos - below, p.cubic_coeff_a);
  const int64_t last = p.in[d] - 1;
  std::array<WeightedTap, 4> taps;
  double kept = 0;
  for (int k = 0; k < 4; ++k) {
    const int64_t i = static_cast<int64_t>(below) - 1 + k;
    const bool outside = i < 0 || i > last;
    taps[k] = {std::clamp<int64_t>(i, 0, last), p.exclude_outside && outside ? 0.0 : w[k]};
    kept += taps[k].w;
  }
  if (p.exclude_outside && kept != 0) {
    for (WeightedTap& t : taps) t.w /= kept;
  }
  return taps;
}

}  // namespace fusor
