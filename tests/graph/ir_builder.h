// Builds IR graphs directly for tests: tensors by name, nodes by op, then Build() links them.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace fusor::testing {

class IrBuilder {
 public:
  TensorId Input(const std::string& name, Shape dims, DType dtype = DType::kFloat32) {
    TensorId id = Add(name, std::move(dims), TensorKind::kGraphInput, dtype);
    g_.AddInput(id);
    return id;
  }
  TensorId Weight(const std::string& name, Shape dims) {
    return Add(name, std::move(dims), TensorKind::kWeight);
  }
  TensorId IntConstant(const std::string& name, std::vector<int64_t> values) {
    TensorId id =
        Add(name, {static_cast<int64_t>(values.size())}, TensorKind::kConstant, DType::kInt64);
    g_.mutable_tensor(id).int_data = std::move(values);
    return id;
  }
  TensorId IntScalar(const std::string& name, int64_t value) {
    TensorId id = Add(name, {}, TensorKind::kConstant, DType::kInt64);
    g_.mutable_tensor(id).int_data = {value};
    return id;
  }
  TensorId FloatConstant(const std::string& name, std::vector<double> values) {
    TensorId id = Add(name, {static_cast<int64_t>(values.size())}, TensorKind::kConstant);
    g_.mutable_tensor(id).float_data = std::move(values);
    return id;
  }
  TensorId FloatScalar(const std::string& name, double value) {
    TensorId id = Add(name, {}, TensorKind::kConstant);
    g_.mutable_tensor(id).float_data = {value};
    return id;
  }
  TensorId Act(const std::string& name, Shape dims, DType dtype = DType::kFloat32) {
    return Add(name, std::move(dims), TensorKind::kActivation, dtype);
  }
  NodeId Op(const std::string& op, std::vector<TensorId> inputs, std::vector<TensorId> outputs,
            std::vector<Attribute> attrs = {}) {
    Node n;
    n.name = op + "_" + std::to_string(g_.num_nodes());
    n.op_type = op;
    n.inputs = std::move(inputs);
    n.outputs = std::move(outputs);
    for (auto& a : attrs) n.SetAttr(a.name, a.value);
    return g_.AddNode(std::move(n));
  }
  void Output(TensorId t) { g_.AddOutput(t); }
  Graph Build() {
    g_.Link();
    return g_;
  }

 private:
  TensorId Add(const std::string& name, Shape dims, TensorKind kind,
               DType dtype = DType::kFloat32) {
    Tensor t;
    t.name = name;
    t.dims = std::move(dims);
    t.kind = kind;
    t.dtype = dtype;
    return g_.AddTensor(std::move(t));
  }
  Graph g_;
};

inline Attribute Ints(const std::string& name, std::vector<int64_t> v) {
  return {name, std::move(v)};
}
inline Attribute Int(const std::string& name, int64_t v) { return {name, v}; }

// The graph of one `op` node reading input x of `in` dims into the graph's output y of `out` dims,
// with a constant integer second input `second` when given (Tile's repeats).
inline Graph OneOpGraph(const std::string& op, const Shape& in, const Shape& out,
                        std::vector<Attribute> attrs, std::vector<int64_t> second = {}) {
  IrBuilder b;
  std::vector<TensorId> inputs = {b.Input("x", in)};
  if (!second.empty()) inputs.push_back(b.IntConstant("second", second));
  TensorId y = b.Act("y", out);
  b.Op(op, inputs, {y}, std::move(attrs));
  b.Output(y);
  return b.Build();
}

}  // namespace fusor::testing
