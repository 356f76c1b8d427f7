// SqlitePlanStore on real files: the PlanStore contract (plan_store_contract_test.cc) on a SQLite
// file, and what only a file has: its schema version and journal mode, and read-only use.
#include "db/sqlite_plan_store.h"

#include <gtest/gtest.h>

#include "db/schema.h"
#include "tests/db/plan_store_contract.h"
#include "tests/db/test_db.h"

namespace fusor::db {
namespace testing {
namespace {

class SqliteFileBackend final : public StoreBackend {
 public:
  std::unique_ptr<TuningDatabase> Open() override { return OpenWritable(path()); }
  std::string Name() const override { return path(); }
  std::string RawQuery(const std::string& sql) const override {
    return testing::RawQuery(path(), sql);
  }

 private:
  std::string path() const { return dir_.File("tuning.db"); }
  TempDir dir_;
};

}  // namespace

std::unique_ptr<StoreBackend> SqliteBackend() { return std::make_unique<SqliteFileBackend>(); }

}  // namespace testing

namespace {

using testing::Graph;
using testing::GraphHash;
using testing::kCalibrated;
using testing::Plan;
using testing::Profile;

INSTANTIATE_TEST_SUITE_P(Sqlite, PlanStoreContract,
                         ::testing::Values(testing::StoreBackendFactory{"sqlite",
                                                                        testing::SqliteBackend}),
                         testing::BackendName);
INSTANTIATE_TEST_SUITE_P(Sqlite, JobQueueContract,
                         ::testing::Values(testing::StoreBackendFactory{"sqlite",
                                                                        testing::SqliteBackend}),
                         testing::BackendName);

class SqlitePlanStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = testing::OpenWritable(dir_.File("tuning.db"));
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->PutTarget(Profile("target-a", "cm1", kCalibrated)).ok());
  }

  testing::TempDir dir_;
  std::unique_ptr<SqlitePlanStore> store_;
};

TEST_F(SqlitePlanStoreTest, FileHasTheSchemaVersionAndWriteAheadLog) {
  EXPECT_EQ(testing::RawQuery(store_->path(), "PRAGMA user_version"),
            std::to_string(kSchemaVersion));
  EXPECT_EQ(testing::RawQuery(store_->path(), "PRAGMA journal_mode"), "wal");
}

TEST_F(SqlitePlanStoreTest, ReadOnlyStoreReadsButRefusesWrites) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1)});
  ASSERT_TRUE(store_->PutPlan(plan, Graph("resnet18", 4), {}).ok());
  std::unique_ptr<SqlitePlanStore> reader = testing::OpenReadOnly(store_->path());
  ASSERT_NE(reader, nullptr);
  EXPECT_TRUE(reader->GetPlan(PlanKey::Of(plan), "cm1").ok());
  Status s = reader->PutPlan(Plan({.graph_hash = GraphHash(2)}), Graph("m", 1), {});
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("read-only"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace fusor::db
