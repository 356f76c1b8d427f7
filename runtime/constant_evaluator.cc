#include "runtime/constant_evaluator.h"

#include "runtime/host_tensor.h"
#include "runtime/reference.h"

namespace fusor {

StatusOr<std::vector<AttrTensor>> EvaluateConstantNode(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  TensorValues values;
  for (TensorId t : n.inputs) {
    if (t == kNoId) continue;
    FUSOR_ASSIGN_OR_RETURN(values[t], ConstantValue(g.tensor(t)));
  }
  FUSOR_RETURN_IF_ERROR(RunReferenceNode(g, id, &values));
  std::vector<AttrTensor> out;
  for (TensorId t : n.outputs) {
    HostTensor& v = values.at(t);
    AttrTensor a;
    a.dtype = g.tensor(t).dtype;
    a.dims = v.dims;
    if (v.is_float()) {
      a.float_data.assign(v.f.begin(), v.f.end());
    } else {
      a.int_data = std::move(v.i);
    }
    out.push_back(std::move(a));
  }
  return out;
}

ImportOptions WithConstantFolding(ImportOptions options) {
  options.evaluate_constants = EvaluateConstantNode;
  return options;
}

Status FoldNodesOverConstants(Graph* g) {
  return FoldConstantNodes(g, EvaluateConstantNode).status();
}

}  // namespace fusor
