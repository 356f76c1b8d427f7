// GELU with its bias Add as one fused loop, for tests of the chain a source joins
// (lowering/loop_lowering.h) in tests/lowering and tests/costmodel: x = bias + mm, read by the Div
// that starts the Erf chain and by the Mul that ends it.
#pragma once

#include <vector>

#include "graph/graph.h"
#include "tests/graph/ir_builder.h"

namespace fusor::testing {

struct GeluLoop {
  Graph g;
  std::vector<NodeId> nodes;
  std::vector<TensorId> outputs;
  TensorId x, d, e, a, y;
};

// variant 0: y is the loop's one output; 1: x is an output too; 2: a Relu outside the chain reads
// x.
inline GeluLoop GeluWithBias(int variant) {
  IrBuilder b;
  const Shape dims = {1, 128, 3072};
  TensorId mm = b.Input("mm", dims), x = b.Act("x", dims), d = b.Act("d", dims);
  TensorId e = b.Act("e", dims), a = b.Act("a", dims), y = b.Act("y", dims);
  b.Op("Add", {b.Weight("bias", {3072}), mm}, {x});
  b.Op("Div", {x, b.FloatScalar("root_two", 1.4142135f)}, {d});
  b.Op("Erf", {d}, {e});
  b.Op("Add", {e, b.FloatScalar("one", 1)}, {a});
  b.Op("Mul", {x, a}, {y});
  b.Output(y);
  std::vector<NodeId> nodes = {0, 1, 2, 3, 4};
  std::vector<TensorId> outputs = {y};
  if (variant == 1) outputs.push_back(x);
  if (variant == 2) {
    TensorId r = b.Act("r", dims);
    nodes.push_back(b.Op("Relu", {x}, {r}));
    outputs.push_back(r);
  }
  for (TensorId t : outputs) {
    if (t != y) b.Output(t);
  }
  return {b.Build(), nodes, outputs, x, d, e, a, y};
}

}  // namespace fusor::testing
