// The reference interpreter against values computed by hand (or by the most literal loops), so
// that comparing fused executions with it does not just trust another implementation.
#include "runtime/reference.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <optional>
#include <tuple>

#include "graph/graph_builder.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::Int;
using testing::Ints;
using testing::IrBuilder;

HostTensor F(Shape dims, std::vector<float> v) {
  HostTensor h = HostTensor::Zeros(DType::kFloat32, std::move(dims));
  h.f = std::move(v);
  return h;
}

// Runs the graph built by `build` on `inputs` (by tensor id) and returns every output.
TensorValues RunAll(const Graph& g, TensorValues inputs) {
  auto leaves = RandomLeafValues(g, 7);
  EXPECT_TRUE(leaves.ok());
  for (auto& [t, v] : inputs) (*leaves)[t] = v;
  auto out = RunReference(g, *leaves);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : TensorValues{};
}

// The output of a single-output graph.
HostTensor RunOne(const Graph& g, TensorValues inputs) {
  return RunAll(g, std::move(inputs)).at(g.outputs()[0]);
}

void ExpectValues(const HostTensor& h, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(h.num_elements(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(h.at(i), want[i], tol) << "element " << i;
}

// An op without inputs that the reference does not know (an opaque Constant node that import kept)
// is an error naming the node, not a read of a missing first input.
TEST(Reference, UnknownOpWithoutInputsIsUnimplementedNotACrash) {
  GraphBuilder b;
  TensorId c = b.Op("Constant", {}, {4});
  b.Output(b.Op("Relu", {c}, {4}));
  Graph& g = b.Linked();
  auto out = RunReference(g, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Status::Code::kUnimplemented);
  EXPECT_NE(out.status().message().find("(Constant): Fusor has no implementation of op 'Constant'"),
            std::string::npos)
      << out.status().message();
}

TEST(ReferenceGemm, MatchesTripleLoopOnOddSizes) {
  int64_t m = 7, n = 600, k = 130;  // Crosses the 4-row, 512-column and 128-deep blocks.
  std::vector<float> a(m * k), b(k * n), c(m * n), want(m * n, 0);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7) % 11) - 5;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 3) % 13) - 6;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) want[i * n + j] += a[i * k + p] * b[p * n + j];
  ReferenceGemm(m, n, k, a.data(), k, b.data(), n, c.data(), n, false);
  for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], want[i]) << i;
}

// The reference judges float32 runtimes, so its own sums must not round like theirs: here a float32
// running sum loses every small term next to 1e8 (its spacing there is 8) and ends at 0. Blocks
// of 4 rows, 512 columns and 128 deep are crossed, and `accumulate` adds to what C holds.
TEST(ReferenceGemm, SumsInDoubleSoSmallTermsBesideCancellingLargeOnesSurvive) {
  int64_t m = 5, n = 513, k = 130;
  std::vector<float> a(m * k, 1.0f), b(k * n, 1.0f), c(m * n, 0.5f);
  for (int64_t i = 0; i < m; ++i) {
    a[i * k] = 1e8f;
    a[i * k + k - 1] = -1e8f;
  }
  ReferenceGemm(m, n, k, a.data(), k, b.data(), n, c.data(), n, false);
  for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], 128.0f) << i;
  ReferenceGemm(m, n, k, a.data(), k, b.data(), n, c.data(), n, true);
  for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], 256.0f) << i;
}

TEST(Reference, ConvPaddedStridedByHand) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 1, 3, 3});
  TensorId w = b.Weight("w", {1, 1, 2, 2});
  TensorId y = b.Act("y", {1, 1, 2, 2});
  b.Op("Conv", {x, w}, {y}, {Ints("pads", {1, 1, 0, 0}), Ints("strides", {2, 2})});
  b.Output(y);
  Graph g = b.Build();
  // x = 1..9, w = [[1,2],[3,4]]; windows start at (-1,-1), (-1,1), (1,-1), (1,1).
  HostTensor out = RunOne(
      g, {{x, F({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})}, {w, F({1, 1, 2, 2}, {1, 2, 3, 4})}});
  ExpectValues(out, {4 * 1, 3 * 2 + 4 * 3, 2 * 4 + 4 * 7, 1 * 5 + 2 * 6 + 3 * 8 + 4 * 9});
}

TEST(Reference, ConvDilatedGroupedWithBias) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 2, 3, 3});
  TensorId w = b.Weight("w", {2, 1, 2, 2});
  TensorId bias = b.Weight("b", {2});
  TensorId y = b.Act("y", {1, 2, 1, 1});
  b.Op("Conv", {x, w, bias}, {y}, {Int("group", 2), Ints("dilations", {2, 2})});
  b.Output(y);
  Graph g = b.Build();
  std::vector<float> xv(18);
  for (int i = 0; i < 18; ++i) xv[i] = static_cast<float>(i);
  HostTensor out = RunOne(g, {{x, F({1, 2, 3, 3}, xv)},
                              {w, F({2, 1, 2, 2}, {1, 1, 1, 1, 1, -1, 0, 2})},
                              {bias, F({2}, {10, 20})}});
  // Channel 0 corners 0,2,6,8 -> 16 + 10; channel 1 corners 9,11,15,17 -> 9-11+0+34 + 20.
  ExpectValues(out, {26, 52});
}

TEST(Reference, MatMulBatchedBroadcast) {
  IrBuilder b;
  TensorId a = b.Input("a", {2, 1, 2});
  TensorId m = b.Input("m", {2, 2});
  TensorId y = b.Act("y", {2, 1, 2});
  b.Op("MatMul", {a, m}, {y});
  b.Output(y);
  Graph g = b.Build();
  HostTensor out = RunOne(g, {{a, F({2, 1, 2}, {1, 2, 3, 4})}, {m, F({2, 2}, {1, 0, 1, 1})}});
  ExpectValues(out, {3, 2, 7, 4});
}

TEST(Reference, GemmByHand) {
  IrBuilder b;
  TensorId a = b.Input("a", {2, 1});   // transA: A^T = [1, 2] (1x2).
  TensorId w = b.Weight("w", {3, 2});  // transB: B^T is 2x3.
  TensorId c = b.Weight("c", {3});
  TensorId y = b.Act("y", {1, 3});
  b.Op("Gemm", {a, w, c}, {y}, {Int("transA", 1), Int("transB", 1), {"alpha", 2.0}, {"beta", 0.5}});
  b.Output(y);
  Graph g = b.Build();
  HostTensor out = RunOne(
      g, {{a, F({2, 1}, {1, 2})}, {w, F({3, 2}, {1, 0, 0, 1, 1, 1})}, {c, F({3}, {10, 20, 30})}});
  ExpectValues(out, {2 * 1 + 5, 2 * 2 + 10, 2 * 3 + 15});
}

TEST(Reference, BatchNormByHand) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 2, 1, 1});
  TensorId s = b.Weight("s", {2}), bb = b.Weight("bb", {2}), m = b.Weight("m", {2}),
           v = b.Weight("v", {2});
  TensorId y = b.Act("y", {1, 2, 1, 1});
  b.Op("BatchNormalization", {x, s, bb, m, v}, {y}, {{"epsilon", 0.0}});
  b.Output(y);
  Graph g = b.Build();
  HostTensor out = RunOne(g, {{x, F({1, 2, 1, 1}, {3, 5})},
                              {s, F({2}, {2, 1})},
                              {bb, F({2}, {1, -1})},
                              {m, F({2}, {1, 1})},
                              {v, F({2}, {4, 16})}});
  ExpectValues(out, {(3 - 1) / 2.0f * 2 + 1, (5 - 1) / 4.0f * 1 - 1});
}

// LayerNormalization's optional Mean and InvStdDev outputs: one value per normalised row
// (conformance: they were left at zero).
TEST(Reference, LayerNormWritesMeanAndInvStdDevPerRow) {
  IrBuilder b;
  TensorId x = b.Input("x", {2, 2});
  TensorId s = b.Weight("s", {2});
  TensorId y = b.Act("y", {2, 2}), mean = b.Act("mean", {2, 1}), inv = b.Act("inv", {2, 1});
  b.Op("LayerNormalization", {x, s}, {y, mean, inv}, {{"epsilon", 0.0}});
  b.Output(y);
  b.Output(mean);
  b.Output(inv);
  Graph g = b.Build();
  TensorValues out = RunAll(g, {{x, F({2, 2}, {1, 3, 2, 6})}, {s, F({2}, {1, 1})}});
  ExpectValues(out[y], {-1, 1, -1, 1});
  ExpectValues(out[mean], {2, 4});
  ExpectValues(out[inv], {1, 0.5f});
}

