// `fusor plan explain`'s report (client/plan_explain.h) on bundled models: every group's named
// terms add up to its predicted time, in the data and in the printed table, and conv and matmul
// groups show their compute.
#include "client/plan_explain.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "graph/onnx_import.h"
#include "runtime/constant_evaluator.h"
#include "runtime/onednn_info.h"
#include "search/plan_search.h"

namespace fusor {
namespace {

HardwareProfile ThisCpu() {
  HardwareProfile p;
  auto target = DetectTarget(OneDnnIsa(), OneDnnVersion());
  EXPECT_TRUE(target.ok()) << target.status().ToString();
  if (target.ok()) p.target = *target;
  return p;
}

double SumOfTerms(const CostTerms& t) {
  double sum = 0;
  for (const NamedTerm& term : NamedTerms(t)) sum += term.ns;
  return sum;
}

// The numbers of each group row of the table: time, then the terms.
std::vector<std::vector<double>> TableRows(const std::string& table) {
  std::vector<std::vector<double>> rows;
  std::istringstream in(table);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    int group;
    std::string kind, bar;
    double time;
    if (!(fields >> group >> kind >> time >> bar) || bar != "|") continue;
    std::vector<double> row = {time};
    double v;
    while (fields >> v) row.push_back(v);
    rows.push_back(row);
  }
  return rows;
}

class PlanExplain : public ::testing::TestWithParam<std::string> {};

TEST_P(PlanExplain, TermsAddUpToEachGroupsTimeAndAnchorsShowTheirCompute) {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + GetParam() + ".onnx",
                          WithConstantFolding({}));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  AnalyticalCostModel model(ThisCpu());
  auto searched = SearchPlan(*g, model, {.algorithm = SearchAlgorithm::kGreedy});
  ASSERT_TRUE(searched.ok()) << searched.status().ToString();
  std::vector<ExplainedGroup> groups = ExplainPlan(*g, searched->plan, model);
  ASSERT_EQ(groups.size(), searched->plan.groups.size());

  int anchors = 0, fused = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const ExplainedGroup& e = groups[i];
    EXPECT_NEAR(SumOfTerms(e.fused), e.fused.total_ns, 1e-6 * e.fused.total_ns + 1e-9)
        << "group " << i << " " << e.ops;
    EXPECT_DOUBLE_EQ(e.fused.total_ns, searched->cost.groups[i].total_ns) << "group " << i;
    if (e.kind == "anchor") {
      ++anchors;
      EXPECT_GT(e.fused.flops_ns, 0) << "group " << i << " " << e.ops << " shows no compute";
    }
    if (e.alone) {
      ++fused;
      EXPECT_NEAR(SumOfTerms(*e.alone), e.alone->total_ns, 1e-6 * e.alone->total_ns + 1e-9);
      EXPECT_FALSE(e.decided.empty());
    }
  }
  EXPECT_GT(anchors, 0);
  EXPECT_GT(fused, 0);

  // The printed table: each row's terms add up to its time, to the rounding of 0.01 us a column.
  std::vector<std::vector<double>> rows = TableRows(ExplainTable(groups, false));
  ASSERT_EQ(rows.size(), groups.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 1 + NamedTerms(CostTerms{}).size()) << "row " << i;
    double sum = 0;
    for (size_t k = 1; k < rows[i].size(); ++k) sum += rows[i][k];
    EXPECT_NEAR(sum, rows[i][0], 0.005 * rows[i].size()) << "row " << i;
  }
  nlohmann::json j = ExplainJson(groups);
  ASSERT_EQ(j["groups"].size(), groups.size());
  EXPECT_DOUBLE_EQ(j["groups"][0]["terms_ns"]["compute"].get<double>(), groups[0].fused.flops_ns);
}

INSTANTIATE_TEST_SUITE_P(BundledModels, PlanExplain,
                         ::testing::Values("squeezenet1_1", "resnet18", "bert_base_encoder"));

// An opaque node's group says how it runs, and so how it is priced: the GRU tagger's two GRUs on
// our recurrence loop (priced step by step), audio_encoder's InstanceNormalization on oneDNN's
// normalization (priced as its two primitives).
TEST(PlanExplain, OpaqueGroupsNameTheirKernel) {
  AnalyticalCostModel model(ThisCpu());
  for (const auto& [name, want] :
       {std::pair<std::string, std::string>{"gru_tagger", "GRU (recurrence loop)"},
        {"audio_encoder", "InstanceNormalization (oneDNN normalization)"}}) {
    auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + name + ".onnx",
                            WithConstantFolding({}));
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    auto searched = SearchPlan(*g, model, {.algorithm = SearchAlgorithm::kRules});
    ASSERT_TRUE(searched.ok()) << searched.status().ToString();
    int named = 0;
    for (const ExplainedGroup& e : ExplainPlan(*g, searched->plan, model)) {
      if (e.kind == "opaque") {
        EXPECT_EQ(e.ops, want) << name;
      }
      named += e.ops == want;
    }
    EXPECT_GT(named, 0) << name;
  }
}

}  // namespace
}  // namespace fusor
