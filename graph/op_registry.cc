#include "graph/op_registry.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "graph/node_attrs.h"

namespace fusor {
namespace {

// ---------------------------------------------------------------------------------------------
// Shape helpers

const Tensor* Input(const Graph& g, const Node& n, size_t i) {
  TensorId id = n.input(i);
  return id == kNoId ? nullptr : &g.tensor(id);
}

const Tensor& Output(const Graph& g, const Node& n, size_t i) { return g.tensor(n.outputs[i]); }

// ONNX multidirectional broadcasting; nullopt when the shapes are incompatible.
std::optional<Shape> Broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t da = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    int64_t db = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::string NodeRef(const Node& n) { return "node '" + n.name + "' (" + n.op_type + ")"; }

Status ShapeMismatch(const Node& n, const std::string& what) {
  return Status::InvalidArgument(NodeRef(n) + ": " + what);
}

Status ExpectOutputShape(const Graph& g, const Node& n, const Shape& expected) {
  const Tensor& out = Output(g, n, 0);
  if (out.dims == expected) return Status::Ok();
  return ShapeMismatch(n, "output '" + out.name + "' has shape " + ShapeString(out.dims) +
                              ", the inputs give " + ShapeString(expected));
}

Status ExpectRank(const Node& n, const Tensor& t, size_t min_rank, const char* role) {
  if (t.dims.size() >= min_rank) return Status::Ok();
  return ShapeMismatch(n, std::string(role) + " '" + t.name + "' has rank " +
                              std::to_string(t.dims.size()) + ", " + n.op_type + " needs rank " +
                              std::to_string(min_rank) + " or more");
}

int64_t SpatialProduct(const Shape& dims) {
  int64_t p = 1;
  for (size_t i = 2; i < dims.size(); ++i) p *= dims[i];
  return p;
}

// Normalises a possibly negative axis against a rank.
int64_t NormAxis(int64_t axis, size_t rank) { return axis < 0 ? axis + rank : axis; }

// ---------------------------------------------------------------------------------------------
// Sliding-window output shapes (Conv, pooling)

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends.
  std::string auto_pad;
  bool ceil_mode = false;
};

Window ReadWindow(const Node& n, const Shape& kernel_dims) {
  Window w;
  size_t s = kernel_dims.size();
  w.kernel = kernel_dims;
  w.strides = n.GetInts("strides");
  w.dilations = n.GetInts("dilations");
  w.pads = n.GetInts("pads");
  w.auto_pad = n.GetString("auto_pad", "NOTSET");
  w.ceil_mode = n.GetInt("ceil_mode", 0) != 0;
  if (w.strides.size() != s) w.strides.assign(s, 1);
  if (w.dilations.size() != s) w.dilations.assign(s, 1);
  if (w.pads.size() != 2 * s) w.pads.assign(2 * s, 0);
  return w;
}

Shape WindowOutput(const Shape& in_spatial, const Window& w) {
  Shape out;
  size_t s = in_spatial.size();
  for (size_t i = 0; i < s; ++i) {
    int64_t in = in_spatial[i], stride = std::max<int64_t>(w.strides[i], 1);
    int64_t extent = (w.kernel[i] - 1) * w.dilations[i] + 1;
    if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
      out.push_back((in + stride - 1) / stride);
    } else if (w.auto_pad == "VALID") {
      out.push_back((in - extent) / stride + 1);
    } else {
      int64_t span = in + w.pads[i] + w.pads[i + s] - extent;
      int64_t o = w.ceil_mode ? (span + stride - 1) / stride + 1 : span / stride + 1;
      // ONNX: with ceil_mode the last window must start inside the input or left padding.
      if (w.ceil_mode && (o - 1) * stride >= in + w.pads[i]) --o;
      out.push_back(o);
    }
  }
  return out;
}

Shape Spatial(const Shape& dims) {
  return Shape(dims.begin() + std::min<size_t>(2, dims.size()), dims.end());
}

// ---------------------------------------------------------------------------------------------
// Per-op FLOPs

double OutElems(const Graph& g, const Node& n) {
  return n.outputs.empty() ? 0.0 : static_cast<double>(Output(g, n, 0).num_elements());
}

double InElems(const Graph& g, const Node& n) {
  const Tensor* t = Input(g, n, 0);
  return t ? static_cast<double>(t->num_elements()) : 0.0;
}

void ConvFlops(const Graph& g, const Node& n, OpCost* c) {
  const Tensor& w = *Input(g, n, 1);
  const Tensor& y = Output(g, n, 0);
  double kernel = static_cast<double>(SpatialProduct(w.dims));
  double macs = static_cast<double>(y.num_elements()) * static_cast<double>(w.dims[1]) * kernel;
  c->flops = 2 * macs + (Input(g, n, 2) ? static_cast<double>(y.num_elements()) : 0.0);
}

void ConvTransposeFlops(const Graph& g, const Node& n, OpCost* c) {
  const Tensor& x = *Input(g, n, 0);
  const Tensor& w = *Input(g, n, 1);
  double kernel = static_cast<double>(SpatialProduct(w.dims));
  double macs = static_cast<double>(x.num_elements()) * static_cast<double>(w.dims[1]) * kernel;
  c->flops = 2 * macs + (Input(g, n, 2) ? OutElems(g, n) : 0.0);
}

void MatMulFlops(const Graph& g, const Node& n, OpCost* c) {
  const Tensor& a = *Input(g, n, 0);
  double k = static_cast<double>(a.dims.empty() ? 1 : a.dims.back());
  c->flops = 2 * OutElems(g, n) * k;
}

void GemmFlops(const Graph& g, const Node& n, OpCost* c) {
  const Tensor& a = *Input(g, n, 0);
  double k = static_cast<double>(n.GetInt("transA", 0) ? a.dims[0] : a.dims[1]);
  c->flops = 2 * OutElems(g, n) * k + (Input(g, n, 2) ? OutElems(g, n) : 0.0);
}

