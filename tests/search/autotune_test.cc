// Autotune's last word: the refined plan, the rules baseline's plan and the unfused plan are
// chosen between by the measurement protocol (search/plan_choice.h; its own tests hold the noisy
// cases): side by side, in rounds, the fastest only beyond the noise, else the better-predicted.
// Whole-plan times come from a RecordedMeasurer (the runtime seam for code above it), so each
// decision is exact; the budget leaves no measurement for regions.
#include "search/autotune.h"

#include <gtest/gtest.h>

#include "lowering/plan_legality.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::IrBuilder;

Measurement Timed(int64_t us, bool unstable = false) {
  Measurement m;
  m.median_ns = m.min_ns = m.max_ns = us * 1000;
  m.samples = 10;
  m.unstable = unstable;
  return m;
}

// Records how many plans each MeasurePlans call measured together.
class SideBySideLog : public RecordedMeasurer {
 public:
  StatusOr<std::vector<Measurement>> MeasurePlans(const Graph& g,
                                                  const std::vector<FusionPlan>& plans) override {
    together.push_back(static_cast<int>(plans.size()));
    return RecordedMeasurer::MeasurePlans(g, plans);
  }
  std::vector<int> together;
};

struct Case {
  const char* name;
  int64_t tuned_us, rules_us, unfused_us;
  const char* returned;  // "tuned", "rules", "unfused" or "predicted" (the better-predicted of
                         // tuned and rules).
};

