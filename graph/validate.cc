#include "graph/validate.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "graph/op_registry.h"

namespace fusor {
namespace {

std::string NodeRef(const Node& n) { return "node '" + n.name + "' (" + n.op_type + ")"; }

Status CheckCounts(const Graph& g, const ValidationLimits& limits) {
  if (static_cast<int64_t>(g.num_nodes()) > limits.max_nodes) {
    return Status::ResourceExhausted("graph has " + std::to_string(g.num_nodes()) +
                                     " nodes, the limit is " + std::to_string(limits.max_nodes));
  }
  return Status::Ok();
}

Status CheckTensorNames(const Graph& g) {
  std::unordered_set<std::string_view> seen;
  for (const Tensor& t : g.tensors()) {
    if (t.name.empty()) return Status::InvalidArgument("a tensor has an empty name");
    if (!seen.insert(t.name).second) {
      return Status::InvalidArgument("tensor name '" + t.name + "' is used by two tensors");
    }
  }
  return Status::Ok();
}

Status CheckTensor(const Tensor& t, const ValidationLimits& limits) {
  if (t.dtype == DType::kUnspecified || static_cast<int>(t.dtype) > kMaxDType) {
    return Status::InvalidArgument("tensor '" + t.name + "' has no known dtype");
  }
  int64_t elements = 1;
  for (size_t i = 0; i < t.dims.size(); ++i) {
    int64_t d = t.dims[i];
    bool empty_ok = d == 0 && (t.kind == TensorKind::kConstant || t.kind == TensorKind::kWeight);
    if (d < 1 && !empty_ok) {
      return Status::InvalidArgument("tensor '" + t.name + "' has dim " + std::to_string(i) +
                                     " = " + std::to_string(d) + "; dims must be 1 or more");
    }
    if (d > 0 && elements > std::numeric_limits<int64_t>::max() / d) {
      return Status::InvalidArgument("tensor '" + t.name + "' of shape " + ShapeString(t.dims) +
                                     " has more elements than int64 can count");
    }
    elements *= d;
  }
  if (elements > limits.max_tensor_elements) {
    return Status::ResourceExhausted("tensor '" + t.name + "' of shape " + ShapeString(t.dims) +
                                     " has " + std::to_string(elements) +
                                     " elements, the limit is " +
                                     std::to_string(limits.max_tensor_elements));
  }
  size_t data = t.int_data.size() + t.float_data.size();
  if (t.kind == TensorKind::kConstant && static_cast<int64_t>(data) != elements) {
    return Status::InvalidArgument("constant '" + t.name + "' of shape " + ShapeString(t.dims) +
                                   " carries " + std::to_string(data) + " values, expected " +
                                   std::to_string(elements));
  }
  return Status::Ok();
}

Status CheckNodeEdges(const Graph& g, NodeId id, std::vector<int>* producers) {
  const Node& n = g.node(id);
  if (n.op_type.empty())
    return Status::InvalidArgument("node #" + std::to_string(id) + " has no op");
  if (n.outputs.empty()) return Status::InvalidArgument(NodeRef(n) + " has no outputs");
  // Every op Fusor knows takes at most 5 inputs, except Concat, GRU (6) and LSTM (8); nothing
  // takes more than 65536.
  constexpr size_t kMaxKnownInputs = 5, kMaxGruInputs = 6, kMaxLstmInputs = 8, kMaxInputs = 65536;
  bool variadic = n.op_type == "Concat" || !IsKnownOp(n.domain, n.op_type);
  size_t limit = variadic              ? kMaxInputs
                 : n.op_type == "LSTM" ? kMaxLstmInputs
                 : n.op_type == "GRU"  ? kMaxGruInputs
                                       : kMaxKnownInputs;
  if (n.inputs.size() > limit) {
    return Status::InvalidArgument(NodeRef(n) + " has " + std::to_string(n.inputs.size()) +
                                   " inputs; it takes at most " + std::to_string(limit));
  }
  const int32_t count = static_cast<int32_t>(g.num_tensors());
  for (TensorId in : n.inputs) {
    if (in != kNoId && (in < 0 || in >= count)) {
      return Status::InvalidArgument(NodeRef(n) + " reads a tensor id out of range");
    }
  }
  for (TensorId out : n.outputs) {
    if (out < 0 || out >= count) {
      return Status::InvalidArgument(NodeRef(n) + " writes a tensor id out of range");
    }
    const Tensor& t = g.tensor(out);
    if (t.kind != TensorKind::kActivation) {
      return Status::InvalidArgument(NodeRef(n) + " writes '" + t.name + "', which is a " +
                                     std::string(TensorKindName(t.kind)) + ", not an activation");
    }
    if (++(*producers)[out] > 1) {
      return Status::InvalidArgument(
          "tensor '" + t.name + "' is written by two nodes (the second is " + NodeRef(n) + ")");
    }
  }
  return Status::Ok();
}

Status CheckEdges(const Graph& g) {
  std::vector<int> producers(g.num_tensors(), 0);
  for (NodeId id = 0; id < static_cast<NodeId>(g.num_nodes()); ++id) {
    FUSOR_RETURN_IF_ERROR(CheckNodeEdges(g, id, &producers));
  }
  for (NodeId id = 0; id < static_cast<NodeId>(g.num_nodes()); ++id) {
    for (TensorId in : g.node(id).inputs) {
      if (in == kNoId) continue;
      const Tensor& t = g.tensor(in);
      if (t.kind == TensorKind::kActivation && producers[in] == 0) {
        return Status::InvalidArgument(NodeRef(g.node(id)) + " reads '" + t.name +
                                       "', which no node produces and is not a graph input, "
                                       "weight or constant");
      }
    }
  }
  return Status::Ok();
}

Status CheckGraphInterface(const Graph& g) {
  const int32_t count = static_cast<int32_t>(g.num_tensors());
  for (TensorId in : g.inputs()) {
    if (in < 0 || in >= count || g.tensor(in).kind != TensorKind::kGraphInput) {
      return Status::InvalidArgument("a graph input is not a tensor of kind input");
    }
  }
  std::unordered_set<TensorId> listed(g.inputs().begin(), g.inputs().end());
  for (TensorId id = 0; id < count; ++id) {
    if (g.tensor(id).kind == TensorKind::kGraphInput && !listed.count(id)) {
      return Status::InvalidArgument("tensor '" + g.tensor(id).name +
                                     "' is of kind input but not listed among the graph inputs");
    }
  }
  if (g.outputs().empty()) return Status::InvalidArgument("graph has no outputs");
  for (TensorId out : g.outputs()) {
    if (out < 0 || out >= count)
      return Status::InvalidArgument("a graph output id is out of range");
  }
  return Status::Ok();
}

}  // namespace

Status Validate(const Graph& g, const ValidationLimits& limits) {
  FUSOR_RETURN_IF_ERROR(CheckCounts(g, limits));
  FUSOR_RETURN_IF_ERROR(CheckTensorNames(g));
  for (const Tensor& t : g.tensors()) FUSOR_RETURN_IF_ERROR(CheckTensor(t, limits));
  FUSOR_RETURN_IF_ERROR(CheckEdges(g));
  FUSOR_RETURN_IF_ERROR(CheckGraphInterface(g));
  auto order = g.TopologicalOrder();
  if (!order.ok()) return order.status();
  for (const Node& n : g.nodes()) FUSOR_RETURN_IF_ERROR(CheckNodeShapes(g, n));
  return Status::Ok();
}

}  // namespace fusor