// BatchNormalization in training mode normalises with the batch's statistics and writes the
// running ones (conformance: it used the running statistics as in inference).
TEST(Reference, TrainingBatchNormUsesTheBatchStatistics) {
  IrBuilder b;
  TensorId x = b.Input("x", {2, 1, 1, 1});
  TensorId s = b.Weight("s", {1}), bb = b.Weight("bb", {1}), m = b.Weight("m", {1}),
           v = b.Weight("v", {1});
  TensorId y = b.Act("y", {2, 1, 1, 1}), rm = b.Act("rm", {1}), rv = b.Act("rv", {1});
  b.Op("BatchNormalization", {x, s, bb, m, v}, {y, rm, rv},
       {{"epsilon", 0.0}, {"momentum", 0.5}, Int("training_mode", 1)});
  b.Output(y);
  b.Output(rm);
  b.Output(rv);
  Graph g = b.Build();
  TensorValues out = RunAll(g, {{x, F({2, 1, 1, 1}, {1, 5})},
                                {s, F({1}, {2})},
                                {bb, F({1}, {1})},
                                {m, F({1}, {0})},
                                {v, F({1}, {2})}});
  // Batch mean 3, variance 4: y = (x - 3) / 2 * 2 + 1.
  ExpectValues(out[y], {-1, 3});
  ExpectValues(out[rm], {0 * 0.5f + 3 * 0.5f});
  ExpectValues(out[rv], {2 * 0.5f + 4 * 0.5f});
}

struct UnaryCase {
  const char* op;
  float x, want;
};

TEST(Reference, UnaryOpsByHand) {
  const UnaryCase cases[] = {{"Sqrt", 4, 2},       {"Exp", 0, 1},
                             {"Log", 1, 0},        {"Tanh", 0, 0},
                             {"Relu", -2, 0},      {"LeakyRelu", -2, -0.02f},
                             {"Sigmoid", 0, 0.5f}, {"HardSigmoid", 1, 0.7f},
                             {"HardSwish", 3, 3},  {"Erf", 0.5f, 0.5204999f}};
  for (const auto& c : cases) {
    IrBuilder b;
    TensorId x = b.Input("x", {1});
    TensorId y = b.Act("y", {1});
    b.Op(c.op, {x}, {y});
    b.Output(y);
    Graph g = b.Build();
    ExpectValues(RunOne(g, {{x, F({1}, {c.x})}}), {c.want});
  }
}

TEST(Reference, BinaryBroadcastPowClipWhereCast) {
  IrBuilder b;
  TensorId x = b.Input("x", {2, 2});
  TensorId r = b.Input("r", {2});
  TensorId lo = b.FloatScalar("lo", 0), hi = b.FloatScalar("hi", 5);
  TensorId sub = b.Act("sub", {2, 2}), div = b.Act("div", {2, 2}), pw = b.Act("pw", {2, 2});
  TensorId clip = b.Act("clip", {2, 2}), cond = b.Act("cond", {2, 2}, DType::kBool);
  TensorId y = b.Act("y", {2, 2});
  b.Op("Sub", {x, r}, {sub});
  b.Op("Div", {sub, r}, {div});
  b.Op("Pow", {div, r}, {pw});
  b.Op("Clip", {pw, lo, hi}, {clip});
  b.Op("Cast", {x}, {cond}, {Int("to", 9)});
  b.Op("Where", {cond, clip, x}, {y});
  b.Output(y);
  Graph g = b.Build();
  // x = [[0, 4], [6, 8]], r = [1, 2]: sub = [[-1,2],[5,6]], div = [[-1,1],[5,3]],
  // pow = [[-1,1],[5,9]], clip = [[0,1],[5,5]], where(x != 0) -> [[0,1],[5,5]] with x[0]=0 -> 0.
  HostTensor out = RunOne(g, {{x, F({2, 2}, {0, 4, 6, 8})}, {r, F({2}, {1, 2})}});
  ExpectValues(out, {0, 1, 5, 5});
}

TEST(Reference, SoftmaxAndLayerNormByHand) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 2});
  TensorId s = b.Weight("s", {2}), bias = b.Weight("bias", {2});
  TensorId sm = b.Act("sm", {1, 2}), y = b.Act("y", {1, 2});
  b.Op("Softmax", {x}, {sm}, {Int("axis", -1)});
  b.Op("LayerNormalization", {sm, s, bias}, {y}, {{"epsilon", 0.0}});
  b.Output(y);
  Graph g = b.Build();
  TensorValues v = {
      {x, F({1, 2}, {0, std::log(3.0f)})}, {s, F({2}, {1, 2})}, {bias, F({2}, {0, 1})}};
  // softmax = [0.25, 0.75]; normalised = [-1, 1]; scaled = [-1, 3].
  ExpectValues(RunOne(g, v), {-1, 3}, 1e-4f);
}

