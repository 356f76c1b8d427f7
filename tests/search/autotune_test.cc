// Autotune's last word: the refined plan, the rules baseline's plan and the unfused plan are
// measured whole, side by side, and the fastest beyond the noise margin is returned, once two more
// side-by-side measurements confirm it. Whole-plan times come from a RecordedMeasurer (the runtime
// seam for code above it), so each decision is exact; the budget leaves no measurement for regions.
#include "search/autotune.h"

#include <gtest/gtest.h>

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
  bool rules_unstable;
  const char* returned;  // "tuned", "rules" or "unfused".
};

TEST(Autotune, ReturnsTheFastestOfTheTunedRulesAndUnfusedPlansBeyondTheMargin) {
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
  AutotuneOptions options;
  options.measure_budget = 3;  // The three whole plans only.
  const Case cases[] = {
      {"rules 20% faster", 100, 80, 120, false, "rules"},
      {"rules within the 3% margin", 100, 98, 120, false, "tuned"},
      {"rules faster but unstable", 100, 80, 120, true, "tuned"},
      {"unfused faster than both", 100, 80, 50, false, "unfused"},
      {"tuned fastest", 100, 110, 120, false, "tuned"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SideBySideLog measurer;
    measurer.Record(RecordedMeasurer::PlanKey(g, tuned), Timed(c.tuned_us));
    measurer.Record(RecordedMeasurer::PlanKey(g, rules), Timed(c.rules_us, c.rules_unstable));
    measurer.Record(RecordedMeasurer::PlanKey(g, unfused), Timed(c.unfused_us));
    auto result = Autotune(g, model, TargetFingerprint{}, tuned, &measurer, options);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    const std::string want = c.returned;
    const FusionPlan& expected = want == "rules" ? rules : want == "unfused" ? unfused : tuned;
    EXPECT_EQ(result->plan, expected);
    const int64_t expected_us = want == "rules"     ? c.rules_us
                                : want == "unfused" ? c.unfused_us
                                                    : c.tuned_us;
    EXPECT_EQ(result->measured.median_ns, expected_us * 1000);
    EXPECT_EQ(result->unfused_measured.median_ns, c.unfused_us * 1000);
    // Every stable whole-plan timing is kept for the learned residual, confirmations aside.
    std::vector<FusionPlan> timed;
    for (const TimedPlan& t : result->timed) {
      EXPECT_EQ(t.region, nullptr);
      EXPECT_EQ(t.what, "plan");
      timed.push_back(t.plan);
    }
    EXPECT_EQ(timed, c.rules_unstable ? std::vector<FusionPlan>({tuned, unfused})
                                      : std::vector<FusionPlan>({tuned, rules, unfused}));
    EXPECT_EQ(result->timed.front().measured_ns, c.tuned_us * 1000.0);
    bool replaced = want != "tuned";
    // The three plans are measured together; a baseline that beats the tuned plan is confirmed:
    // both measured twice more, side by side.
    EXPECT_EQ(result->measurements, replaced ? 3 + 4 : 3);
    EXPECT_EQ(measurer.together, replaced ? std::vector<int>({3, 2, 2}) : std::vector<int>({3}));
    ASSERT_EQ(result->trials.empty(), !replaced);
    if (replaced) {
      EXPECT_EQ(result->trials.back().alternative.rfind(want, 0), 0u);
      EXPECT_TRUE(result->trials.back().chosen);
    }
  }
}

// One lucky measurement does not decide: the unfused plan measured 20% faster once (a slow
// stretch of the host during the tuned plan's run, or a quiet one during its own), then 10%
// slower twice, side by side with the tuned plan, keeps the tuned plan and records why. Measured
// faster three times, it replaces it at the median of its runs.
TEST(Autotune, ABaselineFasterOnceIsConfirmedBeforeItReplacesTheTunedPlan) {
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
  for (bool confirmed : {false, true}) {
    SCOPED_TRACE(confirmed);
    RecordedMeasurer measurer;
    measurer.Record(RecordedMeasurer::PlanKey(g, tuned), Timed(100));
    measurer.RecordSequence(RecordedMeasurer::PlanKey(g, unfused),
                            {Timed(80), Timed(confirmed ? 85 : 110), Timed(confirmed ? 90 : 110)});
    auto result = Autotune(g, model, TargetFingerprint{}, tuned, &measurer, options);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    EXPECT_EQ(result->measurements, 2 + 4);
    EXPECT_EQ(result->plan, confirmed ? unfused : tuned);
    EXPECT_EQ(result->measured.median_ns, (confirmed ? 85 : 100) * 1000);
    ASSERT_EQ(result->trials.size(), 1u);
    EXPECT_EQ(result->trials[0].chosen, confirmed);
    EXPECT_NE(result->trials[0].alternative.find(confirmed ? "measured faster" : "not confirmed"),
              std::string::npos)
        << result->trials[0].alternative;
  }
}

}  // namespace
}  // namespace fusor
