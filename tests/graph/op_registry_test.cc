#include "graph/op_registry.h"

#include <gtest/gtest.h>

#include "graph/node_attrs.h"
#include "graph/validate.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::Int;
using testing::Ints;
using testing::IrBuilder;
using testing::OneOpGraph;

// X[2,8,15,15] * W[16,4,3,3], group 2, stride 2, pad 1 -> Y[2,16,8,8] since (15+2-3)/2+1 = 8.
// MACs = |Y| * (C/group) * 3*3 = 2048 * 4 * 9 = 73728; FLOPs = 2*MACs + bias adds (2048).
TEST(OpRegistry, StridedPaddedGroupedConv) {
  IrBuilder b;
  TensorId x = b.Input("x", {2, 8, 15, 15});
  TensorId w = b.Weight("w", {16, 4, 3, 3});
  TensorId bias = b.Weight("b", {16});
  TensorId y = b.Act("y", {2, 16, 8, 8});
  NodeId conv = b.Op("Conv", {x, w, bias}, {y},
                     {Int("group", 2), Ints("strides", {2, 2}), Ints("pads", {1, 1, 1, 1}),
                      Ints("kernel_shape", {3, 3})});
  b.Output(y);
  Graph g = b.Build();
  ASSERT_TRUE(Validate(g).ok()) << Validate(g).ToString();
  OpCost c = CostOfNode(g, g.node(conv));
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 73728 + 2048);
  EXPECT_EQ(c.bytes_read, (2 * 8 * 15 * 15 + 16 * 4 * 9 + 16) * 4);
  EXPECT_EQ(c.bytes_written, 2 * 16 * 8 * 8 * 4);
  EXPECT_EQ(ClassifyNode(g, g.node(conv)), OpClass::kAnchor);
}

TEST(OpRegistry, DilatedConvShapeIsChecked) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 3, 10, 10});
  TensorId w = b.Weight("w", {4, 3, 3, 3});
  // Dilation 2 makes the kernel span 5: (10 - 5) + 1 = 6. Declaring 8 must fail.
  TensorId y = b.Act("y", {1, 4, 8, 8});
  b.Op("Conv", {x, w}, {y}, {Ints("dilations", {2, 2})});
  b.Output(y);
  Status s = Validate(b.Build());
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("output 'y' has shape 1x4x8x8, the inputs give 1x4x6x6"),
            std::string::npos)
      << s.message();
}

// A[4,1,32,64] x B[3,64,16] -> [4,3,32,16]; FLOPs = 2 * 4*3 * 32*16 * 64.
TEST(OpRegistry, BatchedBroadcastMatMul) {
  IrBuilder b;
  TensorId a = b.Input("a", {4, 1, 32, 64});
  TensorId w = b.Weight("b", {3, 64, 16});
  TensorId y = b.Act("y", {4, 3, 32, 16});
  NodeId mm = b.Op("MatMul", {a, w}, {y});
  b.Output(y);
  Graph g = b.Build();
  ASSERT_TRUE(Validate(g).ok()) << Validate(g).ToString();
  OpCost c = CostOfNode(g, g.node(mm));
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 4 * 3 * 32 * 16 * 64);
  EXPECT_EQ(c.bytes_read, (4 * 32 * 64 + 3 * 64 * 16) * 4);
  EXPECT_EQ(c.bytes_written, 4 * 3 * 32 * 16 * 4);
}

TEST(OpRegistry, MatMulInnerDimMismatchNamesTheNode) {
  IrBuilder b;
  TensorId a = b.Input("a", {8, 32});
  TensorId w = b.Weight("w", {16, 4});
  TensorId y = b.Act("y", {8, 4});
  b.Op("MatMul", {a, w}, {y});
  b.Output(y);
  Status s = Validate(b.Build());
  EXPECT_NE(s.message().find("node 'MatMul_0' (MatMul): inner dims differ: 8x32 x 16x4"),
            std::string::npos)
      << s.message();
}

