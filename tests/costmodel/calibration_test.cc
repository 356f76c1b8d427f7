#include "costmodel/calibration.h"
#include "costmodel/in_plan.h"
#include "lowering/plan_legality.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace fusor {
namespace {

// What a plan's groups take under `p`, one after another.
double PlanNs(const Graph& g, const FusionPlan& plan, const HardwareProfile& p) {
  double ns = 0;
  for (const GroupFeatures& f : PlanFeatures(g, plan, p.target))
    ns += EvaluateFeatures(f, p).total_ns;
  return ns;
}

// Samples of every benchmark of the suite, timed as `truth` predicts.
std::vector<CalibrationSample> TruthSamples(const std::vector<CalibrationBenchmark>& suite,
                                            const HardwareProfile& truth) {
  std::vector<CalibrationSample> samples;
  for (const auto& b : suite) {
    std::vector<GroupFeatures> groups = PlanFeatures(b.graph, b.plan, truth.target);
    GroupFeatures f = groups[0];
    f.then.assign(groups.begin() + 1, groups.end());
    samples.push_back({b.name, f, PlanNs(b.graph, b.plan, truth)});
  }
  return samples;
}

// Every benchmark is one group, but for the handoff benchmarks: a conv, then a group reading its
// output. On an ISA where oneDNN has brgemm convs (lowering/layout.h) the transposes around a
// channels-last conv are pinned too; elsewhere nothing is transposed.
TEST(CalibrationSuite, EveryBenchmarkIsALegalPlanAndEveryParameterIsExercised) {
  TargetFingerprint t;
  t.isa = "avx512_core_bf16";
  auto suite = CalibrationSuite(t);
  EXPECT_GE(suite.size(), 40u);
  std::set<std::string> names;
  for (const auto& b : suite) {
    EXPECT_TRUE(names.insert(b.name).second) << "duplicate " << b.name;
    bool handoff = b.name.rfind("handoff_", 0) == 0;
    ASSERT_EQ(b.plan.groups.size(), handoff ? 2u : 1u) << b.name;
    EXPECT_TRUE(CheckPlan(b.graph, b.plan).ok()) << b.name;
  }
  HardwareProfile truth;
  truth.target = t;
  // Fitting noiseless samples from a known profile: every constant must be pinned by something
  // (on one core nothing is handed off between cores: the next test).
  HardwareProfile fitted;
  fitted.dispatch_ns.value *= 3;
  fitted.matmul_gflops.value /= 2;
  ASSERT_TRUE(FitProfile(TruthSamples(suite, truth), &fitted).ok());
  for (const auto& [name, f] : fitted.Parameters()) {
    if (name.rfind("handoff_", 0) != 0) {
      EXPECT_GT(f->samples, 0) << name;
    }
  }
  EXPECT_NEAR(fitted.dispatch_ns.value / truth.dispatch_ns.value, 1, 0.05);
  EXPECT_NEAR(fitted.matmul_gflops.value / truth.matmul_gflops.value, 1, 0.05);

  t.isa = "avx";  // No brgemm convs (lowering/layout.h): nothing runs channels-last.
  for (const auto& b : CalibrationSuite(t)) {
    for (const GroupFeatures& f : PlanFeatures(b.graph, b.plan, t)) {
      EXPECT_EQ(f.transposed_bytes, 0) << b.name;
    }
  }
}

TEST(CalibrationSuite, HandoffBenchmarksPinTheHandoffConstantsOnTwoCores) {
  TargetFingerprint t;
  t.cores = 2;
  t.l2_bytes = 1 << 20;  // The tensors of the handoff benchmarks fit in L2, as on an EPYC.
  t.l3_bytes = 32 << 20;
  HardwareProfile truth;
  truth.target = t;
  truth.handoff_ns.value = 3000;  // Fitted at 2.8-3.7 us on a 2-vCPU EPYC guest (30-36 GB/s).
  truth.handoff_gbps.value = 10;  // Slower, so that the bytes are a visible share here.
  auto samples = TruthSamples(CalibrationSuite(t), truth);
  int handoffs = 0;
  for (const auto& s : samples) {
    for (const GroupFeatures& next : s.features.then) handoffs += static_cast<int>(next.handoffs);
  }
  EXPECT_GE(handoffs, 4);  // At 56x56 a residual Add's tensors spill to L3: no handoff then.
  HardwareProfile fitted;
  fitted.target = t;
  ASSERT_TRUE(FitProfile(samples, &fitted).ok());
  EXPECT_GT(fitted.handoff_ns.samples, 0);
  EXPECT_GT(fitted.handoff_gbps.samples, 0);
}

TEST(Calibrate, FitsFromMeasurementsAndFlagsUnstableOnes) {
  TargetFingerprint t;
  auto suite = CalibrationSuite(t, 0.5);
  HardwareProfile truth;
  truth.elementwise_gflops.value = 13;
  int calls = 0;
  MeasureFn measure = [&](const Graph& g, const FusionPlan& plan) -> StatusOr<MeasuredTime> {
    ++calls;
    double ns = PlanNs(g, plan, truth);
    return MeasuredTime{ns, 0.01, calls == 3, {}, false};  // One unstable measurement.
  };
  size_t last_done = 0;
  auto result = Calibrate(suite, HardwareProfile{}, measure,
                          [&](size_t done, size_t, const std::string&) { last_done = done; });
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->skipped_unstable, 1);
  // No measure for the benchmarks held to oneDNN: they are left out.
  auto held =
      std::count_if(suite.begin(), suite.end(), [](const auto& b) { return b.onednn_chain; });
  EXPECT_GT(held, 0);
  EXPECT_EQ(result->samples.size(), suite.size() - 1 - held);
  EXPECT_EQ(last_done, suite.size());
  EXPECT_NEAR(result->profile.elementwise_gflops.value, 13, 0.5);
  EXPECT_GT(result->profile.calibrated_unix_ms, 0);
}

