#include "graph/node_attrs.h"

#include <algorithm>
#include <variant>

#include "graph/dtype.h"

namespace fusor {

std::string NodeLabel(const Node& n) { return "node '" + n.name + "' (" + n.op_type + ")"; }

int64_t NormalizeAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
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
  const bool lstm = n.op_type == "LSTM";
  if ((!lstm && n.op_type != "GRU") || n.input(0) == kNoId || n.input(1) == kNoId ||
      n.input(2) == kNoId) {
    return Status::InvalidArgument(NodeLabel(n) + ": not an LSTM or GRU with inputs X, W and R");
  }
  RecurrentAttrs a;
  a.gates = lstm ? 4 : 3;
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
    const size_t per_direction = lstm ? 3 : 2;
    for (size_t i = 0; acts != nullptr && i < acts->size(); ++i) {
      if ((*acts)[i] != (i % per_direction == 0 ? "Sigmoid" : "Tanh")) {
        a.non_default_activation = (*acts)[i];
        break;
      }
    }
  }
  return a;
}

}  // namespace fusor