// DepthToSpace, SpaceToDepth and Tile are injective ops with no FLOPs, reading their data once
// (Tile not its repeats), and their shapes are checked: a DepthToSpace of channels that are no
// multiple of blocksize^2, a SpaceToDepth output that does not follow, and a Tile output its
// constant repeats do not give are errors naming the node and what is wrong.
TEST(OpRegistry, SpaceDepthAndTileAreInjectiveAndTheirShapesAreChecked) {
  for (const Graph& g :
       {OneOpGraph("DepthToSpace", {1, 8, 2, 3}, {1, 2, 4, 6}, {Int("blocksize", 2)}),
        OneOpGraph("SpaceToDepth", {1, 2, 4, 6}, {1, 8, 2, 3}, {Int("blocksize", 2)}),
        OneOpGraph("Tile", {1, 2, 4, 6}, {2, 2, 8, 6}, {}, {2, 1, 2, 1})}) {
    ASSERT_TRUE(Validate(g).ok()) << Validate(g).ToString();
    EXPECT_EQ(ClassifyNode(g, g.node(0)), OpClass::kInjective) << g.node(0).op_type;
    const OpCost c = CostOfNode(g, g.node(0));
    EXPECT_EQ(c.flops, 0) << g.node(0).op_type;
    EXPECT_EQ(c.bytes_read, 48 * 4) << g.node(0).op_type;
  }
  auto error = [](const Graph& g) { return Validate(g).message(); };
  EXPECT_NE(error(OneOpGraph("DepthToSpace", {1, 6, 2, 3}, {1, 1, 4, 6}, {Int("blocksize", 2)}))
                .find("node 'DepthToSpace_0' (DepthToSpace): the input's 6 channels are no "
                      "multiple of blocksize^2 = 4"),
            std::string::npos);
  EXPECT_NE(error(OneOpGraph("SpaceToDepth", {1, 2, 4, 6}, {1, 8, 3, 2}, {Int("blocksize", 2)}))
                .find("output 'y' has shape 1x8x3x2, the inputs give 1x8x2x3"),
            std::string::npos);
  EXPECT_NE(error(OneOpGraph("Tile", {2, 3}, {4, 3}, {}, {1, 2}))
                .find("node 'Tile_0' (Tile): output 'y' has shape 4x3, the inputs give 2x6"),
            std::string::npos);
}

// Gemm with transB: A[8,32] x B^T where B[16,32] -> [8,16]; FLOPs = 2*8*16*32 + 8*16 (C add).
TEST(OpRegistry, GemmTransB) {
  IrBuilder b;
  TensorId a = b.Input("a", {8, 32});
  TensorId w = b.Weight("w", {16, 32});
  TensorId c = b.Weight("c", {16});
  TensorId y = b.Act("y", {8, 16});
  NodeId gemm = b.Op("Gemm", {a, w, c}, {y}, {Int("transB", 1)});
  b.Output(y);
  Graph g = b.Build();
  ASSERT_TRUE(Validate(g).ok()) << Validate(g).ToString();
  EXPECT_DOUBLE_EQ(CostOfNode(g, g.node(gemm)).flops, 2.0 * 8 * 16 * 32 + 8 * 16);
}

TEST(OpRegistry, ClassesDependOnShapes) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 4, 8, 8});
  TensorId bias = b.Weight("bias", {4, 1, 1});
  TensorId half = b.FloatScalar("half", 0.5);
  TensorId same = b.Act("same", {1, 4, 8, 8});
  TensorId bcast = b.Act("bcast", {1, 4, 8, 8});
  TensorId scaled = b.Act("scaled", {1, 4, 8, 8});
  TensorId flat = b.Act("flat", {1, 256});
  TensorId soft = b.Act("soft", {1, 256});
  TensorId odd = b.Act("odd", {1, 256});
  TensorId shape = b.IntConstant("shape", {1, 256});
  NodeId add = b.Op("Add", {x, x}, {same});
  NodeId badd = b.Op("Add", {same, bias}, {bcast});
  NodeId mul = b.Op("Mul", {bcast, half}, {scaled});
  NodeId reshape = b.Op("Reshape", {scaled, shape}, {flat});
  NodeId softmax = b.Op("Softmax", {flat}, {soft});
  NodeId custom = b.Op("Softplus", {soft}, {odd});
  b.Output(odd);
  Graph g = b.Build();
  ASSERT_TRUE(Validate(g).ok()) << Validate(g).ToString();
  EXPECT_EQ(ClassifyNode(g, g.node(add)), OpClass::kElementwise);
  EXPECT_EQ(ClassifyNode(g, g.node(badd)), OpClass::kBroadcast);
  EXPECT_EQ(ClassifyNode(g, g.node(mul)), OpClass::kElementwise);
  EXPECT_EQ(ClassifyNode(g, g.node(reshape)), OpClass::kInjective);
  EXPECT_EQ(ClassifyNode(g, g.node(softmax)), OpClass::kReduction);
  EXPECT_EQ(ClassifyNode(g, g.node(custom)), OpClass::kOpaque);
  // Add reading x twice reads it once; a reshape is a view and moves nothing.
  EXPECT_EQ(CostOfNode(g, g.node(add)).bytes_read, 256 * 4);
  EXPECT_EQ(CostOfNode(g, g.node(reshape)).bytes_read, 0);
  EXPECT_EQ(CostOfNode(g, g.node(reshape)).bytes_written, 0);
  // Softmax: 4 cheap ops and one exp per element.
  EXPECT_DOUBLE_EQ(CostOfNode(g, g.node(softmax)).flops, 4.0 * 256);
  EXPECT_DOUBLE_EQ(CostOfNode(g, g.node(softmax)).transcendentals, 256);
  // An unknown op costs its bytes only.
  EXPECT_DOUBLE_EQ(CostOfNode(g, g.node(custom)).flops, 0);
  EXPECT_EQ(CostOfNode(g, g.node(custom)).bytes_written, 256 * 4);
}