// Cheap per-output-element arithmetic and transcendental counts.
std::function<void(const Graph&, const Node&, OpCost*)> PerElement(double flops, double trans) {
  return [flops, trans](const Graph& g, const Node& n, OpCost* c) {
    c->flops = flops * OutElems(g, n);
    c->transcendentals = trans * OutElems(g, n);
  };
}

void PowFlops(const Graph& g, const Node& n, OpCost* c) {
  const Tensor* e = Input(g, n, 1);
  bool square =
      e && e->kind == TensorKind::kConstant && e->float_data.size() == 1 && e->float_data[0] == 2.0;
  if (square) {
    c->flops = OutElems(g, n);  // x*x
  } else {
    c->transcendentals = OutElems(g, n);
  }
}

// LSTM and GRU (X [seq, batch, input], or [batch, seq, input] for layout 1): per step, direction
// and batch entry the gate products W x and R h (2 * G H (I + H) for G gates), then the gate
// arithmetic and state update, with LSTM's five transcendentals per hidden unit (three sigmoids,
// two tanh) and GRU's three (two sigmoids, one tanh).
void RecurrentFlops(const Graph& g, const Node& n, OpCost* c) {
  const Shape& x = Input(g, n, 0)->dims;
  const Shape& w = Input(g, n, 1)->dims;
  if (x.size() != 3 || w.size() != 3) return;
  const bool lstm = n.op_type == "LSTM";
  const double gates = lstm ? 4 : 3;
  double steps = static_cast<double>(x[0] * x[1] * w[0]);
  double hidden = static_cast<double>(w[1]) / gates, in = static_cast<double>(w[2]);
  c->flops = steps * (2 * gates * hidden * (in + hidden) + (lstm ? 10 : 8) * hidden);
  c->transcendentals = steps * (lstm ? 5 : 3) * hidden;
}

void LayerNormFlops(const Graph& g, const Node& n, OpCost* c) {
  const Tensor& x = *Input(g, n, 0);
  int64_t axis = NormAxis(n.GetInt("axis", -1), x.dims.size());
  double rows = 1;
  for (int64_t i = 0; i < axis && i < static_cast<int64_t>(x.dims.size()); ++i) rows *= x.dims[i];
  // mean, subtract, square, sum, scale by inv-std, gamma, beta, plus the variance mean: 8 per
  // element.
  c->flops = 8 * InElems(g, n);
  c->transcendentals = rows;  // One rsqrt per normalised row.
}

void PoolFlops(const Graph& g, const Node& n, OpCost* c) {
  c->flops = OutElems(g, n) * static_cast<double>(NumElements(n.GetInts("kernel_shape")));
}

void ReduceFlops(const Graph& g, const Node& n, OpCost* c) { c->flops = InElems(g, n); }

void GlobalPoolFlops(const Graph& g, const Node& n, OpCost* c) {
  c->flops = InElems(g, n) + OutElems(g, n);
}

void ResizeFlops(const Graph& g, const Node& n, OpCost* c) {
  const Tensor& x = *Input(g, n, 0);
  const Tensor& y = Output(g, n, 0);
  double resized = 0;
  for (size_t i = 0; i < std::min(x.dims.size(), y.dims.size()); ++i) {
    if (x.dims[i] != y.dims[i]) ++resized;
  }
  std::string mode = n.GetString("mode", "nearest");
  double per_dim = mode == "linear" ? 3 : mode == "cubic" ? 8 : 0;
  c->flops = OutElems(g, n) * per_dim * resized;
}

void NoFlops(const Graph&, const Node&, OpCost*) {}

// ---------------------------------------------------------------------------------------------
// Per-op shape rules

Status CheckBroadcastInputs(const Graph& g, const Node& n, size_t first, size_t count) {
  Shape acc;
  bool any = false;
  for (size_t i = first; i < std::min(first + count, n.inputs.size()); ++i) {
    const Tensor* t = Input(g, n, i);
    if (!t) continue;
    auto b = any ? Broadcast(acc, t->dims) : std::optional<Shape>(t->dims);
    if (!b) {
      return ShapeMismatch(n, "input '" + t->name + "' of shape " + ShapeString(t->dims) +
                                  " does not broadcast with " + ShapeString(acc));
    }
    acc = *b;
    any = true;
  }
  return any ? ExpectOutputShape(g, n, acc) : Status::Ok();
}

Status CheckAllInputs(const Graph& g, const Node& n) {
  return CheckBroadcastInputs(g, n, 0, n.inputs.size());
}
Status CheckFirstInput(const Graph& g, const Node& n) { return CheckBroadcastInputs(g, n, 0, 1); }

Status CheckBatchNorm(const Graph& g, const Node& n) {
  const Tensor& x = *Input(g, n, 0);
  FUSOR_RETURN_IF_ERROR(ExpectRank(n, x, 2, "input"));
  for (size_t i = 1; i < std::min<size_t>(5, n.inputs.size()); ++i) {
    const Tensor* p = Input(g, n, i);
    if (p && p->dims != Shape{x.dims[1]}) {
      return ShapeMismatch(n, "parameter '" + p->name + "' has shape " + ShapeString(p->dims) +
                                  ", expected " + std::to_string(x.dims[1]) + " (the channels)");
    }
  }
  return ExpectOutputShape(g, n, x.dims);
}

