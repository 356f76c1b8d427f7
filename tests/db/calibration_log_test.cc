// The calibration log on real files: runs round-trip with their samples, are selected by target and
// cost-model version, come newest first under a cap, bad runs are refused, the stats count them,
// and a layered store merges the layers' runs and appends to the top one.
#include <gtest/gtest.h>

#include <cmath>

#include "db/layered_plan_store.h"
#include "db/sqlite_plan_store.h"
#include "tests/db/test_db.h"

namespace fusor::db {
namespace {

using testing::kCalibrated;
using testing::Profile;
using testing::SampleRun;

class CalibrationLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = Open("tuning.db");
    ASSERT_NE(store_, nullptr);
  }

  // A writable store at `name` that knows target-a and target-b.
  std::unique_ptr<SqlitePlanStore> Open(const std::string& name) {
    std::unique_ptr<SqlitePlanStore> store = testing::OpenWritable(dir_.File(name));
    if (store == nullptr) return nullptr;
    EXPECT_TRUE(store->PutTarget(Profile("target-a", "cm1", kCalibrated)).ok());
    EXPECT_TRUE(store->PutTarget(Profile("target-b", "cm1", kCalibrated)).ok());
    return store;
  }

  int64_t Append(PlanStore& store, const CalibrationRun& run) {
    StatusOr<int64_t> id = store.AppendCalibrationRun(run);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : -1;
  }

  std::vector<CalibrationRun> Runs(PlanStore& store, const std::string& target,
                                   const std::string& cmv, int32_t max_runs = 8) {
    StatusOr<std::vector<CalibrationRun>> runs = store.CalibrationRuns({target, cmv, max_runs});
    EXPECT_TRUE(runs.ok()) << runs.status().ToString();
    return runs.ok() ? *runs : std::vector<CalibrationRun>();
  }

  testing::TempDir dir_;
  std::unique_ptr<SqlitePlanStore> store_;
};

TEST_F(CalibrationLogTest, RunsRoundTripNewestFirstWithTheirSamples) {
  int64_t first = Append(*store_, SampleRun("target-a", "cm1", 3, kCalibrated + 1));
  int64_t second = Append(*store_, SampleRun("target-a", "cm1", 2, kCalibrated + 2));
  EXPECT_GT(second, first);
  std::vector<CalibrationRun> runs = Runs(*store_, "target-a", "cm1");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].run_id, second);
  EXPECT_EQ(runs[0].run_unix_ms, kCalibrated + 2);
  EXPECT_EQ(runs[0].samples.size(), 2u);
  EXPECT_EQ(runs[0].database, store_->path());
  const CalibrationRun& old = runs[1];
  EXPECT_EQ(old.run_id, first);
  EXPECT_EQ(old.target_id, "target-a");
  EXPECT_EQ(old.cost_model_version, "cm1");
  CalibrationRun expected = SampleRun("target-a", "cm1", 3);
  ASSERT_EQ(old.samples.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_GT(old.samples[i].sample_id, 0);
    EXPECT_EQ(old.samples[i].benchmark, expected.samples[i].benchmark);
    EXPECT_EQ(old.samples[i].features_json, expected.samples[i].features_json);
    EXPECT_EQ(old.samples[i].measured_ns, expected.samples[i].measured_ns);
    EXPECT_EQ(old.samples[i].cv, expected.samples[i].cv);
  }
}

TEST_F(CalibrationLogTest, ZeroRunTimeMeansNow) {
  Append(*store_, SampleRun("target-a", "cm1", 1));
  std::vector<CalibrationRun> runs = Runs(*store_, "target-a", "cm1");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_GT(runs[0].run_unix_ms, kCalibrated);
}

TEST_F(CalibrationLogTest, OnlyTheTargetsRunsUnderTheAskedCostModelVersion) {
  Append(*store_, SampleRun("target-a", "cm1", 2));
  Append(*store_, SampleRun("target-a", "cm2", 5));  // Features of another cost model.
  Append(*store_, SampleRun("target-b", "cm1", 4));
  std::vector<CalibrationRun> runs = Runs(*store_, "target-a", "cm1");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].samples.size(), 2u);
  EXPECT_EQ(Runs(*store_, "target-a", "cm2").at(0).samples.size(), 5u);
  EXPECT_TRUE(Runs(*store_, "target-c", "cm1").empty());
}

TEST_F(CalibrationLogTest, TheCapKeepsTheNewestRuns) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Append(*store_, SampleRun("target-a", "cm1", 3)));
  std::vector<CalibrationRun> runs = Runs(*store_, "target-a", "cm1", 2);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].run_id, ids[4]);
  EXPECT_EQ(runs[1].run_id, ids[3]);
  EXPECT_EQ(runs[1].samples.size(), 3u);
  StatusOr<std::vector<CalibrationRun>> none = store_->CalibrationRuns({"target-a", "cm1", 0});
  EXPECT_EQ(none.status().code(), Status::Code::kInvalidArgument);
}