TEST(Reference, ReductionsAndPoolsByHand) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 1, 2, 3});
  TensorId mean = b.Act("mean", {1, 1, 2, 1}), sum = b.Act("sum", {1, 1, 1, 3}),
           mx = b.Act("mx", {1, 1}), gap = b.Act("gap", {1, 1, 1, 1});
  TensorId mp = b.Act("mp", {1, 1, 1, 2}), ap = b.Act("ap", {1, 1, 2, 2});
  b.Op("ReduceMean", {x}, {mean}, {Ints("axes", {3})});
  b.Op("ReduceSum", {x}, {sum}, {Ints("axes", {2})});
  b.Op("ReduceMax", {x}, {mx}, {Ints("axes", {2, 3}), Int("keepdims", 0)});
  b.Op("GlobalAveragePool", {x}, {gap});
  b.Op("MaxPool", {x}, {mp},
       {Ints("kernel_shape", {2, 2}), Ints("strides", {2, 2}), Int("ceil_mode", 1)});
  b.Op("AveragePool", {x}, {ap}, {Ints("kernel_shape", {2, 2}), Ints("pads", {0, 0, 1, 0})});
  for (TensorId t : {mean, sum, mx, gap, mp, ap}) b.Output(t);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 1);
  (*leaves)[x] = F({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = RunReference(g, *leaves);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectValues(out->at(mean), {2, 5});
  ExpectValues(out->at(sum), {5, 7, 9});
  ExpectValues(out->at(mx), {6});
  ExpectValues(out->at(gap), {3.5f});
  ExpectValues(out->at(mp), {5, 6});  // ceil_mode: the second window hangs over the edge.
  ExpectValues(out->at(ap), {3, 4, 4.5f, 5.5f});  // Padding excluded from the average.
}

TEST(Reference, InjectiveOpsByHand) {
  IrBuilder b;
  TensorId x = b.Input("x", {2, 3});
  TensorId tr = b.Act("tr", {3, 2}), sl = b.Act("sl", {2, 1}), cat = b.Act("cat", {2, 4});
  TensorId s0 = b.Act("s0", {2, 1}), s1 = b.Act("s1", {2, 2}), pad = b.Act("pad", {2, 5});
  TensorId tri = b.Act("tri", {2, 3}), ex = b.Act("ex", {2, 2, 3}), rs = b.Act("rs", {3, 2});
  b.Op("Transpose", {x}, {tr}, {Ints("perm", {1, 0})});
  b.Op("Slice",
       {x, b.IntConstant("st", {2}), b.IntConstant("en", {0}), b.IntConstant("ax", {1}),
        b.IntConstant("sp", {-2})},
       {sl});
  b.Op("Concat", {sl, x}, {cat}, {Int("axis", 1)});
  b.Op("Split", {x, b.IntConstant("parts", {1, 2})}, {s0, s1}, {Int("axis", 1)});
  b.Op("Pad", {x, b.IntConstant("pads", {0, 1, 0, 1})}, {pad});
  b.Op("Trilu", {x}, {tri}, {Int("upper", 1)});
  b.Op("Expand", {x, b.IntConstant("shape", {2, 1, 3})}, {ex});
  b.Op("Reshape", {x, b.IntConstant("rshape", {3, 2})}, {rs});
  for (TensorId t : {tr, cat, s0, s1, pad, tri, ex, rs}) b.Output(t);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 1);
  (*leaves)[x] = F({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = RunReference(g, *leaves);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectValues(out->at(tr), {1, 4, 2, 5, 3, 6});
  ExpectValues(out->at(cat), {3, 1, 2, 3, 6, 4, 5, 6});  // Slice keeps column 2 (step -2 from 2).
  ExpectValues(out->at(s0), {1, 4});
  ExpectValues(out->at(s1), {2, 3, 5, 6});
  ExpectValues(out->at(pad), {0, 1, 2, 3, 0, 0, 4, 5, 6, 0});
  ExpectValues(out->at(tri), {1, 2, 3, 0, 5, 6});
  ExpectValues(out->at(ex), {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  ExpectValues(out->at(rs), {1, 2, 3, 4, 5, 6});
}

// Swin's shifted-window mask is a ScatterND of region ids into a zero image, then Equal / Not;
// import folds them with these kernels.
TEST(Reference, ScatterNdAndNotByHand) {
  IrBuilder b;
  TensorId data = b.Input("data", {3, 2});
  TensorId idx = b.Input("idx", {2, 1}, DType::kInt64);
  TensorId upd = b.Input("upd", {2, 2});
  TensorId set = b.Act("set", {3, 2}), add = b.Act("add", {3, 2});
  TensorId flags = b.Input("flags", {3}, DType::kBool), nots = b.Act("nots", {3}, DType::kBool);
  b.Op("ScatterND", {data, idx, upd}, {set});
  b.Op("ScatterND", {data, idx, upd}, {add}, {{"reduction", std::string("add")}});
  b.Op("Not", {flags}, {nots});
  for (TensorId t : {set, add, nots}) b.Output(t);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 1);
  ASSERT_TRUE(leaves.ok());
  (*leaves)[data] = F({3, 2}, {1, 2, 3, 4, 5, 6});
  (*leaves)[idx] = HostTensor::Zeros(DType::kInt64, {2, 1});
  (*leaves)[idx].i = {2, -3};  // Rows 2 and 0.
  (*leaves)[upd] = F({2, 2}, {10, 20, 30, 40});
  (*leaves)[flags] = HostTensor::Zeros(DType::kBool, {3});
  (*leaves)[flags].i = {1, 0, 1};
  auto out = RunReference(g, *leaves);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectValues(out->at(set), {30, 40, 3, 4, 10, 20});
  ExpectValues(out->at(add), {31, 42, 3, 4, 15, 26});
  ExpectValues(out->at(nots), {0, 1, 0});
}

TEST(Reference, ScatterNdIndexOutsideTheDataIsNamed) {
  IrBuilder b;
  TensorId data = b.Input("data", {3});
  TensorId idx = b.Input("idx", {1, 1}, DType::kInt64);
  TensorId upd = b.Input("upd", {1}), y = b.Act("y", {3});
  b.Op("ScatterND", {data, idx, upd}, {y});
  b.Output(y);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 1);
  ASSERT_TRUE(leaves.ok());
  (*leaves)[idx].i = {3};
  auto out = RunReference(g, *leaves);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("index 3 is outside dim 0 of size 3"), std::string::npos)
      << out.status().message();
}

TEST(Reference, GatherWithIntegerIndices) {
  IrBuilder b;
  TensorId table = b.Weight("table", {3, 2});
  TensorId ids = b.Input("ids", {1, 2}, DType::kInt64);
  TensorId y = b.Act("y", {1, 2, 2});
  b.Op("Gather", {table, ids}, {y});
  b.Output(y);
  Graph g = b.Build();
  HostTensor idv = HostTensor::Zeros(DType::kInt64, {1, 2});
  idv.i = {2, -3};
  ExpectValues(RunOne(g, {{table, F({3, 2}, {1, 2, 3, 4, 5, 6})}, {ids, idv}}), {5, 6, 1, 2});
}

TEST(Reference, RandomIndicesStayInsideTheGatheredAxis) {
  IrBuilder b;
  TensorId table = b.Weight("table", {5, 2});
  TensorId ids = b.Input("ids", {64}, DType::kInt64);
  TensorId y = b.Act("y", {64, 2});
  b.Op("Gather", {table, ids}, {y});
  b.Output(y);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 3);
  ASSERT_TRUE(leaves.ok());
  for (int64_t v : leaves->at(ids).i) EXPECT_TRUE(v >= 0 && v < 5) << v;
}

TEST(Reference, ConvTransposeStridedWithOutputPaddingAndBias) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 1, 2, 2});
  TensorId w = b.Weight("w", {1, 1, 2, 2});
  TensorId bias = b.Weight("b", {1});
  TensorId y = b.Act("y", {1, 1, 5, 5});
  b.Op("ConvTranspose", {x, w, bias}, {y},
       {Ints("strides", {2, 2}), Ints("output_padding", {1, 1})});
  b.Output(y);
  Graph g = b.Build();
  // Stride 2, kernel 2: x[i][j] * w[a][c] lands on y[2i + a][2j + c]; output_padding adds a last
  // row and column that no input reaches (bias only). x = [[1,2],[3,4]], w = [[1,2],[3,4]].
  HostTensor out = RunOne(g, {{x, F({1, 1, 2, 2}, {1, 2, 3, 4})},
                              {w, F({1, 1, 2, 2}, {1, 2, 3, 4})},
                              {bias, F({1}, {10})}});
  ExpectValues(out, {11, 12, 12, 14, 10,  //
                     13, 14, 16, 18, 10,  //
                     13, 16, 14, 18, 10,  //
                     19, 22, 22, 26, 10,  //
                     10, 10, 10, 10, 10});
}

TEST(Reference, ConvTransposeGroupedDilatedWithBeginPadding) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 2, 3});
  TensorId w = b.Weight("w", {2, 1, 2});
  TensorId y = b.Act("y", {1, 2, 4});
  b.Op("ConvTranspose", {x, w}, {y},
       {Int("group", 2), Ints("dilations", {2}), Ints("pads", {1, 0})});
  b.Output(y);
  Graph g = b.Build();
  // Output o = i + 2k before padding. Channel 0: x = [1,2,3], w = [1,10] -> [1, 2, 3+10, 20, 30];
  // channel 1: x = [4,5,6], w = [1,-1] -> [4, 5, 6-4, -5, -6]. pads begin 1 drops the first.
  HostTensor out =
      RunOne(g, {{x, F({1, 2, 3}, {1, 2, 3, 4, 5, 6})}, {w, F({2, 1, 2}, {1, 10, 1, -1})}});
  ExpectValues(out, {2, 13, 20, 30, 5, 2, -5, -6});
}

TEST(Reference, ConvTransposeAutoPadSameUpperAndLower) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 1, 3});
  TensorId w = b.Weight("w", {1, 1, 3});
  TensorId upper = b.Act("upper", {1, 1, 6}), lower = b.Act("lower", {1, 1, 6});
  b.Op("ConvTranspose", {x, w}, {upper}, {Ints("strides", {2}), {"auto_pad", "SAME_UPPER"}});
  b.Op("ConvTranspose", {x, w}, {lower}, {Ints("strides", {2}), {"auto_pad", "SAME_LOWER"}});
  b.Output(upper);
  b.Output(lower);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 1);
  (*leaves)[x] = F({1, 1, 3}, {1, 2, 3});
  (*leaves)[w] = F({1, 1, 3}, {1, 1, 1});
  auto out = RunReference(g, *leaves);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // Unpadded: o = 2i + k gives [1, 1, 1+2, 2, 2+3, 3, 3] (7 long); 6 are kept, the one padded
  // element cut at the end for SAME_UPPER and at the start for SAME_LOWER (ONNX 1.12's text).
  ExpectValues(out->at(upper), {1, 1, 3, 2, 5, 3});
  ExpectValues(out->at(lower), {1, 3, 2, 5, 3, 3});
}

// An output_shape one longer than the kernels reach (total padding -1) extends the output at the
// end, as ONNX's floor division of the total gives (conformance: convtranspose_output_shape).
TEST(Reference, ConvTransposeOutputShapeBeyondTheKernelsExtendsTheEnd) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 1, 2});
  TensorId w = b.Weight("w", {1, 1, 2});
  TensorId y = b.Act("y", {1, 1, 5});
  b.Op("ConvTranspose", {x, w}, {y}, {Ints("strides", {2}), Ints("output_shape", {5})});
  b.Output(y);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 1);
  (*leaves)[x] = F({1, 1, 2}, {1, 2});
  (*leaves)[w] = F({1, 1, 2}, {1, 1});
  auto out = RunReference(g, *leaves);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectValues(out->at(y), {1, 1, 2, 2, 0});
}

