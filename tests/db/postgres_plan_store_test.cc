// PostgresPlanStore against a real PostgreSQL 15 (test_postgres.h): the PlanStore contract
// (plan_store_contract_test.cc), and what only a server shared by replicas has: two stores on one
// database, migration by several openers at once, a foreign or newer database
// refused, errors naming the database (never the password) while the server is away, recovery
// when it returns, and a SQLite deployment snapshot exported from PostgreSQL.
#include "db/postgres_plan_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "db/open_plan_store.h"
#include "db/schema.h"
#include "db/snapshot.h"
#include "db/sqlite_plan_store.h"
#include "tests/db/plan_store_contract.h"
#include "tests/db/test_db.h"
#include "tests/db/test_postgres.h"

namespace fusor::db {
namespace testing {
namespace {

// A fresh database per test on the process's shared server.
StatusOr<std::string> FreshDatabase() {
  static int next = 0;
  TestPostgres* server = SharedTestPostgres();
  if (server == nullptr) return Status::Unavailable("no PostgreSQL server for the test");
  return server->CreateDatabase("fusor_test_" + std::to_string(++next));
}

std::unique_ptr<PostgresPlanStore> OpenPostgres(const std::string& uri) {
  StatusOr<std::unique_ptr<PostgresPlanStore>> store = PostgresPlanStore::Open(uri, {});
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

class PostgresDatabaseBackend final : public StoreBackend {
 public:
  std::unique_ptr<TuningDatabase> Open() override {
    if (uri_.empty()) {
      StatusOr<std::string> uri = FreshDatabase();
      EXPECT_TRUE(uri.ok()) << uri.status().ToString();
      if (!uri.ok()) return nullptr;
      uri_ = *uri;
    }
    return OpenPostgres(uri_);
  }
  std::string Name() const override { return RedactedLocation(uri_); }
  std::string RawQuery(const std::string& sql) const override {
    return TestPostgres::Query(uri_, sql);
  }

 private:
  std::string uri_;
};

}  // namespace

std::unique_ptr<StoreBackend> PostgresBackend() {
  return std::make_unique<PostgresDatabaseBackend>();
}

}  // namespace testing

namespace {

using testing::Graph;
using testing::GraphHash;
using testing::kCalibrated;
using testing::Plan;
using testing::Profile;
using testing::TestPostgres;

INSTANTIATE_TEST_SUITE_P(Postgres, PlanStoreContract,
                         ::testing::Values(testing::StoreBackendFactory{"postgresql",
                                                                        testing::PostgresBackend}),
                         testing::BackendName);
INSTANTIATE_TEST_SUITE_P(Postgres, JobQueueContract,
                         ::testing::Values(testing::StoreBackendFactory{"postgresql",
                                                                        testing::PostgresBackend}),
                         testing::BackendName);

class PostgresPlanStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::SharedTestPostgres();
    ASSERT_NE(server_, nullptr);
    StatusOr<std::string> uri = testing::FreshDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status().ToString();
    uri_ = *uri;
  }