TEST_F(CalibrationLogTest, BadRunsAreRefusedNamingWhatIsWrong) {
  CalibrationRun empty = SampleRun("target-a", "cm1", 0);
  EXPECT_EQ(store_->AppendCalibrationRun(empty).status().code(), Status::Code::kInvalidArgument);
  CalibrationRun no_version = SampleRun("target-a", "", 1);
  EXPECT_EQ(store_->AppendCalibrationRun(no_version).status().code(),
            Status::Code::kInvalidArgument);
  CalibrationRun nan_time = SampleRun("target-a", "cm1", 2);
  nan_time.samples[1].measured_ns = std::nan("");
  Status s = store_->AppendCalibrationRun(nan_time).status();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("'bench_1'"), std::string::npos) << s.message();
  CalibrationRun negative_cv = SampleRun("target-a", "cm1", 1);
  negative_cv.samples[0].cv = -1;
  EXPECT_EQ(store_->AppendCalibrationRun(negative_cv).status().code(),
            Status::Code::kInvalidArgument);
  Status unknown = store_->AppendCalibrationRun(SampleRun("target-z", "cm1", 1)).status();
  EXPECT_EQ(unknown.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(unknown.message().find("target-z"), std::string::npos) << unknown.message();
  EXPECT_TRUE(Runs(*store_, "target-a", "cm1").empty());  // Nothing half-written.
}

TEST_F(CalibrationLogTest, ReadOnlyStoreReadsTheLogButCannotAppend) {
  Append(*store_, SampleRun("target-a", "cm1", 2));
  std::unique_ptr<SqlitePlanStore> reader = testing::OpenReadOnly(dir_.File("tuning.db"));
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(Runs(*reader, "target-a", "cm1").size(), 1u);
  EXPECT_EQ(reader->AppendCalibrationRun(SampleRun("target-a", "cm1", 1)).status().code(),
            Status::Code::kFailedPrecondition);
}

TEST_F(CalibrationLogTest, StatsCountSamplesAndRuns) {
  Append(*store_, SampleRun("target-a", "cm1", 3));
  Append(*store_, SampleRun("target-a", "cm2", 2));
  Append(*store_, SampleRun("target-b", "cm1", 4));
  StatusOr<std::vector<DatabaseStats>> stats = store_->Stats("");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const DatabaseStats& s = stats->at(0);
  EXPECT_EQ(s.calibration_runs, 3);
  EXPECT_EQ(s.calibration_samples, 9);
  ASSERT_EQ(s.per_target.size(), 2u);
  EXPECT_EQ(s.per_target[0].target_id, "target-a");
  EXPECT_EQ(s.per_target[0].calibration_samples, 5);
  EXPECT_EQ(s.per_target[1].calibration_samples, 4);
}

TEST_F(CalibrationLogTest, LayersMergeNewestFirstAndAppendsGoToTheTop) {
  std::unique_ptr<SqlitePlanStore> lower = Open("lower.db");
  ASSERT_NE(lower, nullptr);
  Append(*lower, SampleRun("target-a", "cm1", 1, kCalibrated + 10));
  Append(*lower, SampleRun("target-a", "cm1", 2, kCalibrated + 30));
  lower.reset();
  Append(*store_, SampleRun("target-a", "cm1", 3, kCalibrated + 20));
  store_.reset();
  std::vector<std::unique_ptr<PlanStore>> layers;
  layers.push_back(testing::OpenWritable(dir_.File("tuning.db")));
  layers.push_back(testing::OpenReadOnly(dir_.File("lower.db")));
  LayeredPlanStore layered(std::move(layers));

  std::vector<CalibrationRun> runs = Runs(layered, "target-a", "cm1", 2);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].run_unix_ms, kCalibrated + 30);
  EXPECT_EQ(runs[0].database, dir_.File("lower.db"));
  EXPECT_EQ(runs[1].run_unix_ms, kCalibrated + 20);
  EXPECT_EQ(runs[1].database, dir_.File("tuning.db"));

  Append(layered, SampleRun("target-a", "cm1", 4, kCalibrated + 40));
  EXPECT_EQ(testing::RawQuery(dir_.File("tuning.db"), "SELECT count(*) FROM calibration_samples"),
            "7");
  EXPECT_EQ(testing::RawQuery(dir_.File("lower.db"), "SELECT count(*) FROM calibration_samples"),
            "3");
}

}  // namespace
}  // namespace fusor::db