// One Resize of x (shape [1, n]) along its last dim; `sizes` or `scales` give the output length.
HostTensor ResizeRow(std::vector<float> x, int64_t out_len, std::vector<Attribute> attrs,
                     double scale = 0) {
  IrBuilder b;
  int64_t n = static_cast<int64_t>(x.size());
  TensorId in = b.Input("x", {1, n});
  TensorId y = b.Act("y", {1, out_len});
  TensorId roi = b.FloatConstant("roi", {});
  if (scale > 0) {
    b.Op("Resize", {in, roi, b.FloatConstant("scales", {1.0, scale})}, {y}, attrs);
  } else {
    b.Op("Resize", {in, roi, b.FloatConstant("scales", {}), b.IntConstant("sizes", {1, out_len})},
         {y}, attrs);
  }
  b.Output(y);
  Graph g = b.Build();
  return RunOne(g, {{in, F({1, n}, std::move(x))}});
}

Attribute Str(const std::string& name, const std::string& value) { return {name, value}; }

TEST(Reference, ResizeNearestModesByHand) {
  // Asymmetric, scale 4 on [10, 20]: source positions 0, .25, .5, .75, 1, 1.25, 1.5, 1.75, the
  // last ones clamped to index 1. The ties at .5 and 1.5 tell the round modes apart.
  auto nearest = [](const std::string& mode) {
    return ResizeRow(
        {10, 20}, 8,
        {Str("coordinate_transformation_mode", "asymmetric"), Str("nearest_mode", mode)}, 4.0);
  };
  ExpectValues(nearest("round_prefer_floor"), {10, 10, 10, 20, 20, 20, 20, 20});
  ExpectValues(nearest("round_prefer_ceil"), {10, 10, 20, 20, 20, 20, 20, 20});
  ExpectValues(nearest("floor"), {10, 10, 10, 10, 20, 20, 20, 20});
  ExpectValues(nearest("ceil"), {10, 20, 20, 20, 20, 20, 20, 20});
  // Default half_pixel, round_prefer_floor, scale 2 on [10,20,30,40]: positions x/2 - .25 =
  // -.25, .25, .75, 1.25, ... round to 0, 0, 1, 1, 2, 2, 3, 3.
  ExpectValues(ResizeRow({10, 20, 30, 40}, 8, {}, 2.0), {10, 10, 20, 20, 30, 30, 40, 40});
  // A non-integer scale 1.5 (4 -> 6), asymmetric floor: x / 1.5 = 0, .67, 1.33, 2, 2.67, 3.33.
  ExpectValues(
      ResizeRow({10, 20, 30, 40}, 6,
                {Str("coordinate_transformation_mode", "asymmetric"), Str("nearest_mode", "floor")},
                1.5),
      {10, 10, 20, 30, 30, 40});
}

TEST(Reference, ResizeLinearCoordinateModesByHand) {
  Attribute linear = Str("mode", "linear");
  // align_corners 3 -> 5: x * 2 / 4 = 0, .5, 1, 1.5, 2.
  ExpectValues(
      ResizeRow({10, 20, 30}, 5, {linear, Str("coordinate_transformation_mode", "align_corners")}),
      {10, 15, 20, 25, 30});
  // half_pixel, scale 2 on [10, 20]: x/2 - .25 = -.25 (clamped to 0), .25, .75, 1.25 (to 1).
  ExpectValues(ResizeRow({10, 20}, 4, {linear}, 2.0), {10, 12.5f, 17.5f, 20});
  // asymmetric, scale 2: x / 2 = 0, .5, 1, 1.5 (clamped to 1).
  ExpectValues(
      ResizeRow({10, 20}, 4, {linear, Str("coordinate_transformation_mode", "asymmetric")}, 2.0),
      {10, 15, 20, 20});
  // 3 -> 1: half_pixel reads (0 + .5) * 3 - .5 = 1; pytorch_half_pixel reads 0 for length 1.
  ExpectValues(ResizeRow({10, 20, 30}, 1, {linear}), {20});
  ExpectValues(ResizeRow({10, 20, 30}, 1,
                         {linear, Str("coordinate_transformation_mode", "pytorch_half_pixel")}),
               {10});
}

TEST(Reference, ResizeBilinearAlignCornersByHand) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 1, 2, 2});
  TensorId y = b.Act("y", {1, 1, 3, 3});
  b.Op("Resize",
       {x, b.FloatConstant("roi", {}), b.FloatConstant("scales", {}),
        b.IntConstant("sizes", {1, 1, 3, 3})},
       {y}, {Str("mode", "linear"), Str("coordinate_transformation_mode", "align_corners")});
  b.Output(y);
  Graph g = b.Build();
  // Rows and columns at 0, .5, 1 of [[0, 10], [20, 30]].
  ExpectValues(RunOne(g, {{x, F({1, 1, 2, 2}, {0, 10, 20, 30})}}),
               {0, 5, 10, 10, 15, 20, 20, 25, 30});
}

// With scales, align_corners divides by the unrounded resized length, in * scale (ONNX's rule;
// conformance: the rounded output length gave 4 where ONNX gives 3.142857).
TEST(Reference, ResizeAlignCornersWithScalesUsesTheUnroundedLength) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 1, 1, 4});
  TensorId y = b.Act("y", {1, 1, 1, 2});
  b.Op("Resize", {x, b.FloatConstant("roi", {}), b.FloatConstant("scales", {1, 1, 1, 0.6f})}, {y},
       {Str("mode", "linear"), Str("coordinate_transformation_mode", "align_corners")});
  b.Output(y);
  Graph g = b.Build();
  // Output 1 reads input position 1 * 3 / (4 * 0.6 - 1) = 2.142857 of [1, 2, 3, 4].
  ExpectValues(RunOne(g, {{x, F({1, 1, 1, 4}, {1, 2, 3, 4})}}), {1, 3.142857f});
}

TEST(Reference, ResizeUnsupportedModesNameNodeAndValue) {
  for (auto [attr, value] : std::vector<std::pair<std::string, std::string>>{
           {"mode", "lanczos"}, {"coordinate_transformation_mode", "half_pixel_symmetric"}}) {
    IrBuilder b;
    TensorId x = b.Input("x", {1, 2});
    TensorId y = b.Act("y", {1, 4});
    b.Op("Resize", {x, b.FloatConstant("roi", {}), b.FloatConstant("scales", {1, 2})}, {y},
         {Str(attr, value)});
    b.Output(y);
    Graph g = b.Build();
    auto out = RunReference(g, *RandomLeafValues(g, 1));
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), Status::Code::kUnimplemented);
    EXPECT_NE(out.status().message().find("node 'Resize_0' (Resize): " + attr + " '" + value +
                                          "' is not supported"),
              std::string::npos)
        << out.status().message();
  }
}

// Cubic, half_pixel, 4 -> 2: positions .5 and 2.5, each between four taps weighted (a = -.75)
// -.09375, .59375, .59375, -.09375, the edge repeated beyond the input (14.0625, 35.9375); with
// exclude_outside the tap outside gets 0 and the others are renormalised by 1.09375.
TEST(Reference, ResizeCubicByHand) {
  Attribute cubic = Str("mode", "cubic");
  ExpectValues(ResizeRow({10, 20, 30, 40}, 2, {cubic}), {14.0625f, 35.9375f});
  ExpectValues(ResizeRow({10, 20, 30, 40}, 2, {cubic, Int("exclude_outside", 1)}),
               {15 / 1.09375f, 39.6875f / 1.09375f});
}

// tf_crop_and_resize, linear, [10, 20, 30, 40] -> 3 over roi [.25, .75] of the last dim reads
// .75, 1.5, 2.25; over [-.5, 1.5] it reads -1.5 and 4.5, outside: extrapolation_value.
TEST(Reference, ResizeCropAndResizeByHand) {
  auto crop = [](double start, double end) {
    IrBuilder b;
    TensorId x = b.Input("x", {1, 4});
    TensorId y = b.Act("y", {1, 3});
    b.Op("Resize",
         {x, b.FloatConstant("roi", {0, start, 1, end}), b.FloatConstant("scales", {}),
          b.IntConstant("sizes", {1, 3})},
         {y},
         {Str("mode", "linear"),
          Str("coordinate_transformation_mode", "tf_crop_and_resize"),
          {"extrapolation_value", 7.0}});
    b.Output(y);
    Graph g = b.Build();
    return RunOne(g, {{x, F({1, 4}, {10, 20, 30, 40})}});
  };
  ExpectValues(crop(0.25, 0.75), {17.5f, 25, 32.5f});
  ExpectValues(crop(-0.5, 1.5), {7, 25, 7});
}

