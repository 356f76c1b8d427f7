#include "costmodel/validation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "graph/onnx_import.h"
#include "lowering/plan_legality.h"

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

// Held-out regions of up to 4 ops from ResNet-18 (at least one).
std::vector<HeldOutRegion> ResNetRegions() {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/resnet18.onnx");
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return {};
  auto regions = HeldOutRegions(*g, 4, 10, 2);
  EXPECT_FALSE(regions.empty());
  return regions;
}

// A "measurement" that is the model itself scores perfectly; one that inverts it scores badly.
TEST(ValidateCostModel, MetricsReflectAgreement) {
  std::vector<HeldOutRegion> regions = ResNetRegions();
  AnalyticalCostModel model{HardwareProfile{}};
  MeasureFn truth = [&](const Graph& r, const FusionPlan& p) -> StatusOr<MeasuredTime> {
    return MeasuredTime{model.Cost(r, p).total.total_ns, 0, false, {}, false};
  };
  auto good = ValidateCostModel(regions, model, OneAfterAnother(truth));
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_NEAR(good->mape, 0, 1e-9);
  EXPECT_DOUBLE_EQ(good->agreement, 1.0);
  EXPECT_DOUBLE_EQ(good->kendall_tau, 1.0);
  EXPECT_DOUBLE_EQ(good->repeat_tau, 1.0);  // A repeatable measurement.
  EXPECT_DOUBLE_EQ(good->repeat_agreement, 1.0);
  // Each item says which region it measured and where in the model that region was cut.
  ASSERT_FALSE(good->items.empty());
  EXPECT_EQ(good->items.back().region, good->regions - 1);
  for (const ValidationItem& i : good->items) {
    const HeldOutRegion& r = regions.at(i.region);
    EXPECT_EQ(i.ops, r.ops);
    EXPECT_EQ(i.where.rfind(r.graph.node(0).name + " -> ", 0), 0u) << i.where;
    EXPECT_NE(i.where.find('x'), std::string::npos) << i.where;  // An output shape, "1x64x56x56".
  }
  MeasureFn inverted = [&](const Graph& r, const FusionPlan& p) -> StatusOr<MeasuredTime> {
    return MeasuredTime{1e9 / model.Cost(r, p).total.total_ns, 0, false, {}, false};
  };
  auto bad = ValidateCostModel(regions, model, OneAfterAnother(inverted));
  ASSERT_TRUE(bad.ok());
  EXPECT_DOUBLE_EQ(bad->kendall_tau, -1.0);
  // By measured gap: five buckets that hold every pair once, each as ordered as the whole.
  int all_pairs = 0;
  std::map<int, int> alternatives;
  for (const ValidationItem& i : good->items) ++alternatives[i.region];
  for (auto [region, n] : alternatives) all_pairs += n * (n - 1) / 2;
  for (const ValidationReport* r : {&*good, &*bad}) {
    ASSERT_EQ(r->by_gap.size(), 5u);
    EXPECT_DOUBLE_EQ(r->by_gap[1].min_gap, 0.01);
    EXPECT_DOUBLE_EQ(r->by_gap[4].min_gap, 0.10);
    EXPECT_TRUE(std::isinf(r->by_gap[4].max_gap));
    int pairs = 0;
    for (const GapBucket& b : r->by_gap) {
      pairs += b.pairs;
      EXPECT_EQ(b.repeat_pairs, b.pairs);
      if (b.pairs == 0) continue;
      EXPECT_DOUBLE_EQ(b.tau, r == &*good ? 1.0 : -1.0) << b.min_gap;
      EXPECT_DOUBLE_EQ(b.repeat_tau, 1.0) << b.min_gap;
    }
    EXPECT_EQ(pairs, all_pairs);
  }
  nlohmann::json by_gap = ReportToJson(*good)["kendall_tau_by_measured_gap"];
  ASSERT_EQ(by_gap.size(), 5u);
  EXPECT_TRUE(by_gap[4]["max_gap"].is_null());
  EXPECT_EQ(by_gap[0]["pairs"], good->by_gap[0].pairs);
  EXPECT_DOUBLE_EQ(bad->agreement, 0.0);
  EXPECT_GT(bad->mape, 50);
  // Every decision of the inverted measurement is a wrong call, decisive ones listed first.
  EXPECT_TRUE(WrongFuseCalls(*good).empty());
  std::vector<WrongFuseCall> wrong = WrongFuseCalls(*bad);
  ASSERT_EQ(static_cast<int>(wrong.size()), bad->decisions);
  for (size_t i = 0; i < wrong.size(); ++i) {
    EXPECT_NE(wrong[i].measured_ratio < 1, wrong[i].predicted_ratio < 1);
    if (i > 0) {
      EXPECT_TRUE(wrong[i - 1].decisive || !wrong[i].decisive);
    }
  }
  EXPECT_EQ(ReportToJson(*bad)["wrong_fuse_calls"].size(), wrong.size());
}

