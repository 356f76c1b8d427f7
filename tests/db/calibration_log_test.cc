// The calibration log on real SQLite files: a read-only file reads the log but cannot append, and a
// layered log merges the layers' runs and appends to the top one. What every backend does with
// the log (round trips, selection, the cap, refusals, stats) is in plan_store_contract_test.cc.
#include <gtest/gtest.h>

#include <cmath>

#include "db/layered_calibration_log.h"
#include "db/sqlite_plan_store.h"
#include "tests/db/test_db.h"

namespace fusor::db {
namespace {

using testing::Append;
using testing::kCalibrated;
using testing::Profile;
using testing::Runs;
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

  testing::TempDir dir_;
  std::unique_ptr<SqlitePlanStore> store_;
};

TEST_F(CalibrationLogTest, ReadOnlyStoreReadsTheLogButCannotAppend) {
  Append(*store_, SampleRun("target-a", "cm1", 2));
  std::unique_ptr<SqlitePlanStore> reader = testing::OpenReadOnly(dir_.File("tuning.db"));
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(Runs(*reader, "target-a", "cm1").size(), 1u);
  EXPECT_EQ(reader->AppendCalibrationRun(SampleRun("target-a", "cm1", 1)).status().code(),
            Status::Code::kFailedPrecondition);
}

TEST_F(CalibrationLogTest, LayersMergeNewestFirstAndAppendsGoToTheTop) {
  std::unique_ptr<SqlitePlanStore> lower = Open("lower.db");
  ASSERT_NE(lower, nullptr);
  Append(*lower, SampleRun("target-a", "cm1", 1, kCalibrated + 10));
  Append(*lower, SampleRun("target-a", "cm1", 2, kCalibrated + 30));
  lower.reset();
  Append(*store_, SampleRun("target-a", "cm1", 3, kCalibrated + 20));
  store_.reset();
  std::vector<std::unique_ptr<CalibrationLog>> layers;
  layers.push_back(testing::OpenWritable(dir_.File("tuning.db")));
  layers.push_back(testing::OpenReadOnly(dir_.File("lower.db")));
  LayeredCalibrationLog layered(std::move(layers));

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