// Grid positions on X [[10, 20]] (without align_corners, x = ((g + 1) * 2 - 1) / 2): g = 0 reads
// .5, g = -.5 reads 0, g = 3 reads 3.5, outside: zeros gives 0, border clamps to 1, reflection
// folds it to -.5, halfway between index 0 and its mirror.
TEST(Reference, GridSamplePaddingModesByHand) {
  for (auto [padding, far] : std::vector<std::pair<std::string, float>>{
           {"zeros", 0}, {"border", 20}, {"reflection", 10}}) {
    SCOPED_TRACE(padding);
    IrBuilder b;
    TensorId x = b.Input("x", {1, 1, 1, 2});
    TensorId grid = b.Input("grid", {1, 1, 3, 2});
    TensorId y = b.Act("y", {1, 1, 1, 3});
    b.Op("GridSample", {x, grid}, {y}, {Str("padding_mode", padding)});
    b.Output(y);
    Graph g = b.Build();
    ExpectValues(RunOne(g, {{x, F({1, 1, 1, 2}, {10, 20})},
                            {grid, F({1, 1, 3, 2}, {3, 0, 0, 0, -0.5f, 0})}}),
                 {far, 15, 10});
  }
}

// CumSum of [[1, 2], [3, 4]] along axis 1, and exclusive in reverse along axis 0.
TEST(Reference, CumSumByHand) {
  for (auto [axis, exclusive_reverse, want] :
       std::vector<std::tuple<int64_t, bool, std::vector<float>>>{{1, false, {1, 3, 3, 7}},
                                                                  {0, true, {3, 4, 0, 0}}}) {
    IrBuilder b;
    TensorId x = b.Input("x", {2, 2});
    TensorId y = b.Act("y", {2, 2});
    std::vector<Attribute> attrs;
    if (exclusive_reverse) attrs = {Int("exclusive", 1), Int("reverse", 1)};
    b.Op("CumSum", {x, b.IntScalar("axis", axis)}, {y}, attrs);
    b.Output(y);
    Graph g = b.Build();
    ExpectValues(RunOne(g, {{x, F({2, 2}, {1, 2, 3, 4})}}), want);
  }
}

// Periodic windows of length 4 (period 4) and a symmetric Hann window (period 3).
TEST(Reference, WindowFunctionsByHand) {
  auto window = [](const std::string& op, int64_t periodic) {
    IrBuilder b;
    TensorId y = b.Act("y", {4});
    b.Op(op, {b.IntScalar("size", 4)}, {y}, {Int("periodic", periodic)});
    b.Output(y);
    Graph g = b.Build();
    return RunOne(g, {});
  };
  ExpectValues(window("HannWindow", 1), {0, 0.5f, 1, 0.5f});
  ExpectValues(window("HannWindow", 0), {0, 0.75f, 0.75f, 0});
  ExpectValues(window("HammingWindow", 1), {4 / 46.0f, 25 / 46.0f, 1, 25 / 46.0f});
  ExpectValues(window("BlackmanWindow", 1), {0, 0.34f, 1, 0.34f});
}

// OneHot of [1, -1, 5] with depth 3 and values [0, 7]: -1 counts from the end, 5 is outside and
// gives a row of zeros; along axis 0 the rows become columns.
TEST(Reference, OneHotByHand) {
  for (auto [axis, want] : std::vector<std::pair<int64_t, std::vector<float>>>{
           {-1, {0, 7, 0, 0, 0, 7, 0, 0, 0}}, {0, {0, 0, 0, 7, 0, 0, 0, 7, 0}}}) {
    IrBuilder b;
    TensorId indices = b.Input("indices", {3}, DType::kInt64);
    TensorId y = b.Act("y", {3, 3});
    b.Op("OneHot", {indices, b.IntScalar("depth", 3), b.FloatConstant("values", {0, 7})}, {y},
         {Int("axis", axis)});
    b.Output(y);
    Graph g = b.Build();
    HostTensor idx = HostTensor::Zeros(DType::kInt64, {3});
    idx.i = {1, -1, 5};
    ExpectValues(RunOne(g, {{indices, idx}}), want);
  }
}

// Compress of [[1, 2, 3], [4, 5, 6]]: rows by [0, 1], columns by [1, 0, 1], and without an
// axis the flattened elements by [0, 1, 1] (a condition shorter than the input).
TEST(Reference, CompressByHand) {
  struct Case {
    std::optional<int64_t> axis;
    std::vector<int64_t> condition;
    Shape out;
    std::vector<float> want;
  };
  for (const Case& c : std::vector<Case>{{0, {0, 1}, {1, 3}, {4, 5, 6}},
                                         {1, {1, 0, 1}, {2, 2}, {1, 3, 4, 6}},
                                         {std::nullopt, {0, 1, 1}, {2}, {2, 3}}}) {
    IrBuilder b;
    TensorId x = b.Input("x", {2, 3});
    const int64_t len = static_cast<int64_t>(c.condition.size());
    TensorId condition = b.Input("condition", {len}, DType::kBool);
    TensorId y = b.Act("y", c.out);
    std::vector<Attribute> attrs;
    if (c.axis) attrs.push_back(Int("axis", *c.axis));
    b.Op("Compress", {x, condition}, {y}, attrs);
    b.Output(y);
    Graph g = b.Build();
    HostTensor cond = HostTensor::Zeros(DType::kBool, {len});
    cond.i = c.condition;
    ExpectValues(RunOne(g, {{x, F({2, 3}, {1, 2, 3, 4, 5, 6})}, {condition, cond}}), c.want);
  }
}

// Training-mode Dropout with its ratio given at run time is refused naming --const-input for the
// ratio (fixed at 0, Dropout is the identity, as the conformance case training_dropout_zero_ratio).
TEST(Reference, TrainingDropoutWithARuntimeRatioNamesConstInput) {
  IrBuilder b;
  TensorId x = b.Input("x", {2});
  TensorId ratio = b.Input("ratio", {});
  TensorId training = b.Input("training_mode", {}, DType::kBool);
  TensorId y = b.Act("y", {2});
  b.Op("Dropout", {x, ratio, training}, {y});
  b.Output(y);
  Graph g = b.Build();
  Status s = CheckReferenceKernel(g, 0);
  EXPECT_EQ(s.code(), Status::Code::kUnimplemented);
  EXPECT_NE(s.message().find("--const-input ratio=FILE"), std::string::npos) << s.ToString();

  IrBuilder fixed;
  x = fixed.Input("x", {2});
  y = fixed.Act("y", {2});
  fixed.Op("Dropout", {x, fixed.FloatScalar("ratio", 0), fixed.Input("t", {}, DType::kBool)}, {y});
  fixed.Output(y);
  Graph identity = fixed.Build();
  ExpectValues(RunOne(identity, {{x, F({2}, {3, -4})}}), {3, -4});
}

// ConvInteger pads with x's zero point: (x - 1) = [[1, 2], [3, 4]] under a 2x2 kernel of
// (2 - 1) with one of padding sums each window's shifted values.
TEST(Reference, ConvIntegerPadsWithTheZeroPointByHand) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 1, 2, 2}, DType::kUInt8);
  TensorId w = b.Input("w", {1, 1, 2, 2}, DType::kUInt8);
  TensorId y = b.Act("y", {1, 1, 3, 3}, DType::kInt32);
  b.Op("ConvInteger", {x, w, b.IntScalar("x_zero", 1), b.IntScalar("w_zero", 1)}, {y},
       {Ints("pads", {1, 1, 1, 1})});
  b.Output(y);
  Graph g = b.Build();
  HostTensor xv = HostTensor::Zeros(DType::kUInt8, {1, 1, 2, 2});
  xv.i = {2, 3, 4, 5};
  HostTensor wv = HostTensor::Zeros(DType::kUInt8, {1, 1, 2, 2});
  wv.i = {2, 2, 2, 2};
  ExpectValues(RunOne(g, {{x, xv}, {w, wv}}), {1, 3, 2, 4, 10, 6, 3, 7, 4});
}