// One disturbed measurement of an alternative (its first round, 100x fast) is outvoted by the
// median of three interleaved rounds; measured once, it reorders the region.
TEST(ValidateCostModel, InterleavedRoundsOutvoteADisturbedMeasurement) {
  std::vector<HeldOutRegion> regions = ResNetRegions();
  AnalyticalCostModel model{HardwareProfile{}};
  std::map<const FusionPlan*, int> calls;
  std::set<const FusionPlan*> unfused;  // Alternative 1 of each region.
  for (const auto& r : regions) unfused.insert(&r.alternatives[1].second);
  MeasureFn disturbed = [&](const Graph& r, const FusionPlan& p) -> StatusOr<MeasuredTime> {
    double t = model.Cost(r, p).total.total_ns;
    bool slow = calls[&p]++ == 0 && unfused.count(&p) > 0;
    return MeasuredTime{slow ? t / 100 : t, 0, false, {}, false};
  };
  auto once = ValidateCostModel(regions, model, OneAfterAnother(disturbed), {}, 1);
  ASSERT_TRUE(once.ok());
  EXPECT_LT(once->kendall_tau, 1.0);
  calls.clear();
  auto three = ValidateCostModel(regions, model, OneAfterAnother(disturbed), {}, 3);
  ASSERT_TRUE(three.ok());
  EXPECT_DOUBLE_EQ(three->kendall_tau, 1.0);
  EXPECT_NEAR(three->mape, 0, 1e-9);
  for (const auto& [plan, n] : calls) EXPECT_EQ(n, 3);
}

// Rounds taken in one of the host's slow states are left out while another round was not: two
// of three rounds disturbed and inverted would outvote the clean one in a median; left out, the
// clean round orders every region. When every round of a region is disturbed they all count.
TEST(ValidateCostModel, RoundsInASlowStateAreLeftOut) {
  std::vector<HeldOutRegion> regions = ResNetRegions();
  AnalyticalCostModel model{HardwareProfile{}};
  std::map<const HeldOutRegion*, int> calls;
  bool all_disturbed = false;
  MeasureAlternativesFn measure =
      [&](const HeldOutRegion& r) -> StatusOr<std::vector<MeasuredTime>> {
    bool disturbed = all_disturbed || calls[&r]++ < 2;
    std::vector<MeasuredTime> out;
    for (const auto& [name, plan] : r.alternatives) {
      double t = model.Cost(r.graph, plan).total.total_ns;
      out.push_back({disturbed ? 1e9 / t : t, 0, false, {}, disturbed});
    }
    return out;
  };
  auto report = ValidateCostModel(regions, model, measure, {}, 3);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_DOUBLE_EQ(report->kendall_tau, 1.0);
  EXPECT_NEAR(report->mape, 0, 1e-9);
  EXPECT_EQ(report->rounds, 3 * report->regions);
  EXPECT_EQ(report->disturbed_rounds, 2 * report->regions);
  EXPECT_DOUBLE_EQ(report->repeat_tau, 0.0);  // One round kept: no halves to compare.
  for (const ValidationItem& i : report->items) EXPECT_EQ(i.rounds_ns.size(), 3u);
  all_disturbed = true;
  auto slow = ValidateCostModel(regions, model, measure, {}, 3);
  ASSERT_TRUE(slow.ok());
  EXPECT_DOUBLE_EQ(slow->kendall_tau, -1.0);  // Every round inverted, every round kept.
  EXPECT_EQ(slow->disturbed_rounds, slow->rounds);
}

