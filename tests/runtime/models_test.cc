// Every bundled model, run under the unfused plan (through both chain backends), the most-fused
// legal plan and several random legal plans, must match the op-by-op reference interpreter on the
// same random inputs and weights. The reference runs once per model.
#include <gtest/gtest.h>

#include <spdlog/spdlog.h>

#include "graph/onnx_import.h"
#include "graph/plan.h"
#include "runtime/executor.h"
#include "runtime/reference.h"

namespace fusor {
namespace {

class ModelsTest : public ::testing::TestWithParam<std::string> {};

void ExpectPlanMatches(const Graph& g, const TensorValues& leaves, const TensorValues& want,
                       const FusionPlan& plan, ChainBackend backend, const std::string& what) {
  ExecutorOptions options;
  options.chain_backend = backend;
  auto exec = Executor::Create(g, plan, leaves, options);
  ASSERT_TRUE(exec.ok()) << what << ": " << exec.status().ToString();
  (*exec)->Run();
  for (const auto& [t, value] : want) {
    auto got = (*exec)->Read(t);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    auto c = Compare(value, *got);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_LE(c->worst_ratio, 1.0)
        << what << " output '" << g.tensor(t).name << "': " << c->ToString();
  }
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

INSTANTIATE_TEST_SUITE_P(Bundled, ModelsTest,
                         ::testing::Values("resnet18", "mobilenet_v2", "squeezenet1_1",
                                           "efficientnet_b0", "bert_base_encoder"));

}  // namespace
}  // namespace fusor