// TfIdfVectorizer over [1, 2, 1, 3] with pool {1}, {(1, 2), (1, 3)} and one skip: the unigram 1
// twice (once per position), (1, 2) at distance 1 and (1, 3) at distance 1, (1, 1) at distance 2
// not in the pool; min_gram_length 2 drops the unigram; TFIDF multiplies by the weights.
TEST(Reference, TfIdfVectorizerCountsSkipGramsByHand) {
  auto vectorize = [](int64_t min_len, const std::string& mode) {
    IrBuilder b;
    TensorId x = b.Input("x", {4}, DType::kInt64);
    TensorId y = b.Act("y", {3});
    b.Op("TfIdfVectorizer", {x}, {y},
         {Int("min_gram_length", min_len),
          Int("max_gram_length", 2),
          Int("max_skip_count", 1),
          Str("mode", mode),
          Ints("ngram_counts", {0, 1}),
          Ints("ngram_indexes", {0, 1, 2}),
          Ints("pool_int64s", {1, 1, 2, 1, 3}),
          {"weights", std::vector<double>{0.5, 2, 3}}});
    b.Output(y);
    Graph g = b.Build();
    HostTensor xv = HostTensor::Zeros(DType::kInt64, {4});
    xv.i = {1, 2, 1, 3};
    return RunOne(g, {{x, xv}});
  };
  ExpectValues(vectorize(1, "TF"), {2, 1, 1});
  ExpectValues(vectorize(2, "TF"), {0, 1, 1});
  ExpectValues(vectorize(1, "TFIDF"), {1, 2, 3});
  ExpectValues(vectorize(1, "IDF"), {0.5f, 2, 3});
}

// Einsum by hand: a batched matrix product, a diagonal under an ellipsis, and the implicit output
// (the labels used once, alphabetically: "ji" transposes).
TEST(Reference, EinsumByHand) {
  auto einsum = [](const std::string& equation,
                   std::vector<std::pair<Shape, std::vector<float>>> in, Shape out) {
    IrBuilder b;
    std::vector<TensorId> ids;
    TensorValues values;
    for (size_t k = 0; k < in.size(); ++k) {
      ids.push_back(b.Input("x" + std::to_string(k), in[k].first));
      values[ids.back()] = F(in[k].first, in[k].second);
    }
    TensorId y = b.Act("y", out);
    b.Op("Einsum", ids, {y}, {Str("equation", equation)});
    b.Output(y);
    Graph g = b.Build();
    return RunOne(g, values);
  };
  // [[1, 2]] x [[3], [4]] = 11 and [[5, 6]] x [[7], [8]] = 83.
  ExpectValues(
      einsum("bij, bjk -> bik", {{{2, 1, 2}, {1, 2, 5, 6}}, {{2, 2, 1}, {3, 4, 7, 8}}}, {2, 1, 1}),
      {11, 83});
  ExpectValues(einsum("...ii->...i", {{{2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}}}, {2, 2}),
               {1, 4, 5, 8});
  ExpectValues(einsum("ji", {{{2, 3}, {1, 2, 3, 4, 5, 6}}}, {3, 2}), {1, 4, 2, 5, 3, 6});
  ExpectValues(einsum("ij->", {{{2, 2}, {1, 2, 3, 4}}}, {}), {10});
}

// MaxPool's Indices: the first of equal maxima (4 at flat index 1, position (0, 1)), row-major,
// or with storage_order 1 column-major (1 * 2 + 0 = 2).
TEST(Reference, MaxPoolIndicesByHand) {
  for (auto [order, want] : std::vector<std::pair<int64_t, float>>{{0, 1}, {1, 2}}) {
    IrBuilder b;
    TensorId x = b.Input("x", {1, 1, 2, 2});
    TensorId y = b.Act("y", {1, 1, 1, 1});
    TensorId idx = b.Act("idx", {1, 1, 1, 1}, DType::kInt64);
    b.Op("MaxPool", {x}, {y, idx}, {Ints("kernel_shape", {2, 2}), Int("storage_order", order)});
    b.Output(y);
    b.Output(idx);
    Graph g = b.Build();
    TensorValues out = RunAll(g, {{x, F({1, 1, 2, 2}, {1, 4, 4, 2})}});
    ExpectValues(out.at(y), {4});
    ExpectValues(out.at(idx), {want});
  }
}

// DFT of [1, 2, 3, 4] along axis 1: 10, -2 + 2i, -2, -2 - 2i; onesided keeps the first three;
// the inverse of the full transform gives the signal back.
TEST(Reference, DftByHand) {
  auto dft = [](Shape in_dims, std::vector<float> in, Shape out_dims,
                std::vector<Attribute> attrs) {
    IrBuilder b;
    TensorId x = b.Input("x", in_dims);
    TensorId y = b.Act("y", out_dims);
    b.Op("DFT", {x}, {y}, attrs);
    b.Output(y);
    Graph g = b.Build();
    return RunOne(g, {{x, F(in_dims, std::move(in))}});
  };
  const std::vector<float> spectrum = {10, 0, -2, 2, -2, 0, -2, -2};
  ExpectValues(dft({1, 4, 1}, {1, 2, 3, 4}, {1, 4, 2}, {}), spectrum);
  ExpectValues(dft({1, 4, 1}, {1, 2, 3, 4}, {1, 3, 2}, {Int("onesided", 1)}),
               {10, 0, -2, 2, -2, 0});
  ExpectValues(dft({1, 4, 2}, spectrum, {1, 4, 2}, {Int("inverse", 1)}), {1, 0, 2, 0, 3, 0, 4, 0});
}

// RoiAlign of the whole [[0, 10], [20, 30]] into one bin sampled at 0.5 and 1.5 each way (the
// samples past the last pixel clamp to it): 15, 20, 25, 30 average to 22.5; max mode takes the
// largest weighted tap, 30.
TEST(Reference, RoiAlignByHand) {
  for (auto [mode, want] :
       std::vector<std::pair<std::string, float>>{{"avg", 22.5f}, {"max", 30}}) {
    IrBuilder b;
    TensorId x = b.Input("x", {1, 1, 2, 2});
    TensorId rois = b.Input("rois", {1, 4});
    TensorId y = b.Act("y", {1, 1, 1, 1});
    b.Op("RoiAlign", {x, rois, b.IntConstant("batch", {0})}, {y},
         {Str("mode", mode), Int("sampling_ratio", 2), Int("output_height", 1),
          Int("output_width", 1), Str("coordinate_transformation_mode", "output_half_pixel")});
    b.Output(y);
    Graph g = b.Build();
    ExpectValues(
        RunOne(g, {{x, F({1, 1, 2, 2}, {0, 10, 20, 30})}, {rois, F({1, 4}, {0, 0, 2, 2})}}),
        {want});
  }
}

// Unique of [2, 1, 1, 3, 4, 3], sorted and in order of first occurrence, and of the rows of
// [[1, 0], [0, 1], [1, 0]]; NonZero of [[1, 0], [0, 3]].
TEST(Reference, UniqueAndNonZeroByHand) {
  struct Case {
    Shape in, y;
    std::vector<float> x;
    std::optional<int64_t> axis;
    int64_t sorted;
    std::vector<std::vector<float>> want;  // Y, indices, inverse_indices, counts.
  };
  for (const Case& c : std::vector<Case>{
           {{6},
            {4},
            {2, 1, 1, 3, 4, 3},
            std::nullopt,
            1,
            {{1, 2, 3, 4}, {1, 0, 3, 4}, {1, 0, 0, 2, 3, 2}, {2, 1, 2, 1}}},
           {{6},
            {4},
            {2, 1, 1, 3, 4, 3},
            std::nullopt,
            0,
            {{2, 1, 3, 4}, {0, 1, 3, 4}, {0, 1, 1, 2, 3, 2}, {1, 2, 2, 1}}},
           {{3, 2}, {2, 2}, {1, 0, 0, 1, 1, 0}, 0, 1, {{0, 1, 1, 0}, {1, 0}, {1, 0, 1}, {1, 2}}}}) {
    IrBuilder b;
    TensorId x = b.Input("x", c.in);
    const int64_t unique = c.y[c.axis.value_or(0)];
    const int64_t slices = c.axis ? c.in[*c.axis] : NumElements(c.in);
    std::vector<TensorId> outs = {b.Act("y", c.y), b.Act("indices", {unique}, DType::kInt64),
                                  b.Act("inverse", {slices}, DType::kInt64),
                                  b.Act("counts", {unique}, DType::kInt64)};
    std::vector<Attribute> attrs = {Int("sorted", c.sorted)};
    if (c.axis) attrs.push_back(Int("axis", *c.axis));
    b.Op("Unique", {x}, outs, attrs);
    for (TensorId t : outs) b.Output(t);
    Graph g = b.Build();
    TensorValues got = RunAll(g, {{x, F(c.in, c.x)}});
    for (size_t k = 0; k < outs.size(); ++k) ExpectValues(got.at(outs[k]), c.want[k]);
  }
  IrBuilder b;
  TensorId x = b.Input("x", {2, 2});
  TensorId y = b.Act("y", {2, 2}, DType::kInt64);
  b.Op("NonZero", {x}, {y});
  b.Output(y);
  Graph g = b.Build();
  ExpectValues(RunOne(g, {{x, F({2, 2}, {1, 0, 0, 3})}}), {0, 1, 0, 1});
}

