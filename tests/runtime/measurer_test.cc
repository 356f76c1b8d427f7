// Timing discipline (median, spread, retries, unstable flag) and the two Measurer
// implementations; the oneDNN one times a real plan.
#include "runtime/measurer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::IrBuilder;

void SpinFor(std::chrono::microseconds d) {
  auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

TEST(TimeRepeated, MedianOfASteadyRunAndSampleCount) {
  TimingOptions o;
  o.min_total_ns = 20'000'000;
  o.max_cv = 0.5;
  Measurement m = TimeRepeated([] { SpinFor(std::chrono::microseconds(500)); }, o);
  EXPECT_GE(m.median_ns, 500'000);
  EXPECT_LT(m.median_ns, 5'000'000);
  EXPECT_GE(m.samples, o.min_repeats);
  EXPECT_GE(static_cast<int64_t>(m.samples) * m.median_ns, o.min_total_ns / 2);
  // Steady by construction, but ctest runs another test binary on the other core: a preempted
  // repeat may still spread the samples. Whatever happened, the flag must agree with the spread.
  EXPECT_EQ(m.unstable, m.cv > o.max_cv) << m.ToString();
}

TEST(TimeRepeated, NoisyRunIsFlaggedUnstableAfterRetries) {
  TimingOptions o;
  o.min_total_ns = 0;
  o.min_repeats = 6;
  o.retries = 1;
  o.max_cv = 0.01;
  int calls = 0;
  // Alternating 0.1 ms and 2 ms runs: the spread never gets under 1%.
  Measurement m =
      TimeRepeated([&] { SpinFor(std::chrono::microseconds(++calls % 2 ? 100 : 2000)); }, o);
  EXPECT_TRUE(m.unstable);
  EXPECT_EQ(m.attempts, 2);
  EXPECT_GT(m.cv, 0.01);
  EXPECT_NE(m.ToString().find("UNSTABLE"), std::string::npos);
}

Graph SmallGraph() {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 8, 16, 16});
  TensorId c = b.Act("c", {1, 8, 16, 16}), y = b.Act("y", {1, 8, 16, 16});
  b.Op("Conv", {x, b.Weight("w", {8, 8, 1, 1})}, {c});
  b.Op("Relu", {c}, {y});
  b.Output(y);
  return b.Build();
}

TEST(OneDnnMeasurer, TimesAPlanAndAGroupWithFixedThreads) {
  OneDnnMeasurerOptions options;
  options.timing.min_total_ns = 5'000'000;
  options.executor.threads = 1;
  OneDnnMeasurer measurer(options);
  Graph g = SmallGraph();
  auto plan = measurer.MeasurePlan(g, UnfusedPlan(g));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_GT(plan->median_ns, 0);
  EXPECT_EQ(plan->threads, 1);
  auto group = measurer.MeasureGroup(g, FusionGroup{GroupKind::kAnchor, {0, 1}, {}});
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  EXPECT_GT(group->median_ns, 0);
}

TEST(RecordedMeasurer, AnswersFromTheTableAndNotFoundOtherwise) {
  Graph g = SmallGraph();
  RecordedMeasurer recorded;
  Measurement m;
  m.median_ns = 1234;
  FusionGroup group{GroupKind::kAnchor, {0, 1}, {}};
  recorded.Record(RecordedMeasurer::GroupKey(g, group), m);
  auto found = recorded.MeasureGroup(g, group);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->median_ns, 1234);
  auto missing = recorded.MeasurePlan(g, UnfusedPlan(g));
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace fusor
