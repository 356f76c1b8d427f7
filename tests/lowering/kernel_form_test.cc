// Which kernel form a group takes where its kind leaves a choice (lowering/kernel_form.h): a
// primitive chain beside our fused loop, our row reduction or a oneDNN primitive, oneDNN's
// resampling, swish, instance normalization and blocked pooling. Rules of the graph alone;
// tests/lowering/group_lowering_test.cc checks that the runtime builds the forms they name.
#include "lowering/kernel_form.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::Int;
using testing::Ints;
using testing::IrBuilder;

// oneDNN 2.6 broadcasts binary operands per tensor, per channel (dim 1) or not at all in its JIT
// kernels; a [768] bias over [1,128,768] (dim 2) is no primitive chain, a [1,128,1] divisor is.
TEST(HasPrimitiveChainForm, OnlyBroadcastsOneDnnRunsInJit) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 128, 768}), d = b.Input("d", {1, 128, 1});
  TensorId w = b.Weight("w", {768});
  TensorId q = b.Act("q", {1, 128, 768}), y = b.Act("y", {1, 128, 768});
  b.Op("Div", {x, d}, {q});
  b.Op("Mul", {q, w}, {y});
  b.Output(y);
  Graph g = b.Build();
  EXPECT_TRUE(HasPrimitiveChainForm(g, {0}, {q}));
  EXPECT_FALSE(HasPrimitiveChainForm(g, {0, 1}, {y}));
}

// oneDNN 2.6's eltwise primitive takes no post-ops, and a binary node with a scalar constant is
// an eltwise head: BERT's GELU tail Add(e, 1) -> Mul(x, .) -> Mul(., 0.5) has no primitive form
// from its head, Mul(x, .) -> Mul(., 0.5) has (a binary head), and Add(e, 1) -> Mul(., 0.5) too
// (the runtime merges the two affine maps into one eltwise_linear).
TEST(HasPrimitiveChainForm, AnEltwiseHeadTakesOnlyAffineMapsItMerges) {
  IrBuilder b;
  const Shape dims = {1, 128, 3072};
  TensorId e = b.Input("e", dims), x = b.Input("x", dims);
  TensorId a = b.Act("a", dims), m = b.Act("m", dims), y = b.Act("y", dims);
  TensorId h = b.Act("h", dims);
  b.Op("Add", {e, b.FloatScalar("one", 1)}, {a});
  b.Op("Mul", {x, a}, {m});
  b.Op("Mul", {m, b.FloatScalar("half", 0.5)}, {y});
  b.Op("Mul", {a, b.FloatScalar("third", 0.3)}, {h});
  b.Output(y);
  b.Output(h);
  Graph g = b.Build();
  EXPECT_FALSE(HasPrimitiveChainForm(g, {0, 1}, {m}));
  EXPECT_FALSE(HasPrimitiveChainForm(g, {0, 1, 2}, {y}));
  EXPECT_TRUE(HasPrimitiveChainForm(g, {1, 2}, {y}));
  EXPECT_TRUE(HasPrimitiveChainForm(g, {0, 3}, {h}));
}

// A GlobalAveragePool with a Relu epilogue and a Softmax after an Exp prologue reduce rows in our
// loop; a lone Softmax is oneDNN's softmax primitive, and a ReduceSum over the leading axis
// reduces no rows (a oneDNN reduction primitive).
TEST(RunsAsRowReduction, RowsWithAPrologueOrEpilogueRunInOurLoopALoneSoftmaxDoesNot) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 64, 7, 7});
  TensorId gap = b.Act("gap", {1, 64, 1, 1}), y = b.Act("y", {1, 64, 1, 1});
  b.Op("GlobalAveragePool", {x}, {gap});  // 0
  b.Op("Relu", {gap}, {y});               // 1
  TensorId s = b.Input("s", {8, 128});
  TensorId e = b.Act("e", {8, 128}), sm = b.Act("sm", {8, 128}), lone = b.Act("lone", {8, 128});
  TensorId lead = b.Act("lead", {1, 128});
  b.Op("Exp", {s}, {e});                                       // 2
  b.Op("Softmax", {e}, {sm}, {Int("axis", -1)});               // 3
  b.Op("Softmax", {s}, {lone}, {Int("axis", -1)});             // 4
  b.Op("ReduceSum", {s, b.IntConstant("axes", {0})}, {lead});  // 5
  for (TensorId t : {y, sm, lone, lead}) b.Output(t);
  Graph g = b.Build();
  EXPECT_TRUE(RunsAsRowReduction(g, FusionGroup{GroupKind::kReduction, {0, 1}, {}}));
  EXPECT_TRUE(RunsAsRowReduction(g, FusionGroup{GroupKind::kSingle, {0}, {}}));
  EXPECT_TRUE(RunsAsRowReduction(g, FusionGroup{GroupKind::kReduction, {2, 3}, {}}));
  EXPECT_FALSE(RunsAsRowReduction(g, FusionGroup{GroupKind::kSingle, {4}, {}}));
  EXPECT_FALSE(RunsAsRowReduction(g, FusionGroup{GroupKind::kSingle, {5}, {}}));
  EXPECT_FALSE(RunsAsRowReduction(g, FusionGroup{GroupKind::kSingle, {1}, {}}));  // No reduction.
}

