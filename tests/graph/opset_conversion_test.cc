// Models at opsets outside 11-17 import: older ones through libonnx's version converter, newer
// ones op by op (graph/opset_conversion.h); what cannot be converted is refused naming the node,
// the op and the opset.
#include "graph/opset_conversion.h"

#include <gtest/gtest.h>

#include "graph/node_attrs.h"
#include "graph/onnx_import.h"
#include "tests/graph/onnx_builder.h"

namespace fusor {
namespace {

using testing::OnnxBuilder;

const Node* FindOp(const Graph& g, const std::string& op) {
  for (const Node& n : g.nodes()) {
    if (n.op_type == op) return &n;
  }
  return nullptr;
}

// Opset 9's Upsample became Resize (opset 10-11) with its scales as an input.
TEST(OpsetConversion, OpsetNineUpsampleImportsAsResize) {
  OnnxBuilder b(9);
  b.Input("x", {1, 1, 2, 2}).FloatConstant("scales", {1, 1, 2, 2}).Output("y");
  b.Node("Upsample", {"x", "scales"}, {"u"});
  b.Node("Relu", {"u"}, {"y"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->opset, kMinOpset);
  const Node* resize = FindOp(*g, "Resize");
  ASSERT_NE(resize, nullptr);
  EXPECT_EQ(g->tensor(resize->outputs[0]).dims, (Shape{1, 1, 4, 4}));
}

// Opset 6's Add broadcasts only with broadcast=1 and an axis; the converter needs the shapes of
// the values it rewrites, which the conversion infers first.
TEST(OpsetConversion, OpsetSixBroadcastAddBetweenNodesImports) {
  OnnxBuilder b(6);
  b.Input("x", {2, 3}).Input("z", {3}).Output("y");
  b.Node("Relu", {"x"}, {"r"});
  auto& add = b.Node("Add", {"r", "z"}, {"y"});
  OnnxBuilder::IntAttr(add, "broadcast", 1);
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const Node* sum = FindOp(*g, "Add");
  ASSERT_NE(sum, nullptr);
  EXPECT_TRUE(sum->attributes.empty()) << "broadcast is implicit from opset 7";
  EXPECT_EQ(g->tensor(sum->outputs[0]).dims, (Shape{2, 3}));
}

// Opset 18 moved ReduceMean's axes to an input and added Split's num_outputs; both go back to
// opset 17's form.
TEST(OpsetConversion, OpsetEighteenReduceAxesInputBecomesTheAttribute) {
  OnnxBuilder b(18);
  b.Input("x", {2, 4, 6}).Int64Constant("axes", {1}).Output("y").Output("p").Output("q");
  auto& mean = b.Node("ReduceMean", {"x", "axes"}, {"y"});
  OnnxBuilder::IntAttr(mean, "keepdims", 0);
  auto& split = b.Node("Split", {"x"}, {"p", "q"});
  OnnxBuilder::IntAttr(split, "axis", 2);
  OnnxBuilder::IntAttr(split, "num_outputs", 2);
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->opset, kMaxOpset);
  const Node* reduce = FindOp(*g, "ReduceMean");
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->inputs.size(), 1u);
  EXPECT_EQ(reduce->GetInts("axes"), (std::vector<int64_t>{1}));
  EXPECT_EQ(g->tensor(reduce->outputs[0]).dims, (Shape{2, 6}));
  const Node* parts = FindOp(*g, "Split");
  ASSERT_NE(parts, nullptr);
  EXPECT_EQ(g->tensor(parts->outputs[1]).dims, (Shape{2, 4, 3}));
}

// No axes and noop_with_empty_axes 1: the input unchanged.
TEST(OpsetConversion, OpsetEighteenReduceWithNoAxesAndNoopIsRemoved) {
  OnnxBuilder b(18);
  b.Input("x", {2, 4}).Output("y");
  auto& max = b.Node("ReduceMax", {"x"}, {"m"});
  OnnxBuilder::IntAttr(max, "noop_with_empty_axes", 1);
  b.Node("Relu", {"m"}, {"y"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(g->node(0).op_type, "Relu");
  EXPECT_EQ(g->tensor(g->node(0).inputs[0]).name, "x");
}

// libonnx's converter crashed on a graph output that no node writes (found by the fuzz replay
// with an opset 6 seed); the import refuses such a model before converting it.
TEST(OpsetConversion, OldModelWithAnOutputNoNodeWritesIsRefusedNotACrash) {
  OnnxBuilder b(6);
  b.Input("x", {4}).Output("y");
  b.Node("Relu", {"x"}, {"r"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("graph output 'y' is not computed by any node"),
            std::string::npos)
      << g.status().message();
}

void ExpectRefused(const std::string& model, const std::vector<std::string>& named) {
  auto g = ImportOnnxBytes(model);
  ASSERT_FALSE(g.ok());
  for (const std::string& s : named) {
    EXPECT_NE(g.status().message().find(s), std::string::npos)
        << "'" << s << "' not in: " << g.status().message();
  }
}

TEST(OpsetConversion, WhatOpsetSeventeenCannotExpressIsRefusedByNodeOpAndOpset) {
  {
    OnnxBuilder b(18);
    b.Input("x", {2, 4}).Output("y");
    b.Node("Mish", {"x"}, {"y"}).set_name("act");
    ExpectRefused(b.Serialize(), {"opset 18", "'act' (Mish)", "not in opset 17"});
  }
  {
    OnnxBuilder b(18);
    b.Input("x", {2, 4}).Input("axes", {1}, "", onnx::TensorProto::INT64).Output("y");
    b.Node("ReduceL2", {"x", "axes"}, {"y"}).set_name("norm");
    ExpectRefused(b.Serialize(), {"opset 18", "'norm' (ReduceL2)", "axes input 'axes'"});
  }
  {
    OnnxBuilder b(19);
    b.Input("x", {1, 1, 4, 4}).Output("y");
    auto& pool = b.Node("AveragePool", {"x"}, {"y"});
    OnnxBuilder::IntsAttr(pool, "kernel_shape", {2, 2});
    OnnxBuilder::IntsAttr(pool, "dilations", {2, 2});
    ExpectRefused(b.Serialize(), {"opset 19", "(AveragePool)", "dilations"});
  }
  {
    OnnxBuilder b(kNewestKnownOpset + 1);
    b.Input("x", {4}).Output("y");
    b.Node("Relu", {"x"}, {"y"});
    ExpectRefused(b.Serialize(), {"opset " + std::to_string(kNewestKnownOpset + 1), "newer"});
  }
}

}  // namespace
}  // namespace fusor
