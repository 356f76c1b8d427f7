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

namespace {

Status NoLstmPrimitive(const Node& n, const std::string& why) {
  return Status::Unimplemented(NodeLabel(n) + ": LSTM " + why +
                               " has no oneDNN lowering; it runs through the reference fallback");
}

}  // namespace

Status LstmPrimitiveForm(const Graph& g, const Node& n) {
  if (n.op_type != "LSTM" || n.input(0) == kNoId || n.input(1) == kNoId || n.input(2) == kNoId) {
    return Status::InvalidArgument(NodeLabel(n) + ": not an LSTM with X, W and R");
  }
  if (g.tensor(n.inputs[0]).dims.size() != 3) return NoLstmPrimitive(n, "over a rank != 3 X");
  if (n.GetInt("layout", 0) != 0) return NoLstmPrimitive(n, "with layout=1 (batch first)");
  if (n.GetFloat("clip", 0.0) != 0.0) return NoLstmPrimitive(n, "with clip");
  if (n.GetInt("input_forget", 0) != 0) return NoLstmPrimitive(n, "with input_forget");
  if (const Attribute* a = n.FindAttr("activations")) {
    const auto* acts = std::get_if<std::vector<std::string>>(&a->value);
    for (size_t i = 0; acts != nullptr && i < acts->size(); ++i) {
      if ((*acts)[i] != (i % 3 == 0 ? "Sigmoid" : "Tanh")) {
        return NoLstmPrimitive(n, "with activation '" + (*acts)[i] + "'");
      }
    }
  }
  if (n.input(7) != kNoId) return NoLstmPrimitive(n, "with peepholes");
  if (n.input(4) != kNoId) {
    const int64_t seq = g.tensor(n.inputs[0]).dims[0];
    StatusOr<std::vector<int64_t>> lens = ConstantInts(g, n, 4);
    bool full =
        lens.ok() && std::all_of(lens->begin(), lens->end(), [seq](int64_t v) { return v == seq; });
    if (!full) return NoLstmPrimitive(n, "with sequence_lens other than the full length");
  }
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    TensorId t = n.inputs[i];
    if (i != 4 && t != kNoId && g.tensor(t).dtype != DType::kFloat32) {
      return NoLstmPrimitive(n, "over " + std::string(DTypeName(g.tensor(t).dtype)));
    }
  }
  return Status::Ok();
}

}  // namespace fusor