// MaxPool 3x3 stride 2 on 112x112 with pad 1: (112+2-3)/2+1 = 56; ceil mode on 7x7, kernel 2,
// stride 2: ceil(5/2)+1 = 4 windows.
TEST(OpRegistry, PoolingShapesAndFlops) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 64, 112, 112});
  TensorId y = b.Act("y", {1, 64, 56, 56});
  TensorId z = b.Act("z", {1, 64, 28, 28});
  NodeId pool =
      b.Op("MaxPool", {x}, {y},
           {Ints("kernel_shape", {3, 3}), Ints("strides", {2, 2}), Ints("pads", {1, 1, 1, 1})});
  b.Op("AveragePool", {y}, {z}, {Ints("kernel_shape", {2, 2}), Ints("strides", {2, 2})});
  b.Output(z);
  Graph g = b.Build();
  ASSERT_TRUE(Validate(g).ok()) << Validate(g).ToString();
  EXPECT_DOUBLE_EQ(CostOfNode(g, g.node(pool)).flops, 64.0 * 56 * 56 * 9);

  IrBuilder c;
  TensorId cx = c.Input("x", {1, 1, 7, 7});
  TensorId cy = c.Act("y", {1, 1, 4, 4});
  c.Op("MaxPool", {cx}, {cy},
       {Ints("kernel_shape", {2, 2}), Ints("strides", {2, 2}), Int("ceil_mode", 1)});
  c.Output(cy);
  EXPECT_TRUE(Validate(c.Build()).ok());
}

TEST(OpRegistry, EveryOpOfTheIssueIsKnown) {
  for (const char* op : {"Conv",
                         "ConvTranspose",
                         "Gemm",
                         "MatMul",
                         "BatchNormalization",
                         "Add",
                         "Sub",
                         "Mul",
                         "Div",
                         "Pow",
                         "Sqrt",
                         "Erf",
                         "Exp",
                         "Log",
                         "Tanh",
                         "Relu",
                         "LeakyRelu",
                         "Sigmoid",
                         "HardSigmoid",
                         "HardSwish",
                         "Clip",
                         "Softmax",
                         "LayerNormalization",
                         "ReduceMean",
                         "ReduceSum",
                         "ReduceMax",
                         "MaxPool",
                         "AveragePool",
                         "GlobalAveragePool",
                         "Reshape",
                         "Flatten",
                         "Transpose",
                         "Concat",
                         "Slice",
                         "Split",
                         "Gather",
                         "Squeeze",
                         "Unsqueeze",
                         "Expand",
                         "Where",
                         "Cast",
                         "Pad",
                         "Resize",
                         "Trilu"}) {
    EXPECT_TRUE(IsKnownOp("", op)) << op;
  }
  EXPECT_FALSE(IsKnownOp("", "NonMaxSuppression"));
  EXPECT_FALSE(IsKnownOp("com.microsoft", "Conv"));
}

// Gathers that are lookups stay lookups: indices computed at run time, two constant indices, an
// index outside the axis (ONNX leaves it undefined; the runtime clamps it, as the reference does).
TEST(OpFacts, UnaryElementwiseOpsAreTheRegisteredOnesOfOneDataInput) {
  for (const char* op : {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Erf",
                         "HardSigmoid", "HardSwish", "Shrink", "Clip", "Cast"}) {
    EXPECT_TRUE(IsUnaryElementwise(op)) << op;
    EXPECT_FALSE(IsBinaryArithmetic(op)) << op;
  }
  // Neg is unary in ONNX but unknown to the registry: opaque, so never fused as a unary step.
  for (const char* op : {"Add", "Pow", "Where", "Reshape", "Softmax", "Neg", "Conv"}) {
    EXPECT_FALSE(IsUnaryElementwise(op)) << op;
  }
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow"}) EXPECT_TRUE(IsBinaryArithmetic(op));
  for (const char* op : {"Where", "Relu", "Max"}) EXPECT_FALSE(IsBinaryArithmetic(op)) << op;
}