// oneDNN's resampling takes a float32 linear Resize of the spatial dims in half-pixel
// coordinates; a nearest one, one that resizes channels, one in asymmetric coordinates and a
// pytorch_half_pixel one down to a single row stay in our loop.
TEST(RunsAsResampling, OnlyLinearHalfPixelResizesOfTheSpatialDims) {
  auto resize = [](const Shape& in, const Shape& out, const std::string& mode,
                   const std::string& coordinates) {
    IrBuilder b;
    TensorId y = b.Act("y", out);
    b.Op("Resize",
         {b.Input("x", in), b.FloatConstant("roi", {}), b.FloatConstant("sc", {}),
          b.IntConstant("sz", out)},
         {y}, {{"mode", mode}, {"coordinate_transformation_mode", coordinates}});
    b.Output(y);
    Graph g = b.Build();
    return RunsAsResampling(g, g.node(0));
  };
  EXPECT_TRUE(resize({1, 21, 5, 5}, {1, 21, 40, 40}, "linear", "half_pixel"));
  EXPECT_TRUE(resize({2, 3, 16, 12}, {2, 3, 8, 6}, "linear", "pytorch_half_pixel"));
  EXPECT_TRUE(resize({1, 4, 7}, {1, 4, 19}, "linear", "half_pixel"));
  EXPECT_FALSE(resize({1, 21, 5, 5}, {1, 21, 40, 40}, "nearest", "half_pixel"));
  EXPECT_FALSE(resize({1, 21, 5, 5}, {1, 42, 40, 40}, "linear", "half_pixel"));
  EXPECT_FALSE(resize({1, 21, 5, 5}, {1, 21, 40, 40}, "linear", "asymmetric"));
  EXPECT_FALSE(resize({1, 3, 16, 12}, {1, 3, 1, 6}, "linear", "pytorch_half_pixel"));
}

// InstanceNormalization runs on oneDNN for float32 input of rank 3 or more with one scale and one
// bias per channel; a scale of another length, or a 2-D input, goes to the reference fallback.
TEST(RunsAsInstanceNormPrimitive, Float32WithAScaleAndBiasPerChannel) {
  auto norm = [](const Shape& x, int64_t params) {
    IrBuilder b;
    TensorId y = b.Act("y", x);
    b.Op("InstanceNormalization",
         {b.Input("x", x), b.Weight("scale", {params}), b.Weight("bias", {params})}, {y});
    b.Output(y);
    Graph g = b.Build();
    return RunsAsInstanceNormPrimitive(g, g.node(0));
  };
  EXPECT_TRUE(norm({1, 4, 8, 8}, 4));
  EXPECT_TRUE(norm({2, 32, 100}, 32));
  EXPECT_FALSE(norm({1, 4, 8, 8}, 1));
  EXPECT_FALSE(norm({4, 8}, 8));
}

// Pools over whole 8-channel blocks run blocked where the block is 8; where it is 16, only whole
// 16-channel blocks do (24 channels pool plain on AVX-512).
TEST(PoolingRunsBlocked, ChannelsOfWholeBlocksOfTheTargetsWidth) {
  auto pool = [](int64_t channels, int64_t block) {
    IrBuilder b;
    TensorId y = b.Act("y", {1, channels, 4, 4});
    b.Op("MaxPool", {b.Input("x", {1, channels, 8, 8})}, {y},
         {Ints("kernel_shape", {2, 2}), Ints("strides", {2, 2})});
    b.Output(y);
    Graph g = b.Build();
    return PoolingRunsBlocked(g, g.node(0), LayoutTarget{block, true});
  };
  EXPECT_TRUE(pool(24, 8));
  EXPECT_FALSE(pool(24, 16));
  EXPECT_TRUE(pool(32, 16));
  EXPECT_FALSE(pool(12, 8));
}

}  // namespace
}  // namespace fusor
