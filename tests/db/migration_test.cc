// Schema migrations on a real file of the previous version: tests/db/data/schema_v1.sql is the dump
// of a database that the version-1 code wrote (targets, plans with measurements, a replaced plan,
// a deleted one, history). A writable open upgrades it in place keeping every row; a read-only
// open (a deployed snapshot cannot be migrated) reads it as it is, with an empty calibration log
// and no residual samples or residuals.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>

#include "db/schema.h"
#include "db/sqlite_plan_store.h"
#include "tests/db/test_db.h"

namespace fusor::db {
namespace {

using testing::GraphHash;
using testing::Plan;
using testing::PlanSpec;
using testing::RawQuery;

// The version-1 database, loaded from its dump into `path`.
void WriteVersion1File(const std::string& path) {
  std::ifstream in(std::string(FUSOR_DB_TEST_DATA) + "/schema_v1.sql");
  ASSERT_TRUE(in) << "missing test data schema_v1.sql";
  std::string sql(std::istreambuf_iterator<char>(in), {});
  ASSERT_EQ(testing::RawScript(path, sql), "");
  ASSERT_EQ(RawQuery(path, "PRAGMA user_version"), "1");
}

PlanKey KeyOf(uint64_t graph, const std::string& target = "target-a") {
  return PlanKey::Of(Plan(PlanSpec{.graph_hash = GraphHash(graph), .target_id = target}));
}

TEST(SchemaMigration, Version1FileUpgradesInPlaceKeepingEveryRow) {
  testing::TempDir dir;
  std::string path = dir.File("tuning.db");
  WriteVersion1File(path);
  std::string created = RawQuery(path, "SELECT value FROM meta WHERE key = 'created_unix_ms'");

  std::unique_ptr<SqlitePlanStore> store = testing::OpenWritable(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema().migrated_from, 1);
  EXPECT_EQ(store->schema().version, kSchemaVersion);
  EXPECT_EQ(RawQuery(path, "PRAGMA user_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(RawQuery(path, "SELECT value FROM meta WHERE key = 'created_unix_ms'"), created);

  StatusOr<std::vector<v1::HardwareProfile>> targets = store->ListTargets();
  ASSERT_TRUE(targets.ok()) << targets.status().ToString();
  ASSERT_EQ(targets->size(), 2u);
  EXPECT_EQ(targets->at(1).target().id(), "target-b");
  StatusOr<StoredPlan> measured = store->GetPlan(KeyOf(1), "cm1");
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  EXPECT_EQ(measured->plan.measured_ns(), 900);
  EXPECT_EQ(measured->model_name, "resnet");
  StatusOr<std::vector<Measurement>> measurements = store->GetMeasurements(KeyOf(1));
  ASSERT_TRUE(measurements.ok());
  ASSERT_EQ(measurements->size(), 2u);
  EXPECT_EQ(measurements->at(0).samples_ns, (std::vector<double>{900, 910, 890}));
  StatusOr<StoredPlan> replaced = store->GetPlan(KeyOf(2), "cm1");
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(replaced->plan.predicted_ns(), 2500);
  EXPECT_TRUE(store->GetPlan(KeyOf(3, "target-b"), "cm1").ok());
  EXPECT_EQ(store->GetPlan(KeyOf(4), "cm1").status().code(), Status::Code::kNotFound);
  StatusOr<std::vector<HistoryEvent>> history = store->History({});
  ASSERT_TRUE(history.ok());
  EXPECT_EQ(history->size(), 9u);
  EXPECT_EQ(history->front().event, "deleted");

  // The new table works, and the file stays at the new version when opened again.
  ASSERT_TRUE(store->AppendCalibrationRun(testing::SampleRun("target-a", "cm1", 2)).ok());
  EXPECT_EQ(store->CalibrationRuns({"target-a", "cm1", 8})->size(), 1u);
  store.reset();
  store = testing::OpenWritable(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema().migrated_from, kSchemaVersion);
  EXPECT_EQ(RawQuery(path, "SELECT count(*) FROM plans"), "3");
  EXPECT_EQ(RawQuery(path, "SELECT count(*) FROM calibration_samples"), "2");
  EXPECT_EQ(RawQuery(path, "SELECT count(*) FROM residual_samples"), "0");
  EXPECT_EQ(RawQuery(path, "SELECT count(*) FROM residuals"), "0");
}

// A regression guard for the version bump: snapshots exported by the previous fusor are read-only
// files that can never be migrated, and must stay queryable.
TEST(SchemaMigration, Version1SnapshotStillOpensReadOnlyAndStaysVersion1) {
  testing::TempDir dir;
  std::string path = dir.File("deploy.db");
  WriteVersion1File(path);
  ASSERT_EQ(RawQuery(path, "INSERT INTO meta VALUES ('snapshot_of_target', 'target-a')"), "");
  ASSERT_EQ(chmod(path.c_str(), 0444), 0);

  std::unique_ptr<SqlitePlanStore> reader = testing::OpenReadOnly(path);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->schema().version, 1);
  EXPECT_EQ(reader->schema().snapshot_of_target, "target-a");
  EXPECT_EQ(testing::AllPages(*reader, {}).size(), 3u);
  StatusOr<std::vector<CalibrationRun>> runs = reader->CalibrationRuns({"target-a", "cm1", 8});
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  EXPECT_TRUE(runs->empty());
  StatusOr<std::vector<DatabaseStats>> stats = reader->Stats("");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->at(0).schema_version, 1);
  EXPECT_EQ(stats->at(0).plans, 3);
  EXPECT_EQ(stats->at(0).calibration_samples, 0);
  StatusOr<std::vector<ResidualSampleRow>> samples =
      reader->ResidualSamples({"target-a", "cm1", 0, 10});
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  EXPECT_TRUE(samples->empty());
  EXPECT_EQ(reader->GetResidual("target-a").status().code(), Status::Code::kNotFound);
  reader.reset();
  EXPECT_EQ(RawQuery(path, "PRAGMA user_version"), "1");
}

}  // namespace
}  // namespace fusor::db