TEST(OpFacts, PowIsUnaryOnlyByAConstantScalarTwoHalfOrOne) {
  IrBuilder b;
  TensorId x = b.Input("x", {4});
  auto pow_by = [&](TensorId e) {
    TensorId y = b.Act("y" + std::to_string(e), {4});
    return b.Op("Pow", {x, e}, {y});
  };
  NodeId square = pow_by(b.FloatScalar("two", 2.0));
  NodeId root = pow_by(b.FloatScalar("half", 0.5));
  NodeId copy = pow_by(b.FloatScalar("one", 1.0));
  NodeId cube = pow_by(b.FloatScalar("three", 3.0));
  NodeId per_element = pow_by(b.FloatConstant("twos", {2, 2, 2, 2}));
  NodeId by_input = pow_by(b.Input("e", {}));
  TensorId z = b.Act("z", {4});
  NodeId mul = b.Op("Mul", {x, b.FloatScalar("two_again", 2.0)}, {z});
  Graph g = b.Build();
  EXPECT_EQ(UnaryPowExponent(g, g.node(square)), 2.0);
  EXPECT_EQ(UnaryPowExponent(g, g.node(root)), 0.5);
  EXPECT_EQ(UnaryPowExponent(g, g.node(copy)), 1.0);
  EXPECT_FALSE(UnaryPowExponent(g, g.node(cube)).has_value());
  EXPECT_FALSE(UnaryPowExponent(g, g.node(per_element)).has_value());
  EXPECT_FALSE(UnaryPowExponent(g, g.node(by_input)).has_value());
  EXPECT_FALSE(UnaryPowExponent(g, g.node(mul)).has_value());
}

TEST(OpFacts, AnAbsentAttributeTakesOnnxsDefaultForItsOp) {
  auto node = [](const char* op, std::vector<Attribute> attrs = {}) {
    Node n;
    n.op_type = op;
    for (auto& a : attrs) n.SetAttr(a.name, a.value);
    return n;
  };
  EXPECT_DOUBLE_EQ(FloatAttrOrDefault(node("LeakyRelu"), "alpha"), 0.01);
  EXPECT_DOUBLE_EQ(FloatAttrOrDefault(node("LeakyRelu", {{"alpha", 0.3}}), "alpha"), 0.3);
  EXPECT_DOUBLE_EQ(FloatAttrOrDefault(node("HardSigmoid"), "alpha"), 0.2);
  EXPECT_DOUBLE_EQ(FloatAttrOrDefault(node("HardSigmoid"), "beta"), 0.5);
  EXPECT_DOUBLE_EQ(FloatAttrOrDefault(node("Elu"), "alpha"), 1.0);
  EXPECT_FLOAT_EQ(static_cast<float>(FloatAttrOrDefault(node("Selu"), "alpha")), 1.6732632f);
  EXPECT_FLOAT_EQ(static_cast<float>(FloatAttrOrDefault(node("Selu"), "gamma")), 1.0507010f);
  EXPECT_DOUBLE_EQ(FloatAttrOrDefault(node("Gemm"), "beta"), 1.0);
  EXPECT_DOUBLE_EQ(FloatAttrOrDefault(node("LayerNormalization"), "epsilon"), 1e-5);
  EXPECT_DOUBLE_EQ(FloatAttrOrDefault(node("Relu"), "alpha"), 0.0);
}

TEST(GatherSliceIndex, OnlyOneConstantIndexInsideTheAxis) {
  IrBuilder b;
  TensorId x = b.Input("x", {4, 6});
  TensorId a = b.Act("a", {2, 6}), c = b.Act("c", {2, 6}), d = b.Act("d", {6}), e = b.Act("e", {4});
  b.Op("Gather", {x, b.Input("ids", {2}, DType::kInt64)}, {a});
  b.Op("Gather", {x, b.IntConstant("two", {0, 3})}, {c});
  b.Op("Gather", {x, b.IntScalar("out", 4)}, {d});
  b.Op("Gather", {x, b.IntScalar("neg", -6)}, {e}, {Int("axis", 1)});
  b.Op("Gather", {x, b.IntScalar("last", -1)}, {b.Act("f", {6})});
  Graph g = b.Build();
  EXPECT_EQ(GatherSliceIndex(g, g.node(0)), -1);
  EXPECT_EQ(GatherSliceIndex(g, g.node(1)), -1);
  EXPECT_EQ(GatherSliceIndex(g, g.node(2)), -1);
  EXPECT_EQ(GatherSliceIndex(g, g.node(3)), 0);
  EXPECT_EQ(GatherSliceIndex(g, g.node(4)), 3);
}

}  // namespace
}  // namespace fusor
