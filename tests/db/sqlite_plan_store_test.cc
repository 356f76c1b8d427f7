// SqlitePlanStore on real files: round trips, the unique key, target isolation, staleness, filters
// and pagination, measurements, delete and expiry, stats, read-only use.
#include "db/sqlite_plan_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/db/test_db.h"

namespace fusor::db {
namespace {

using testing::Graph;
using testing::GraphHash;
using testing::kCalibrated;
using testing::Plan;
using testing::PlanSpec;
using testing::Profile;

class SqlitePlanStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = testing::OpenWritable(dir_.File("tuning.db"));
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->PutTarget(Profile("target-a", "cm1", kCalibrated)).ok());
    ASSERT_TRUE(store_->PutTarget(Profile("target-b", "cm1", kCalibrated)).ok());
  }

  void Put(const v1::Plan& plan, const std::string& model = "resnet18") {
    Status s = store_->PutPlan(plan, Graph(model, 4), {});
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::vector<StoredPlan> All(const PlanQuery& query) { return testing::AllPages(*store_, query); }

  testing::TempDir dir_;
  std::unique_ptr<SqlitePlanStore> store_;
};

TEST_F(SqlitePlanStoreTest, PutThenGetReturnsTheSamePlan) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1), .measured_ns = 900});
  Put(plan);
  StatusOr<StoredPlan> got = store_->GetPlan(PlanKey::Of(plan), "cm1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->plan.SerializeAsString(), plan.SerializeAsString());
  EXPECT_EQ(got->model_name, "resnet18");
  EXPECT_FALSE(got->stale) << got->stale_reason;
  EXPECT_EQ(got->database, store_->path());
  StatusOr<v1::Graph> graph = store_->GetGraph(GraphHash(1));
  ASSERT_TRUE(graph.ok());
  EXPECT_EQ(graph->nodes_size(), 4);
}

TEST_F(SqlitePlanStoreTest, PlansPersistAcrossReopen) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1)});
  Put(plan);
  store_.reset();
  store_ = testing::OpenWritable(dir_.File("tuning.db"));
  ASSERT_NE(store_, nullptr);
  EXPECT_TRUE(store_->GetPlan(PlanKey::Of(plan), "cm1").ok());
  EXPECT_EQ(testing::RawQuery(dir_.File("tuning.db"), "PRAGMA user_version"),
            std::to_string(kSchemaVersion));
  EXPECT_EQ(testing::RawQuery(dir_.File("tuning.db"), "PRAGMA journal_mode"), "wal");
}

TEST_F(SqlitePlanStoreTest, ZeroCreatedTimeMeansNow) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1), .created_unix_ms = 0});
  Put(plan);
  StatusOr<StoredPlan> got = store_->GetPlan(PlanKey::Of(plan), "cm1");
  ASSERT_TRUE(got.ok());
  EXPECT_GT(got->plan.created_unix_ms(), kCalibrated);
}

TEST_F(SqlitePlanStoreTest, SameKeyReplacesAndHistoryKeepsBoth) {
  Put(Plan({.graph_hash = GraphHash(1), .predicted_ns = 1000}));
  Put(Plan(
      {.graph_hash = GraphHash(1), .predicted_ns = 800, .created_unix_ms = 1'700'000'000'001}));
  std::vector<StoredPlan> all = All(PlanQuery());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].plan.predicted_ns(), 800);
  StatusOr<std::vector<HistoryEvent>> history = store_->History({GraphHash(1), "", 10});
  ASSERT_TRUE(history.ok());
  std::vector<std::string> events;
  for (const HistoryEvent& e : *history) events.push_back(e.event);
  EXPECT_EQ(events, (std::vector<std::string>{"stored", "replaced", "stored"}));
}

TEST_F(SqlitePlanStoreTest, DifferentOptionsAreDifferentPlans) {
  Put(Plan({.graph_hash = GraphHash(1), .search_options = "greedy"}));
  Put(Plan({.graph_hash = GraphHash(1), .search_options = "optimal"}));
  EXPECT_EQ(All(PlanQuery()).size(), 2u);
}

TEST_F(SqlitePlanStoreTest, PlanForUnknownTargetIsRefused) {
  Status s = store_->PutPlan(Plan({.graph_hash = GraphHash(1), .target_id = "nowhere"}),
                             Graph("m", 1), {});
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("'nowhere'"), std::string::npos) << s.message();
}

