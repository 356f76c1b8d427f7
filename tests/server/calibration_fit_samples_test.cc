// The service's side of the calibration log on a real SQLite file, without measuring: samples go
// in as a run and come back as the same CalibrationSamples; a stored row whose features do not read
// back is skipped, counted and logged naming its benchmark; other cost-model versions are not read.
#include "server/calibration_fit_samples.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "costmodel/calibration.h"
#include "costmodel/cost_model.h"
#include "db/sqlite_plan_store.h"

namespace fusor {
namespace {

constexpr const char* kTarget = "target-a";

CalibrationSample Sample(const std::string& name, double ns, double scale) {
  CalibrationSample s;
  s.benchmark = name;
  s.measured_ns = ns;
  s.features.flops[0] = 1e6 * scale;
  s.features.read_bytes[1] = 4096 * scale;
  s.features.write_bytes[3] = 1 << 20;
  s.features.kernels = 1;
  s.features.post_ops = scale;
  return s;
}

class CalibrationFitSamplesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fusor_calibration_log_XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto store = db::SqlitePlanStore::Open(dir_ + "/tuning.db", {});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    v1::HardwareProfile target;
    target.mutable_target()->set_id(kTarget);
    target.set_cost_model_version(kCostModelVersion);
    ASSERT_TRUE(store_->PutTarget(target).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  int64_t Append(const db::CalibrationRun& run) {
    StatusOr<int64_t> id = store_->AppendCalibrationRun(run);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : -1;
  }

  LoggedSamples Load(const std::string& cmv = kCostModelVersion) {
    StatusOr<LoggedSamples> logged = LoadCalibrationLog(*store_, {kTarget, cmv, 8});
    EXPECT_TRUE(logged.ok()) << logged.status().ToString();
    return logged.ok() ? *logged : LoggedSamples();
  }

  std::string dir_;
  std::unique_ptr<db::SqlitePlanStore> store_;
};

TEST_F(CalibrationFitSamplesTest, SamplesRoundTripThroughTheLog) {
  std::vector<CalibrationSample> first = {Sample("stream_relu_16KiB", 1200, 1),
                                          Sample("matmul_64x64x64", 5300, 2)};
  int64_t run1 =
      Append(RunToAppend(kTarget, kCostModelVersion, first, {{"matmul_64x64x64", 0.03}}));
  int64_t run2 =
      Append(RunToAppend(kTarget, kCostModelVersion, {{Sample("tiny_relu_8", 900, 3)}}, {}));
  LoggedSamples logged = Load();
  EXPECT_EQ(logged.runs, 2);
  EXPECT_EQ(logged.skipped, 0);
  ASSERT_EQ(logged.samples.size(), 3u);
  EXPECT_EQ(logged.run_ids, (std::vector<int64_t>{run2, run1, run1}));  // Newest run first.
  EXPECT_EQ(SampleToJson(logged.samples[0]), SampleToJson(Sample("tiny_relu_8", 900, 3)));
  EXPECT_EQ(SampleToJson(logged.samples[1]), SampleToJson(first[0]));
  EXPECT_EQ(SampleToJson(logged.samples[2]), SampleToJson(first[1]));
  auto runs = store_->CalibrationRuns({kTarget, kCostModelVersion, 8});
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->at(1).samples[1].cv, 0.03);
  EXPECT_EQ(runs->at(1).samples[0].cv, 0);
}

TEST_F(CalibrationFitSamplesTest, ACorruptRowIsSkippedCountedAndLoggedByName) {
  db::CalibrationRun run =
      RunToAppend(kTarget, kCostModelVersion, {{Sample("stream_relu_16KiB", 1200, 1)}}, {});
  run.samples.push_back({0, "broken_json", "{\"flops\": [1, 2", 100, 0});
  run.samples.push_back({0, "missing_keys", "{\"benchmark\": \"missing_keys\"}", 100, 0});
  run.samples.push_back({0, "not_an_object", "[1, 2, 3]", 100, 0});
  Append(run);
  Append({0, kTarget, kCostModelVersion, 0, {{0, "all_bad", "nonsense", 50, 0}}, ""});

  std::ostringstream log;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  LoggedSamples logged = Load();
  spdlog::set_default_logger(previous);

  ASSERT_EQ(logged.samples.size(), 1u);
  EXPECT_EQ(logged.samples[0].benchmark, "stream_relu_16KiB");
  EXPECT_EQ(logged.skipped, 4);
  EXPECT_EQ(logged.runs, 1);  // The run with nothing usable does not count.
  for (const char* name : {"'broken_json'", "'missing_keys'", "'not_an_object'", "'all_bad'"}) {
    EXPECT_NE(log.str().find(name), std::string::npos) << name << " not in:\n" << log.str();
  }
  EXPECT_NE(log.str().find("tuning.db"), std::string::npos) << log.str();
}

TEST_F(CalibrationFitSamplesTest, SampleFromRowNamesTheRowAndBenchmark) {
  StatusOr<CalibrationSample> bad = SampleFromRow({42, "conv3x3_c64_56", "{", 10, 0}, "x.db");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("sample 42 (benchmark 'conv3x3_c64_56')"),
            std::string::npos)
      << bad.status().message();
}

