// Nodes over constants fold at import through the reference interpreter, with their values; an
// opaque node runs through the reference fallback in every plan and gives the reference's
// values; an op with no implementation at all fails naming the node and op, never crashes.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>

#include "graph/canonical.h"
#include "graph/constant_folding.h"
#include "graph/onnx_import.h"
#include "graph/plan.h"
#include "lowering/kernel_form.h"
#include "lowering/plan_legality.h"
#include "lowering/unfused_ops.h"
#include "runtime/constant_evaluator.h"
#include "runtime/executor.h"
#include "runtime/reference.h"
#include "tests/graph/ir_builder.h"
#include "tests/graph/onnx_builder.h"

namespace fusor {
namespace {

// The executor's first output against `want`, the reference's value of it, within tolerance.
void ExpectFirstOutputMatches(const Executor& exec, const Graph& g, const HostTensor& want) {
  auto got = exec.Read(g.outputs()[0]);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  auto c = Compare(want, *got);
  ASSERT_TRUE(c.ok());
  EXPECT_LE(c->worst_ratio, 1.0) << c->ToString();
}

// x [4, 4] + Trilu(Constant mask of -inf, k = 1): a causal attention mask, as GPT exports build it.
std::string CausalMaskModel() {
  testing::OnnxBuilder b(14);
  b.Input("x", {4, 4}).Int64Constant("k", {1}, {});
  auto& c = b.Node("Constant", {}, {"full"});
  auto* a = c.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  auto* t = a->mutable_t();
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->add_dims(4);
  for (int i = 0; i < 16; ++i) t->add_float_data(-std::numeric_limits<float>::infinity());
  b.Node("Trilu", {"full", "k"}, {"mask"});
  b.Node("Add", {"x", "mask"}, {"y"});
  b.Output("y");
  return b.Serialize();
}

// Shape(x) and Identity(x): every node folds or passes through, leaving a graph of no nodes.
std::string NodesThatAllFoldModel() {
  testing::OnnxBuilder b(14);
  b.Input("x", {2, 3});
  b.Node("Shape", {"x"}, {"shape"});
  b.Node("Identity", {"x"}, {"same"});
  b.Output("shape", onnx::TensorProto::INT64).Output("same");
  return b.Serialize();
}

TEST(ConstantFolding, AGraphThatFoldsToNoNodesRunsAndGivesTheFoldedValuesAndTheInputs) {
  auto g = ImportOnnxBytes(NodesThatAllFoldModel(), WithConstantFolding({}));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->num_nodes(), 0u);
  auto leaves = RandomLeafValues(*g, 5);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  auto want = RunReference(*g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  auto exec = Executor::Create(*g, UnfusedPlan(*g), *leaves);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  (*exec)->Run();
  auto shape = (*exec)->Read(g->outputs()[0]);
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_EQ(shape->i, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(want->at(g->outputs()[0]).i, shape->i);
  auto same = (*exec)->Read(g->outputs()[1]);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(same->f, leaves->at(*g->FindTensor("x")).f);
}

TEST(ConstantFolding, CausalMaskFoldsWithItsValues) {
  auto g = ImportOnnxBytes(CausalMaskModel(), WithConstantFolding({}));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(g->node(0).op_type, "Add");
  const Tensor& mask = g->tensor(*g->FindTensor("mask"));
  ASSERT_EQ(mask.kind, TensorKind::kConstant);
  ASSERT_EQ(mask.float_data.size(), 16u);
  for (int r = 0; r < 4; ++r) {
    for (int col = 0; col < 4; ++col) {
      double v = mask.float_data[r * 4 + col];
      if (col - r >= 1) {
        EXPECT_TRUE(std::isinf(v) && v < 0) << r << "," << col;
      } else {
        EXPECT_EQ(v, 0.0) << r << "," << col;
      }
    }
  }
  // The folded mask reaches the runtime: row 0 keeps only its first element.
  auto leaves = RandomLeafValues(*g, 5);
  ASSERT_TRUE(leaves.ok());
  auto exec = Executor::Create(*g, UnfusedPlan(*g), *leaves);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  (*exec)->Run();
  auto y = (*exec)->Read(g->outputs()[0]);
  ASSERT_TRUE(y.ok());
  EXPECT_TRUE(std::isfinite(y->f[0]));
  EXPECT_TRUE(std::isinf(y->f[1]));
}

TEST(ConstantFolding, AnImportWithoutAnEvaluatorIsRefusedNamingTheNode) {
  auto g = ImportOnnxBytes(CausalMaskModel());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(g.status().message().find("(Trilu) reads only constants"), std::string::npos)
      << g.status().message();
  EXPECT_NE(g.status().message().find("WithConstantFolding"), std::string::npos);
}

TEST(ConstantFolding, KeptOnPurposeTheMaskRunsAsANode) {
  ImportOptions keep;
  keep.keep_constant_nodes = true;
  auto g = ImportOnnxBytes(CausalMaskModel(), keep);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->num_nodes(), 2u);
  // A graph that arrives unfolded (a client that kept the node) folds to the import's graph.
  auto folded = ImportOnnxBytes(CausalMaskModel(), WithConstantFolding({}));
  ASSERT_TRUE(folded.ok());
  Graph arrived = *g;
  ASSERT_TRUE(FoldNodesOverConstants(&arrived).ok());
  EXPECT_EQ(CanonicalHash(Canonicalize(arrived)), CanonicalHash(*folded));
}

// scores [1, windows, 2, 49, 49] + a shifted-window mask built as Swin builds it from a constant
// of region ids per window position: ids [windows, 49] reshaped to [windows, 1, 49] and
// [windows, 49, 1], their difference (a broadcast to [windows, 49, 49]), -100 where it is not 0
// (Equal, Not, Where), reshaped to [1, windows, 1, 49, 49].
Graph ShiftedWindowMaskGraph(int64_t windows) {
  testing::IrBuilder b;
  const int64_t w = windows;
  TensorId scores = b.Input("scores", {1, w, 2, 49, 49});
  std::vector<double> region(w * 49);
  for (size_t i = 0; i < region.size(); ++i) region[i] = static_cast<double>((i * 7 / 13) % 9);
  TensorId ids = b.FloatConstant("ids", region);
  TensorId rows = b.Act("rows", {w, 1, 49}), cols = b.Act("cols", {w, 49, 1});
  b.Op("Reshape", {ids, b.IntConstant("rows_shape", {w, 1, 49})}, {rows});
  b.Op("Reshape", {ids, b.IntConstant("cols_shape", {w, 49, 1})}, {cols});
  TensorId diff = b.Act("diff", {w, 49, 49});
  TensorId same = b.Act("same", {w, 49, 49}, DType::kBool);
  TensorId apart = b.Act("apart", {w, 49, 49}, DType::kBool);
  TensorId mask = b.Act("mask", {w, 49, 49}), mask5 = b.Act("mask5", {1, w, 1, 49, 49});
  TensorId y = b.Act("y", {1, w, 2, 49, 49});
  b.Op("Sub", {rows, cols}, {diff});
  b.Op("Equal", {diff, b.FloatScalar("zero", 0)}, {same});
  b.Op("Not", {same}, {apart});
  b.Op("Where", {apart, b.FloatScalar("minus_100", -100), b.FloatScalar("none", 0)}, {mask});
  b.Op("Reshape", {mask, b.IntConstant("mask_shape", {1, w, 1, 49, 49})}, {mask5});
  b.Op("Add", {scores, mask5}, {y});
  b.Output(y);
  return b.Build();
}

// Swin-T's first stage: 64 windows, a [64, 49, 49] mask (153664 elements, over the 65536 of a
// constant read from a file) folds into one carried constant, so the plan runs the Add alone,
// with the values the unfolded graph computes; a mask over kMaxFoldedElements stays as nodes.
TEST(ConstantFolding, ShiftedWindowMaskOverTheFileConstantCapFoldsWithItsValues) {
  Graph unfolded = ShiftedWindowMaskGraph(64);
  Graph g = unfolded;
  ASSERT_TRUE(FoldNodesOverConstants(&g).ok());
  ASSERT_EQ(g.num_nodes(), 1u);
  EXPECT_EQ(g.node(0).op_type, "Add");
  const Tensor& mask = g.tensor(g.node(0).inputs[1]);
  ASSERT_EQ(mask.kind, TensorKind::kConstant);
  EXPECT_EQ(mask.float_data.size(), 64u * 49 * 49);
  EXPECT_GT(mask.float_data.size(), static_cast<size_t>(kMaxConstantElements));

  auto leaves = RandomLeafValues(unfolded, 3);
  ASSERT_TRUE(leaves.ok());
  auto want = RunReference(unfolded, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  auto folded_leaves = RandomLeafValues(g, 3);  // The carried mask, and the same scores.
  ASSERT_TRUE(folded_leaves.ok());
  (*folded_leaves)[*g.FindTensor("scores")] = leaves->at(*unfolded.FindTensor("scores"));
  auto exec = Executor::Create(g, UnfusedPlan(g), *folded_leaves);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  (*exec)->Run();
  ExpectFirstOutputMatches(**exec, g, want->at(unfolded.outputs()[0]));

  // 128 windows: the difference has 307328 elements, over kMaxFoldedElements. Only the Reshapes
  // of the ids fold.
  Graph large = ShiftedWindowMaskGraph(128);
  const size_t nodes = large.num_nodes();
  ASSERT_TRUE(FoldNodesOverConstants(&large).ok());
  EXPECT_EQ(large.num_nodes(), nodes - 2);
}

// x -> Relu -> LSTM with `clip` (opaque; oneDNN's RNN primitive and our recurrence loop do not
// clip, lowering/rnn_form.h) -> Relu on Y_h -> y.
Graph ClippedLstmGraph() {
  testing::IrBuilder b;
  TensorId x = b.Input("x", {4, 1, 3});
  TensorId w = b.Weight("w", {1, 8, 3}), r = b.Weight("r", {1, 8, 2});
  TensorId a = b.Act("a", {4, 1, 3}), all = b.Act("all", {4, 1, 1, 2});
  TensorId yh = b.Act("yh", {1, 1, 2}), y = b.Act("y", {1, 1, 2});
  b.Op("Relu", {x}, {a});
  b.Op("LSTM", {a, w, r}, {all, yh}, {{"hidden_size", int64_t{2}}, {"clip", 0.5}});
  b.Op("Relu", {yh}, {y});
  b.Output(y);
  return b.Build();
}

// A node oneDNN and our kernels cannot take runs through the reference fallback.
TEST(ReferenceFallback, OpaqueNodeRunsInEveryPlanAndMatchesTheReference) {
  Graph g = ClippedLstmGraph();
  auto leaves = RandomLeafValues(g, 9);
  ASSERT_TRUE(leaves.ok());
  auto want = RunReference(g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (const FusionPlan& plan : {UnfusedPlan(g), MaxFusionPlan(g), RandomLegalPlan(g, 4)}) {
    bool fallback = false;
    for (const FusionGroup& group : plan.groups) {
      if (group.kind == GroupKind::kOpaque) fallback = group.nodes.size() == 1;
    }
    EXPECT_TRUE(fallback) << "the opaque node runs alone";
    auto exec = Executor::Create(g, plan, *leaves);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    (*exec)->Run();
    bool described = false;
    for (size_t i = 0; i < (*exec)->num_groups(); ++i) {
      described |= (*exec)->DescribeGroup(i).find("reference fallback") != std::string::npos;
    }
    EXPECT_TRUE(described);
    ExpectFirstOutputMatches(**exec, g, want->at(g.outputs()[0]));
  }
}

// With a scale and bias per channel it runs on oneDNN (layer normalization per plane, then the
// affine) in every plan and matches the reference, over one image or several, 3-D to 5-D; the
// lowering and the inspect count say so.
TEST(InstanceNormKernel, RunsOnOneDnnNormalizationAndMatchesTheReference) {
  for (const Shape& dims :
       std::vector<Shape>{{1, 3, 4, 4}, {1, 32, 1000}, {2, 5, 3, 4, 6}, {3, 4, 7}}) {
    SCOPED_TRACE(ShapeString(dims));
    testing::IrBuilder b;
    TensorId x = b.Input("x", dims);
    TensorId s = b.Weight("s", {dims[1]}), bias = b.Weight("bias", {dims[1]});
    TensorId a = b.Act("a", dims), n = b.Act("n", dims), y = b.Act("y", dims);
    b.Op("Relu", {x}, {a});
    b.Op("InstanceNormalization", {a, s, bias}, {n}, {{"epsilon", 1e-3}});
    b.Op("Relu", {n}, {y});
    b.Output(y);
    Graph g = b.Build();
    ASSERT_TRUE(RunsAsInstanceNormPrimitive(g, g.node(1)));
    EXPECT_EQ(UnfusedOps(g).count("InstanceNormalization (oneDNN normalization)"), 1u);
    auto leaves = RandomLeafValues(g, 5);
    ASSERT_TRUE(leaves.ok());
    auto want = RunReference(g, *leaves);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    for (const FusionPlan& plan : {UnfusedPlan(g), MaxFusionPlan(g)}) {
      auto exec = Executor::Create(g, plan, *leaves);
      ASSERT_TRUE(exec.ok()) << exec.status().ToString();
      (*exec)->Run();
      bool described = false;
      for (size_t i = 0; i < (*exec)->num_groups(); ++i) {
        const std::string d = (*exec)->DescribeGroup(i);
        EXPECT_EQ(d.find("reference fallback"), std::string::npos) << d;
        described |= d.find("instance norm") != std::string::npos;
      }
      EXPECT_TRUE(described);
      ExpectFirstOutputMatches(**exec, g, want->at(g.outputs()[0]));
    }
  }
}

// A LayerNormalization whose Mean and InvStdDev are read, and a BatchNormalization in training
// mode, are computed by the reference interpreter only: each is opaque, runs alone through the
// fallback in every plan, and every output matches the reference (conformance: oneDNN's kernels
// gave Y alone, and the inference form of the BatchNormalization).
TEST(ReferenceFallback, NormalizationsWithStatisticOutputsRunAloneOnTheReference) {
  testing::IrBuilder b;
  TensorId x = b.Input("x", {2, 3, 4, 5});
  TensorId s = b.Weight("s", {5}), scale = b.Weight("scale", {3}), bias = b.Weight("bias", {3});
  TensorId m = b.Weight("m", {3}), v = b.Weight("v", {3});
  TensorId r = b.Act("r", {2, 3, 4, 5}), y = b.Act("y", {2, 3, 4, 5});
  TensorId mean = b.Act("mean", {2, 3, 4, 1}), inv = b.Act("inv", {2, 3, 4, 1});
  TensorId bn = b.Act("bn", {2, 3, 4, 5}), rm = b.Act("rm", {3}), rv = b.Act("rv", {3});
  TensorId out = b.Act("out", {2, 3, 4, 5});
  b.Op("Relu", {x}, {r});
  b.Op("LayerNormalization", {r, s}, {y, mean, inv});
  b.Op("BatchNormalization", {y, scale, bias, m, v}, {bn, rm, rv},
       {testing::Int("training_mode", 1)});
  b.Op("Relu", {bn}, {out});
  for (TensorId t : {out, mean, inv, rm, rv}) b.Output(t);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 3);
  ASSERT_TRUE(leaves.ok());
  auto want = RunReference(g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (const FusionPlan& plan : {UnfusedPlan(g), MaxFusionPlan(g)}) {
    for (const FusionGroup& group : plan.groups) {
      const std::string& op = g.node(group.nodes[0]).op_type;
      if (op == "LayerNormalization" || op == "BatchNormalization") {
        EXPECT_EQ(group.kind, GroupKind::kOpaque) << op;
        EXPECT_EQ(group.nodes.size(), 1u) << op;
      }
    }
    auto exec = Executor::Create(g, plan, *leaves);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    (*exec)->Run();
    for (TensorId t : g.outputs()) {
      auto got = (*exec)->Read(t);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      auto c = Compare(want->at(t), *got);
      ASSERT_TRUE(c.ok());
      EXPECT_LE(c->worst_ratio, 1.0) << g.tensor(t).name << ": " << c->ToString();
    }
  }
}

TEST(ReferenceFallback, OpWithNoImplementationFailsNamingNodeAndOp) {
  testing::IrBuilder b;
  TensorId x = b.Input("x", {4});
  TensorId y = b.Act("y", {4});
  NodeId id = b.Op("Frobnicate", {x}, {y});
  b.Output(y);
  Graph g = b.Build();
  g.mutable_node(id).domain = "com.example";
  auto leaves = RandomLeafValues(g, 1);
  ASSERT_TRUE(leaves.ok());
  auto exec = Executor::Create(g, UnfusedPlan(g), *leaves);
  ASSERT_FALSE(exec.ok());
  EXPECT_EQ(exec.status().code(), Status::Code::kUnimplemented);
  EXPECT_NE(exec.status().message().find("Frobnicate_0"), std::string::npos)
      << exec.status().message();
  EXPECT_NE(exec.status().message().find("com.example.Frobnicate"), std::string::npos)
      << exec.status().message();
}

}  // namespace
}  // namespace fusor
