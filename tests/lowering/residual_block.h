// A residual block of convolutions, for tests of which tensors stay channel-blocked
// (lowering/layout.h) in tests/lowering and of the kernels built on them in tests/runtime.
#pragma once

#include <string>

#include "graph/graph.h"
#include "tests/graph/ir_builder.h"

namespace fusor::testing {

// x -> Conv a -> Relu -> r1 -> Conv b -> Add(r1) -> Relu -> r2 -> Conv c -> y, plus a scale of r2
// per channel and row (a broadcast whose bytes differ in a blocked layout, so a loop that cannot
// run on blocked data) as a second output.
struct ResidualBlock {
  Graph g;
  TensorId r1 = kNoId, r2 = kNoId, y = kNoId, scaled = kNoId;
};

inline ResidualBlock MakeResidualBlock(int64_t channels) {
  IrBuilder b;
  Shape d = {1, channels, 8, 8};
  ResidualBlock out;
  TensorId x = b.Input("x", d);
  TensorId a = b.Act("a", d), ca = b.Act("cb", d), sum = b.Act("sum", d);
  out.r1 = b.Act("r1", d);
  out.r2 = b.Act("r2", d);
  out.y = b.Act("y", d);
  out.scaled = b.Act("scaled", d);
  auto conv = [&](const std::string& w, TensorId in, TensorId o) {
    b.Op("Conv", {in, b.Weight(w, {channels, channels, 3, 3})}, {o}, {Ints("pads", {1, 1, 1, 1})});
  };
  conv("wa", x, a);
  b.Op("Relu", {a}, {out.r1});
  conv("wb", out.r1, ca);
  b.Op("Add", {ca, out.r1}, {sum});
  b.Op("Relu", {sum}, {out.r2});
  conv("wc", out.r2, out.y);
  b.Op("Mul", {out.r2, b.Weight("per_channel_row", {channels, 8, 1})}, {out.scaled});
  b.Output(out.y);
  b.Output(out.scaled);
  out.g = b.Build();
  return out;
}

}  // namespace fusor::testing