Status CheckConv(const Graph& g, const Node& n) {
  const Tensor& x = *Input(g, n, 0);
  const Tensor& w = *Input(g, n, 1);
  FUSOR_RETURN_IF_ERROR(ExpectRank(n, x, 3, "input"));
  if (w.dims.size() != x.dims.size()) {
    return ShapeMismatch(n, "weight '" + w.name + "' has rank " + std::to_string(w.dims.size()) +
                                ", the input has rank " + std::to_string(x.dims.size()));
  }
  int64_t group = n.GetInt("group", 1);
  if (group <= 0 || x.dims[1] != w.dims[1] * group) {
    return ShapeMismatch(n, "input channels " + std::to_string(x.dims[1]) + " != weight channels " +
                                std::to_string(w.dims[1]) + " x group " + std::to_string(group));
  }
  if (w.dims[0] % group != 0) {
    return ShapeMismatch(n, "output channels " + std::to_string(w.dims[0]) +
                                " are not divisible by group " + std::to_string(group));
  }
  const Tensor* b = Input(g, n, 2);
  if (b && b->dims != Shape{w.dims[0]}) {
    return ShapeMismatch(n, "bias '" + b->name + "' has shape " + ShapeString(b->dims) +
                                ", expected " + std::to_string(w.dims[0]));
  }
  Window win = ReadWindow(n, Spatial(w.dims));
  Shape expected = {x.dims[0], w.dims[0]};
  for (int64_t d : WindowOutput(Spatial(x.dims), win)) expected.push_back(d);
  return ExpectOutputShape(g, n, expected);
}

Status CheckConvTranspose(const Graph& g, const Node& n) {
  const Tensor& x = *Input(g, n, 0);
  const Tensor& w = *Input(g, n, 1);
  FUSOR_RETURN_IF_ERROR(ExpectRank(n, x, 3, "input"));
  int64_t group = n.GetInt("group", 1);
  if (w.dims.size() != x.dims.size() || group <= 0 || x.dims[1] != w.dims[0]) {
    return ShapeMismatch(n, "weight '" + w.name + "' of shape " + ShapeString(w.dims) +
                                " does not match input of shape " + ShapeString(x.dims));
  }
  const Tensor& y = Output(g, n, 0);
  if (y.dims.size() != x.dims.size() || y.dims[0] != x.dims[0] || y.dims[1] != w.dims[1] * group) {
    return ShapeMismatch(n, "output '" + y.name + "' has shape " + ShapeString(y.dims) +
                                ", expected batch " + std::to_string(x.dims[0]) + " and " +
                                std::to_string(w.dims[1] * group) + " channels");
  }
  return Status::Ok();
}

Status CheckMatMul(const Graph& g, const Node& n) {
  Shape a = Input(g, n, 0)->dims, b = Input(g, n, 1)->dims;
  if (a.empty() || b.empty()) return ShapeMismatch(n, "MatMul inputs must have rank 1 or more");
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  if (a.back() != b[b.size() - 2]) {
    return ShapeMismatch(n, "inner dims differ: " + ShapeString(Input(g, n, 0)->dims) + " x " +
                                ShapeString(Input(g, n, 1)->dims));
  }
  auto batch = Broadcast(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  if (!batch) return ShapeMismatch(n, "batch dims do not broadcast");
  Shape out = *batch;
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b.back());
  return ExpectOutputShape(g, n, out);
}

Status CheckGemm(const Graph& g, const Node& n) {
  const Shape& a = Input(g, n, 0)->dims;
  const Shape& b = Input(g, n, 1)->dims;
  if (a.size() != 2 || b.size() != 2) return ShapeMismatch(n, "Gemm inputs must have rank 2");
  bool ta = n.GetInt("transA", 0) != 0, tb = n.GetInt("transB", 0) != 0;
  int64_t m = ta ? a[1] : a[0], ka = ta ? a[0] : a[1];
  int64_t kb = tb ? b[1] : b[0], nn = tb ? b[0] : b[1];
  if (ka != kb) {
    return ShapeMismatch(n, "inner dims differ: A gives K=" + std::to_string(ka) +
                                ", B gives K=" + std::to_string(kb));
  }
  const Tensor* c = Input(g, n, 2);
  if (c && !Broadcast(c->dims, {m, nn})) {
    return ShapeMismatch(n, "C '" + c->name + "' of shape " + ShapeString(c->dims) +
                                " does not broadcast to " + ShapeString({m, nn}));
  }
  return ExpectOutputShape(g, n, {m, nn});
}

Status CheckPool(const Graph& g, const Node& n) {
  const Tensor& x = *Input(g, n, 0);
  FUSOR_RETURN_IF_ERROR(ExpectRank(n, x, 3, "input"));
  std::vector<int64_t> kernel = n.GetInts("kernel_shape");
  if (kernel.size() != x.dims.size() - 2) {
    return ShapeMismatch(n, "kernel_shape has " + std::to_string(kernel.size()) +
                                " dims, the input has " + std::to_string(x.dims.size() - 2) +
                                " spatial dims");
  }
  Shape expected = {x.dims[0], x.dims[1]};
  for (int64_t d : WindowOutput(Spatial(x.dims), ReadWindow(n, kernel))) expected.push_back(d);
  return ExpectOutputShape(g, n, expected);
}

Status CheckGlobalPool(const Graph& g, const Node& n) {
  const Tensor& x = *Input(g, n, 0);
  FUSOR_RETURN_IF_ERROR(ExpectRank(n, x, 3, "input"));
  Shape expected(x.dims.size(), 1);
  expected[0] = x.dims[0];
  expected[1] = x.dims[1];
  return ExpectOutputShape(g, n, expected);
}

Status CheckSameElementCount(const Graph& g, const Node& n) {
  const Tensor& x = *Input(g, n, 0);
  const Tensor& y = Output(g, n, 0);
  if (x.num_elements() == y.num_elements()) return Status::Ok();
  return ShapeMismatch(n, "output '" + y.name + "' (" + ShapeString(y.dims) + ") has " +
                              std::to_string(y.num_elements()) + " elements, input '" + x.name +
                              "' (" + ShapeString(x.dims) + ") has " +
                              std::to_string(x.num_elements()));
}

