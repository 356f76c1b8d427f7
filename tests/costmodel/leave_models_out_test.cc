#include "costmodel/leave_models_out.h"

#include <gtest/gtest.h>

#include "graph/onnx_import.h"
#include "lowering/plan_legality.h"

namespace fusor {
namespace {

TEST(ModelFamily, NearCopiesShareOne) {
  EXPECT_EQ(ModelFamily("resnet18"), ModelFamily("resnet18_dynamic_batch"));
  EXPECT_EQ(ModelFamily("efficientnet_b0"), ModelFamily("efficientnet_v2_s"));
  EXPECT_NE(ModelFamily("resnet18"), ModelFamily("resnext50_32x4d"));
  EXPECT_EQ(ModelFamily("alexnet"), "alexnet");
}

TEST(AssignFolds, EveryFoldHoldsWholeFamiliesAndNoneIsEmpty) {
  std::vector<std::string> models = {"resnet18",        "resnet18_dynamic_batch", "alexnet",
                                     "efficientnet_b0", "efficientnet_v2_s",      "vgg11_bn",
                                     "squeezenet1_1"};
  std::map<std::string, int> folds = AssignFolds(models, 3);
  ASSERT_EQ(folds.size(), models.size());
  EXPECT_EQ(folds["resnet18"], folds["resnet18_dynamic_batch"]);
  EXPECT_EQ(folds["efficientnet_b0"], folds["efficientnet_v2_s"]);
  std::set<int> used;
  for (const auto& [m, f] : folds) used.insert(f);
  EXPECT_EQ(used, (std::set<int>{0, 1, 2}));
}

struct Fixture {
  std::vector<Graph> graphs;
  std::vector<HeldOutRegion> regions;
  std::map<std::string, int> folds;
};

Fixture TwoModels() {
  Fixture f;
  for (const char* name : {"resnet18", "squeezenet1_1"}) {
    auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + name + ".onnx");
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    if (!g.ok()) continue;
    for (auto& r : HeldOutRegions(*g, 4, 6, 1)) f.regions.push_back(std::move(r));
    f.graphs.push_back(std::move(*g));
  }
  f.folds = AssignFolds({"resnet18", "squeezenet1_1"}, 2);
  return f;
}

// Times "measured" as the default profile's prediction times `scale` for regions of `model`.
MeasureAlternativesFn Times(const std::string& model, double scale) {
  auto base = std::make_shared<AnalyticalCostModel>(HardwareProfile{});
  return [base, model, scale](const HeldOutRegion& r) -> StatusOr<std::vector<MeasuredTime>> {
    std::vector<MeasuredTime> out;
    for (const auto& [name, plan] : r.alternatives) {
      double t = base->Cost(r.graph, plan).total.total_ns * (r.model == model ? scale : 1.3);
      out.push_back(MeasuredTime{t, 0, false, {}, false});
    }
    return out;
  };
}

// Regions, whole plans and sampled benchmarks of both models, `model`'s times scaled by `scale`.
FoldData Data(const Fixture& f, const std::string& model, double scale) {
  FoldData d;
  d.regions = &f.regions;
  d.measure = Times(model, scale);
  d.rounds = 2;
  auto base = std::make_shared<AnalyticalCostModel>(HardwareProfile{});
  for (const Graph& g : f.graphs) {
    d.models.push_back(&g);
    FusionPlan plan = MaxFusionPlan(g);
    double t = base->Cost(g, plan).total.total_ns * (g.model_name == model ? scale : 1.3);
    d.plans.push_back({&g, "max", plan, {t, t}});
  }
  // Sampled benchmarks carry no model name: every one is "measured" as predicted, so a change
  // here would have to come from which models they are drawn from.
  d.measure_benchmark = [base](const Graph& g, const FusionPlan& p) -> StatusOr<MeasuredTime> {
    return MeasuredTime{base->Cost(g, p).total.total_ns * 1.1, 0, false, {}, false};
  };
  return d;
}

// The regression the protocol exists for: a fold's fit must not see its own models. Changing
// every time measured on the held-out model leaves its fold's profile and residual as they were.
TEST(FitFold, TheHeldOutModelsMeasurementsNeverReachItsFoldsFit) {
  Fixture f = TwoModels();
  ASSERT_FALSE(f.regions.empty());
  const int fold = f.folds.at("resnet18");
  ASSERT_NE(fold, f.folds.at("squeezenet1_1"));
  FoldFitOptions options;
  options.refit_profile = true;
  options.residual = true;
  options.sampled_benchmarks = 6;
  options.fit_options.max_iterations = 20;
  HardwareProfile start;
  auto a = FitFold(fold, f.folds, start, Data(f, "resnet18", 1.0), options);
  auto b = FitFold(fold, f.folds, start, Data(f, "resnet18", 2.5), options);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_GT(a->training_regions, 0);
  EXPECT_EQ(a->training_plans, 1);
  EXPECT_GT(a->sampled_benchmarks, 0);
  EXPECT_EQ(a->residual.weights, b->residual.weights);
  EXPECT_EQ(ProfileToJson(a->profile), ProfileToJson(b->profile));
  // And the other model's measurements do reach it.
  auto c = FitFold(fold, f.folds, start, Data(f, "squeezenet1_1", 2.5), options);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->residual.weights, c->residual.weights);
}

TEST(FoldedCostModel, PredictsEachModelWithItsFoldsModel) {
  Fixture f = TwoModels();
  ASSERT_EQ(f.graphs.size(), 2u);
  HardwareProfile slow;
  slow.conv_gflops.value /= 4;
  std::vector<std::unique_ptr<CostModel>> models;
  models.push_back(std::make_unique<AnalyticalCostModel>(HardwareProfile{}));
  models.push_back(std::make_unique<AnalyticalCostModel>(HardwareProfile{}));
  models[f.folds.at("squeezenet1_1")] = std::make_unique<AnalyticalCostModel>(slow);
  FoldedCostModel folded(f.folds, std::move(models));
  AnalyticalCostModel normal{HardwareProfile{}}, slowed{slow};
  for (const Graph& g : f.graphs) {
    const CostModel& expected = g.model_name == "squeezenet1_1"
                                    ? static_cast<const CostModel&>(slowed)
                                    : static_cast<const CostModel&>(normal);
    FusionPlan plan = MaxFusionPlan(g);
    EXPECT_DOUBLE_EQ(folded.Cost(g, plan).total.total_ns, expected.Cost(g, plan).total.total_ns)
        << g.model_name;
  }
}

TEST(RegionKind, NamesTheAnchorsOp) {
  Fixture f = TwoModels();
  std::set<std::string> kinds;
  for (const HeldOutRegion& r : f.regions) kinds.insert(RegionKind(r));
  EXPECT_TRUE(kinds.count("anchor:Conv")) << ::testing::PrintToString(kinds);
}

}  // namespace
}  // namespace fusor
