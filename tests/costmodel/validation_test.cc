#include "costmodel/validation.h"

#include <gtest/gtest.h>

#include "graph/onnx_import.h"

namespace fusor {
namespace {

TEST(KendallTau, ByHand) {
  int pairs = 0;
  EXPECT_DOUBLE_EQ(KendallTau({1, 2, 3}, {10, 20, 30}, &pairs), 1.0);
  EXPECT_EQ(pairs, 3);
  EXPECT_DOUBLE_EQ(KendallTau({1, 2, 3}, {30, 20, 10}, &pairs), -1.0);
  // (1,2) concordant, (1,3) concordant, (2,3) discordant.
  EXPECT_NEAR(KendallTau({1, 2, 3}, {1, 3, 2}, &pairs), 1.0 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(KendallTau({1, 1}, {1, 2}, &pairs), 0.0);
  EXPECT_EQ(pairs, 0);
}

TEST(HeldOutRegions, DistinctLegalRegionsWithFusedAndUnfusedFirst) {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/efficientnet_b0.onnx");
  ASSERT_TRUE(g.ok());
  auto regions = HeldOutRegions(*g, 6, 30, 1);
  ASSERT_GE(regions.size(), 5u);
  for (const auto& r : regions) {
    ASSERT_GE(r.alternatives.size(), 2u) << r.ops;
    EXPECT_EQ(r.alternatives[0].first, "fused");
    EXPECT_EQ(r.alternatives[1].first, "unfused");
    EXPECT_LE(r.graph.num_nodes(), 6u);
    EXPECT_GE(r.graph.num_nodes(), 2u);
    for (const auto& [name, plan] : r.alternatives) {
      EXPECT_TRUE(CheckPlan(r.graph, plan).ok()) << r.ops << " " << name;
    }
  }
}

// A "measurement" that is the model itself scores perfectly; one that inverts it scores badly.
TEST(ValidateCostModel, MetricsReflectAgreement) {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/resnet18.onnx");
  ASSERT_TRUE(g.ok());
  auto regions = HeldOutRegions(*g, 4, 10, 2);
  AnalyticalCostModel model{HardwareProfile{}};
  MeasureFn truth = [&](const Graph& r, const FusionPlan& p) -> StatusOr<MeasuredTime> {
    return MeasuredTime{model.Cost(r, p).total.total_ns, 0, false};
  };
  auto good = ValidateCostModel(regions, model, truth);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_NEAR(good->mape, 0, 1e-9);
  EXPECT_DOUBLE_EQ(good->agreement, 1.0);
  EXPECT_DOUBLE_EQ(good->kendall_tau, 1.0);
  MeasureFn inverted = [&](const Graph& r, const FusionPlan& p) -> StatusOr<MeasuredTime> {
    return MeasuredTime{1e9 / model.Cost(r, p).total.total_ns, 0, false};
  };
  auto bad = ValidateCostModel(regions, model, inverted);
  ASSERT_TRUE(bad.ok());
  EXPECT_DOUBLE_EQ(bad->kendall_tau, -1.0);
  EXPECT_DOUBLE_EQ(bad->agreement, 0.0);
  EXPECT_GT(bad->mape, 50);
}

}  // namespace
}  // namespace fusor