TEST_F(CalibrationFitSamplesTest, OtherCostModelVersionsAreNotRead) {
  Append(RunToAppend(kTarget, "analytical-0", {{Sample("stream_relu_16KiB", 1200, 1)}}, {}));
  EXPECT_TRUE(Load().samples.empty());
  EXPECT_EQ(Load("analytical-0").samples.size(), 1u);
}

TEST_F(CalibrationFitSamplesTest, AFittedSampleCarriesTheProfilesPrediction) {
  HardwareProfile profile;
  CalibrationSample s = Sample("matmul_64x64x64", 5300, 2);
  v1::FittedSample fitted = FittedSampleOf(s, 7, profile);
  EXPECT_EQ(fitted.benchmark(), "matmul_64x64x64");
  EXPECT_EQ(fitted.run_id(), 7);
  EXPECT_EQ(fitted.measured_ns(), 5300);
  EXPECT_DOUBLE_EQ(fitted.predicted_ns(), EvaluateFeatures(s.features, profile).total_ns);
  EXPECT_GT(fitted.predicted_ns(), 0);
  EXPECT_EQ(nlohmann::json::parse(fitted.features_json()), SampleToJson(s));
}

// Runs are compared on the median of their shared benchmarks' time ratios: a run ~1.85x slower
// than the quickest (a whole calibration in a slow state of the host) stands out, one with a few
// noisy benchmarks does not, and a run sharing too few benchmarks is not compared. Read back from
// the log, as the service compares them.
TEST_F(CalibrationFitSamplesTest, RunsAreComparedByTheirMedianBenchmark) {
  auto run = [](double scale, int benchmarks, int noisy) {
    std::vector<CalibrationSample> samples;
    for (int b = 0; b < benchmarks; ++b) {
      double noise = b < noisy ? 3.0 : 1.0;  // A few benchmarks 3x slow: not the median.
      samples.push_back(Sample("bench_" + std::to_string(b), 1000.0 * (b + 1) * scale * noise, 1));
    }
    return samples;
  };
  int64_t quick = Append(RunToAppend(kTarget, kCostModelVersion, run(1.0, 30, 5), {}));
  int64_t slow = Append(RunToAppend(kTarget, kCostModelVersion, run(1.85, 30, 0), {}));
  int64_t few =
      Append(RunToAppend(kTarget, kCostModelVersion, run(5.0, kMinSharedBenchmarks - 1, 0), {}));
  LoggedSamples earlier = Load();
  ASSERT_EQ(earlier.runs, 3);
  const std::vector<CalibrationSample> now = run(1.1, 30, 2);
  std::vector<RunSlowdown> compared = CompareCalibrationRuns(earlier, now, 99);
  ASSERT_EQ(compared.size(), 3u);  // This run first, then the earlier runs compared.
  std::map<int64_t, double> slowdown;
  for (const RunSlowdown& r : compared) slowdown[r.run_id] = r.slowdown;
  EXPECT_EQ(compared[0].run_id, 99);
  EXPECT_NEAR(slowdown.at(99), 1.1, 1e-9);
  EXPECT_NEAR(slowdown.at(quick), 1.0, 1e-9);
  EXPECT_NEAR(slowdown.at(slow), 1.85, 1e-9);
  EXPECT_FALSE(slowdown.count(few));
  EXPECT_GT(slowdown.at(slow), kSlowCalibrationRun);
  EXPECT_LT(slowdown.at(99), kSlowCalibrationRun);
  // Without an earlier run to compare with there is nothing to say.
  EXPECT_TRUE(CompareCalibrationRuns(LoggedSamples(), now, 99).empty());

  LoggedSamples kept = WithoutRuns(earlier, {slow});
  EXPECT_EQ(kept.runs, 2);
  EXPECT_EQ(kept.samples.size(), earlier.samples.size() - 30);
  for (int64_t id : kept.run_ids) EXPECT_NE(id, slow);

  // Timings over 1.35x their benchmark's quickest go, one by one: the quick run's five noisy ones
  // (3x the slow run's 1.85x), the slow run's 1.85x ones except where the quick run was noisy,
  // and all of the last run's (5x). A run left with nothing is no longer counted.
  std::vector<std::string> dropped;
  LoggedSamples fast = WithoutSlowTimings(earlier, &dropped);
  EXPECT_EQ(fast.samples.size() + dropped.size(), earlier.samples.size());
  EXPECT_EQ(dropped.size(), 5u + 25u + (kMinSharedBenchmarks - 1));
  EXPECT_EQ(fast.runs, 2);
  for (size_t i = 0; i < fast.samples.size(); ++i) {
    EXPECT_NE(fast.run_ids[i], few);
    EXPECT_EQ(fast.run_ids[i] == slow,
              fast.samples[i].benchmark < "bench_5" && fast.samples[i].benchmark.size() == 7)
        << fast.samples[i].benchmark;
  }
}

}  // namespace
}  // namespace fusor