// The benchmarks that pin oneDNN's jit transcendental rates are timed by the measure held to
// oneDNN, every other by the usual one; a sample is fitted as the primitive chain it ran as.
TEST(Calibrate, BenchmarksHeldToOneDnnAreTimedByTheirOwnMeasure) {
  TargetFingerprint t;
  t.cores = 2;
  auto suite = CalibrationSuite(t, 0.5);
  std::set<std::string> held, by_usual, by_onednn;
  for (const auto& b : suite) {
    if (b.onednn_chain) held.insert(b.graph.model_name);
  }
  // Sized as the others: a quarter of L2 over the cores (float32 in, 4 bytes an element).
  const std::string size = std::to_string((t.l2_bytes * t.cores / 4) >> 10) + "KiB";
  for (const char* op : {"Exp", "Sigmoid", "swish"}) {
    EXPECT_TRUE(held.count(std::string("transcendental_onednn_") + op + "_" + size)) << op;
  }
  EXPECT_FALSE(held.count("transcendental_onednn_Erf_" + size));  // No oneDNN eltwise erf.
  auto recording = [](std::set<std::string>* seen, bool chain) -> MeasureFn {
    return [seen, chain](const Graph& g, const FusionPlan& plan) -> StatusOr<MeasuredTime> {
      seen->insert(g.model_name);
      return MeasuredTime{1e5, 0.01, false, std::vector<bool>(plan.groups.size(), chain)};
    };
  };
  auto result = Calibrate(suite, HardwareProfile{}, recording(&by_usual, false), {}, {},
                          recording(&by_onednn, true));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(by_onednn, held);
  for (const std::string& name : held) EXPECT_EQ(by_usual.count(name), 0u) << name;
  EXPECT_EQ(result->samples.size(), suite.size());
  for (const auto& s : result->samples) {
    if (!held.count(s.benchmark)) continue;
    // Timed as the chain: Sigmoid, Exp and swish as oneDNN's jit eltwise.
    const int jit = static_cast<int>(ComputeClass::kJitTranscendental);
    const int sigmoid = static_cast<int>(ComputeClass::kJitSigmoid);
    const int swish = static_cast<int>(ComputeClass::kJitSwish);
    EXPECT_GT(s.features.flops[jit] + s.features.flops[sigmoid] + s.features.flops[swish], 0)
        << s.benchmark;
  }
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

// A timing taken in a slow state of the host is taken again after the suite and the quicker kept;
// a failure then (the time limit) keeps the first.
TEST(Calibrate, DisturbedTimingsAreTakenAgainAndTheQuickerKept) {
  TargetFingerprint t;
  auto suite = CalibrationSuite(t, 0.5);
  ASSERT_GE(suite.size(), 3u);
  std::map<std::string, int> calls;
  MeasureFn measure = [&](const Graph& g, const FusionPlan&) -> StatusOr<MeasuredTime> {
    int n = ++calls[g.model_name];
    if (g.model_name == suite[0].name)
      return MeasuredTime{n == 1 ? 9000.0 : 1000.0, 0.01, false, {}, n == 1};
    if (g.model_name == suite[1].name) {
      if (n > 1) return Status::DeadlineExceeded("time limit");
      return MeasuredTime{5000, 0.01, false, {}, true};
    }
    return MeasuredTime{2000, 0.01, false, {}, false};
  };
  auto result = Calibrate(suite, HardwareProfile{}, measure);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->retimed_disturbed, 2);
  EXPECT_EQ(calls[suite[0].name], 2);
  EXPECT_EQ(calls[suite[2].name], 1);
  EXPECT_DOUBLE_EQ(result->samples.at(0).measured_ns, 1000);
  EXPECT_DOUBLE_EQ(result->samples.at(1).measured_ns, 5000);
  EXPECT_EQ(result->disturbed, std::vector<std::string>{suite[1].name});
}

