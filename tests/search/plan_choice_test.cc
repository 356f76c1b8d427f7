// The measurement protocol (search/plan_choice.h) on recorded timings: a RecordedMeasurer answers
// each plan's rounds from a table, so every decision below is exact and the same on every run.
// Noisy tables stand for a shared host: the protocol must refuse to choose on noise and choose
// when the difference is clear.
#include "search/plan_choice.h"

#include <gtest/gtest.h>

#include <cmath>

#include "search/plan_search.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::IrBuilder;

Measurement Timed(int64_t us) {
  Measurement m;
  m.median_ns = m.min_ns = m.max_ns = us * 1000;
  m.samples = 1;
  m.samples_ns = {us * 1000};
  return m;
}

std::vector<Measurement> Rounds(const std::vector<int64_t>& us) {
  std::vector<Measurement> out;
  for (int64_t u : us) out.push_back(Timed(u));
  return out;
}

// Counts the rounds: each MeasurePlans call is one.
class RoundLog : public RecordedMeasurer {
 public:
  StatusOr<std::vector<Measurement>> MeasurePlans(const Graph& g,
                                                  const std::vector<FusionPlan>& plans) override {
    ++rounds;
    return RecordedMeasurer::MeasurePlans(g, plans);
  }
  int rounds = 0;
};

class PlanChoiceTest : public ::testing::Test {
 protected:
  PlanChoiceTest() {
    IrBuilder b;
    const Shape d = {1, 64, 32, 32};
    TensorId x = b.Input("x", d), r = b.Act("r", d), y = b.Act("y", d);
    b.Op("Relu", {x}, {r});
    b.Op("Exp", {r}, {y});
    b.Output(y);
    g_ = b.Build();
    fused_ = FusionPlan{{FusionGroup{GroupKind::kLoop, {0, 1}, {}}}};
    unfused_ = UnfusedPlan(g_);
  }

  // Times the fused and the unfused plan, whose rounds answer from `fused_us` and `unfused_us`.
  CandidateTimings Time(const std::vector<int64_t>& fused_us,
                        const std::vector<int64_t>& unfused_us) {
    measurer_.RecordSequence(RecordedMeasurer::PlanKey(g_, fused_), Rounds(fused_us));
    measurer_.RecordSequence(RecordedMeasurer::PlanKey(g_, unfused_), Rounds(unfused_us));
    auto t = TimeCandidates(&measurer_, g_, {fused_, unfused_}, options_);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : CandidateTimings{};
  }

  Graph g_;
  FusionPlan fused_, unfused_;
  RoundLog measurer_;
  ChoiceOptions options_;
};

// A shared host's noise: the two plans trade places from round to round by up to 30%. Every round
// the budget allows is taken, the timings do not settle, and the choice falls to the prediction
// (whichever plan it favours), saying so.
TEST_F(PlanChoiceTest, RefusesToChooseOnNoiseAndFallsBackToThePrediction) {
  CandidateTimings t = Time({100, 70, 130, 95, 110, 85, 120}, {90, 125, 80, 105, 100, 115, 92});
  EXPECT_EQ(measurer_.rounds, options_.max_rounds);
  EXPECT_EQ(t.rounds, options_.max_rounds);
  EXPECT_FALSE(t.settled);
  for (size_t favoured : {0u, 1u}) {
    std::vector<double> predicted = {2, 2};
    predicted[favoured] = 1;
    PlanChoice choice = ChoosePlan(t, predicted, options_);
    EXPECT_EQ(choice.index, favoured);
    EXPECT_FALSE(choice.by_measurement);
    EXPECT_EQ(choice.decision, kChosenByPrediction);
  }
  ChoiceConfidence c = ConfidenceOf(t, ChoosePlan(t, {1, 2}, options_), 1, options_);
  EXPECT_TRUE(c.unstable);
  EXPECT_FALSE(c.settled);
  EXPECT_EQ(c.samples, options_.max_rounds);
  EXPECT_LT(c.speedup.low, 1);
  EXPECT_GT(c.speedup.high, 1);
}

