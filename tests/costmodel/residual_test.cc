#include "costmodel/residual.h"

#include <gtest/gtest.h>

#include <cmath>

#include "graph/onnx_import.h"
#include "lowering/plan_legality.h"

namespace fusor {
namespace {

Graph Import(const std::string& name) {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + name + ".onnx");
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : Graph();
}

// Every group of a plan as a plan of its own, "measured" at the analytical prediction times
// `truth(group)`: what a residual should learn back.
std::vector<ResidualSample> Samples(const AnalyticalCostModel& base, const Graph& g,
                                    const FusionPlan& plan,
                                    const std::function<double(const FusionGroup&)>& truth) {
  std::vector<ResidualSample> out;
  for (const FusionGroup& group : plan.groups) {
    FusionPlan one{{group}};
    Graph region = g.ExtractRegion(group.nodes);
    FusionGroup whole = group;
    whole.nodes.clear();
    for (NodeId id = 0; id < static_cast<NodeId>(region.num_nodes()); ++id)
      whole.nodes.push_back(id);
    whole.recomputed.clear();
    FusionPlan p{{whole}};
    double predicted = base.Cost(region, p).total.total_ns;
    out.push_back(ResidualSampleOf(base, region, p, predicted * truth(group)));
  }
  return out;
}

TEST(FitResidual, LearnsBackAFactorThatDependsOnTheGroupsKind) {
  Graph g = Import("resnet18");
  AnalyticalCostModel base{HardwareProfile{}};
  auto truth = [](const FusionGroup& group) {
    return group.kind == GroupKind::kAnchor ? 1.5 : 0.8;
  };
  std::vector<ResidualSample> samples = Samples(base, g, MaxFusionPlan(g), truth);
  for (auto& s : Samples(base, g, UnfusedPlan(g), truth)) samples.push_back(std::move(s));
  ASSERT_GT(samples.size(), 20u);
  auto fitted = FitResidual(samples, {.ridge = 1e-4});
  ASSERT_TRUE(fitted.ok()) << fitted.status().ToString();
  EXPECT_EQ(fitted->training_samples, static_cast<int>(samples.size()));
  EXPECT_GT(fitted->train_rms_log_error_before, 0.2);
  EXPECT_LT(fitted->train_rms_log_error_after, 0.02);
  for (const ResidualSample& s : samples) {
    EXPECT_NEAR(fitted->Factor(s.x[0]) * s.predicted_ns[0] / s.measured_ns, 1.0, 0.05);
  }
}

TEST(FitResidual, AGroupKindTheTrainingLacksKeepsTheAnalyticalTimeTimesTheBias) {
  Graph g = Import("resnet18");
  AnalyticalCostModel base{HardwareProfile{}};
  std::vector<ResidualSample> anchors;
  for (auto& s : Samples(base, g, MaxFusionPlan(g), [](const FusionGroup&) { return 1.0; })) {
    anchors.push_back(std::move(s));
  }
  auto fitted = FitResidual(anchors);
  ASSERT_TRUE(fitted.ok());
  ResidualFeatureVector x{};
  x[0] = 1;
  EXPECT_NEAR(fitted->Factor(x), 1.0, 0.02);
}

TEST(ResidualModel, FactorIsClampedToAThirdAndThreeTimes) {
  ResidualModel r;
  r.weights.assign(kResidualFeatures, 0);
  ResidualFeatureVector x{};
  x[0] = 1;
  r.weights[0] = 10;
  EXPECT_NEAR(r.Factor(x), 3.0, 1e-3);
  r.weights[0] = -10;
  EXPECT_NEAR(r.Factor(x), 1 / 3.0, 1e-3);
  EXPECT_EQ(ResidualModel{}.Factor(x), 1.0);
}

TEST(FitResidual, RefusesNoSamplesAndSamplesWithoutATime) {
  EXPECT_FALSE(FitResidual({}).ok());
  ResidualSample s;
  s.model = "m";
  s.predicted_ns = {1};
  s.x = {ResidualFeatureVector{}};
  auto r = FitResidual({s});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'m'"), std::string::npos) << r.status().ToString();
}

TEST(ResidualJson, RoundTripsAndNamesWhatIsWrong) {
  ResidualModel r;
  for (int j = 0; j < kResidualFeatures; ++j) r.weights.push_back(0.01 * j);
  r.training_samples = 42;
  nlohmann::json j = ResidualToJson(r);
  auto back = ResidualFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->weights, r.weights);
  EXPECT_EQ(back->training_samples, 42);

  nlohmann::json unknown = j;
  unknown["weights"]["flops_gpu"] = 1;
  auto bad = ResidualFromJson(unknown);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("flops_gpu"), std::string::npos);
  nlohmann::json missing = j;
  missing["weights"].erase("serial");
  bad = ResidualFromJson(missing);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("serial"), std::string::npos);
}

TEST(ResidualSampleJson, RoundTripsExactlyAndRefusesAGroupOfAnotherLayout) {
  Graph g = Import("squeezenet1_1");
  AnalyticalCostModel base(HardwareProfile{});
  ResidualSample s = ResidualSampleOf(base, g, MaxFusionPlan(g), 1.5e6);
  ASSERT_GT(s.x.size(), 1u);
  // Through text, as the tuning database keeps it.
  auto back = ResidualSampleFromJson(nlohmann::json::parse(ResidualSampleToJson(s).dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->measured_ns, s.measured_ns);
  EXPECT_EQ(back->predicted_ns, s.predicted_ns);
  EXPECT_EQ(back->x, s.x);
  EXPECT_EQ(back->model, s.model);

  nlohmann::json shorter = ResidualSampleToJson(s);
  shorter["groups"][1].erase(shorter["groups"][1].size() - 1);
  auto bad = ResidualSampleFromJson(shorter);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("group 1"), std::string::npos) << bad.status().message();
  nlohmann::json no_time = ResidualSampleToJson(s);
  no_time.erase("measured_ns");
  EXPECT_FALSE(ResidualSampleFromJson(no_time).ok());
}

TEST(ResidualFeaturesVersion, NamesTheCountAndIsStable) {
  const std::string& v = ResidualFeaturesVersion();
  EXPECT_EQ(v.rfind("f" + std::to_string(kResidualFeatures) + "-", 0), 0u) << v;
  EXPECT_EQ(v.size(), 4u + 12u) << v;
  EXPECT_EQ(v, ResidualFeaturesVersion());
}

TEST(CorrectedCostModel, TheCorrectionIsItsOwnTermAndTheTermsStillAddUp) {
  Graph g = Import("squeezenet1_1");
  HardwareProfile profile;
  ResidualModel r;
  r.weights.assign(kResidualFeatures, 0);
  r.weights[0] = std::log(1.25);
  CorrectedCostModel corrected(profile, r);
  AnalyticalCostModel base(profile);
  FusionPlan plan = MaxFusionPlan(g);
  PlanCost a = base.Cost(g, plan), c = corrected.Cost(g, plan);
  EXPECT_NEAR(c.total.total_ns, 1.25 * a.total.total_ns, 1e-6 * a.total.total_ns);
  EXPECT_NEAR(c.total.learned_ns, 0.25 * a.total.total_ns, 1e-6 * a.total.total_ns);
  EXPECT_EQ(a.total.learned_ns, 0);
  double sum = 0;
  for (const NamedTerm& t : NamedTerms(c.total)) sum += t.ns;
  EXPECT_NEAR(sum, c.total.total_ns, 1e-6 * c.total.total_ns);
}

}  // namespace
}  // namespace fusor
