// A squeeze-and-excite block as EfficientNet and MobileNetV3 export it, for tests of the layout
// rules (lowering/layout.h) in tests/lowering and of the kernels built on them in tests/runtime.
#pragma once

#include <string>

#include "graph/graph.h"
#include "tests/graph/ir_builder.h"

namespace fusor::testing {

// x[1,16,8,8] -> Conv 16->C -> e -> depthwise Conv -> d -> Sigmoid -> Mul(d, .) -> act (SiLU) ->
// GlobalAveragePool -> Conv C->8 (one pixel) -> Relu -> Conv 8->C -> Sigmoid -> scale [1,C,1,1];
// Mul(act, scale) -> excited -> Conv C->16 -> y.
struct SeBlock {
  Graph g;
  TensorId act = kNoId, pooled = kNoId, scale = kNoId, excited = kNoId, y = kNoId;
  NodeId pool = kNoId, excite = kNoId;  // The GlobalAveragePool and the per-channel Mul.
};

inline SeBlock MakeSeBlock(int64_t channels) {
  IrBuilder b;
  SeBlock out;
  const Shape full = {1, channels, 8, 8}, one = {1, channels, 1, 1};
  auto conv = [&](const std::string& name, TensorId x, Shape dims, int64_t in, int64_t group,
                  int64_t kernel) {
    TensorId y = b.Act(name, dims);
    const int64_t pad = kernel / 2;
    b.Op("Conv", {x, b.Weight("w_" + name, {dims[1], in / group, kernel, kernel})}, {y},
         {Int("group", group), Ints("pads", {pad, pad, pad, pad})});
    return y;
  };
  TensorId e = conv("e", b.Input("x", {1, 16, 8, 8}), full, 16, 1, 1);
  TensorId d = conv("d", e, full, channels, channels, 3);
  TensorId sg = b.Act("sg", full);
  b.Op("Sigmoid", {d}, {sg});
  out.act = b.Act("act", full);
  b.Op("Mul", {d, sg}, {out.act});
  out.pooled = b.Act("pooled", one);
  out.pool = b.Op("GlobalAveragePool", {out.act}, {out.pooled});
  TensorId squeezed = conv("squeezed", out.pooled, {1, 8, 1, 1}, channels, 1, 1);
  TensorId relu = b.Act("relu", {1, 8, 1, 1});
  b.Op("Relu", {squeezed}, {relu});
  TensorId expanded = conv("expanded", relu, one, 8, 1, 1);
  out.scale = b.Act("scale", one);
  b.Op("Sigmoid", {expanded}, {out.scale});
  out.excited = b.Act("excited", full);
  out.excite = b.Op("Mul", {out.act, out.scale}, {out.excited});
  out.y = conv("y", out.excited, {1, 16, 8, 8}, channels, 1, 1);
  b.Output(out.y);
  out.g = b.Build();
  return out;
}

}  // namespace fusor::testing