// The unfused plan ~50% slower in every round: settled after the minimum rounds, and the measured
// winner is chosen even against a prediction that favours the other.
TEST_F(PlanChoiceTest, ChoosesByMeasurementWhenTheDifferenceIsClear) {
  CandidateTimings t = Time({100, 103, 98}, {150, 160, 148});
  EXPECT_EQ(measurer_.rounds, options_.min_rounds);
  EXPECT_TRUE(t.settled);
  PlanChoice choice = ChoosePlan(t, {2, 1}, options_);
  EXPECT_EQ(choice.index, 0u);
  EXPECT_TRUE(choice.by_measurement);
  EXPECT_EQ(choice.decision, kChosenByMeasurement);
  ChoiceConfidence c = ConfidenceOf(t, choice, 1, options_);
  EXPECT_FALSE(c.unstable);
  EXPECT_EQ(c.samples, 3);
  // Three rounds: the interval is the range of the rounds' ratios.
  EXPECT_DOUBLE_EQ(c.speedup.low, 150.0 / 100);
  EXPECT_DOUBLE_EQ(c.speedup.high, 160.0 / 103);
  EXPECT_EQ(MeasurementOf(t.plans[0], options_).median_ns, 100'000);
}

// The host's speed halves and recovers between rounds, both plans alike: each plan's time is not
// settled (flagged for the headline), but the paired ratio is, so the choice is still measured.
TEST_F(PlanChoiceTest, AHostChangingSpeedBetweenRoundsStillDecidesButFlagsTheTimes) {
  CandidateTimings t =
      Time({100, 200, 150, 120, 180, 100, 200}, {130, 260, 195, 156, 234, 130, 260});
  EXPECT_EQ(measurer_.rounds, options_.max_rounds);
  EXPECT_FALSE(t.settled);
  PlanChoice choice = ChoosePlan(t, {2, 1}, options_);
  EXPECT_EQ(choice.index, 0u);
  EXPECT_TRUE(choice.by_measurement);
  EXPECT_TRUE(ConfidenceOf(t, choice, 1, options_).unstable);
  EXPECT_TRUE(MeasurementOf(t.plans[0], options_).unstable);
}

// Two plans within the noise margin in every round are as good as tied: settled, and the
// prediction chooses.
TEST_F(PlanChoiceTest, PlansWithinTheMarginAreChosenByPrediction) {
  CandidateTimings t = Time({100, 101, 100}, {101, 102, 101});
  EXPECT_TRUE(t.settled);
  PlanChoice choice = ChoosePlan(t, {2, 1}, options_);
  EXPECT_EQ(choice.index, 1u);
  EXPECT_EQ(choice.decision, kChosenByPrediction);
}

// What an agent older than the protocol reports: one timing per plan, one round. However far
// apart, one round never decides.
TEST_F(PlanChoiceTest, OneRoundNeverDecides) {
  CandidateTimings t;
  t.plans.resize(2);
  t.plans[0].round_ns = {100};
  t.plans[1].round_ns = {300};
  t.rounds = 1;
  EXPECT_FALSE(Settled(t, options_));
  PlanChoice choice = ChoosePlan(t, {2, 1}, options_);
  EXPECT_EQ(choice.index, 1u);
  EXPECT_EQ(choice.decision, kChosenByPrediction);
}

// Rounds past the minimum are asked for: a caller out of time stops the protocol there.
TEST_F(PlanChoiceTest, RoundsPastTheMinimumStopWhenTheCallerSaysSo) {
  measurer_.Record(RecordedMeasurer::PlanKey(g_, fused_), Timed(100));
  measurer_.RecordSequence(RecordedMeasurer::PlanKey(g_, unfused_), Rounds({60, 140, 100}));
  auto t = TimeCandidates(&measurer_, g_, {fused_, unfused_}, options_, [] { return false; });
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->rounds, options_.min_rounds);
  EXPECT_FALSE(t->settled);
}

TEST(MedianInterval, IsTheRangeOfThreeValuesAndUnboundedBelowTheMinimum) {
  Interval three = MedianInterval({3, 1, 2}, 3);
  EXPECT_EQ(three.low, 1);
  EXPECT_EQ(three.high, 3);
  Interval two = MedianInterval({1, 2}, 3);
  EXPECT_EQ(two.low, 0);
  EXPECT_TRUE(std::isinf(two.high));
  // Many values close together, one outlier: the interval is narrow and leaves the outlier out.
  Interval many = MedianInterval({100, 101, 99, 100, 102, 98, 100, 101, 400}, 3);
  EXPECT_GE(many.low, 99);
  EXPECT_LE(many.high, 102);
}

}  // namespace
}  // namespace fusor