TEST_F(SqlitePlanStoreTest, MalformedPlansAreRefused) {
  EXPECT_EQ(store_->PutPlan(Plan({.graph_hash = "abc"}), Graph("m", 1), {}).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(
      store_
          ->PutPlan(Plan({.graph_hash = GraphHash(1), .cost_model_version = ""}), Graph("m", 1), {})
          .code(),
      Status::Code::kInvalidArgument);
  std::string upper = GraphHash(1);
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  EXPECT_EQ(store_->PutPlan(Plan({.graph_hash = upper}), Graph("m", 1), {}).code(),
            Status::Code::kInvalidArgument);
}

TEST_F(SqlitePlanStoreTest, BestPlanPrefersMeasuredThenFaster) {
  Put(Plan({.graph_hash = GraphHash(1), .search_options = "a", .predicted_ns = 100}));
  Put(Plan({.graph_hash = GraphHash(1), .search_options = "b", .measured_ns = 700}));
  Put(Plan({.graph_hash = GraphHash(1), .search_options = "c", .measured_ns = 500}));
  StatusOr<StoredPlan> best = store_->BestPlan(GraphHash(1), "target-a", "cm1");
  ASSERT_TRUE(best.ok()) << best.status().ToString();
  EXPECT_EQ(best->plan.search_options(), "c");
}

TEST_F(SqlitePlanStoreTest, PlanTunedOnOneTargetIsNeverServedForAnother) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1), .target_id = "target-a"});
  Put(plan);
  EXPECT_EQ(store_->BestPlan(GraphHash(1), "target-b", "cm1").status().code(),
            Status::Code::kNotFound);
  PlanKey other = PlanKey::Of(plan);
  other.target_id = "target-b";
  EXPECT_EQ(store_->GetPlan(other, "cm1").status().code(), Status::Code::kNotFound);
  PlanQuery query;
  query.target_id = "target-b";
  EXPECT_TRUE(All(query).empty());
}

TEST_F(SqlitePlanStoreTest, OlderCostModelIsStaleNotCurrent) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1), .cost_model_version = "cm1"});
  Put(plan);
  StatusOr<StoredPlan> got = store_->GetPlan(PlanKey::Of(plan), "cm2");
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->stale);
  EXPECT_NE(got->stale_reason.find("cm2"), std::string::npos) << got->stale_reason;
  StatusOr<StoredPlan> best = store_->BestPlan(GraphHash(1), "target-a", "cm2");
  EXPECT_EQ(best.status().code(), Status::Code::kNotFound);
  EXPECT_NE(best.status().message().find("stale"), std::string::npos);
  EXPECT_TRUE(store_->BestPlan(GraphHash(1), "target-a", "cm1").ok());
}

TEST_F(SqlitePlanStoreTest, EmptyCurrentVersionMeansTheTargetsCalibratedOne) {
  Put(Plan({.graph_hash = GraphHash(1), .cost_model_version = "cm1"}));
  EXPECT_TRUE(store_->BestPlan(GraphHash(1), "target-a", "").ok());
  ASSERT_TRUE(store_->PutTarget(Profile("target-a", "cm2", kCalibrated + 1)).ok());
  EXPECT_EQ(store_->BestPlan(GraphHash(1), "target-a", "").status().code(),
            Status::Code::kNotFound);
}

TEST_F(SqlitePlanStoreTest, RecalibrationMakesOlderPlansStale) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1), .created_unix_ms = kCalibrated + 10});
  Put(plan);
  ASSERT_TRUE(store_->BestPlan(GraphHash(1), "target-a", "cm1").ok());
  ASSERT_TRUE(store_->PutTarget(Profile("target-a", "cm1", kCalibrated + 20)).ok());
  StatusOr<StoredPlan> got = store_->GetPlan(PlanKey::Of(plan), "cm1");
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->stale);
  EXPECT_NE(got->stale_reason.find("recalibrated"), std::string::npos) << got->stale_reason;
  EXPECT_FALSE(store_->BestPlan(GraphHash(1), "target-a", "cm1").ok());
  // A plan tuned after the calibration is current again.
  Put(Plan({.graph_hash = GraphHash(1), .created_unix_ms = kCalibrated + 30}));
  EXPECT_TRUE(store_->BestPlan(GraphHash(1), "target-a", "cm1").ok());
}

TEST_F(SqlitePlanStoreTest, OlderCalibrationNeverReplacesNewer) {
  Put(Plan({.graph_hash = GraphHash(1), .created_unix_ms = kCalibrated + 10}));
  ASSERT_TRUE(store_->PutTarget(Profile("target-a", "cm1", kCalibrated + 20)).ok());
  ASSERT_TRUE(store_->PutTarget(Profile("target-a", "cm1", kCalibrated)).ok());
  StatusOr<v1::HardwareProfile> target = store_->GetTarget("target-a");
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->calibrated_unix_ms(), kCalibrated + 20);
  EXPECT_FALSE(store_->BestPlan(GraphHash(1), "target-a", "cm1").ok());
}