  TestPostgres* server_ = nullptr;
  std::string uri_;
};

TEST_F(PostgresPlanStoreTest, TwoStoresOnOneDatabaseSeeEachOthersPlans) {
  std::unique_ptr<PostgresPlanStore> a = testing::OpenPostgres(uri_);
  std::unique_ptr<PostgresPlanStore> b = testing::OpenPostgres(uri_);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(a->PutTarget(Profile("target-a", "cm1", kCalibrated)).ok());
  v1::Plan plan = Plan({.graph_hash = GraphHash(1)});
  ASSERT_TRUE(a->PutPlan(plan, Graph("resnet18", 4), {}).ok());
  StatusOr<StoredPlan> got = b->BestPlan(GraphHash(1), "target-a", "cm1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->plan.SerializeAsString(), plan.SerializeAsString());
  // A recalibration stored through one replica makes the plan stale for the other.
  ASSERT_TRUE(b->PutTarget(Profile("target-a", "cm1", plan.created_unix_ms() + 1)).ok());
  EXPECT_EQ(a->BestPlan(GraphHash(1), "target-a", "cm1").status().code(), Status::Code::kNotFound);
}

TEST_F(PostgresPlanStoreTest, ReplicasOpeningAtOnceMigrateOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> opened{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      if (PostgresPlanStore::Open(uri_, {}).ok()) ++opened;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(opened.load(), 4);
  EXPECT_EQ(TestPostgres::Query(uri_, "SELECT value FROM meta WHERE key = 'schema_version'"),
            std::to_string(kSchemaVersion));
  EXPECT_EQ(TestPostgres::Query(uri_, "SELECT count(*) FROM meta"), "3");
}

TEST_F(PostgresPlanStoreTest, ConcurrentPutsOfOneKeyLeaveOnePlan) {
  std::unique_ptr<PostgresPlanStore> a = testing::OpenPostgres(uri_);
  std::unique_ptr<PostgresPlanStore> b = testing::OpenPostgres(uri_);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(a->PutTarget(Profile("target-a", "cm1", kCalibrated)).ok());
  std::atomic<int> failed{0};
  auto put = [&](PostgresPlanStore* store, int n) {
    for (int i = 0; i < 10; ++i) {
      v1::Plan plan = Plan({.graph_hash = GraphHash(1), .predicted_ns = 1000.0 + n * 10 + i});
      if (!store->PutPlan(plan, Graph("m", 4), {}).ok()) ++failed;
    }
  };
  std::thread t1(put, a.get(), 1), t2(put, b.get(), 2);
  t1.join();
  t2.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(TestPostgres::Query(uri_, "SELECT count(*) FROM plans"), "1");
  EXPECT_EQ(TestPostgres::Query(uri_, "SELECT count(*) FROM tuning_history WHERE event = 'stored'"),
            "20");
}

TEST_F(PostgresPlanStoreTest, AnotherApplicationsDatabaseIsRefused) {
  ASSERT_EQ(TestPostgres::Query(uri_, "CREATE TABLE meta (key TEXT, value TEXT)"), "");
  StatusOr<std::unique_ptr<PostgresPlanStore>> store = PostgresPlanStore::Open(uri_, {});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("another application"), std::string::npos)
      << store.status().ToString();
}

TEST_F(PostgresPlanStoreTest, NewerSchemaIsRefusedNamingTheVersion) {
  ASSERT_NE(testing::OpenPostgres(uri_), nullptr);
  ASSERT_EQ(TestPostgres::Query(uri_, "UPDATE meta SET value = '99' WHERE key = 'schema_version'"),
            "");
  StatusOr<std::unique_ptr<PostgresPlanStore>> store = PostgresPlanStore::Open(uri_, {});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("upgrade fusor"), std::string::npos)
      << store.status().ToString();
}

TEST_F(PostgresPlanStoreTest, ReadOnlyStoreReadsButRefusesWrites) {
  EXPECT_EQ(PostgresPlanStore::Open(uri_, {.read_only = true}).status().code(),
            Status::Code::kFailedPrecondition);  // Not a tuning database yet.
  ASSERT_NE(testing::OpenPostgres(uri_), nullptr);
  StatusOr<std::unique_ptr<PlanStore>> reader = OpenPlanStore(uri_, {.read_only = true});
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_TRUE((*reader)->ListTargets().ok());
  Status s = (*reader)->PutTarget(Profile("target-a", "cm1", kCalibrated));
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("read-only"), std::string::npos) << s.message();
}

TEST_F(PostgresPlanStoreTest, UnreachableServerIsUnavailableNamingTheDatabaseNotThePassword) {
  std::string uri = "postgresql://fusor:s3cret-pw@/tuning?host=/nonexistent-socket-dir&port=5999";
  StatusOr<std::unique_ptr<PlanStore>> store = OpenPlanStore(uri);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kUnavailable);
  std::string message = store.status().ToString();
  EXPECT_NE(message.find("tuning"), std::string::npos) << message;
  EXPECT_NE(message.find("/nonexistent-socket-dir"), std::string::npos) << message;
  EXPECT_EQ(message.find("s3cret-pw"), std::string::npos) << message;
  EXPECT_EQ(RedactedLocation("postgresql://u:pw@h:5432/db?password=x&sslmode=require"),
            "postgresql://u:***@h:5432/db?password=***&sslmode=require");
}

