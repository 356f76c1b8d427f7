// Plans returned by every search algorithm run through the real runtime and give the reference
// interpreter's outputs (random inputs and weights; the graphs carry dims only).
#include <gtest/gtest.h>

#include "graph/onnx_import.h"
#include "runtime/executor.h"
#include "runtime/reference.h"
#include "search/plan_search.h"
#include "tests/runtime/expect_plan_matches.h"

namespace fusor {
namespace {

class SearchedPlansRun : public ::testing::TestWithParam<std::string> {};

TEST_P(SearchedPlansRun, EveryAlgorithmsPlanMatchesTheReference) {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + GetParam() + ".onnx");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto leaves = RandomLeafValues(*g, 7);
  ASSERT_TRUE(leaves.ok());
  auto want = RunReference(*g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  HardwareProfile cheap_broadcast;  // Makes recompute attractive, so recomputed plans run too.
  cheap_broadcast.indexed_gelems.value = 50;
  for (const HardwareProfile& profile : {HardwareProfile{}, cheap_broadcast}) {
    AnalyticalCostModel model(profile);
    for (auto a : {SearchAlgorithm::kRules, SearchAlgorithm::kGreedy, SearchAlgorithm::kDefault}) {
      SearchOptions o;
      o.algorithm = a;
      auto r = SearchPlan(*g, model, o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      testing::ExpectPlanMatches(*g, *leaves, *want, r->plan, std::string(AlgorithmName(a)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SearchedPlansRun,
                         ::testing::Values("squeezenet1_1", "mobilenet_v2", "efficientnet_b0",
                                           "resnet18"));

}  // namespace
}  // namespace fusor