TEST_F(SqlitePlanStoreTest, StaleFilterInSqlAgreesWithStaleFlag) {
  ASSERT_TRUE(store_->PutTarget(Profile("target-b", "cm2", kCalibrated + 500)).ok());
  for (int i = 0; i < 40; ++i) {
    Put(Plan({.graph_hash = GraphHash(i),
              .target_id = i % 2 ? "target-a" : "target-b",
              .cost_model_version = i % 3 ? "cm1" : "cm2",
              .created_unix_ms = kCalibrated + 100 * (i % 10)}));
  }
  for (std::string current : {"", "cm1", "cm2"}) {
    PlanQuery all;
    all.current_cost_model_version = current;
    std::set<std::string> expected;
    for (const StoredPlan& s : All(all)) {
      if (!s.stale) expected.insert(s.plan.graph_hash());
    }
    all.only_current = true;
    std::set<std::string> filtered;
    for (const StoredPlan& s : All(all)) {
      EXPECT_FALSE(s.stale);
      filtered.insert(s.plan.graph_hash());
    }
    EXPECT_EQ(filtered, expected) << "current '" << current << "'";
    EXPECT_FALSE(expected.empty());
    EXPECT_LT(expected.size(), 40u);
  }
}

TEST_F(SqlitePlanStoreTest, FiltersSelectExactlyTheMatchingPlans) {
  for (int i = 0; i < 12; ++i) {
    Put(Plan({.graph_hash = GraphHash(i),
              .target_id = i < 6 ? "target-a" : "target-b",
              .predicted_ns = 1000,
              .unfused_predicted_ns = 1000.0 + 100 * i,
              .created_unix_ms = kCalibrated + 1000 * i}),
        i % 3 == 0 ? "bert" : "resnet18");
  }
  PlanQuery q;
  q.model_name = "bert";
  EXPECT_EQ(All(q).size(), 4u);
  q = PlanQuery();
  q.target_id = "target-b";
  EXPECT_EQ(All(q).size(), 6u);
  q = PlanQuery();
  q.created_after_unix_ms = kCalibrated + 3000;
  q.created_before_unix_ms = kCalibrated + 7000;
  EXPECT_EQ(All(q).size(), 4u);  // i = 3, 4, 5, 6.
  q = PlanQuery();
  q.min_speedup = 1.5;
  EXPECT_EQ(All(q).size(), 7u);  // i >= 5.
  q = PlanQuery();
  q.graph_hash_prefix = GraphHash(7).substr(0, 10);
  std::vector<StoredPlan> by_prefix = All(q);
  ASSERT_EQ(by_prefix.size(), 1u);
  EXPECT_EQ(by_prefix[0].plan.graph_hash(), GraphHash(7));
  q.graph_hash_prefix = "xyz";
  EXPECT_EQ(store_->QueryPlans(q).status().code(), Status::Code::kInvalidArgument);
}

TEST_F(SqlitePlanStoreTest, PagesCoverEveryPlanOnceNewestFirst) {
  for (int i = 0; i < 23; ++i) {
    // Pairs share a creation time, so the tie-break by key is exercised too.
    Put(Plan({.graph_hash = GraphHash(i), .created_unix_ms = kCalibrated + 10 * (i / 2)}));
  }
  PlanQuery q;
  q.page_size = 5;
  int pages = 0;
  std::vector<StoredPlan> seen = testing::AllPages(*store_, q, &pages);
  EXPECT_EQ(pages, 5);
  EXPECT_EQ(seen.size(), 23u);
  testing::ExpectListedOnceInOrder(seen);
}

TEST_F(SqlitePlanStoreTest, ForeignPageTokenIsRejected) {
  PlanQuery q;
  q.page_token = "not-a-token";
  EXPECT_EQ(store_->QueryPlans(q).status().code(), Status::Code::kInvalidArgument);
  q.page_token = "";
  q.page_size = -1;
  EXPECT_EQ(store_->QueryPlans(q).status().code(), Status::Code::kInvalidArgument);
}

TEST_F(SqlitePlanStoreTest, MeasurementsAreSummarisedAndReplacedWithThePlan) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1), .measured_ns = 300});
  std::vector<Measurement> measurements(2);
  measurements[0].samples_ns = {400, 100, 300, 200, 500};
  measurements[1].group_id = 1;
  measurements[1].samples_ns = {10, 10, 10};
  ASSERT_TRUE(store_->PutPlan(plan, Graph("m", 4), measurements).ok());
  StatusOr<std::vector<Measurement>> got = store_->GetMeasurements(PlanKey::Of(plan));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_FALSE((*got)[0].group_id.has_value());
  EXPECT_EQ((*got)[0].samples_ns, (std::vector<double>{400, 100, 300, 200, 500}));
  EXPECT_DOUBLE_EQ((*got)[0].median_ns, 300);
  EXPECT_DOUBLE_EQ((*got)[0].spread, (400.0 - 200.0) / 300.0);
  EXPECT_EQ((*got)[1].group_id, 1);
  EXPECT_DOUBLE_EQ((*got)[1].spread, 0);
  EXPECT_EQ((*got)[0].measured_unix_ms, plan.created_unix_ms());

  ASSERT_TRUE(store_->PutPlan(plan, Graph("m", 4), {}).ok());
  got = store_->GetMeasurements(PlanKey::Of(plan));
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
}

