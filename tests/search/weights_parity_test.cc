// Models with their own weights (bundled models filled by tools/fill_weights.py at test time) give
// the reference interpreter's outputs under the unfused plan and under searched plans (rules,
// greedy, default). Tolerance: Compare's default, |got - want| <= 1e-4 * max|want| + 1e-3 * |want|
// for every element. `bench/weights_parity` runs every shared model the same way.
#include <gtest/gtest.h>

#include "graph/canonical.h"
#include "graph/onnx_import.h"
#include "runtime/executor.h"
#include "runtime/model_weights.h"
#include "runtime/reference.h"
#include "search/plan_search.h"
#include "tests/runtime/expect_plan_matches.h"

namespace fusor {
namespace {

class WeightsParity : public ::testing::TestWithParam<std::string> {};

TEST_P(WeightsParity, UnfusedAndSearchedPlansGiveTheReferenceOutputs) {
  auto m = ImportOnnxFileWithWeights(std::string(FUSOR_FILLED_DIR) + "/" + GetParam() + ".onnx");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  // The same graph as the stripped model's: a plan tuned on dims only applies to it.
  auto stripped = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + GetParam() + ".onnx");
  ASSERT_TRUE(stripped.ok()) << stripped.status().ToString();
  EXPECT_EQ(CanonicalHash(m->graph), CanonicalHash(*stripped));
  Graph g = m->graph;
  auto leaves = ModelLeafValues(g, std::move(m->weights), 3);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  auto want = RunReference(g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  testing::ExpectPlanMatches(g, *leaves, *want, UnfusedPlan(g), "unfused");
  AnalyticalCostModel model{HardwareProfile{}};
  for (auto a : {SearchAlgorithm::kRules, SearchAlgorithm::kGreedy, SearchAlgorithm::kDefault}) {
    SearchOptions o;
    o.algorithm = a;
    auto r = SearchPlan(g, model, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    testing::ExpectPlanMatches(g, *leaves, *want, r->plan, std::string(AlgorithmName(a)));
  }
}

INSTANTIATE_TEST_SUITE_P(Filled, WeightsParity, ::testing::Values("squeezenet1_1", "mobilenet_v2"));

}  // namespace
}  // namespace fusor
