// Which Concats run in place and where their parts are stored (lowering/concat_in_place.h): rules
// of the graph and plan alone. tests/runtime/in_place_concat_test.cc runs the plans they decide
// against the reference.
#include "lowering/concat_in_place.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "graph/graph_builder.h"

namespace fusor {
namespace {

Attribute Axis(int64_t axis) { return {"axis", axis}; }

// Relu(x) and Sigmoid(x) of [n,3,4,4] concatenated over `axis` (negative counts from the end),
// read by a Neg.
struct Pair {
  GraphBuilder b;
  NodeId concat = 2;
};
void BuildPair(Pair* p, int64_t n, int64_t axis) {
  const Shape dims = {n, 3, 4, 4};
  Shape joined = dims;
  joined[axis < 0 ? axis + 4 : axis] *= 2;
  TensorId x = p->b.Input(dims);
  TensorId r = p->b.Op("Relu", {x}, dims);
  TensorId s = p->b.Op("Sigmoid", {x}, dims);
  TensorId cat = p->b.Op("Concat", {r, s}, joined, {Axis(axis)});
  p->b.Output(p->b.Op("Neg", {cat}, joined));
}

// Over channels of one image, or over the batch, each part is one contiguous range of the whole:
// in place. Over channels of two images, or rows of one image's channels, the slices are
// strided: a copy.
TEST(ConcatFitsInPlace, OnlyWhereEveryDimBeforeTheAxisIsOne) {
  for (const auto& [n, axis, fits] : {std::tuple<int64_t, int64_t, bool>{1, 1, true},
                                      {2, 0, true},
                                      {2, 1, false},
                                      {1, 2, false},
                                      {1, -3, true}}) {
    Pair p;
    BuildPair(&p, n, axis);
    const Graph& g = p.b.Linked();
    EXPECT_EQ(ConcatFitsInPlace(g, p.concat), fits) << "batch " << n << " axis " << axis;
  }
}

// A graph input (the caller's buffer), a weight and a tensor listed twice have no slice of their
// own to move into; of two Concats reading one tensor only the first holds it (even when the first
// does not run in place itself).
TEST(ConcatFitsInPlace, PartsMustBeComputedOnceListedAndHeldByTheFirstConcatReadingThem) {
  GraphBuilder b;
  const Shape dims = {1, 4, 3, 3}, joined = {1, 8, 3, 3};
  TensorId x = b.Input(dims);
  TensorId r = b.Op("Relu", {x}, dims);                              // 0
  TensorId s = b.Op("Sigmoid", {x}, dims);                           // 1
  TensorId t = b.Op("Tanh", {x}, dims);                              // 2
  TensorId u = b.Op("Exp", {x}, dims);                               // 3
  TensorId v = b.Op("Abs", {x}, dims);                               // 4
  b.Output(b.Op("Concat", {r, x}, joined, {Axis(1)}));               // 5: a graph input.
  b.Output(b.Op("Concat", {s, s}, joined, {Axis(1)}));               // 6: s twice.
  b.Output(b.Op("Concat", {t, r}, joined, {Axis(1)}));               // 7: r is node 5's.
  b.Output(b.Op("Concat", {u, b.Weight(dims)}, joined, {Axis(1)}));  // 8: a weight.
  b.Output(b.Op("Concat", {v, t}, joined, {Axis(1)}));               // 9: t is node 7's.
  const Graph& g = b.Linked();
  for (NodeId concat : {5, 6, 7, 8, 9}) EXPECT_FALSE(ConcatFitsInPlace(g, concat)) << concat;
  EXPECT_FALSE(ConcatFitsInPlace(g, 0));  // Not a Concat.
}

// Only a lone Concat group runs in place: fused with its reader, it is part of a loop.
TEST(ConcatRunsInPlace, OnlyALoneConcatGroup) {
  Pair p;
  BuildPair(&p, 1, 1);
  const Graph& g = p.b.Linked();
  EXPECT_TRUE(ConcatRunsInPlace(g, FusionGroup{GroupKind::kSingle, {2}, {}}));
  EXPECT_FALSE(ConcatRunsInPlace(g, FusionGroup{GroupKind::kLoop, {2, 3}, {}}));
}

// Each part starts where the parts before it end; a Concat fused into a loop has no slices.
TEST(InPlaceConcatSlices, EachPartStartsWhereThePartsBeforeItEnd) {
  GraphBuilder b;
  TensorId x = b.Input({1, 2, 5, 5});
  TensorId r = b.Op("Relu", {x}, {1, 2, 5, 5});
  TensorId c = b.Op("Conv", {x, b.Weight({3, 2, 1, 1})}, {1, 3, 5, 5});
  TensorId t = b.Op("Tanh", {x}, {1, 2, 5, 5});
  TensorId cat = b.Op("Concat", {r, c, t}, {1, 7, 5, 5}, {Axis(1)});
  b.Output(b.Op("Neg", {cat}, {1, 7, 5, 5}));
  const Graph& g = b.Linked();
  const FusionPlan unfused = UnfusedPlan(g);
  const auto slices = InPlaceConcatSlices(g, unfused);
  ASSERT_EQ(slices.size(), 3u);
  const std::vector<std::pair<TensorId, int64_t>> want = {{r, 0}, {c, 50}, {t, 125}};
  for (size_t i = 0; i < slices.size(); ++i) {
    EXPECT_EQ(slices[i].part, want[i].first) << i;
    EXPECT_EQ(slices[i].whole, cat) << i;
    EXPECT_EQ(slices[i].offset, want[i].second) << i;
  }
  FusionPlan fused{
      {FusionGroup{GroupKind::kSingle, {0}, {}}, FusionGroup{GroupKind::kAnchor, {1}, {}},
       FusionGroup{GroupKind::kSingle, {2}, {}}, FusionGroup{GroupKind::kLoop, {3, 4}, {}}}};
  EXPECT_TRUE(InPlaceConcatSlices(g, fused).empty());
}

}  // namespace
}  // namespace fusor