// MaxUnpool of [5, 6] at indices 1 and 7 of the unpooled [1, 1, 2, 4] (kernel and stride 2): at
// (0, 1) and (1, 3); a larger output_shape [1, 1, 3, 5] keeps those coordinates (conformance:
// maxunpool_export_with_output_shape, where flat indices into it were wrong).
TEST(Reference, MaxUnpoolKeepsCoordinatesInALargerOutput) {
  for (const Shape& out : std::vector<Shape>{{1, 1, 2, 4}, {1, 1, 3, 5}}) {
    IrBuilder b;
    TensorId x = b.Input("x", {1, 1, 1, 2});
    TensorId idx = b.Input("idx", {1, 1, 1, 2}, DType::kInt64);
    TensorId y = b.Act("y", out);
    std::vector<TensorId> inputs = {x, idx};
    if (out[2] == 3) inputs.push_back(b.IntConstant("shape", out));
    b.Op("MaxUnpool", inputs, {y}, {Ints("kernel_shape", {2, 2}), Ints("strides", {2, 2})});
    b.Output(y);
    Graph g = b.Build();
    HostTensor iv = HostTensor::Zeros(DType::kInt64, {1, 1, 1, 2});
    iv.i = {1, 7};
    std::vector<float> want(NumElements(out), 0);
    want[1] = 5;
    want[out[3] + 3] = 6;
    ExpectValues(RunOne(g, {{x, F({1, 1, 1, 2}, {5, 6})}, {idx, iv}}), want);
  }
}

// One mel bin over 0-4000 Hz of an 8-point DFT at 8000 Hz: points at 0, 621 and 1792 Hz fall in
// spectrogram bins 0, 0 and 2 (floor(9 * hz / 8000)): a centre of weight 1 at bin 0 falling to 0.5
// at bin 1.
TEST(Reference, MelWeightMatrixByHand) {
  IrBuilder b;
  TensorId y = b.Act("y", {5, 1});
  b.Op("MelWeightMatrix",
       {b.IntScalar("mels", 1), b.IntScalar("dft", 8), b.IntScalar("rate", 8000),
        b.FloatScalar("low", 0), b.FloatScalar("high", 4000)},
       {y});
  b.Output(y);
  Graph g = b.Build();
  ExpectValues(RunOne(g, {}), {1, 0.5f, 0, 0, 0});
}

TEST(Reference, PadReflectEdgeConstantByHand) {
  IrBuilder b;
  TensorId x = b.Input("x", {2, 3});
  TensorId pads = b.IntConstant("pads", {0, 2, 1, 1});  // Dim 0: +1 at the end; dim 1: 2 and 1.
  TensorId reflect = b.Act("reflect", {3, 6}), edge = b.Act("edge", {3, 6});
  TensorId constant = b.Act("constant", {3, 6}), wide = b.Act("wide", {1, 9});
  b.Op("Pad", {x, pads}, {reflect}, {Str("mode", "reflect")});
  b.Op("Pad", {x, pads}, {edge}, {Str("mode", "edge")});
  b.Op("Pad", {x, pads, b.FloatScalar("nine", 9)}, {constant});
  TensorId row = b.Act("row", {1, 3});
  b.Op("Slice", {x, b.IntConstant("st", {0}), b.IntConstant("en", {1})}, {row});
  b.Op("Pad", {row, b.IntConstant("wpads", {0, 3, 0, 3})}, {wide}, {Str("mode", "reflect")});
  for (TensorId t : {reflect, edge, constant, wide}) b.Output(t);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 1);
  (*leaves)[x] = F({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = RunReference(g, *leaves);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // x = [[1,2,3],[4,5,6]]. Reflect mirrors about the edge element (not repeating it); the extra
  // row mirrors row 1 about itself, giving row 0.
  ExpectValues(out->at(reflect), {3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2});
  ExpectValues(out->at(edge), {1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6, 4, 4, 4, 5, 6, 6});
  ExpectValues(out->at(constant), {9, 9, 1, 2, 3, 9, 9, 9, 4, 5, 6, 9, 9, 9, 9, 9, 9, 9});
  // Pads longer than the dim keep mirroring: ... 2 3 2 | 1 2 3 | 2 1 2 ... (numpy's 'reflect').
  ExpectValues(out->at(wide), {2, 3, 2, 1, 2, 3, 2, 1, 2});
}

TEST(Reference, PadWrapModeNamesNodeAndMode) {
  IrBuilder b;
  TensorId x = b.Input("x", {2});
  TensorId y = b.Act("y", {4});
  b.Op("Pad", {x, b.IntConstant("pads", {1, 1})}, {y}, {Str("mode", "wrap")});
  b.Output(y);
  Graph g = b.Build();
  auto out = RunReference(g, *RandomLeafValues(g, 1));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Status::Code::kUnimplemented);
  EXPECT_NE(out.status().message().find("node 'Pad_0' (Pad): pad mode 'wrap' is not supported"),
            std::string::npos)
      << out.status().message();
}

TEST(Reference, PadWithPadsComputedAtRunTime) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 3});
  // Pads computed by nodes, as an exporter that does not fold them writes it: per-dim (begin, end)
  // pairs [[0, 0], [1, 2]], transposed and flattened to [0, 1, 0, 2].
  TensorId pairs = b.Act("pairs", {2, 2}, DType::kInt64);
  TensorId swapped = b.Act("swapped", {2, 2}, DType::kInt64);
  TensorId pads = b.Act("pads", {4}, DType::kInt64);
  TensorId y = b.Act("y", {1, 6});
  b.Op("Reshape", {b.IntConstant("flat", {0, 0, 1, 2}), b.IntConstant("s22", {2, 2})}, {pairs});
  b.Op("Transpose", {pairs}, {swapped});
  b.Op("Reshape", {swapped, b.IntConstant("s4", {4})}, {pads});
  b.Op("Pad", {x, pads, b.FloatScalar("v", -1)}, {y});
  b.Output(y);
  Graph g = b.Build();
  ExpectValues(RunOne(g, {{x, F({1, 3}, {1, 2, 3})}}), {-1, 1, 2, 3, -1, -1});
}

TEST(Reference, MatMulWithOneDimensionalOperandsByHand) {
  IrBuilder b;
  TensorId v = b.Input("v", {2});
  TensorId m = b.Input("m", {2, 3});
  TensorId m2 = b.Input("m2", {2, 3});
  TensorId u = b.Input("u", {3});
  TensorId vm = b.Act("vm", {3}), mu = b.Act("mu", {2}), dot = b.Act("dot", {});
  b.Op("MatMul", {v, m}, {vm});
  b.Op("MatMul", {m2, u}, {mu});
  b.Op("MatMul", {v, v}, {dot});
  for (TensorId t : {vm, mu, dot}) b.Output(t);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 1);
  (*leaves)[v] = F({2}, {1, 2});
  (*leaves)[m] = F({2, 3}, {1, 0, 1, 0, 1, 1});
  (*leaves)[m2] = F({2, 3}, {1, 2, 3, 4, 5, 6});
  (*leaves)[u] = F({3}, {1, 0, -1});
  auto out = RunReference(g, *leaves);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectValues(out->at(vm), {1, 2, 3});  // [1, 2] x [[1,0,1],[0,1,1]].
  ExpectValues(out->at(mu), {-2, -2});   // [1-3, 4-6].
  ExpectValues(out->at(dot), {5});       // 1*1 + 2*2.
}

// One LSTM step for hidden size 1 and input size 1, written from the ONNX equations with scalars:
// w, r and the two biases in gate order i, o, f, c.
struct ScalarLstm {
  float w[4], r[4], wb[4], rb[4];
  std::pair<float, float> Step(float x, float h, float c) const {
    auto sig = [](float v) { return 1.0f / (1.0f + std::exp(-v)); };
    auto pre = [&](int g) { return w[g] * x + r[g] * h + wb[g] + rb[g]; };
    float i = sig(pre(0)), o = sig(pre(1)), f = sig(pre(2)), cc = std::tanh(pre(3));
    float c2 = f * c + i * cc;
    return {o * std::tanh(c2), c2};
  }
};

