// Small wire graphs for the server tests: chains of elementwise ops whose size and shape the
// test picks, so distinct graphs (distinct canonical hashes) are cheap to make and quick to tune.
#pragma once

#include <string>

#include "graph/graph_proto.h"
#include "proto/tuner.pb.h"
#include "tests/graph/ir_builder.h"

namespace fusor::testing {

// x[1, width] -> Relu -> Add(., bias) -> Relu -> ... with `nodes` nodes in all.
inline v1::Graph ChainGraph(int nodes, int64_t width = 64, const std::string& name = "chain") {
  IrBuilder b;
  TensorId x = b.Input("x", {1, width});
  TensorId bias = b.Weight("bias", {1, width});
  for (int i = 0; i < nodes; ++i) {
    TensorId y = b.Act("t" + std::to_string(i), {1, width});
    if (i % 2 == 0) {
      b.Op("Relu", {x}, {y});
    } else {
      b.Op("Add", {x, bias}, {y});
    }
    x = y;
  }
  b.Output(x);
  Graph g = b.Build();
  g.model_name = name;
  return ToProto(g);
}

inline v1::TuneRequest TuneRequestFor(const v1::Graph& graph) {
  v1::TuneRequest r;
  *r.mutable_graph() = graph;
  r.mutable_options()->set_measure_budget(1);
  r.mutable_options()->set_time_limit_s(20);
  return r;
}

}  // namespace fusor::testing
