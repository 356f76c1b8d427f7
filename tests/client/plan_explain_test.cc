// `fusor plan explain`'s report (client/plan_explain.h) on bundled models: every group's named
// terms add up to its predicted time, in the data and in the printed table, and conv and matmul
// groups show their compute.
#include "client/plan_explain.h"
#include "client/text_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include <spdlog/fmt/fmt.h>

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

void ExpectEveryLineFits(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) EXPECT_LE(line.size(), kTextColumns) << line;
}

// The named terms a default column adds up.
double ColumnSum(const CostTerms& t, std::string_view column) {
  double sum = 0;
  for (const TermColumn& c : TermColumns()) {
    if (c.name != column) continue;
    for (const NamedTerm& term : NamedTerms(t)) {
      sum += std::count(c.terms.begin(), c.terms.end(), term.name) ? term.ns : 0;
    }
  }
  return sum;
}

// `plan show` prints compute, memory and launch from the plan and "other" as the rest, naming
// the rest by TermColumns: each named term belongs to exactly one column.
TEST(PlanExplain, EveryNamedTermIsInExactlyOneDefaultColumn) {
  for (const NamedTerm& term : NamedTerms(CostTerms{})) {
    int in = 0;
    for (const TermColumn& c : TermColumns()) {
      in += static_cast<int>(std::count(c.terms.begin(), c.terms.end(), term.name));
    }
    EXPECT_EQ(in, 1) << term.name;
  }
  EXPECT_EQ(OtherColumnText(), "other = overlap (negative) + spill + reorder + learned");
}

class PlanExplain : public ::testing::TestWithParam<std::string> {};

TEST_P(PlanExplain, TermsAddUpToEachGroupsTimeAndAnchorsShowTheirCompute) {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + GetParam() + ".onnx",
                          WithConstantFolding({}));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  AnalyticalCostModel model(ThisCpu());
  auto searched = SearchPlan(*g, model, {.algorithm = SearchAlgorithm::kGreedy});
  ASSERT_TRUE(searched.ok()) << searched.status().ToString();
  const ExplainedPlan explained = ExplainPlan(*g, searched->plan, model);
  const std::vector<ExplainedGroup>& groups = explained.groups;
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

  // The printed tables: each row's terms add up to its time, to the rounding of 0.01 us a column;
  // without --wide in the TermColumns and in kTextColumns, with it every named term.
  for (bool wide : {false, true}) {
    const std::string table = ExplainTable(explained, false, wide);
    std::vector<std::vector<double>> rows = TableRows(table);
    ASSERT_EQ(rows.size(), groups.size());
    const size_t columns = wide ? NamedTerms(CostTerms{}).size() : TermColumns().size();
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_EQ(rows[i].size(), 1 + columns) << "row " << i << " wide " << wide;
      double sum = 0;
      for (size_t k = 1; k < rows[i].size(); ++k) sum += rows[i][k];
      EXPECT_NEAR(sum, rows[i][0], 0.005 * rows[i].size()) << "row " << i << " wide " << wide;
    }
    if (!wide) ExpectEveryLineFits(table);
  }
  // The default columns are the cost model's own sums, as `plan show` prints them from the plan.
  for (const ExplainedGroup& e : groups) {
    EXPECT_NEAR(ColumnSum(e.fused, "compute"), e.fused.compute_ns, 1e-6 * e.fused.total_ns + 1e-9);
    EXPECT_NEAR(ColumnSum(e.fused, "memory"), e.fused.memory_ns, 1e-6 * e.fused.total_ns + 1e-9);
    EXPECT_NEAR(ColumnSum(e.fused, "launch"), e.fused.launch_ns, 1e-9);
  }
  nlohmann::json j = ExplainJson(explained);
  ASSERT_EQ(j["groups"].size(), groups.size());
  EXPECT_DOUBLE_EQ(j["groups"][0]["terms_ns"]["compute"].get<double>(), groups[0].fused.flops_ns);
}

// The plan's total is its groups' times plus what the plan adds (CostModel::WholePlan): ResNet-18's
// weights, read once an inference, come back colder than alone, so with fitted constants it adds
// time, and the table and the JSON say how much.
TEST(PlanExplain, TheTotalIsTheGroupsPlusWhatThePlanAdds) {
  auto g =
      ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/resnet18.onnx", WithConstantFolding({}));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  HardwareProfile profile = ThisCpu();
  profile.in_plan.ns_per_byte = {0.05, 0.01, 0.03};
  profile.in_plan.samples = 18;
  AnalyticalCostModel model(profile);
  auto searched = SearchPlan(*g, model, {.algorithm = SearchAlgorithm::kRules});
  ASSERT_TRUE(searched.ok()) << searched.status().ToString();
  const ExplainedPlan explained = ExplainPlan(*g, searched->plan, model);
  double groups = 0;
  for (const ExplainedGroup& e : explained.groups) groups += e.fused.total_ns;
  EXPECT_GT(explained.in_plan_ns, 0);
  EXPECT_DOUBLE_EQ(explained.total_ns, groups + explained.in_plan_ns);
  const nlohmann::json j = ExplainJson(explained);
  EXPECT_DOUBLE_EQ(j["total_ns"].get<double>(), explained.total_ns);
  EXPECT_DOUBLE_EQ(j["groups_ns"].get<double>(), groups);
  EXPECT_DOUBLE_EQ(j["in_plan_ns"].get<double>(), explained.in_plan_ns);
  const std::string table = ExplainTable(explained, true);
  EXPECT_NE(table.find(fmt::format("total {:.2f} us = {} groups {:.2f} us + in-plan {:.2f} us",
                                   explained.total_ns / 1e3, explained.groups.size(), groups / 1e3,
                                   explained.in_plan_ns / 1e3)),
            std::string::npos)
      << table;
  ExpectEveryLineFits(table);
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
    for (const ExplainedGroup& e : ExplainPlan(*g, searched->plan, model).groups) {
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