Status CheckTranspose(const Graph& g, const Node& n) {
  const Shape& x = Input(g, n, 0)->dims;
  std::vector<int64_t> perm = n.GetInts("perm");
  if (perm.empty()) {
    for (size_t i = 0; i < x.size(); ++i) perm.push_back(static_cast<int64_t>(x.size() - 1 - i));
  }
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted.size() != x.size() || sorted[i] != static_cast<int64_t>(i)) {
      return ShapeMismatch(
          n, "perm is not a permutation of the input's " + std::to_string(x.size()) + " axes");
    }
  }
  Shape out;
  for (int64_t p : perm) out.push_back(x[p]);
  return ExpectOutputShape(g, n, out);
}

Status CheckConcat(const Graph& g, const Node& n) {
  const Shape& first = Input(g, n, 0)->dims;
  int64_t axis = NormAxis(n.GetInt("axis", 0), first.size());
  if (axis < 0 || axis >= static_cast<int64_t>(first.size())) {
    return ShapeMismatch(n, "axis " + std::to_string(n.GetInt("axis", 0)) + " is out of range");
  }
  Shape out = first;
  out[axis] = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Tensor* t = Input(g, n, i);
    if (!t) continue;
    bool same_rank = t->dims.size() == first.size();
    for (size_t d = 0; same_rank && d < first.size(); ++d) {
      if (static_cast<int64_t>(d) != axis && t->dims[d] != first[d]) same_rank = false;
    }
    if (!same_rank) {
      return ShapeMismatch(n, "input '" + t->name + "' of shape " + ShapeString(t->dims) +
                                  " differs from " + ShapeString(first) + " off axis " +
                                  std::to_string(axis));
    }
    out[axis] += t->dims[axis];
  }
  return ExpectOutputShape(g, n, out);
}

Status CheckSplit(const Graph& g, const Node& n) {
  const Shape& x = Input(g, n, 0)->dims;
  int64_t axis = NormAxis(n.GetInt("axis", 0), x.size());
  if (axis < 0 || axis >= static_cast<int64_t>(x.size())) {
    return ShapeMismatch(n, "axis is out of range for rank " + std::to_string(x.size()));
  }
  int64_t total = 0;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const Shape& y = Output(g, n, i).dims;
    if (y.size() != x.size()) return ShapeMismatch(n, "outputs must keep the input's rank");
    total += y[axis];
  }
  if (total == x[axis]) return Status::Ok();
  return ShapeMismatch(n, "outputs add up to " + std::to_string(total) + " along axis " +
                              std::to_string(axis) + ", the input has " + std::to_string(x[axis]));
}

Status CheckExpand(const Graph& g, const Node& n) {
  const Tensor& x = *Input(g, n, 0);
  const Tensor& y = Output(g, n, 0);
  auto b = Broadcast(x.dims, y.dims);
  if (b && *b == y.dims) return Status::Ok();
  return ShapeMismatch(
      n, "input of shape " + ShapeString(x.dims) + " does not expand to " + ShapeString(y.dims));
}

// DepthToSpace and SpaceToDepth: an input [N, C, H, W] and a blocksize b of at least 1; the output
// [N, C / b^2, H b, W b] (DepthToSpace, C a multiple of b^2) or [N, C b^2, H / b, W / b]
// (SpaceToDepth, H and W multiples of b).
Status CheckSpaceDepth(const Graph& g, const Node& n) {
  const Shape& x = Input(g, n, 0)->dims;
  const int64_t b = n.GetInt("blocksize", 0);
  if (x.size() != 4) {
    return ShapeMismatch(n, "input has rank " + std::to_string(x.size()) + ", " + n.op_type +
                                " needs rank 4 ([N, C, H, W])");
  }
  if (b < 1) return ShapeMismatch(n, "blocksize " + std::to_string(b) + " is not 1 or more");
  if (n.op_type == "DepthToSpace") {
    if (x[1] % (b * b) != 0) {
      return ShapeMismatch(
          n, "the input's " + std::to_string(x[1]) +
                 " channels are no multiple of blocksize^2 = " + std::to_string(b * b));
    }
    return ExpectOutputShape(g, n, {x[0], x[1] / (b * b), x[2] * b, x[3] * b});
  }
  if (x[2] % b != 0 || x[3] % b != 0) {
    return ShapeMismatch(n, "the input's height and width " + ShapeString({x[2], x[3]}) +
                                " are no multiples of blocksize " + std::to_string(b));
  }
  return ExpectOutputShape(g, n, {x[0], x[1] * b * b, x[2] / b, x[3] / b});
}

// Tile: the output the input repeated along each dim, as often as the constant `repeats` says
// when it is one; otherwise each output dim a whole multiple of the input's.
Status CheckTile(const Graph& g, const Node& n) {
  const Shape& x = Input(g, n, 0)->dims;
  const Tensor* repeats = Input(g, n, 1);
  if (repeats != nullptr && repeats->kind == TensorKind::kConstant &&
      repeats->int_data.size() == x.size()) {
    Shape expected = x;
    for (size_t d = 0; d < x.size(); ++d) expected[d] *= repeats->int_data[d];
    return ExpectOutputShape(g, n, expected);
  }
  const Shape& y = Output(g, n, 0).dims;
  bool whole = y.size() == x.size();
  for (size_t d = 0; whole && d < x.size(); ++d) {
    whole = x[d] == 0 ? y[d] == 0 : y[d] % x[d] == 0;
  }
  if (whole) return Status::Ok();
  return ShapeMismatch(n, "output of shape " + ShapeString(y) + " does not repeat the input's " +
                              ShapeString(x) + " a whole number of times along each dim");
}

