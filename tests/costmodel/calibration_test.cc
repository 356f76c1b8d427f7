#include "costmodel/calibration.h"

#include <gtest/gtest.h>

#include <set>

namespace fusor {
namespace {

TEST(CalibrationSuite, EveryBenchmarkIsOneLegalGroupAndEveryParameterIsExercised) {
  TargetFingerprint t;
  auto suite = CalibrationSuite(t);
  EXPECT_GE(suite.size(), 40u);
  std::set<std::string> names;
  HardwareProfile truth;
  std::vector<CalibrationSample> samples;
  for (const auto& b : suite) {
    EXPECT_TRUE(names.insert(b.name).second) << "duplicate " << b.name;
    ASSERT_EQ(b.plan.groups.size(), 1u) << b.name;
    EXPECT_TRUE(CheckPlan(b.graph, b.plan).ok()) << b.name;
    GroupFeatures f = PlanFeatures(b.graph, b.plan, t)[0];
    samples.push_back({b.name, f, EvaluateFeatures(f, truth).total_ns});
  }
  // Fitting noiseless samples from a known profile: every constant must be pinned by something.
  HardwareProfile fitted;
  fitted.dispatch_ns.value *= 3;
  fitted.matmul_gflops.value /= 2;
  ASSERT_TRUE(FitProfile(samples, &fitted).ok());
  for (const auto& [name, f] : fitted.Parameters()) EXPECT_GT(f->samples, 0) << name;
  EXPECT_NEAR(fitted.dispatch_ns.value / truth.dispatch_ns.value, 1, 0.05);
  EXPECT_NEAR(fitted.matmul_gflops.value / truth.matmul_gflops.value, 1, 0.05);
}

TEST(Calibrate, FitsFromMeasurementsAndFlagsUnstableOnes) {
  TargetFingerprint t;
  auto suite = CalibrationSuite(t, 0.5);
  HardwareProfile truth;
  truth.elementwise_gflops.value = 13;
  int calls = 0;
  MeasureFn measure = [&](const Graph& g, const FusionPlan& plan) -> StatusOr<MeasuredTime> {
    ++calls;
    double ns = EvaluateFeatures(PlanFeatures(g, plan, t)[0], truth).total_ns;
    return MeasuredTime{ns, 0.01, calls == 3};  // One unstable measurement.
  };
  size_t last_done = 0;
  auto result = Calibrate(suite, HardwareProfile{}, measure,
                          [&](size_t done, size_t, const std::string&) { last_done = done; });
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->skipped_unstable, 1);
  EXPECT_EQ(result->samples.size(), suite.size() - 1);
  EXPECT_EQ(last_done, suite.size());
  EXPECT_NEAR(result->profile.elementwise_gflops.value, 13, 0.5);
  EXPECT_GT(result->profile.calibrated_unix_ms, 0);
}

// A benchmark the runtime may run as our loop or as a oneDNN primitive chain is fitted as the way
// the measurer says it ran; when the measurer cannot say, as the least of both.
TEST(Calibrate, ASampleKeepsTheFeaturesOfTheKernelThatRan) {
  TargetFingerprint t;
  std::vector<CalibrationBenchmark> one;
  for (const auto& b : CalibrationSuite(t, 0.5)) {
    if (b.name.rfind("transcendental_Sigmoid", 0) == 0 && one.empty()) one.push_back(b);
  }
  ASSERT_EQ(one.size(), 1u);
  GroupFeatures both = PlanFeatures(one[0].graph, one[0].plan, t)[0];
  ASSERT_EQ(both.or_else.size(), 1u);
  for (std::vector<bool> ran : {std::vector<bool>{true}, {false}, {}}) {
    MeasureFn measure = [&](const Graph&, const FusionPlan&) -> StatusOr<MeasuredTime> {
      return MeasuredTime{1e5, 0.01, false, ran};
    };
    auto result = Calibrate(one, HardwareProfile{}, measure);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    const GroupFeatures& f = result->samples.at(0).features;
    const GroupFeatures& want = !ran.empty() && ran[0] ? both.or_else[0] : both;
    EXPECT_EQ(f.or_else.size(), ran.empty() ? 1u : 0u);
    EXPECT_EQ(f.flops, want.flops);
    EXPECT_EQ(f.kernels, want.kernels);
    EXPECT_EQ(f.loop_kernels, want.loop_kernels);
  }
}

TEST(Calibrate, AMeasurementErrorNamesTheBenchmark) {
  auto suite = CalibrationSuite(TargetFingerprint{}, 0.5);
  MeasureFn failing = [](const Graph&, const FusionPlan&) -> StatusOr<MeasuredTime> {
    return Status::Unimplemented("no kernel");
  };
  auto result = Calibrate(suite, HardwareProfile{}, failing);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("calibration benchmark '" + suite[0].name + "'"),
            std::string::npos);
}

TEST(CalibrationLog, SamplesRoundTripThroughJson) {
  CalibrationSample s{"x", {}, 1234.5};
  s.features.flops[2] = 1e9;
  s.features.read_bytes[3] = 42;
  s.features.post_ops = 3;
  auto back = SampleFromJson(SampleToJson(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->benchmark, "x");
  EXPECT_DOUBLE_EQ(back->features.flops[2], 1e9);
  EXPECT_DOUBLE_EQ(back->features.read_bytes[3], 42);
  EXPECT_FALSE(SampleFromJson(nlohmann::json{{"benchmark", "y"}}).ok());
}

}  // namespace
}  // namespace fusor