TEST(Reference, LstmBidirectionalByHand) {
  const ScalarLstm fw{{0.5f, -0.3f, 0.2f, 0.7f},
                      {0.1f, 0.2f, -0.1f, 0.3f},
                      {0.1f, 0.0f, 0.2f, -0.1f},
                      {0.0f, 0.05f, 0.0f, 0.1f}};
  const ScalarLstm bw{{-0.4f, 0.6f, 0.1f, -0.2f},
                      {0.3f, -0.2f, 0.2f, 0.1f},
                      {0.0f, 0.1f, -0.1f, 0.2f},
                      {0.05f, 0.0f, 0.1f, 0.0f}};
  IrBuilder b;
  TensorId x = b.Input("x", {2, 1, 1});
  TensorId w = b.Weight("w", {2, 4, 1}), r = b.Weight("r", {2, 4, 1}), bias = b.Weight("b", {2, 8});
  TensorId h0 = b.Weight("h0", {2, 1, 1}), c0 = b.Weight("c0", {2, 1, 1});
  TensorId y = b.Act("y", {2, 2, 1, 1}), yh = b.Act("yh", {2, 1, 1}), yc = b.Act("yc", {2, 1, 1});
  b.Op("LSTM", {x, w, r, bias, kNoId, h0, c0}, {y, yh, yc},
       {Int("hidden_size", 1), {"direction", std::string("bidirectional")}});
  b.Output(y);
  b.Output(yh);
  b.Output(yc);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 3);
  ASSERT_TRUE(leaves.ok());
  auto cat = [](const float* a, const float* b) {
    std::vector<float> v(a, a + 4);
    v.insert(v.end(), b, b + 4);
    return v;
  };
  (*leaves)[x] = F({2, 1, 1}, {1.0f, -2.0f});
  (*leaves)[w] = F({2, 4, 1}, cat(fw.w, bw.w));
  (*leaves)[r] = F({2, 4, 1}, cat(fw.r, bw.r));
  std::vector<float> bias_v = cat(fw.wb, fw.rb), bw_bias = cat(bw.wb, bw.rb);
  bias_v.insert(bias_v.end(), bw_bias.begin(), bw_bias.end());
  (*leaves)[bias] = F({2, 8}, bias_v);
  (*leaves)[h0] = F({2, 1, 1}, {0.2f, -0.3f});
  (*leaves)[c0] = F({2, 1, 1}, {-0.1f, 0.4f});
  auto out = RunReference(g, *leaves);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto [f1, fc1] = fw.Step(1.0f, 0.2f, -0.1f);  // Forward: t = 0, then t = 1.
  auto [f2, fc2] = fw.Step(-2.0f, f1, fc1);
  auto [b1, bc1] = bw.Step(-2.0f, -0.3f, 0.4f);  // Reverse: t = 1, then t = 0.
  auto [b2, bc2] = bw.Step(1.0f, b1, bc1);
  ExpectValues(out->at(y), {f1, b2, f2, b1});  // Y[t, direction].
  ExpectValues(out->at(yh), {f2, b2});
  ExpectValues(out->at(yc), {fc2, bc2});
}

// Batch first (layout 1) gives the layout-0 results in its own order: X [batch, seq, input] and
// the initial states [batch, dirs, hidden] in, Y [batch, seq, dirs, hidden] and the final states
// [batch, dirs, hidden] out.
TEST(Reference, BatchFirstRecurrencesMatchTheDefaultLayout) {
  const int64_t seq = 3, batch = 2, in = 2, hid = 2, dirs = 2;
  for (const std::string op : {"LSTM", "GRU", "RNN"}) {
    SCOPED_TRACE(op);
    const int64_t gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
    std::array<Graph, 2> graphs;
    std::array<std::vector<TensorId>, 2> ins, outs;
    for (int layout : {0, 1}) {
      auto state = [&](int64_t a, int64_t b_) {
        return layout == 0 ? Shape{a, b_, hid} : Shape{b_, a, hid};
      };
      IrBuilder b;
      ins[layout] = {b.Input("x", layout == 0 ? Shape{seq, batch, in} : Shape{batch, seq, in}),
                     b.Weight("w", {dirs, gates * hid, in}),
                     b.Weight("r", {dirs, gates * hid, hid}),
                     b.Weight("b", {dirs, 2 * gates * hid}),
                     kNoId,
                     b.Input("h0", state(dirs, batch))};
      if (op == "LSTM") ins[layout].push_back(b.Input("c0", state(dirs, batch)));
      outs[layout] = {
          b.Act("y", layout == 0 ? Shape{seq, dirs, batch, hid} : Shape{batch, seq, dirs, hid}),
          b.Act("yh", state(dirs, batch))};
      if (op == "LSTM") outs[layout].push_back(b.Act("yc", state(dirs, batch)));
      b.Op(op, ins[layout], outs[layout],
           {Int("hidden_size", hid), Str("direction", "bidirectional"), Int("layout", layout)});
      for (TensorId t : outs[layout]) b.Output(t);
      graphs[layout] = b.Build();
    }
    auto leaves = RandomLeafValues(graphs[0], 5);
    ASSERT_TRUE(leaves.ok());
    auto want = RunReference(graphs[0], *leaves);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    // Swaps the first two dims of [a, b, c].
    auto swap01 = [](const HostTensor& t) {
      HostTensor s = HostTensor::Zeros(t.dtype, {t.dims[1], t.dims[0], t.dims[2]});
      for (int64_t i = 0; i < t.dims[0]; ++i)
        for (int64_t j = 0; j < t.dims[1]; ++j)
          for (int64_t k = 0; k < t.dims[2]; ++k)
            s.f[(j * t.dims[0] + i) * t.dims[2] + k] = t.f[(i * t.dims[1] + j) * t.dims[2] + k];
      return s;
    };
    TensorValues batch_first;
    for (size_t i = 0; i < ins[0].size(); ++i) {
      if (ins[0][i] == kNoId) continue;
      const HostTensor& v = leaves->at(ins[0][i]);
      batch_first[ins[1][i]] = (i == 0 || i >= 5) ? swap01(v) : v;
    }
    auto got = RunReference(graphs[1], batch_first);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const HostTensor &y0 = want->at(outs[0][0]), &y1 = got->at(outs[1][0]);
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t d = 0; d < dirs; ++d)
        for (int64_t bi = 0; bi < batch; ++bi)
          for (int64_t h = 0; h < hid; ++h)
            EXPECT_FLOAT_EQ(y1.f[((bi * seq + t) * dirs + d) * hid + h],
                            y0.f[((t * dirs + d) * batch + bi) * hid + h]);
    for (size_t k = 1; k < outs[0].size(); ++k) {
      ExpectValues(got->at(outs[1][k]), swap01(want->at(outs[0][k])).f);
    }
  }
}

TEST(Reference, InstanceNormalizationByHand) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 2, 2});
  TensorId s = b.Weight("s", {2}), bb = b.Weight("bb", {2});
  TensorId y = b.Act("y", {1, 2, 2});
  b.Op("InstanceNormalization", {x, s, bb}, {y}, {{"epsilon", 0.0}});
  b.Output(y);
  Graph g = b.Build();
  // Channel 0 holds 1 and 3 (mean 2, deviation 1); channel 1 holds 4 and 8 (mean 6, deviation 2).
  HostTensor out =
      RunOne(g, {{x, F({1, 2, 2}, {1, 3, 4, 8})}, {s, F({2}, {2, 0.5f})}, {bb, F({2}, {1, -1})}});
  ExpectValues(out, {-2 + 1, 2 + 1, -0.5f - 1, 0.5f - 1});
}

TEST(Reference, UnsupportedOpNamesNodeAndOp) {
  IrBuilder b;
  TensorId x = b.Input("x", {2});
  TensorId y = b.Act("y", {2});
  b.Op("NonMaxSuppression", {x}, {y});
  b.Output(y);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 1);
  auto out = RunReference(g, *leaves);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Status::Code::kUnimplemented);
  EXPECT_NE(out.status().message().find("NonMaxSuppression_0"), std::string::npos);
  EXPECT_NE(out.status().message().find("(NonMaxSuppression)"), std::string::npos);
}

}  // namespace
}  // namespace fusor