// InstanceNormalization: X of rank 3 or more, a scale and a bias of one value per channel, the
// output X's shape (the reference interpreter and the oneDNN form index them so).
Status CheckInstanceNorm(const Graph& g, const Node& n) {
  const Tensor& x = *Input(g, n, 0);
  FUSOR_RETURN_IF_ERROR(ExpectRank(n, x, 3, "input"));
  const char* roles[] = {"", "scale", "B"};
  for (size_t i = 1; i <= 2; ++i) {
    const Tensor* p = Input(g, n, i);
    if (p == nullptr) {
      return ShapeMismatch(n, std::string("input ") + roles[i] + " is missing");
    }
    if (p->dims != Shape{x.dims[1]}) {
      return ShapeMismatch(n, std::string(roles[i]) + " '" + p->name + "' has shape " +
                                  ShapeString(p->dims) + ", expected " + std::to_string(x.dims[1]) +
                                  " (the channels)");
    }
  }
  return ExpectOutputShape(g, n, x.dims);
}

// LSTM and GRU: every input and output has the dims the attributes and X give, so the reference
// interpreter and the RNN primitive can index them.
Status CheckRecurrent(const Graph& g, const Node& n) {
  FUSOR_ASSIGN_OR_RETURN(RecurrentAttrs a, RecurrentAttrsOf(g, n));
  const Tensor& x = *Input(g, n, 0);
  if (x.dims.size() != 3) {
    return ShapeMismatch(n, "input X '" + x.name + "' has rank " + std::to_string(x.dims.size()) +
                                ", " + n.op_type + " needs rank 3");
  }
  const int64_t seq = x.dims[a.batch_first ? 1 : 0], batch = x.dims[a.batch_first ? 0 : 1];
  const int64_t d = a.directions, gh = a.gates * a.hidden;
  const bool lstm = n.op_type == "LSTM";
  auto expect = [&](const Tensor* t, const char* role, const Shape& want) -> Status {
    if (t == nullptr || t->dims == want) return Status::Ok();
    return ShapeMismatch(n, std::string(role) + " '" + t->name + "' has shape " +
                                ShapeString(t->dims) + ", expected " + ShapeString(want));
  };
  const Shape state = a.batch_first ? Shape{batch, d, a.hidden} : Shape{d, batch, a.hidden};
  FUSOR_RETURN_IF_ERROR(expect(Input(g, n, 1), "W", {d, gh, x.dims[2]}));
  FUSOR_RETURN_IF_ERROR(expect(Input(g, n, 2), "R", {d, gh, a.hidden}));
  FUSOR_RETURN_IF_ERROR(expect(Input(g, n, 3), "B", {d, 2 * gh}));
  FUSOR_RETURN_IF_ERROR(expect(Input(g, n, 4), "sequence_lens", {batch}));
  FUSOR_RETURN_IF_ERROR(expect(Input(g, n, 5), "initial_h", state));
  if (lstm) {
    FUSOR_RETURN_IF_ERROR(expect(Input(g, n, 6), "initial_c", state));
    FUSOR_RETURN_IF_ERROR(expect(Input(g, n, 7), "P", {d, 3 * a.hidden}));
  }
  const Shape y = a.batch_first ? Shape{batch, seq, d, a.hidden} : Shape{seq, d, batch, a.hidden};
  const char* roles[] = {"output Y", "output Y_h", "output Y_c"};
  for (size_t i = 0; i < n.outputs.size() && i < 3; ++i) {
    FUSOR_RETURN_IF_ERROR(expect(&Output(g, n, i), roles[i], i == 0 ? y : state));
  }
  return Status::Ok();
}

Status CheckWhere(const Graph& g, const Node& n) { return CheckAllInputs(g, n); }
Status NoCheck(const Graph&, const Node&) { return Status::Ok(); }

// ---------------------------------------------------------------------------------------------
// The table

using FlopsFn = std::function<void(const Graph&, const Node&, OpCost*)>;
using CheckFn = std::function<Status(const Graph&, const Node&)>;

// How bytes are counted for an op (see the header's conventions).
enum class Traffic { kFull, kView, kSliced, kGathered };

// The shape of an elementwise op's arithmetic: one data input, or two operands.
enum class Arity { kOther, kUnary, kBinary };

struct OpInfo {
  OpClass base_class;
  FlopsFn flops;
  CheckFn check;
  Traffic traffic = Traffic::kFull;
  // Elementwise ops whose class becomes kBroadcast when data inputs differ from the output shape.
  bool shape_dependent_class = false;
  // Number of leading inputs that carry data (the rest are parameters such as Clip's bounds).
  size_t data_inputs = 8;
  Arity arity = Arity::kOther;
};

OpInfo Unary(FlopsFn flops) {
  return {OpClass::kElementwise, std::move(flops), CheckFirstInput, Traffic::kFull, false, 8,
          Arity::kUnary};
}

OpInfo BinaryArithmetic(FlopsFn flops) {
  return {OpClass::kElementwise, std::move(flops), CheckAllInputs, Traffic::kFull, true, 8,
          Arity::kBinary};
}

