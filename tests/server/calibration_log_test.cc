// The service's side of the calibration log on a real SQLite file, without measuring: samples go
// in as a run and come back as the same CalibrationSamples; a stored row whose features do not read
// back is skipped, counted and logged naming its benchmark; other cost-model versions are not read.
#include "server/calibration_log.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
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

class CalibrationLogTest : public ::testing::Test {
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

TEST_F(CalibrationLogTest, SamplesRoundTripThroughTheLog) {
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

TEST_F(CalibrationLogTest, ACorruptRowIsSkippedCountedAndLoggedByName) {
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

TEST_F(CalibrationLogTest, SampleFromRowNamesTheRowAndBenchmark) {
  StatusOr<CalibrationSample> bad = SampleFromRow({42, "conv3x3_c64_56", "{", 10, 0}, "x.db");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("sample 42 (benchmark 'conv3x3_c64_56')"),
            std::string::npos)
      << bad.status().message();
}

TEST_F(CalibrationLogTest, OtherCostModelVersionsAreNotRead) {
  Append(RunToAppend(kTarget, "analytical-0", {{Sample("stream_relu_16KiB", 1200, 1)}}, {}));
  EXPECT_TRUE(Load().samples.empty());
  EXPECT_EQ(Load("analytical-0").samples.size(), 1u);
}

TEST_F(CalibrationLogTest, AFittedSampleCarriesTheProfilesPrediction) {
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

}  // namespace
}  // namespace fusor
