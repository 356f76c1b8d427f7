// Models with their own weights (bundled models filled by tools/fill_weights.py at test time) give
// the reference interpreter's outputs under the unfused plan and under searched plans (rules,
// greedy, default). Tolerance: Compare's default, |got - want| <= 1e-4 * max|want| + 1e-3 * |want|
// for every element. `bench/peer_bench` runs every shared model the same way. A parity check
// only sees a network's body when its outputs depend on its input, so each model's outputs for two
// inputs must differ: with the filled weights on every bundled CNN (FUSOR_CNN_MODELS), and with
// the runtime's seeded ones (`fusor run` without --weights, RandomLeafValues) on the models above.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "graph/canonical.h"
#include "graph/onnx_import.h"
#include "runtime/executor.h"
#include "runtime/model_weights.h"
#include "runtime/reference.h"
#include "search/plan_search.h"
#include "tests/runtime/expect_plan_matches.h"

namespace fusor {
namespace {

std::string FilledModel(const std::string& name) {
  return std::string(FUSOR_FILLED_DIR) + "/" + name + ".onnx";
}

// The outputs of `g` on `leaves` under the rules plan, run by the real runtime (oneDNN).
StatusOr<TensorValues> RunOutputs(const Graph& g, const TensorValues& leaves) {
  FUSOR_ASSIGN_OR_RETURN(
      auto exec, Executor::Create(g, RulesPlan(g, SearchOptions{}.max_group_nodes), leaves));
  exec->Run();
  return exec->ReadOutputs();
}

// `leaves` with every graph input taken from RandomLeafValues under `seed`, weights untouched.
StatusOr<TensorValues> WithInputsOfSeed(const Graph& g, TensorValues leaves, uint64_t seed) {
  FUSOR_ASSIGN_OR_RETURN(TensorValues inputs, RandomLeafValues(g, seed, /*weights=*/false));
  for (TensorId t : g.inputs()) leaves[t] = inputs.at(t);
  return leaves;
}

void ExpectOutputsDependOnTheInput(const Graph& g, const TensorValues& leaves) {
  auto other = WithInputsOfSeed(g, leaves, 7);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  auto a = RunOutputs(g, leaves);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = RunOutputs(g, *other);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  double difference = RelativeDifference(*a, *b);
  EXPECT_GT(difference, kMinInputSensitivity)
      << g.model_name << ": two inputs give outputs differing by " << difference
      << " relative; the weights wash the input out";
  std::printf("%s: outputs of two inputs differ by %.3g relative\n", g.model_name.c_str(),
              difference);
}

class WeightsParity : public ::testing::TestWithParam<std::string> {};

TEST_P(WeightsParity, UnfusedAndSearchedPlansGiveTheReferenceOutputs) {
  auto m = ImportOnnxFileWithWeights(FilledModel(GetParam()));
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

TEST_P(WeightsParity, TwoInputsGiveDifferentOutputsWithTheRuntimesSeededWeights) {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + GetParam() + ".onnx");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto leaves = RandomLeafValues(*g, 3);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  ExpectOutputsDependOnTheInput(*g, *leaves);
}

INSTANTIATE_TEST_SUITE_P(Filled, WeightsParity,
                         ::testing::Values("squeezenet1_1", "mobilenet_v2", "efficientnet_b0"));

// The bundled CNNs, as tests/search/CMakeLists.txt lists (and fills) them, comma-separated.
std::vector<std::string> CnnModels() {
  std::vector<std::string> names;
  std::stringstream list(FUSOR_CNN_MODELS);
  for (std::string name; std::getline(list, name, ',');) names.push_back(name);
  return names;
}

class FilledCnn : public ::testing::TestWithParam<std::string> {};

TEST_P(FilledCnn, TwoInputsGiveDifferentOutputsWithTheFilledWeights) {
  auto m = ImportOnnxFileWithWeights(FilledModel(GetParam()));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto leaves = ModelLeafValues(m->graph, std::move(m->weights), 3);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  ExpectOutputsDependOnTheInput(m->graph, *leaves);
}

INSTANTIATE_TEST_SUITE_P(Bundled, FilledCnn, ::testing::ValuesIn(CnnModels()));

}  // namespace
}  // namespace fusor