TEST(Autotune, ReturnsTheFastestOfTheTunedRulesAndUnfusedPlansBeyondTheNoise) {
  IrBuilder b;
  const Shape d = {1, 64, 32, 32};
  TensorId x = b.Input("x", d), r = b.Act("r", d), e = b.Act("e", d), y = b.Act("y", d);
  b.Op("Relu", {x}, {r});
  b.Op("Exp", {r}, {e});
  b.Op("Sigmoid", {e}, {y});
  b.Output(y);
  Graph g = b.Build();
  const FusionPlan tuned{
      {FusionGroup{GroupKind::kLoop, {0, 1}, {}}, FusionGroup{GroupKind::kSingle, {2}, {}}}};
  const FusionPlan rules = RulesPlan(g, 64), unfused = UnfusedPlan(g);
  ASSERT_TRUE(CheckPlan(g, tuned).ok());
  ASSERT_NE(rules, tuned);
  ASSERT_NE(rules, unfused);
  AnalyticalCostModel model{HardwareProfile{}};
  const FusionPlan& better_predicted =
      model.Cost(g, rules).total.total_ns < model.Cost(g, tuned).total.total_ns ? rules : tuned;
  AutotuneOptions options;
  options.measure_budget = 3;  // The three whole plans only.
  const Case cases[] = {
      {"rules 20% faster", 100, 80, 120, "rules"},
      {"rules within the 3% margin", 100, 99, 120, "predicted"},
      {"unfused faster than both", 100, 80, 50, "unfused"},
      {"tuned fastest", 100, 110, 120, "tuned"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SideBySideLog measurer;
    measurer.Record(RecordedMeasurer::PlanKey(g, tuned), Timed(c.tuned_us));
    measurer.Record(RecordedMeasurer::PlanKey(g, rules), Timed(c.rules_us));
    measurer.Record(RecordedMeasurer::PlanKey(g, unfused), Timed(c.unfused_us));
    auto result = Autotune(g, model, TargetFingerprint{}, tuned, &measurer, options);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    const std::string want = c.returned;
    const FusionPlan& expected = want == "rules"       ? rules
                                 : want == "unfused"   ? unfused
                                 : want == "predicted" ? better_predicted
                                                       : tuned;
    EXPECT_EQ(result->plan, expected);
    const int64_t expected_us = expected == rules     ? c.rules_us
                                : expected == unfused ? c.unfused_us
                                                      : c.tuned_us;
    EXPECT_EQ(result->measured.median_ns, expected_us * 1000);
    EXPECT_EQ(result->unfused_measured.median_ns, c.unfused_us * 1000);
    EXPECT_EQ(result->confidence.choice.decision,
              want == "predicted" ? kChosenByPrediction : kChosenByMeasurement);
    EXPECT_TRUE(result->confidence.settled);
    EXPECT_EQ(result->confidence.rounds, ChoiceOptions().min_rounds);
    // Every settled whole-plan timing is kept for the learned residual.
    std::vector<FusionPlan> timed;
    for (const TimedPlan& t : result->timed) {
      EXPECT_EQ(t.region, nullptr);
      EXPECT_EQ(t.what, "plan");
      timed.push_back(t.plan);
    }
    EXPECT_EQ(timed, std::vector<FusionPlan>({tuned, rules, unfused}));
    EXPECT_EQ(result->timed.front().measured_ns, c.tuned_us * 1000.0);
    // The three plans are measured together, in the protocol's minimum of rounds.
    EXPECT_EQ(result->measurements, 3 * 3);
    EXPECT_EQ(measurer.together, std::vector<int>({3, 3, 3}));
    ASSERT_EQ(result->trials.size(), 3u);
    int chosen = 0;
    for (const RegionTrial& trial : result->trials) {
      EXPECT_EQ(trial.ops, "whole graph");
      if (!trial.chosen) continue;
      ++chosen;
      EXPECT_EQ(trial.measured_ns, expected_us * 1000.0);
    }
    EXPECT_EQ(chosen, 1);
  }
}

// One lucky measurement does not decide: the unfused plan measured 20% faster once (a slow
// stretch of the host during the tuned plan's run, or a quiet one during its own), then 10%
// slower, side by side with the tuned plan, keeps the tuned plan: more rounds are taken until
// the difference is beyond the noise. Measured faster in three rounds, it replaces it at the
// median of its rounds.
TEST(Autotune, ABaselineFasterInOneRoundDoesNotReplaceTheTunedPlan) {
  IrBuilder b;
  const Shape d = {1, 64, 32, 32};
  TensorId x = b.Input("x", d), r = b.Act("r", d), y = b.Act("y", d);
  b.Op("Relu", {x}, {r});
  b.Op("Exp", {r}, {y});
  b.Output(y);
  Graph g = b.Build();
  const FusionPlan tuned{{FusionGroup{GroupKind::kLoop, {0, 1}, {}}}};
  const FusionPlan unfused = UnfusedPlan(g);
  ASSERT_EQ(RulesPlan(g, 64), tuned);  // Rules fuse the pair too: only unfused challenges it.
  AnalyticalCostModel model{HardwareProfile{}};
  AutotuneOptions options;
  options.measure_budget = 2;
  for (bool faster : {false, true}) {
    SCOPED_TRACE(faster);
    SideBySideLog measurer;
    measurer.Record(RecordedMeasurer::PlanKey(g, tuned), Timed(100));
    measurer.RecordSequence(RecordedMeasurer::PlanKey(g, unfused),
                            {Timed(80), Timed(faster ? 82 : 110), Timed(faster ? 84 : 110)});
    auto result = Autotune(g, model, TargetFingerprint{}, tuned, &measurer, options);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    EXPECT_EQ(result->plan, faster ? unfused : tuned);
    EXPECT_EQ(result->measured.median_ns, (faster ? 82 : 100) * 1000);
    EXPECT_EQ(result->confidence.choice.decision, kChosenByMeasurement);
    if (faster) {
      EXPECT_EQ(measurer.together.size(), 3u);
    } else {
      EXPECT_GT(measurer.together.size(), 3u) << "the round that disagreed asks for more";
    }
    EXPECT_EQ(result->measurements, 2 * static_cast<int>(measurer.together.size()));
  }
}

// Offers two implementations ("jit:first", oneDNN's first choice, and "brg:second") for every
// group with a MatMul; the region timings are recorded like the whole-plan ones.
class TwoKernels : public SideBySideLog {
 public:
  StatusOr<std::vector<KernelImplementations>> Implementations(const Graph& g,
                                                               const FusionPlan& plan) override {
    std::vector<KernelImplementations> out;
    for (const FusionGroup& group : plan.groups) {
      const bool matmul = g.node(group.nodes[0]).op_type == "MatMul";
      out.push_back(matmul ? KernelImplementations{"jit:first", {"jit:first", "brg:second"}}
                           : KernelImplementations{});
    }
    return out;
  }
};

FusionPlan WithKernel(FusionPlan plan, const std::string& kernel) {
  plan.groups[0].kernel = kernel;
  return plan;
}

// A kernel timed faster on its region alone stays only when the whole-plan timings confirm it:
// when the tuned plan with it and the same plan on oneDNN's first kernels cannot be told apart,
// the first kernels are kept (the predictions, which do not price kernels, cannot tell either).
TEST(Autotune, AKernelChoiceTheWholePlanTimingsDoNotConfirmIsDropped) {
  IrBuilder b;
  TensorId x = b.Input("x", {64, 128}), m = b.Act("m", {64, 256}), y = b.Act("y", {64, 256});
  b.Op("MatMul", {x, b.Weight("w", {128, 256})}, {m});
  b.Op("Relu", {m}, {y});
  b.Output(y);
  Graph g = b.Build();
  const FusionPlan tuned{{FusionGroup{GroupKind::kAnchor, {0, 1}, {}}}};
  const FusionPlan unfused = UnfusedPlan(g);
  ASSERT_EQ(RulesPlan(g, 64), tuned);
  AnalyticalCostModel model{HardwareProfile{}};
  AutotuneOptions options;
  options.measure_budget = 2;
  for (bool confirmed : {false, true}) {
    SCOPED_TRACE(confirmed ? "confirmed" : "within noise");
    TwoKernels measurer;
    for (const FusionPlan& p : {tuned, unfused}) {  // Each MatMul region alone: second faster.
      Graph region = g.ExtractRegion(p.groups[0].nodes);
      FusionPlan local{{FusionGroup{p.groups[0].kind, {}, {}}}};
      for (size_t i = 0; i < p.groups[0].nodes.size(); ++i) {
        local.groups[0].nodes.push_back(static_cast<NodeId>(i));
      }
      measurer.Record(RecordedMeasurer::PlanKey(region, WithKernel(local, "jit:first")),
                      Timed(100));
      measurer.Record(RecordedMeasurer::PlanKey(region, WithKernel(local, "brg:second")),
                      Timed(60));
    }
    measurer.Record(RecordedMeasurer::PlanKey(g, WithKernel(tuned, "brg:second")),
                    Timed(confirmed ? 60 : 99, !confirmed));
    measurer.Record(RecordedMeasurer::PlanKey(g, tuned), Timed(100, !confirmed));
    measurer.Record(RecordedMeasurer::PlanKey(g, WithKernel(unfused, "brg:second")), Timed(300));
    auto result = Autotune(g, model, TargetFingerprint{}, tuned, &measurer, options);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    EXPECT_EQ(result->plan, confirmed ? WithKernel(tuned, "brg:second") : tuned);
    EXPECT_EQ(result->plan.groups[0].kernel, confirmed ? "brg:second" : "");
  }
}

}  // namespace
}  // namespace fusor