const std::unordered_map<std::string_view, OpInfo>& Table() {
  static const auto* table = new std::unordered_map<std::string_view, OpInfo>{
      {"Conv", {OpClass::kAnchor, ConvFlops, CheckConv}},
      {"ConvTranspose", {OpClass::kAnchor, ConvTransposeFlops, CheckConvTranspose}},
      {"Gemm", {OpClass::kAnchor, GemmFlops, CheckGemm}},
      {"MatMul", {OpClass::kAnchor, MatMulFlops, CheckMatMul}},
      {"BatchNormalization", {OpClass::kBroadcast, PerElement(2, 0), CheckBatchNorm}},
      {"Add", BinaryArithmetic(PerElement(1, 0))},
      {"Sub", BinaryArithmetic(PerElement(1, 0))},
      {"Mul", BinaryArithmetic(PerElement(1, 0))},
      {"Div", BinaryArithmetic(PerElement(1, 0))},
      {"Pow", BinaryArithmetic(PowFlops)},
      {"Where", {OpClass::kElementwise, PerElement(1, 0), CheckWhere, Traffic::kFull, true}},
      {"Sqrt", Unary(PerElement(0, 1))},
      {"Erf", Unary(PerElement(0, 1))},
      {"Exp", Unary(PerElement(0, 1))},
      {"Log", Unary(PerElement(0, 1))},
      {"Tanh", Unary(PerElement(0, 1))},
      {"Relu", Unary(PerElement(1, 0))},
      {"LeakyRelu", Unary(PerElement(2, 0))},
      {"Sigmoid", Unary(PerElement(2, 1))},
      {"HardSigmoid", Unary(PerElement(4, 0))},
      {"HardSwish", Unary(PerElement(5, 0))},
      {"Shrink", Unary(PerElement(3, 0))},
      {"Clip",
       {OpClass::kElementwise, PerElement(2, 0), CheckFirstInput, Traffic::kFull, true, 1,
        Arity::kUnary}},
      {"Cast", Unary(PerElement(1, 0))},
      {"Softmax", {OpClass::kReduction, PerElement(4, 1), CheckFirstInput}},
      {"LayerNormalization", {OpClass::kReduction, LayerNormFlops, NoCheck}},
      {"ReduceMean", {OpClass::kReduction, ReduceFlops, NoCheck}},
      {"ReduceSum", {OpClass::kReduction, ReduceFlops, NoCheck}},
      {"ReduceMax", {OpClass::kReduction, ReduceFlops, NoCheck}},
      {"MaxPool", {OpClass::kReduction, PoolFlops, CheckPool}},
      {"AveragePool", {OpClass::kReduction, PoolFlops, CheckPool}},
      {"GlobalAveragePool", {OpClass::kReduction, GlobalPoolFlops, CheckGlobalPool}},
      {"Reshape", {OpClass::kInjective, NoFlops, CheckSameElementCount, Traffic::kView}},
      {"Flatten", {OpClass::kInjective, NoFlops, CheckSameElementCount, Traffic::kView}},
      {"Squeeze", {OpClass::kInjective, NoFlops, CheckSameElementCount, Traffic::kView}},
      {"Unsqueeze", {OpClass::kInjective, NoFlops, CheckSameElementCount, Traffic::kView}},
      {"Transpose", {OpClass::kInjective, NoFlops, CheckTranspose}},
      {"Concat", {OpClass::kInjective, NoFlops, CheckConcat}},
      {"Slice", {OpClass::kInjective, NoFlops, NoCheck, Traffic::kSliced}},
      {"Split", {OpClass::kInjective, NoFlops, CheckSplit}},
      {"Gather", {OpClass::kInjective, NoFlops, NoCheck, Traffic::kGathered}},
      {"Expand", {OpClass::kBroadcast, NoFlops, CheckExpand}},
      {"Pad", {OpClass::kInjective, NoFlops, NoCheck}},
      {"Resize", {OpClass::kInjective, ResizeFlops, NoCheck}},
      {"Trilu", {OpClass::kInjective, NoFlops, CheckFirstInput}},
      {"DepthToSpace", {OpClass::kInjective, NoFlops, CheckSpaceDepth}},
      {"SpaceToDepth", {OpClass::kInjective, NoFlops, CheckSpaceDepth}},
      {"Tile", {OpClass::kInjective, NoFlops, CheckTile, Traffic::kFull, false, 1}},
      // Known but never fused: each runs as a group of its own through the runtime's reference
      // fallback; the entries give the cost model their FLOPs.
      {"LSTM", {OpClass::kOpaque, RecurrentFlops, CheckRecurrent}},
      {"GRU", {OpClass::kOpaque, RecurrentFlops, CheckRecurrent}},
      {"InstanceNormalization", {OpClass::kOpaque, PerElement(5, 0), CheckInstanceNorm}},
  };
  return *table;
}

const OpInfo* Find(const Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return nullptr;
  auto it = Table().find(n.op_type);
  return it == Table().end() ? nullptr : &it->second;
}

// Scalar constants (x * 0.5, x + 1e-5) apply the same value everywhere: not a broadcast of data.
bool IsScalarConstant(const Tensor& t) {
  return t.kind == TensorKind::kConstant && t.num_elements() == 1;
}

