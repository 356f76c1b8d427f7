// Timing discipline (median, spread, retries, unstable flag) and the two Measurer
// implementations; the oneDNN one times a real plan.
#include "runtime/measurer.h"

#include <gtest/gtest.h>

#include <omp.h>
#include <cmath>

#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <vector>

#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::IrBuilder;

using std::chrono::microseconds;
using std::chrono::milliseconds;

// Timing runs on a virtual clock: a "run" advances it by the time it is meant to take, so the
// assertions are on what the timing discipline did, whatever else the machine is doing.
struct VirtualTiming {
  ManualClock clock;
  TimingOptions options;
  VirtualTiming() { options.clock = &clock; }
  std::function<void()> RunOf(microseconds d) {
    return [this, d] { clock.Advance(d); };
  }
};

TEST(TimeRepeated, MedianOfASteadyRunAndSampleCount) {
  VirtualTiming t;
  t.options.min_total_ns = 20'000'000;
  t.options.max_cv = 0.5;
  Measurement m = TimeRepeated(t.RunOf(microseconds(500)), t.options);
  EXPECT_EQ(m.median_ns, 500'000);
  EXPECT_EQ(m.min_ns, 500'000);
  EXPECT_EQ(m.max_ns, 500'000);
  EXPECT_EQ(m.samples, 40);  // 20 ms of 0.5 ms runs.
  EXPECT_EQ(m.cv, 0);
  EXPECT_FALSE(m.unstable);
  EXPECT_EQ(m.attempts, 1);
}

TEST(TimeRepeated, NoisyRunIsFlaggedUnstableAfterRetries) {
  VirtualTiming t;
  t.options.min_total_ns = 0;
  t.options.min_repeats = 6;
  t.options.retries = 1;
  t.options.max_cv = 0.01;
  int calls = 0;
  // Alternating 0.1 ms and 2 ms runs: the spread never gets under 1%.
  Measurement m =
      TimeRepeated([&] { t.clock.Advance(microseconds(++calls % 2 ? 100 : 2000)); }, t.options);
  EXPECT_TRUE(m.unstable);
  EXPECT_EQ(m.attempts, 2);
  EXPECT_GT(m.cv, 0.01);
  EXPECT_NE(m.ToString().find("UNSTABLE"), std::string::npos);
}

// The quiet-host gate, with a probe that reads 100 us while the host is quiet and 250 us while it
// is disturbed: a measurement waits (up to its limit) for a quiet probe and is marked disturbed
// when the probe after it is slow; with the gate off nothing is probed or marked.
TEST(TimeRepeated, WaitsForAQuietHostAndMarksADisturbedOne) {
  VirtualTiming t;
  int64_t quiet_from_ns = 0;  // The host is disturbed until the virtual clock reaches this.
  std::atomic<int> probes{0};
  HostQuietness quietness([&] {
    ++probes;
    return t.clock.NowNs() < quiet_from_ns ? 250'000 : 100'000;
  });
  TimingOptions& o = t.options;
  o.min_total_ns = 1'000'000;
  o.max_cv = 1e9;  // One attempt whatever the spread.
  o.quiet_wait_ms = 60;
  o.quietness = &quietness;
  auto run = t.RunOf(microseconds(100));
  Measurement quiet = TimeRepeated(run, o);
  EXPECT_FALSE(quiet.disturbed) << quiet.ToString();
  EXPECT_EQ(probes, 2);  // Before and after the one attempt.

  // Disturbed throughout: it waits its whole limit, then times, and marks the result.
  quiet_from_ns = std::numeric_limits<int64_t>::max();
  int64_t start = t.clock.NowNs();
  probes = 0;
  Measurement busy = TimeRepeated(run, o);
  EXPECT_GE(t.clock.NowNs() - start, int64_t{o.quiet_wait_ms} * 1'000'000);
  EXPECT_GE(probes, o.quiet_wait_ms / 20);
  EXPECT_TRUE(busy.disturbed);
  EXPECT_NE(busy.ToString().find("host disturbed"), std::string::npos);

  // The host quietens 30 ms into a wait of up to 2 s: it times then, undisturbed.
  o.quiet_wait_ms = 2000;
  start = t.clock.NowNs();
  quiet_from_ns = start + 30'000'000;
  Measurement later = TimeRepeated(run, o);
  EXPECT_FALSE(later.disturbed);
  // Two 20 ms sleeps, then the warm-up (two runs), the run after the wait and 10 timed runs.
  EXPECT_EQ(t.clock.NowNs() - start, 40'000'000 + 13 * 100'000);

  probes = 0;
  quiet_from_ns = std::numeric_limits<int64_t>::max();
  o.quiet_wait_ms = 0;
  EXPECT_FALSE(TimeRepeated(run, o).disturbed);
  EXPECT_EQ(probes, 0);
}

// Side by side, alternatives take turns in bursts, each opened by an untimed run that puts the
// alternative's data back in cache; with bursts of one timed run the order of calls is exact.
TEST(TimeSideBySide, TakesTurnsInBurstsEachOpenedByAnUntimedRun) {
  VirtualTiming t;
  TimingOptions& o = t.options;
  o.warmup = 1;
  o.min_repeats = 4;
  o.min_total_ns = 0;
  o.max_cv = 10;  // No retries: the call log below is one attempt's.
  std::vector<int> log;
  std::vector<std::function<void()>> runs;
  for (int a = 0; a < 3; ++a) {
    runs.push_back([a, &log, &t] {
      log.push_back(a);
      t.clock.Advance(microseconds(100 * (a + 1)));
    });
  }
  std::vector<Measurement> ms = TimeSideBySide(runs, o, /*burst_ns=*/1);
  std::vector<int> want = {0, 1, 2};  // The warm-up.
  for (int burst = 0; burst < o.min_repeats; ++burst) {
    for (int a : {0, 0, 1, 1, 2, 2}) want.push_back(a);
  }
  EXPECT_EQ(log, want);
  ASSERT_EQ(ms.size(), 3u);
  for (int a = 0; a < 3; ++a) {
    EXPECT_EQ(ms[a].samples, o.min_repeats);
    EXPECT_EQ(ms[a].median_ns, 100'000 * (a + 1));
  }
  // Longer bursts: each alternative still gets its own total, in several turns.
  log.clear();
  o.min_total_ns = 6'000'000;
  ms = TimeSideBySide(runs, o, /*burst_ns=*/1'000'000);
  int switches = 0;
  for (size_t i = 1; i < log.size(); ++i) switches += log[i] != log[i - 1];
  EXPECT_GE(switches, 3 * 4);
  for (int a = 0; a < 3; ++a) {
    EXPECT_GE(static_cast<int64_t>(ms[a].samples) * ms[a].max_ns, o.min_total_ns);
  }
}

// A host that slows down 4x during the measurement slows one alternative alone when they are
// timed one after the other, both alike side by side: the second (twice as long) is measured at
// ~2x the first side by side, ~8x when its turn came after the slowdown.
TEST(TimeSideBySide, AHostSlowdownFallsOnAllAlternativesAlike) {
  VirtualTiming t;
  TimingOptions& o = t.options;
  o.warmup = 0;
  o.min_total_ns = 0;
  o.min_repeats = o.max_repeats = 20;
  o.max_cv = 10;
  int calls = 0;
  auto run = [&](int us) { t.clock.Advance(microseconds(calls++ >= 20 ? 4 * us : us)); };
  std::vector<std::function<void()>> runs = {[&] { run(100); }, [&] { run(200); }};
  double a = TimeRepeated(runs[0], o).median_ns, b = TimeRepeated(runs[1], o).median_ns;
  EXPECT_EQ(b / a, 8.0);
  calls = 0;
  std::vector<Measurement> ms = TimeSideBySide(runs, o, /*burst_ns=*/1);
  double ratio = static_cast<double>(ms[1].median_ns) / static_cast<double>(ms[0].median_ns);
  EXPECT_DOUBLE_EQ(ratio, 2.0);
}

// The real probe moves data between two threads: a positive time when there are two, and the
// process-wide gate calls it quiet right after it set the quickest time itself.
TEST(CrossCoreProbe, TimesDataMovedBetweenTwoThreads) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "one OpenMP thread";
  EXPECT_GT(CrossCoreProbeNs(), 0);
  HostQuietness quietness([] { return int64_t{80'000}; });
  EXPECT_TRUE(quietness.Quiet(1.1));
  EXPECT_TRUE(quietness.Quiet(1.1));
}

// The cross-core ratio compares the same work with the data moved between the cores and kept on
// each: positive and finite with two threads.
TEST(CrossCoreProbe, RatioAgainstTheSameWorkOnEachCore) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "one OpenMP thread";
  // A ratio of two timings: a loaded host moves it anywhere (a descheduled thread), so the test
  // checks that the probe measured something, not how fast.
  double ratio = CrossCoreRatio();
  EXPECT_TRUE(std::isfinite(ratio));
  EXPECT_GT(ratio, 0);
}

// SettleHost waits in 100 ms steps while the host is slow: it gives up at its limit on a host
// that stays slow, and stops waiting as soon as the host leaves the slow state.
TEST(SettleHost, GivesUpAtItsLimitAndStopsWhenTheHostQuietens) {
  ManualClock clock;
  int checks = 0;
  EXPECT_FALSE(SettleHost(
      300, "test", [&] { return ++checks, 2.5; }, &clock));
  EXPECT_EQ(clock.NowNs(), 300'000'000);
  EXPECT_EQ(checks, 4);  // At 0, 100, 200 and 300 ms.

  checks = 0;
  const int64_t start = clock.NowNs();
  EXPECT_TRUE(SettleHost(
      3000, "test", [&] { return ++checks < 3 ? 2.5 : 1.1; }, &clock));
  EXPECT_EQ(clock.NowNs() - start, 200'000'000);
  EXPECT_EQ(checks, 3);
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

OneDnnMeasurerOptions OneThread(int64_t min_total_ns) {
  OneDnnMeasurerOptions options;
  options.timing.min_total_ns = min_total_ns;
  options.executor.threads = 1;
  return options;
}

TEST(OneDnnMeasurer, TimesAPlanAndAGroupWithFixedThreads) {
  OneDnnMeasurer measurer(OneThread(5'000'000));
  Graph g = SmallGraph();
  auto plan = measurer.MeasurePlan(g, UnfusedPlan(g));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_GT(plan->median_ns, 0);
  EXPECT_EQ(plan->threads, 1);
  auto group = measurer.MeasureGroup(g, FusionGroup{GroupKind::kAnchor, {0, 1}, {}});
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  EXPECT_GT(group->median_ns, 0);
}

// Plans measured side by side: one measurement each, in order, each saying how its groups ran.
TEST(OneDnnMeasurer, MeasuresPlansSideBySide) {
  OneDnnMeasurerOptions options = OneThread(3'000'000);
  OneDnnMeasurer measurer(options);
  Graph g = SmallGraph();
  FusionPlan fused{{FusionGroup{GroupKind::kAnchor, {0, 1}, {}}}};
  auto ms = measurer.MeasurePlans(g, {UnfusedPlan(g), fused});
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();
  ASSERT_EQ(ms->size(), 2u);
  EXPECT_EQ((*ms)[0].primitive_chain.size(), 2u);
  EXPECT_EQ((*ms)[1].primitive_chain.size(), 1u);
  for (const Measurement& m : *ms) {
    EXPECT_GT(m.median_ns, 0);
    EXPECT_GE(m.samples, options.timing.min_repeats);
    EXPECT_EQ(m.threads, 1);
  }
  // A plan that is not legal for the graph is an error, not a time.
  FusionPlan bad{{FusionGroup{GroupKind::kAnchor, {0, 7}, {}}}};
  EXPECT_FALSE(measurer.MeasurePlans(g, {fused, bad}).ok());
}

// Each group of the plan timed alone and inside it, in the plan's order.
TEST(OneDnnMeasurer, TimesEachGroupAloneAndInsideThePlan) {
  OneDnnMeasurer measurer(OneThread(1'000'000));
  Graph g = SmallGraph();
  auto times = measurer.MeasureGroupsInPlan(g, UnfusedPlan(g), 2);
  ASSERT_TRUE(times.ok()) << times.status().ToString();
  ASSERT_EQ(times->alone_ns.size(), 2u);
  ASSERT_EQ(times->in_plan_ns.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_GT(times->alone_ns[i], 0) << "group " << i;
    EXPECT_GT(times->in_plan_ns[i], 0) << "group " << i;
  }
  // A recorded table has no such timings.
  RecordedMeasurer recorded;
  EXPECT_EQ(recorded.MeasureGroupsInPlan(g, UnfusedPlan(g), 1).status().code(),
            Status::Code::kUnimplemented);
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
  // A sequence is answered in order, its last answer repeating.
  Measurement a, b;
  a.median_ns = 10;
  b.median_ns = 20;
  recorded.RecordSequence(RecordedMeasurer::PlanKey(g, UnfusedPlan(g)), {a, b});
  for (int64_t want : {10, 20, 20})
    EXPECT_EQ(recorded.MeasurePlan(g, UnfusedPlan(g))->median_ns, want);
  // Several plans at once are answered one after the other; one not recorded fails them all.
  recorded.RecordSequence(RecordedMeasurer::PlanKey(g, UnfusedPlan(g)), {a, b});
  FusionPlan fused{{group}};
  recorded.Record(RecordedMeasurer::PlanKey(g, fused), m);
  auto both = recorded.MeasurePlans(g, {UnfusedPlan(g), fused, UnfusedPlan(g)});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  ASSERT_EQ(both->size(), 3u);
  EXPECT_EQ((*both)[0].median_ns, 10);
  EXPECT_EQ((*both)[1].median_ns, 1234);
  EXPECT_EQ((*both)[2].median_ns, 20);
  FusionPlan other{
      {FusionGroup{GroupKind::kAnchor, {0}, {}}, FusionGroup{GroupKind::kSingle, {1}, {}}}};
  EXPECT_EQ(recorded.MeasurePlans(g, {fused, other}).status().code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace fusor