TEST_F(PostgresPlanStoreTest, ServerGoingAwayGivesClearErrorsAndTheStoreRecovers) {
  std::unique_ptr<PostgresPlanStore> store = testing::OpenPostgres(uri_);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->PutTarget(Profile("target-a", "cm1", kCalibrated)).ok());
  v1::Plan plan = Plan({.graph_hash = GraphHash(1)});
  ASSERT_TRUE(store->PutPlan(plan, Graph("m", 4), {}).ok());
  // Several pooled connections, all of which die with the server.
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i) {
    readers.emplace_back([&] { EXPECT_TRUE(store->ListTargets().ok()); });
  }
  for (std::thread& t : readers) t.join();

  ASSERT_TRUE(server_->Stop().ok());
  for (int i = 0; i < 3; ++i) {
    StatusOr<StoredPlan> got = store->GetPlan(PlanKey::Of(plan), "cm1");
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), Status::Code::kUnavailable) << got.status().ToString();
    EXPECT_NE(got.status().message().find(store->name()), std::string::npos)
        << got.status().ToString();
  }
  Status put = store->PutPlan(Plan({.graph_hash = GraphHash(2)}), Graph("m", 4), {});
  EXPECT_EQ(put.code(), Status::Code::kUnavailable) << put.ToString();

  Status restarted = server_->Restart();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
  StatusOr<StoredPlan> got = store->GetPlan(PlanKey::Of(plan), "cm1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->plan.SerializeAsString(), plan.SerializeAsString());
  EXPECT_TRUE(store->PutPlan(Plan({.graph_hash = GraphHash(2)}), Graph("m", 4), {}).ok());
}

TEST_F(PostgresPlanStoreTest, ExportWritesAReadOnlySqliteSnapshot) {
  std::unique_ptr<PostgresPlanStore> store = testing::OpenPostgres(uri_);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->PutTarget(Profile("target-a", "cm1", kCalibrated)).ok());
  std::vector<Measurement> m(1);
  m[0].samples_ns = {300, 310, 290};
  ASSERT_TRUE(
      store
          ->PutPlan(
              Plan({.graph_hash = GraphHash(1), .search_options = "slow", .measured_ns = 500}),
              Graph("model", 4), {})
          .ok());
  v1::Plan fast = Plan({.graph_hash = GraphHash(1), .search_options = "fast", .measured_ns = 300});
  ASSERT_TRUE(store->PutPlan(fast, Graph("model", 4), m).ok());
  testing::TempDir dir;
  std::string out = dir.File("deploy.db");
  StatusOr<ExportSummary> summary = ExportSnapshot(*store, "target-a", "cm1", out, false);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->plans, 1);
  std::unique_ptr<SqlitePlanStore> snapshot = testing::OpenReadOnly(out);
  ASSERT_NE(snapshot, nullptr);
  EXPECT_EQ(snapshot->schema().snapshot_of_target, "target-a");
  StatusOr<StoredPlan> best = snapshot->BestPlan(GraphHash(1), "target-a", "cm1");
  ASSERT_TRUE(best.ok()) << best.status().ToString();
  EXPECT_EQ(best->plan.SerializeAsString(), fast.SerializeAsString());
  StatusOr<std::vector<Measurement>> measured = snapshot->GetMeasurements(PlanKey::Of(fast));
  ASSERT_TRUE(measured.ok());
  ASSERT_EQ(measured->size(), 1u);
  EXPECT_DOUBLE_EQ(measured->front().median_ns, 300);
}

}  // namespace
}  // namespace fusor::db