// The measurement's repeatability compares its even rounds with its odd ones: a measurement that
// orders the alternatives one way in even rounds and the other way in odd ones repeats nothing
// (tau -1, no fuse-or-not decision the same), whatever the model scores against its medians.
TEST(ValidateCostModel, RepeatabilityComparesEvenRoundsWithOddOnes) {
  std::vector<HeldOutRegion> regions = ResNetRegions();
  AnalyticalCostModel model{HardwareProfile{}};
  std::map<const FusionPlan*, int> calls;
  MeasureFn flipping = [&](const Graph& r, const FusionPlan& p) -> StatusOr<MeasuredTime> {
    double t = model.Cost(r, p).total.total_ns;
    return MeasuredTime{calls[&p]++ % 2 == 0 ? t : 1e9 / t, 0, false, {}, false};
  };
  auto report = ValidateCostModel(regions, model, OneAfterAnother(flipping), {}, 4);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_DOUBLE_EQ(report->repeat_tau, -1.0);
  EXPECT_DOUBLE_EQ(report->repeat_agreement, 0.0);
  auto once = ValidateCostModel(regions, model, OneAfterAnother(flipping), {}, 1);
  ASSERT_TRUE(once.ok());
  EXPECT_DOUBLE_EQ(once->repeat_tau, 0.0);  // One round has no halves to compare.
}

// The measurement's own error: odd rounds 10% slower than even ones read as 10% apart.
TEST(ValidateCostModel, RepeatMapeIsTheEvenRoundsDistanceFromTheOddOnes) {
  std::vector<HeldOutRegion> regions = ResNetRegions();
  AnalyticalCostModel model{HardwareProfile{}};
  std::map<const FusionPlan*, int> calls;
  MeasureFn alternating = [&](const Graph& r, const FusionPlan& p) -> StatusOr<MeasuredTime> {
    double t = model.Cost(r, p).total.total_ns;
    return MeasuredTime{calls[&p]++ % 2 == 0 ? t : 1.1 * t, 0, false, {}, false};
  };
  auto report = ValidateCostModel(regions, model, OneAfterAnother(alternating), {}, 4);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_NEAR(report->repeat_mape, 10.0, 1e-9);
  EXPECT_NEAR(ReportToJson(*report)["measurement_repeatability"]["mape_percent"].get<double>(),
              10.0, 1e-9);
}

// The machine check reads drift as the median of measured / predicted over the calibration
// benchmarks: a machine 30% slower than at calibration shows 1.3 and is flagged; 5% is within
// tolerance; a benchmark disturbed to 100x, or flagged unstable, does not move the median.
TEST(CheckMachine, MedianRatioFlagsDriftBeyondTolerance) {
  HardwareProfile profile;
  auto suite = CalibrationSuite(profile.target, 0.5);
  ASSERT_GT(suite.size(), 10u);
  auto scaled = [&](double factor) {
    return [&, factor](const Graph& g, const FusionPlan& p) -> StatusOr<MeasuredTime> {
      double t = EvaluateFeatures(PlanFeatures(g, p, profile.target).at(0), profile).total_ns;
      bool first = &g == &suite.front().graph, second = &g == &suite[1].graph;
      return MeasuredTime{first ? 100 * t : t * factor, 0, second, {}, false};
    };
  };
  auto slow = CheckMachine(suite, profile, scaled(1.3));
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  EXPECT_EQ(slow->benchmarks, static_cast<int>(suite.size()) - 1);
  EXPECT_NEAR(slow->median_ratio, 1.3, 1e-9);
  EXPECT_TRUE(MachineDrifted(*slow));
  auto steady = CheckMachine(suite, profile, scaled(1.05));
  ASSERT_TRUE(steady.ok());
  EXPECT_FALSE(MachineDrifted(*steady));
  EXPECT_TRUE(MachineDrifted(*CheckMachine(suite, profile, scaled(0.8))));
}

TEST(CheckMachine, EveryBenchmarkUnstableIsAnError) {
  HardwareProfile profile;
  auto suite = CalibrationSuite(profile.target, 0.5);
  MeasureFn noisy = [](const Graph&, const FusionPlan&) -> StatusOr<MeasuredTime> {
    return MeasuredTime{1000, 0.5, true, {}, false};
  };
  auto check = CheckMachine(suite, profile, noisy);
  ASSERT_FALSE(check.ok());
  EXPECT_NE(check.status().ToString().find("unstable"), std::string::npos);
}

}  // namespace
}  // namespace fusor
