#include "costmodel/fit.h"

#include <gtest/gtest.h>

#include <random>

namespace fusor {
namespace {

// A "true" profile, unlike the defaults everywhere.
HardwareProfile Truth() {
  HardwareProfile p;
  double scale = 0.6;
  for (auto& [name, f] : p.Parameters()) {
    f->value *= scale;
    scale = scale > 1.5 ? 0.6 : scale + 0.13;
  }
  p.overlap_alpha.value = 0.35;
  p.target.cores = 2;  // Serial groups run on one of them.
  return p;
}

// Samples like calibration's: each exercises a few terms, magnitudes spread over decades.
std::vector<CalibrationSample> SyntheticSamples(const HardwareProfile& truth, double noise,
                                                uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_size(3, 8);
  std::normal_distribution<double> jitter(0, noise);
  std::vector<CalibrationSample> out;
  for (int i = 0; i < 600; ++i) {
    GroupFeatures f;
    (i % 3 == 0 ? f.loop_kernels : f.kernels) = 1;
    // 13 kinds (every compute class, then read-heavy, write-heavy and neither): prime, so that no
    // other term below always comes with the same class.
    static_assert(kNumComputeClasses + 3 == 13);
    int kind = i % 13;
    double size = std::pow(10, log_size(rng));
    if (kind < kNumComputeClasses) f.flops[kind] = size * (kind == 4 || kind == 6 ? 0.1 : 10);
    int level = (i / 8) % 4;
    f.read_bytes[level] = size * (kind == kNumComputeClasses ? 4 : 0.5);
    f.write_bytes[level] = size * (kind == kNumComputeClasses + 1 ? 4 : 0.25);
    if (i % 5 == 0) f.post_ops = 1 + (i % 7);
    if (i % 23 == 0) f.spilled_value_vectors = size / 8;  // Coprime with the kinds' cycle.
    if (i % 7 == 3) f.indexed_elements = size;
    if (i % 41 == 4) f.gathered_elements = size / 2;
    if (i % 17 == 5) f.remapped_elements = size / 3;
    if (i % 47 == 12) f.strided_elements = size / 2;
    if (i % 19 == 6) f.eval_calls = size / 100;
    if (i % 29 == 8) f.run_calls = size / 50;
    if (i % 43 == 11) f.chain_steps = size * 2;
    if (i % 53 == 13) f.rnn_steps = size / 20;
    if (i % 31 == 9) {
      f.handoffs = 1 + i % 3;
      f.handoff_bytes = size;
    }
    if (i % 6 == 1) {
      f.reorder_bytes = size * 2;
      f.kernels += 2;
    }
    if (i % 37 == 10) {
      f.transposed_bytes = size;
      f.kernels += 1;
    }
    // Serial groups (one core, no team to wake) and parallel ones.
    f.threads = i % 4 == 2 ? 1 : truth.target.cores;
    if (f.threads > 1 && i % 9 < 5) f.forks = f.kernels + f.loop_kernels;
    double t = EvaluateFeatures(f, truth).total_ns * (1 + jitter(rng));
    out.push_back({"synthetic_" + std::to_string(i), f, t});
  }
  return out;
}

TEST(FitProfile, RecoversTheParametersThatGeneratedTheSamples) {
  HardwareProfile truth = Truth();
  auto samples = SyntheticSamples(truth, 0.0, 7);
  HardwareProfile fitted;  // Starts from the defaults, on the same machine.
  fitted.target = truth.target;
  auto report = FitProfile(samples, &fitted);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_LT(report->rms_rel_error, 1e-3);
  auto want = truth.Parameters();
  auto got = fitted.Parameters();
  for (size_t j = 0; j < want.size(); ++j) {
    if (got[j].first == "reorder") continue;
    EXPECT_NEAR(got[j].second->value / want[j].second->value, 1.0, 0.02) << got[j].first;
    EXPECT_GT(got[j].second->samples, 0) << got[j].first;
  }
}

TEST(FitProfile, NoisySamplesStillFitWithinTheNoise) {
  HardwareProfile truth = Truth();
  auto samples = SyntheticSamples(truth, 0.05, 11);
  HardwareProfile fitted;
  fitted.target = truth.target;
  auto report = FitProfile(samples, &fitted);
  ASSERT_TRUE(report.ok());
  EXPECT_LT(report->rms_rel_error, 0.08);
  EXPECT_NEAR(fitted.matmul_gflops.value / truth.matmul_gflops.value, 1.0, 0.1);
  EXPECT_NEAR(fitted.dram_read_gbps.value / truth.dram_read_gbps.value, 1.0, 0.1);
  EXPECT_TRUE(CheckPlausible(fitted).ok());
}

// A loaded machine: one sample in thirteen measured 3-10x too slow (another process held the core).
// The Cauchy stage must keep them from dragging the constants they share.
TEST(FitProfile, SamplesDisturbedByOtherProcessesDoNotDragTheFit) {
  HardwareProfile truth = Truth();
  auto samples = SyntheticSamples(truth, 0.03, 13);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> slowdown(3, 10);
  // Every 11th: a stride coprime with the sample kinds' cycle (13), so that disturbed samples
  // spread over them.
  for (size_t i = 0; i < samples.size(); i += 11) samples[i].measured_ns *= slowdown(rng);
  HardwareProfile fitted;
  fitted.target = truth.target;
  ASSERT_TRUE(FitProfile(samples, &fitted).ok());
  EXPECT_NEAR(fitted.matmul_gflops.value / truth.matmul_gflops.value, 1.0, 0.1);
  EXPECT_NEAR(fitted.conv_gflops.value / truth.conv_gflops.value, 1.0, 0.1);
  EXPECT_NEAR(fitted.dram_read_gbps.value / truth.dram_read_gbps.value, 1.0, 0.1);
  EXPECT_NEAR(fitted.dispatch_ns.value / truth.dispatch_ns.value, 1.0, 0.15);
}

TEST(FitProfile, UnexercisedParametersStayPutAndSayZeroSamples) {
  HardwareProfile truth = Truth();
  std::vector<CalibrationSample> only_matmul;
  for (const auto& s : SyntheticSamples(truth, 0, 3)) {
    if (s.features.flops[static_cast<int>(ComputeClass::kMatMul)] > 0) only_matmul.push_back(s);
  }
  HardwareProfile fitted;
  fitted.target = truth.target;
  ASSERT_TRUE(FitProfile(only_matmul, &fitted).ok());
  EXPECT_EQ(fitted.depthwise_conv_gflops.samples, 0);
  EXPECT_NEAR(fitted.depthwise_conv_gflops.value, HardwareProfile{}.depthwise_conv_gflops.value,
              1e-6);
}

// Samples that pin L2 writes at 1 TB/s and say nothing of L1 writes: the fit keeps the hierarchy's
// order (L1 at least as fast as L2) instead of leaving L1 writes at the default 200 GB/s below it.
TEST(FitProfile, KeepsTheMemoryHierarchyInOrder) {
  HardwareProfile truth;
  truth.l2_write_gbps.value = 1000;
  std::vector<CalibrationSample> samples;
  for (int i = 0; i < 20; ++i) {
    GroupFeatures f;
    f.kernels = 1;
    f.write_bytes[static_cast<int>(MemoryLevel::kL2)] = 1e6 * (1 + i);
    samples.push_back({"l2_write_" + std::to_string(i), f, EvaluateFeatures(f, truth).total_ns});
  }
  HardwareProfile fitted;
  ASSERT_TRUE(FitProfile(samples, &fitted).ok());
  EXPECT_GT(fitted.l2_write_gbps.value, 500);
  EXPECT_GE(fitted.l1_write_gbps.value, 0.97 * fitted.l2_write_gbps.value);
  EXPECT_GE(fitted.l2_read_gbps.value, 0.97 * fitted.l3_read_gbps.value);
}

TEST(FitProfile, RejectsEmptyAndNonPositiveSamples) {
  HardwareProfile p;
  EXPECT_FALSE(FitProfile({}, &p).ok());
  CalibrationSample bad{"broken", GroupFeatures{}, 0};
  EXPECT_NE(FitProfile({bad}, &p).status().message().find("'broken'"), std::string::npos);
}

}  // namespace
}  // namespace fusor