TEST_F(SqlitePlanStoreTest, BadMeasurementsAreRefused) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1), .groups = 2});
  std::vector<Measurement> none(1);
  EXPECT_EQ(store_->PutPlan(plan, Graph("m", 4), none).code(), Status::Code::kInvalidArgument);
  std::vector<Measurement> unknown_group(1);
  unknown_group[0].group_id = 7;
  unknown_group[0].samples_ns = {1};
  EXPECT_EQ(store_->PutPlan(plan, Graph("m", 4), unknown_group).code(),
            Status::Code::kInvalidArgument);
  EXPECT_TRUE(All(PlanQuery()).empty());  // Nothing half-stored.
}

TEST_F(SqlitePlanStoreTest, DeleteRemovesPlanAndMeasurements) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1)});
  std::vector<Measurement> m(1);
  m[0].samples_ns = {1, 2, 3};
  ASSERT_TRUE(store_->PutPlan(plan, Graph("m", 4), m).ok());
  ASSERT_TRUE(store_->DeletePlan(PlanKey::Of(plan)).ok());
  EXPECT_EQ(store_->GetPlan(PlanKey::Of(plan), "cm1").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(store_->DeletePlan(PlanKey::Of(plan)).code(), Status::Code::kNotFound);
  EXPECT_EQ(testing::RawQuery(store_->path(), "SELECT count(*) FROM measurements"), "0");
}

TEST_F(SqlitePlanStoreTest, ExpireByAgeAndStalenessDropsOrphanGraphs) {
  Put(Plan({.graph_hash = GraphHash(1), .created_unix_ms = kCalibrated + 1}));
  Put(Plan({.graph_hash = GraphHash(2), .created_unix_ms = kCalibrated + 5}));
  Put(Plan({.graph_hash = GraphHash(3),
            .cost_model_version = "cm0",
            .created_unix_ms = kCalibrated + 9}));
  StatusOr<int64_t> expired = store_->ExpirePlans({kCalibrated + 2, false, ""});
  ASSERT_TRUE(expired.ok()) << expired.status().ToString();
  EXPECT_EQ(*expired, 1);
  expired = store_->ExpirePlans({0, true, "cm1"});
  ASSERT_TRUE(expired.ok());
  EXPECT_EQ(*expired, 1);
  std::vector<StoredPlan> left = All(PlanQuery());
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].plan.graph_hash(), GraphHash(2));
  EXPECT_EQ(store_->GetGraph(GraphHash(1)).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(testing::RawQuery(store_->path(),
                              "SELECT count(*) FROM tuning_history WHERE event = 'expired'"),
            "2");
  EXPECT_EQ(store_->ExpirePlans({}).status().code(), Status::Code::kInvalidArgument);
}

TEST_F(SqlitePlanStoreTest, StatsCountWhatIsStored) {
  Put(Plan({.graph_hash = GraphHash(1)}));
  Put(Plan({.graph_hash = GraphHash(2), .target_id = "target-b", .cost_model_version = "cm0"}));
  StatusOr<std::vector<DatabaseStats>> stats = store_->Stats("cm1");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_EQ(stats->size(), 1u);
  const DatabaseStats& s = stats->front();
  EXPECT_EQ(s.schema_version, kSchemaVersion);
  EXPECT_EQ(s.targets, 2);
  EXPECT_EQ(s.graphs, 2);
  EXPECT_EQ(s.plans, 2);
  EXPECT_EQ(s.stale_plans, 1);
  EXPECT_GT(s.file_bytes, 0);
  ASSERT_EQ(s.per_target.size(), 2u);
  EXPECT_EQ(s.per_target[1].target_id, "target-b");
  EXPECT_EQ(s.per_target[1].stale_plans, 1);
}

TEST_F(SqlitePlanStoreTest, ReadOnlyStoreReadsButRefusesWrites) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1)});
  Put(plan);
  std::unique_ptr<SqlitePlanStore> reader = testing::OpenReadOnly(store_->path());
  ASSERT_NE(reader, nullptr);
  EXPECT_TRUE(reader->GetPlan(PlanKey::Of(plan), "cm1").ok());
  Status s = reader->PutPlan(Plan({.graph_hash = GraphHash(2)}), Graph("m", 1), {});
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("read-only"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace fusor::db
