// A Fire / Inception-like module whose Concat joins whole channel blocks, for tests of which
// tensors stay channel-blocked through a Concat (lowering/layout.h) in tests/lowering and of the
// in-place Concat kernels built on them in tests/runtime.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph_builder.h"
#include "lowering/layout.h"

namespace fusor::testing {

// x[n,cx,8,8] -> Conv cx->16 + Relu -> a, x -> Conv cx->`b_channels` -> b; Concat(a, b) -> c ->
// Relu -> r -> Conv -> y; `extra` adds a reader that changes the rule.
enum class Extra { kNone, kFlattenOfTheWhole, kSecondConcatOfAPart, kConcatOfTheWhole };
struct ConcatModule {
  GraphBuilder b;
  TensorId a = kNoId, b_out = kNoId, c = kNoId, r = kNoId;
};

inline void BuildConcatModule(ConcatModule* m, int64_t n, int64_t cx, int64_t b_channels,
                              Extra extra) {
  GraphBuilder& b = m->b;
  const Attribute channels = {"axis", int64_t{1}};
  TensorId x = b.Input({n, cx, 8, 8});
  TensorId conv1 = b.Op("Conv", {x, b.Weight({16, cx, 3, 3})}, {n, 16, 8, 8},
                        {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  m->a = b.Op("Relu", {conv1}, {n, 16, 8, 8});
  m->b_out = b.Op("Conv", {x, b.Weight({b_channels, cx, 1, 1})}, {n, b_channels, 8, 8});
  const int64_t whole = 16 + b_channels;
  m->c = b.Op("Concat", {m->a, m->b_out}, {n, whole, 8, 8}, {channels});
  m->r = b.Op("Relu", {m->c}, {n, whole, 8, 8});
  b.Output(b.Op("Conv", {m->r, b.Weight({16, whole, 1, 1})}, {n, 16, 8, 8}));
  if (extra == Extra::kFlattenOfTheWhole) {
    b.Output(b.Op("Flatten", {m->c}, {n, whole * 64}, {channels}));
  } else if (extra == Extra::kSecondConcatOfAPart) {
    b.Output(b.Op("Concat", {m->r, m->a}, {n, whole + 16, 8, 8}, {channels}));
  } else if (extra == Extra::kConcatOfTheWhole) {
    b.Output(b.Op("Concat", {m->c, m->r}, {n, 2 * whole, 8, 8}, {channels}));
  }
}

// Whether the parts and the whole are all kept channel-blocked on `target`.
inline bool AllPartsKept(ConcatModule& m, const LayoutTarget& target) {
  const Graph& g = m.b.Linked();
  return KeptBlocked(g, m.a, target) && KeptBlocked(g, m.b_out, target) &&
         KeptBlocked(g, m.c, target);
}

}  // namespace fusor::testing
