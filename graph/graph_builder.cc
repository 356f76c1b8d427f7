#include "graph/graph_builder.h"

namespace fusor {

TensorId GraphBuilder::Add(char prefix, Shape dims, TensorKind kind, DType dtype) {
  Tensor t;
  t.name = prefix + std::to_string(g_.num_tensors());
  t.dims = std::move(dims);
  t.kind = kind;
  t.dtype = dtype;
  return g_.AddTensor(std::move(t));
}

TensorId GraphBuilder::Input(Shape dims, std::string name, DType dtype) {
  TensorId t = Add('x', std::move(dims), TensorKind::kGraphInput, dtype);
  if (!name.empty()) g_.mutable_tensor(t).name = std::move(name);
  g_.AddInput(t);
  return t;
}

TensorId GraphBuilder::Weight(Shape dims) { return Add('w', std::move(dims), TensorKind::kWeight); }

TensorId GraphBuilder::Scalar(double value) {
  TensorId t = Add('c', {}, TensorKind::kConstant);
  g_.mutable_tensor(t).float_data = {value};
  return t;
}

TensorId GraphBuilder::Ints(std::vector<int64_t> values) {
  TensorId t =
      Add('i', {static_cast<int64_t>(values.size())}, TensorKind::kConstant, DType::kInt64);
  g_.mutable_tensor(t).int_data = std::move(values);
  return t;
}

TensorId GraphBuilder::Op(const std::string& op, std::vector<TensorId> inputs, Shape out,
                          std::vector<Attribute> attrs) {
  TensorId t = Add('a', std::move(out), TensorKind::kActivation);
  Node n;
  n.name = op + "_" + std::to_string(g_.num_nodes());
  n.op_type = op;
  n.op_version = 13;
  n.inputs = std::move(inputs);
  n.outputs = {t};
  for (auto& a : attrs) n.SetAttr(a.name, a.value);
  g_.AddNode(std::move(n));
  return t;
}

}  // namespace fusor
