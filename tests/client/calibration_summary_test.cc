// What `fusor calibrate` prints about a fit (client/calibration_summary.h): a run with 97 noisy
// benchmarks, two slow runs and slow timings reads as lines within 100 columns, the noisy ones
// counted per family unless --list-noisy asks for each name.
#include "client/calibration_summary.h"

#include <gtest/gtest.h>

#include <sstream>

#include "client/text_format.h"

namespace fusor {
namespace {

// A response as fusord sends it after a calibration on a busy host.
v1::CalibrateResponse BusyHostResponse() {
  v1::CalibrateResponse r;
  r.set_samples_used(1234);
  r.set_runs_used(9);
  r.set_run_samples(41);
  r.set_run_id(12);
  r.set_samples_skipped(3);
  r.set_slow_timings(17);
  for (int i = 0; i < 60; ++i)
    r.add_unstable("stream_relu_" + std::to_string(16 << i % 12) + "KiB (cv 0.1" +
                   std::to_string(i % 10) + "0000)");
  for (int i = 0; i < 30; ++i)
    r.add_unstable("conv3x3_c" + std::to_string(16 + i) + "_56 (cv 0.210000)");
  for (int i = 0; i < 7; ++i)
    r.add_unstable("matmul_" + std::to_string(64 << i) + "x64x64 (cv 0.330000)");
  for (int run : {4, 12}) {
    v1::SlowCalibrationRun* slow = r.add_slow_runs();
    slow->set_run_id(run);
    slow->set_slowdown(1.52);
  }
  return r;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(CalibrationSummary, NoisyBenchmarksAreCountedPerFamilyWithinOneHundredColumns) {
  const std::string text = CalibrationSummary(BusyHostResponse(), /*list_noisy=*/false);
  for (const std::string& line : Lines(text)) EXPECT_LE(line.size(), kTextColumns) << line;
  EXPECT_NE(text.find("fit over 1234 samples from 9 calibration runs (41 measured now, run 12)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("run 12 (this one), 1.52x slower"), std::string::npos) << text;
  EXPECT_NE(text.find("17 timings left out"), std::string::npos) << text;
  EXPECT_NE(text.find("97 benchmarks stayed too noisy to fit"), std::string::npos) << text;
  EXPECT_NE(text.find("stream     60      0.19"), std::string::npos) << text;
  EXPECT_NE(text.find("conv       30      0.21"), std::string::npos) << text;
  EXPECT_NE(text.find("matmul      7      0.33"), std::string::npos) << text;
  EXPECT_EQ(text.find("stream_relu_16KiB"), std::string::npos) << "names only with --list-noisy";
  EXPECT_LT(Lines(text).size(), 20u) << text;
}

TEST(CalibrationSummary, ListNoisyNamesEveryBenchmarkOnALineOfItsOwn) {
  const std::string text = CalibrationSummary(BusyHostResponse(), /*list_noisy=*/true);
  for (const std::string& line : Lines(text)) EXPECT_LE(line.size(), kTextColumns) << line;
  EXPECT_NE(text.find("\n  stream_relu_16KiB (cv 0.100000)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  matmul_4096x64x64 (cv 0.330000)\n"), std::string::npos) << text;
}

TEST(CalibrationSummary, AQuietRunSaysOnlyWhatTheFitUsed) {
  v1::CalibrateResponse r;
  r.set_samples_used(138);
  r.set_runs_used(1);
  r.set_run_samples(138);
  r.set_run_id(1);
  EXPECT_EQ(CalibrationSummary(r, false),
            "fit over 138 samples from 1 calibration runs (138 measured now, run 1)\n");
}

TEST(CalibrationSummary, BenchmarkFamiliesAreTheNamesFirstWord) {
  EXPECT_EQ(BenchmarkFamily("stream_relu_16KiB"), "stream");
  EXPECT_EQ(BenchmarkFamily("conv3x3_c64_56"), "conv");
  EXPECT_EQ(BenchmarkFamily("matmul_256x256x256"), "matmul");
  EXPECT_EQ(BenchmarkFamily("reduce_mean_128x768"), "reduce");
  EXPECT_EQ(BenchmarkFamily("_odd"), "_odd");
}

}  // namespace
}  // namespace fusor
