// An Inception module whose second branch reduces to channels that are no whole block (GoogLeNet's
// 24-channel reduce convs), for tests of the layout rules (lowering/layout.h) in tests/lowering
// and of the kernels built on them in tests/runtime.
#pragma once

#include <string>

#include "graph/graph.h"
#include "tests/graph/ir_builder.h"

namespace fusor::testing {

// x[1,32,8,8] -> Conv 32->32 -> a; a -> Conv 1x1 32->16 -> Relu -> p1; a -> Conv 1x1 32->24 -> r
// -> Conv 3x3 24->16 -> c -> Relu -> p2; Concat(p1, p2) -> cat[1,32,8,8] -> Conv 32->16 -> y.
struct ReduceBranch {
  Graph g;
  TensorId a = kNoId, r = kNoId, c = kNoId, p2 = kNoId, cat = kNoId, y = kNoId;
};

inline ReduceBranch MakeReduceBranch() {
  IrBuilder b;
  ReduceBranch out;
  auto conv = [&](const std::string& name, TensorId x, int64_t in, int64_t channels,
                  int64_t kernel) {
    TensorId y = b.Act(name, {1, channels, 8, 8});
    const int64_t pad = kernel / 2;
    b.Op("Conv", {x, b.Weight("w_" + name, {channels, in, kernel, kernel})}, {y},
         {Ints("pads", {pad, pad, pad, pad})});
    return y;
  };
  out.a = conv("a", b.Input("x", {1, 32, 8, 8}), 32, 32, 3);
  TensorId c1 = conv("c1", out.a, 32, 16, 1);
  TensorId p1 = b.Act("p1", {1, 16, 8, 8});
  b.Op("Relu", {c1}, {p1});
  out.r = conv("r", out.a, 32, 24, 1);
  out.c = conv("c", out.r, 24, 16, 3);
  out.p2 = b.Act("p2", {1, 16, 8, 8});
  b.Op("Relu", {out.c}, {out.p2});
  out.cat = b.Act("cat", {1, 32, 8, 8});
  b.Op("Concat", {p1, out.p2}, {out.cat}, {Int("axis", 1)});
  out.y = conv("y", out.cat, 32, 16, 1);
  b.Output(out.y);
  out.g = b.Build();
  return out;
}

}  // namespace fusor::testing
