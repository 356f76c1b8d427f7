// Every bundled model, run under the unfused plan (through both chain backends), the most-fused
// legal plan and several random legal plans, must match the op-by-op reference interpreter on the
// same random inputs and weights. The reference runs once per model. A small model built in memory
// covers the ops no bundled model has (ConvTranspose, Resize, Pad modes) through the real importer.
#include <gtest/gtest.h>

#include <spdlog/spdlog.h>

#include "graph/onnx_import.h"
#include "graph/plan.h"
#include "lowering/plan_legality.h"
#include "runtime/executor.h"
#include "runtime/reference.h"
#include "tests/graph/onnx_builder.h"
#include "tests/runtime/expect_plan_matches.h"

namespace fusor {
namespace {

class ModelsTest : public ::testing::TestWithParam<std::string> {};

void ExpectPlanMatches(const Graph& g, const TensorValues& leaves, const TensorValues& want,
                       const FusionPlan& plan, ChainBackend backend, const std::string& what) {
  ExecutorOptions options;
  options.chain_backend = backend;
  testing::ExpectPlanMatches(g, leaves, want, plan, what, options);
}

TEST_P(ModelsTest, EveryPlanMatchesTheReference) {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + GetParam() + ".onnx");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto leaves = RandomLeafValues(*g, 2024);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  auto want = RunReference(*g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ExpectPlanMatches(*g, *leaves, *want, UnfusedPlan(*g), ChainBackend::kFusedLoop, "unfused/loop");
  ExpectPlanMatches(*g, *leaves, *want, UnfusedPlan(*g), ChainBackend::kOneDnn, "unfused/oneDNN");
  ExpectPlanMatches(*g, *leaves, *want, MaxFusionPlan(*g), ChainBackend::kAuto, "max fusion");
  for (uint64_t seed : {1, 2, 3}) {
    ExpectPlanMatches(*g, *leaves, *want, RandomLegalPlan(*g, seed), ChainBackend::kFusedLoop,
                      "random plan " + std::to_string(seed));
  }
}

// x -> ConvTranspose (stride 2, output_padding, bias) -> Relu -> Resize (linear, scales 0.75) ->
// Pad (reflect) -> y, and Resize (nearest, sizes) -> Pad (constant_value) -> z.
std::string UpsamplingModel() {
  testing::OnnxBuilder b(13);
  b.Input("x", {1, 4, 6, 6}).Weight("w", {4, 8, 3, 3}).Weight("bias", {8});
  b.FloatConstant("scales", {1, 1, 0.75f, 0.75f}).Int64Constant("sizes", {1, 8, 5, 7});
  b.Int64Constant("pads", {0, 0, 1, 2, 0, 0, 2, 1}).FloatScalar("fill", 0.5f);
  auto& ct = b.Node("ConvTranspose", {"x", "w", "bias"}, {"ct"});
  testing::OnnxBuilder::IntsAttr(ct, "strides", {2, 2});
  testing::OnnxBuilder::IntsAttr(ct, "pads", {1, 1, 1, 1});
  testing::OnnxBuilder::IntsAttr(ct, "output_padding", {1, 1});
  b.Node("Relu", {"ct"}, {"act"});
  auto& linear = b.Node("Resize", {"act", "", "scales"}, {"small"});
  testing::OnnxBuilder::StringAttr(linear, "mode", "linear");
  auto& pad = b.Node("Pad", {"small", "pads"}, {"y"});
  testing::OnnxBuilder::StringAttr(pad, "mode", "reflect");
  auto& nearest = b.Node("Resize", {"act", "", "", "sizes"}, {"picked"});
  testing::OnnxBuilder::StringAttr(nearest, "coordinate_transformation_mode", "asymmetric");
  b.Node("Pad", {"picked", "pads", "fill"}, {"z"});
  b.Output("y").Output("z");
  return b.Serialize();
}

TEST(ImportedModel, ConvTransposeResizePadMatchTheReference) {
  auto g = ImportOnnxBytes(UpsamplingModel());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  // Resize's scales are kept as a constant (their values decide the result), not a weight.
  const Tensor& scales = g->tensor(*g->FindTensor("scales"));
  EXPECT_EQ(scales.kind, TensorKind::kConstant);
  EXPECT_EQ(scales.float_data, (std::vector<double>{1, 1, 0.75, 0.75}));
  EXPECT_EQ(g->tensor(g->outputs()[0]).dims, (Shape{1, 8, 12, 12}));
  auto leaves = RandomLeafValues(*g, 7);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  auto want = RunReference(*g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ExpectPlanMatches(*g, *leaves, *want, UnfusedPlan(*g), ChainBackend::kFusedLoop, "unfused");
  FusionPlan max = MaxFusionPlan(*g);
  EXPECT_LT(max.groups.size(), g->num_nodes());
  ExpectPlanMatches(*g, *leaves, *want, max, ChainBackend::kAuto, "max fusion");
}

// mobilenet_v3_small and googlenet: outputs a plain-writing group stores blocked or channels-last
// (the layout adapter's kBlockedOut), a flat Add of inputs in two forms, one-pixel convs reading
// and writing in place (SameBytes).
INSTANTIATE_TEST_SUITE_P(Bundled, ModelsTest,
                         ::testing::Values("resnet18", "mobilenet_v2", "squeezenet1_1",
                                           "efficientnet_b0", "bert_base_encoder",
                                           "mobilenet_v3_small", "googlenet"));

}  // namespace
}  // namespace fusor
