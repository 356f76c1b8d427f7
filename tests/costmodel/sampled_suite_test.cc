#include "costmodel/sampled_suite.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "graph/canonical.h"
#include "graph/onnx_import.h"
#include "lowering/plan_legality.h"

namespace fusor {
namespace {

std::vector<Graph> Models() {
  std::vector<Graph> out;
  for (const char* name : {"resnet18", "squeezenet1_1", "efficientnet_b0"}) {
    auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + name + ".onnx");
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    if (g.ok()) out.push_back(std::move(*g));
  }
  return out;
}

std::vector<const Graph*> Pointers(const std::vector<Graph>& graphs) {
  std::vector<const Graph*> out;
  for (const Graph& g : graphs) out.push_back(&g);
  return out;
}

TEST(SampledCalibrationSuite, DistinctLegalOneGroupBenchmarksOfManyKinds) {
  std::vector<Graph> graphs = Models();
  auto suite = SampledCalibrationSuite(Pointers(graphs), {.count = 24, .max_ops = 6, .seed = 1});
  ASSERT_EQ(suite.size(), 24u);
  std::set<std::string> hashes, kinds;
  for (const CalibrationBenchmark& b : suite) {
    ASSERT_EQ(b.plan.groups.size(), 1u) << b.name;
    EXPECT_TRUE(CheckPlan(b.graph, b.plan).ok()) << b.name;
    EXPECT_LE(b.graph.num_nodes(), 6u) << b.name;
    EXPECT_TRUE(hashes.insert(CanonicalHash(b.graph)).second) << "drawn twice: " << b.name;
    kinds.insert(GroupKindLabel(b.graph, b.plan.groups[0]));
  }
  EXPECT_GE(kinds.size(), 5u) << ::testing::PrintToString(kinds);
  EXPECT_TRUE(kinds.count("anchor:Conv"));
}

TEST(SampledCalibrationSuite, TheSeedDecidesWhichGroupsAreDrawn) {
  std::vector<Graph> graphs = Models();
  auto names = [&](uint64_t seed) {
    std::vector<std::string> out;
    for (const auto& b : SampledCalibrationSuite(Pointers(graphs), {.count = 16, .seed = seed}))
      out.push_back(b.name);
    return out;
  };
  EXPECT_EQ(names(3), names(3));
  EXPECT_NE(names(3), names(4));
}

TEST(SampledCalibrationSuite, DrawsOnlyFromTheModelsItIsGiven) {
  std::vector<Graph> graphs = Models();
  for (const auto& b : SampledCalibrationSuite({&graphs[1]}, {.count = 12})) {
    EXPECT_EQ(b.name.rfind("sampled:squeezenet1_1:", 0), 0u) << b.name;
  }
}

}  // namespace
}  // namespace fusor