int64_t InputBytes(const Graph& g, const Node& n, size_t limit) {
  int64_t bytes = 0;
  std::vector<TensorId> seen;
  for (size_t i = 0; i < std::min(limit, n.inputs.size()); ++i) {
    TensorId id = n.inputs[i];
    if (id == kNoId || std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
    seen.push_back(id);
    if (g.tensor(id).kind != TensorKind::kConstant) bytes += g.tensor(id).bytes();
  }
  return bytes;
}

int64_t OutputBytes(const Graph& g, const Node& n) {
  int64_t bytes = 0;
  for (TensorId id : n.outputs) bytes += g.tensor(id).bytes();
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// The reference interpreter's ops

// The dtypes a reference kernel may write: float only, or integers too (the runtime computes in
// float32 and int64).
enum class ReferenceOutputs : uint8_t { kFloatOnly, kAnyDType };
constexpr ReferenceOutputs kFloatOnly = ReferenceOutputs::kFloatOnly;
constexpr ReferenceOutputs kAnyDType = ReferenceOutputs::kAnyDType;

const std::unordered_map<std::string_view, ReferenceOutputs>& ReferenceKernels() {
  static const auto* table = new std::unordered_map<std::string_view, ReferenceOutputs>{
      {"Abs", kFloatOnly},
      {"Acos", kFloatOnly},
      {"Acosh", kFloatOnly},
      {"Add", kAnyDType},
      {"And", kAnyDType},
      {"ArgMax", kAnyDType},
      {"ArgMin", kAnyDType},
      {"Asin", kFloatOnly},
      {"Asinh", kFloatOnly},
      {"Atan", kFloatOnly},
      {"Atanh", kFloatOnly},
      {"AveragePool", kFloatOnly},
      {"BatchNormalization", kFloatOnly},
      {"BitShift", kAnyDType},
      {"BlackmanWindow", kAnyDType},
      {"Cast", kAnyDType},
      {"Ceil", kFloatOnly},
      {"Celu", kFloatOnly},
      {"Clip", kAnyDType},
      {"Compress", kAnyDType},
      {"Concat", kAnyDType},
      {"Conv", kFloatOnly},
      {"ConvInteger", kAnyDType},
      {"ConvTranspose", kFloatOnly},
      {"Cos", kFloatOnly},
      {"Cosh", kFloatOnly},
      {"CumSum", kAnyDType},
      {"DFT", kFloatOnly},
      {"DepthToSpace", kAnyDType},
      {"DequantizeLinear", kFloatOnly},
      {"Det", kFloatOnly},
      {"Div", kAnyDType},
      {"Dropout", kAnyDType},
      {"DynamicQuantizeLinear", kAnyDType},
      {"Einsum", kFloatOnly},
      {"Elu", kFloatOnly},
      {"Equal", kAnyDType},
      {"Erf", kFloatOnly},
      {"Exp", kFloatOnly},
      {"Expand", kAnyDType},
      {"EyeLike", kAnyDType},
      {"Flatten", kAnyDType},
      {"Floor", kFloatOnly},
      {"GRU", kFloatOnly},
      {"Gather", kAnyDType},
      {"GatherElements", kAnyDType},
      {"GatherND", kAnyDType},
      {"Gemm", kFloatOnly},
      {"GlobalAveragePool", kFloatOnly},
      {"GlobalMaxPool", kFloatOnly},
      {"Greater", kAnyDType},
      {"GreaterOrEqual", kAnyDType},
      {"GridSample", kFloatOnly},
      {"HammingWindow", kAnyDType},
      {"HannWindow", kAnyDType},
      {"HardSigmoid", kFloatOnly},
      {"HardSwish", kFloatOnly},
      {"Hardmax", kFloatOnly},
      {"InstanceNormalization", kFloatOnly},
      {"IsInf", kAnyDType},
      {"IsNaN", kAnyDType},
      {"LRN", kFloatOnly},
      {"LSTM", kFloatOnly},
      {"LayerNormalization", kFloatOnly},
      {"LeakyRelu", kFloatOnly},
      {"Less", kAnyDType},
      {"LessOrEqual", kAnyDType},
      {"Log", kFloatOnly},
      {"LogSoftmax", kFloatOnly},
      {"MatMul", kFloatOnly},
      {"MatMulInteger", kAnyDType},
      {"Max", kAnyDType},
      {"MaxPool", kAnyDType},
      {"MaxUnpool", kFloatOnly},
      {"MeanVarianceNormalization", kFloatOnly},
      {"MelWeightMatrix", kFloatOnly},
      {"Min", kAnyDType},
      {"Mod", kAnyDType},
      {"Mul", kAnyDType},
      {"Neg", kFloatOnly},
      {"NegativeLogLikelihoodLoss", kFloatOnly},
      {"NonZero", kAnyDType},
      {"Not", kAnyDType},
      {"OneHot", kAnyDType},
      {"Or", kAnyDType},
      {"PRelu", kFloatOnly},
      {"Pad", kAnyDType},
      {"Pow", kAnyDType},
      {"QLinearConv", kAnyDType},
      {"QLinearMatMul", kAnyDType},
      {"QuantizeLinear", kAnyDType},
      {"RNN", kFloatOnly},
      {"Reciprocal", kFloatOnly},
      {"ReduceL1", kFloatOnly},
      {"ReduceL2", kFloatOnly},
      {"ReduceLogSum", kFloatOnly},
      {"ReduceLogSumExp", kFloatOnly},
      {"ReduceMax", kFloatOnly},
      {"ReduceMean", kFloatOnly},
      {"ReduceMin", kFloatOnly},
      {"ReduceProd", kFloatOnly},
      {"ReduceSum", kFloatOnly},
      {"ReduceSumSquare", kFloatOnly},
      {"Relu", kFloatOnly},
      {"Reshape", kAnyDType},
      {"Resize", kAnyDType},
      {"ReverseSequence", kAnyDType},
      {"RoiAlign", kFloatOnly},
      {"Round", kFloatOnly},
      {"ScatterElements", kAnyDType},
      {"ScatterND", kAnyDType},
      {"Selu", kFloatOnly},
      {"Shrink", kFloatOnly},
      {"Sigmoid", kFloatOnly},
      {"Sign", kFloatOnly},
      {"Sin", kFloatOnly},
      {"Sinh", kFloatOnly},
      {"Slice", kAnyDType},
      {"Softmax", kFloatOnly},
      {"SoftmaxCrossEntropyLoss", kFloatOnly},
      {"Softplus", kFloatOnly},
      {"Softsign", kFloatOnly},
      {"SpaceToDepth", kAnyDType},
      {"Split", kAnyDType},
      {"Sqrt", kFloatOnly},
      {"Squeeze", kAnyDType},
      {"Sub", kAnyDType},
      {"Tan", kFloatOnly},
      {"Tanh", kFloatOnly},
      {"TfIdfVectorizer", kFloatOnly},
      {"ThresholdedRelu", kFloatOnly},
      {"Tile", kAnyDType},
      {"TopK", kAnyDType},
      {"Transpose", kAnyDType},
      {"Trilu", kAnyDType},
      {"Unique", kAnyDType},
      {"Unsqueeze", kAnyDType},
      {"Where", kAnyDType},
      {"Xor", kAnyDType},
  };
  return *table;
}

}  // namespace

std::string_view OpClassName(OpClass c) {
  switch (c) {
    case OpClass::kElementwise:
      return "elementwise";
    case OpClass::kBroadcast:
      return "broadcast";
    case OpClass::kInjective:
      return "injective";
    case OpClass::kReduction:
      return "reduction";
    case OpClass::kAnchor:
      return "anchor";
    case OpClass::kOpaque:
      return "opaque";
  }
  return "opaque";
}

bool IsKnownOp(std::string_view domain, std::string_view op_type) {
  if (!domain.empty() && domain != "ai.onnx") return false;
  return Table().count(op_type) > 0;
}

std::vector<std::string_view> KnownOps() {
  std::vector<std::string_view> ops;
  for (const auto& [name, info] : Table()) ops.push_back(name);
  std::sort(ops.begin(), ops.end());
  return ops;
}

bool IsViewOp(std::string_view op_type) {
  auto it = Table().find(op_type);
  return it != Table().end() && it->second.traffic == Traffic::kView;
}

bool IsUnaryElementwise(std::string_view op_type) {
  auto it = Table().find(op_type);
  return it != Table().end() && it->second.arity == Arity::kUnary;
}

bool IsBinaryArithmetic(std::string_view op_type) {
  auto it = Table().find(op_type);
  return it != Table().end() && it->second.arity == Arity::kBinary;
}

bool HasReferenceKernel(std::string_view domain, std::string_view op_type) {
  if (!domain.empty() && domain != "ai.onnx") return false;
  return ReferenceKernels().count(op_type) > 0;
}

bool ReferenceKernelWritesIntegers(std::string_view op_type) {
  auto it = ReferenceKernels().find(op_type);
  return it != ReferenceKernels().end() && it->second == ReferenceOutputs::kAnyDType;
}

std::vector<std::string_view> ReferenceKernelOps() {
  std::vector<std::string_view> ops;
  for (const auto& [name, outputs] : ReferenceKernels()) ops.push_back(name);
  std::sort(ops.begin(), ops.end());
  return ops;
}

std::optional<double> UnaryPowExponent(const Graph& g, const Node& n) {
  if (n.op_type != "Pow" || !n.domain.empty()) return std::nullopt;
  const TensorId e = n.input(1);
  if (e == kNoId || !g.tensor(e).is_constant_data() || g.tensor(e).float_data.size() != 1) {
    return std::nullopt;
  }
  const double x = g.tensor(e).float_data[0];
  if (x == 2.0 || x == 0.5 || x == 1.0) return x;
  return std::nullopt;
}

double FloatAttrOrDefault(const Node& n, std::string_view attr) {
  // ONNX's schema defaults. Selu's are the float32 values the schema's text rounds to, as every
  // kernel computes in float.
  struct Default {
    std::string_view op, attr;
    double value;
  };
  static constexpr Default kDefaults[] = {
      {"LeakyRelu", "alpha", 0.01},
      {"HardSigmoid", "alpha", 0.2},
      {"HardSigmoid", "beta", 0.5},
      {"Elu", "alpha", 1.0},
      {"Celu", "alpha", 1.0},
      {"ThresholdedRelu", "alpha", 1.0},
      {"Selu", "alpha", 1.67326319217681884},
      {"Selu", "gamma", 1.05070102214813232},
      {"Shrink", "lambd", 0.5},
      {"Shrink", "bias", 0.0},
      {"Gemm", "alpha", 1.0},
      {"Gemm", "beta", 1.0},
      {"LRN", "alpha", 1e-4},
      {"LRN", "beta", 0.75},
      {"LRN", "bias", 1.0},
      {"BatchNormalization", "epsilon", 1e-5},
      {"BatchNormalization", "momentum", 0.9},
      {"LayerNormalization", "epsilon", 1e-5},
      {"InstanceNormalization", "epsilon", 1e-5},
  };
  for (const Default& d : kDefaults) {
    if (d.op == n.op_type && d.attr == attr) return n.GetFloat(attr, d.value);
  }
  return n.GetFloat(attr, 0.0);
}

OpClass ClassifyNode(const Graph& g, const Node& n) {
  const OpInfo* info = Find(n);
  if (info == nullptr || OnlyReferenceComputes(g, n)) return OpClass::kOpaque;
  if (!info->shape_dependent_class || n.outputs.empty()) return info->base_class;
  const Shape& out = Output(g, n, 0).dims;
  for (size_t i = 0; i < std::min(info->data_inputs, n.inputs.size()); ++i) {
    const Tensor* t = Input(g, n, i);
    if (t && !IsScalarConstant(*t) && t->dims != out) return OpClass::kBroadcast;
  }
  return OpClass::kElementwise;
}

OpCost CostOfNode(const Graph& g, const Node& n) {
  OpCost cost;
  const OpInfo* info = Find(n);
  Traffic traffic = info ? info->traffic : Traffic::kFull;
  if (info) info->flops(g, n, &cost);
  switch (traffic) {
    case Traffic::kView:
      break;
    case Traffic::kSliced:
      cost.bytes_read = OutputBytes(g, n);
      cost.bytes_written = OutputBytes(g, n);
      break;
    case Traffic::kGathered:
      cost.bytes_read = OutputBytes(g, n) + (Input(g, n, 1) ? Input(g, n, 1)->bytes() : 0);
      cost.bytes_written = OutputBytes(g, n);
      break;
    case Traffic::kFull:
      cost.bytes_read = InputBytes(g, n, info ? info->data_inputs : n.inputs.size());
      cost.bytes_written = OutputBytes(g, n);
      break;
  }
  return cost;
}

Status CheckNodeShapes(const Graph& g, const Node& n) {
  const OpInfo* info = Find(n);
  if (info == nullptr || n.outputs.empty() || n.inputs.empty() || n.inputs[0] == kNoId) {
    return Status::Ok();
  }
  bool anchor = info->base_class == OpClass::kAnchor;
  if (anchor && (n.inputs.size() < 2 || n.inputs[1] == kNoId)) {
    return ShapeMismatch(n, "needs at least two inputs");
  }
  return info->check(g, n);
}

}  // namespace fusor
