// GraphBuilder: builds an IR graph in code, op by op, for graphs Fusor makes itself (calibration
// micro-benchmarks, synthetic scaling graphs). Tensors are named by kind and position ("a12",
// "w3"); names never matter to Fusor. Every node gets op_version 13 (the opset the built graphs
// follow). Not thread-safe; the graph it returns is a value.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace fusor {

class GraphBuilder {
 public:
  // A graph input; `name` defaults to one made from its position.
  TensorId Input(Shape dims, std::string name = "", DType dtype = DType::kFloat32);
  TensorId Weight(Shape dims);                 // Dims only, as imported weights are.
  TensorId Scalar(double value);               // A float scalar constant.
  TensorId Ints(std::vector<int64_t> values);  // A 1-D int64 constant.
  // One node with one float32 output of shape `out`; returns the output.
  TensorId Op(const std::string& op, std::vector<TensorId> inputs, Shape out,
              std::vector<Attribute> attrs = {});
  void Output(TensorId t) { g_.AddOutput(t); }

  // The graph so far, linked.
  Graph& Linked() {
    g_.Link();
    return g_;
  }
  Graph& graph() { return g_; }

 private:
  TensorId Add(char prefix, Shape dims, TensorKind kind, DType dtype = DType::kFloat32);

  Graph g_;
};

}  // namespace fusor