// A slow state can outlast one retiming: a benchmark still disturbed is timed again in later passes
// (three at most) until a quiet timing settles it; one disturbed every time keeps its quickest and
// is reported.
TEST(Calibrate, DisturbedTimingsAreRetimedUntilQuiet) {
  TargetFingerprint t;
  auto suite = CalibrationSuite(t, 0.5);
  ASSERT_GE(suite.size(), 3u);
  std::map<std::string, int> calls;
  MeasureFn measure = [&](const Graph& g, const FusionPlan&) -> StatusOr<MeasuredTime> {
    int n = ++calls[g.model_name];
    if (g.model_name == suite[0].name) {
      const double ns[] = {9000, 7000, 1000, 500};
      return MeasuredTime{ns[std::min(n, 4) - 1], 0.01, false, {}, n < 3};
    }
    if (g.model_name == suite[1].name) {
      const double ns[] = {5000, 3000, 4000, 6000, 100};
      return MeasuredTime{ns[std::min(n, 5) - 1], 0.01, false, {}, true};
    }
    return MeasuredTime{2000, 0.01, false, {}, false};
  };
  auto result = Calibrate(suite, HardwareProfile{}, measure);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(calls[suite[0].name], 3);  // Settled by its third timing, the first quiet one.
  EXPECT_EQ(calls[suite[1].name], 4);  // The suite's timing and three passes.
  EXPECT_EQ(result->retimed_disturbed, 2 + 3);
  EXPECT_DOUBLE_EQ(result->samples.at(0).measured_ns, 1000);
  EXPECT_DOUBLE_EQ(result->samples.at(1).measured_ns, 3000);
  EXPECT_EQ(result->disturbed, std::vector<std::string>{suite[1].name});
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

TargetFingerprint Zen5() {
  TargetFingerprint t;
  t.cores = 2;
  t.l1d_bytes = 48 << 10;
  t.l2_bytes = 1 << 20;
  t.l3_bytes = 32 << 20;
  return t;
}

// Each plan of the in-plan suite pins one step: every group's weight is read one level below its
// alone level inside the plan (the first group's graph input with it), and no byte falls any
// other step.
TEST(InPlanSuite, EachPlanReadsEveryWeightOneStepColderInThePlan) {
  const TargetFingerprint t = Zen5();
  const std::vector<CalibrationBenchmark> suite = InPlanSuite(t);
  ASSERT_EQ(suite.size(), static_cast<size_t>(kColdSteps));
  for (int step = 0; step < kColdSteps; ++step) {
    const CalibrationBenchmark& b = suite[step];
    EXPECT_TRUE(CheckPlan(b.graph, b.plan).ok()) << b.name;
    const std::vector<InPlanGroupReads> reads = InPlanReadsOf(b.graph, b.plan, t);
    ASSERT_EQ(reads.size(), 6u) << b.name;
    for (size_t i = 0; i < reads.size(); ++i) {
      for (int s = 0; s < kColdSteps; ++s) {
        if (s == step) {
          EXPECT_GE(reads[i].cold_bytes[s], reads[i].weight_bytes - reads[i].input_bytes)
              << b.name << " group " << i;
          EXPECT_GT(reads[i].cold_bytes[s], 0) << b.name << " group " << i;
        } else {
          EXPECT_EQ(reads[i].cold_bytes[s], 0) << b.name << " group " << i << " step " << s;
        }
      }
    }
  }
}

// Timings that follow known constants (each group alone 5 us, inside the plan that plus the bytes
// it reads colder than alone at the constants) fit back to them.
TEST(CalibrateInPlan, FitsTheConstantsItsTimingsFollow) {
  const TargetFingerprint t = Zen5();
  InPlanConstants truth;
  truth.ns_per_byte = {0.05, 0.01, 0.03};
  InPlanMeasureFn measure = [&](const Graph& g, const FusionPlan& plan) -> StatusOr<InPlanTimes> {
    InPlanTimes times;
    for (const InPlanGroupReads& r : InPlanReadsOf(g, plan, t)) {
      times.alone_ns.push_back(5000);
      double extra = 0;
      for (int s = 0; s < kColdSteps; ++s) extra += r.cold_bytes[s] * truth.ns_per_byte[s];
      times.in_plan_ns.push_back(5000 + extra);
    }
    return times;
  };
  auto fitted = CalibrateInPlan(InPlanSuite(t), t, measure);
  ASSERT_TRUE(fitted.ok()) << fitted.status().ToString();
  for (int s = 0; s < kColdSteps; ++s)
    EXPECT_NEAR(fitted->ns_per_byte[s], truth.ns_per_byte[s], 1e-9);
  EXPECT_EQ(fitted->samples, 18);
}

TEST(CalibrateInPlan, AMeasurementErrorIsReturned) {
  InPlanMeasureFn measure = [](const Graph& g, const FusionPlan&) -> StatusOr<InPlanTimes> {
    return Status::Unimplemented("cannot time " + g.model_name);
  };
  auto fitted = CalibrateInPlan(InPlanSuite(Zen5()), Zen5(), measure);
  EXPECT_EQ(fitted.status().code(), Status::Code::kUnimplemented);
}

TEST(CalibrationLog, SamplesRoundTripThroughJson) {
  CalibrationSample s{"x", {}, 1234.5};
  s.features.flops[2] = 1e9;
  s.features.read_bytes[3] = 42;
  s.features.post_ops = 3;
  s.features.tile_read_bytes = 8192;
  s.features.tile_write_bytes = 4096;
  GroupFeatures next;
  next.handoffs = 1;
  next.handoff_bytes = 2048;
  s.features.then.push_back(next);
  auto back = SampleFromJson(SampleToJson(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->benchmark, "x");
  EXPECT_DOUBLE_EQ(back->features.flops[2], 1e9);
  EXPECT_DOUBLE_EQ(back->features.read_bytes[3], 42);
  EXPECT_DOUBLE_EQ(back->features.tile_read_bytes, 8192);
  EXPECT_DOUBLE_EQ(back->features.tile_write_bytes, 4096);
  ASSERT_EQ(back->features.then.size(), 1u);
  EXPECT_DOUBLE_EQ(back->features.then[0].handoffs, 1);
  EXPECT_DOUBLE_EQ(back->features.then[0].handoff_bytes, 2048);
  EXPECT_FALSE(SampleFromJson(nlohmann::json{{"benchmark", "y"}}).ok());
  nlohmann::json no_tiles = SampleToJson(s);
  no_tiles.erase("tile_read_bytes");
  auto missing = SampleFromJson(no_tiles);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tile_read_bytes"), std::string::npos);
}

}  // namespace
}  // namespace fusor
