// The TuningDatabase contract, run against every backend (plan_store_contract.h): round trips, the
// unique key, target isolation, staleness, filters and pagination, measurements, delete and
// expiry, stats, the plan-key lock between two stores on one database, the calibration log.
#include "tests/db/plan_store_contract.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <set>
#include <thread>

#include "db/schema.h"
#include "tests/db/test_db.h"

namespace fusor::db {
namespace {

using testing::Append;
using testing::Graph;
using testing::GraphHash;
using testing::kCalibrated;
using testing::Plan;
using testing::PlanSpec;
using testing::Profile;
using testing::Runs;
using testing::SampleRun;

TEST_P(PlanStoreContract, PutThenGetReturnsTheSamePlan) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1), .measured_ns = 900});
  Put(plan);
  StatusOr<StoredPlan> got = store_->GetPlan(PlanKey::Of(plan), "cm1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->plan.SerializeAsString(), plan.SerializeAsString());
  EXPECT_EQ(got->model_name, "resnet18");
  EXPECT_FALSE(got->stale) << got->stale_reason;
  EXPECT_EQ(got->database, backend_->Name());
  StatusOr<v1::Graph> graph = store_->GetGraph(GraphHash(1));
  ASSERT_TRUE(graph.ok());
  EXPECT_EQ(graph->nodes_size(), 4);
}

TEST_P(PlanStoreContract, EachGroupsChosenKernelRoundTripsThroughTheStore) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1), .measured_ns = 900});
  ASSERT_GE(plan.groups_size(), 2);
  plan.mutable_groups(0)->set_kernel("brg_matmul:avx2");
  Put(plan);
  StatusOr<StoredPlan> got = store_->GetPlan(PlanKey::Of(plan), "cm1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->plan.groups(0).kernel(), "brg_matmul:avx2");
  EXPECT_EQ(got->plan.groups(1).kernel(), "");  // oneDNN's first choice.
}

TEST_P(PlanStoreContract, PlansPersistAcrossReopen) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1)});
  Put(plan);
  store_.reset();
  store_ = backend_->Open();
  ASSERT_NE(store_, nullptr);
  EXPECT_TRUE(store_->GetPlan(PlanKey::Of(plan), "cm1").ok());
}

TEST_P(PlanStoreContract, ZeroCreatedTimeMeansNow) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1), .created_unix_ms = 0});
  Put(plan);
  StatusOr<StoredPlan> got = store_->GetPlan(PlanKey::Of(plan), "cm1");
  ASSERT_TRUE(got.ok());
  EXPECT_GT(got->plan.created_unix_ms(), kCalibrated);
}

TEST_P(PlanStoreContract, SameKeyReplacesAndHistoryKeepsBoth) {
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

TEST_P(PlanStoreContract, DifferentOptionsAreDifferentPlans) {
  Put(Plan({.graph_hash = GraphHash(1), .search_options = "greedy"}));
  Put(Plan({.graph_hash = GraphHash(1), .search_options = "optimal"}));
  EXPECT_EQ(All(PlanQuery()).size(), 2u);
}

TEST_P(PlanStoreContract, PlanForUnknownTargetIsRefused) {
  Status s = store_->PutPlan(Plan({.graph_hash = GraphHash(1), .target_id = "nowhere"}),
                             Graph("m", 1), {});
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("'nowhere'"), std::string::npos) << s.message();
}

TEST_P(PlanStoreContract, MalformedPlansAreRefused) {
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

TEST_P(PlanStoreContract, BestPlanPrefersMeasuredThenFaster) {
  Put(Plan({.graph_hash = GraphHash(1), .search_options = "a", .predicted_ns = 100}));
  Put(Plan({.graph_hash = GraphHash(1), .search_options = "b", .measured_ns = 700}));
  Put(Plan({.graph_hash = GraphHash(1), .search_options = "c", .measured_ns = 500}));
  StatusOr<StoredPlan> best = store_->BestPlan(GraphHash(1), "target-a", "cm1");
  ASSERT_TRUE(best.ok()) << best.status().ToString();
  EXPECT_EQ(best->plan.search_options(), "c");
}

TEST_P(PlanStoreContract, PlanTunedOnOneTargetIsNeverServedForAnother) {
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

TEST_P(PlanStoreContract, OlderCostModelIsStaleNotCurrent) {
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

TEST_P(PlanStoreContract, EmptyCurrentVersionMeansTheTargetsCalibratedOne) {
  Put(Plan({.graph_hash = GraphHash(1), .cost_model_version = "cm1"}));
  EXPECT_TRUE(store_->BestPlan(GraphHash(1), "target-a", "").ok());
  ASSERT_TRUE(store_->PutTarget(Profile("target-a", "cm2", kCalibrated + 1)).ok());
  EXPECT_EQ(store_->BestPlan(GraphHash(1), "target-a", "").status().code(),
            Status::Code::kNotFound);
}

TEST_P(PlanStoreContract, RecalibrationMakesOlderPlansStale) {
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

TEST_P(PlanStoreContract, OlderCalibrationNeverReplacesNewer) {
  Put(Plan({.graph_hash = GraphHash(1), .created_unix_ms = kCalibrated + 10}));
  ASSERT_TRUE(store_->PutTarget(Profile("target-a", "cm1", kCalibrated + 20)).ok());
  ASSERT_TRUE(store_->PutTarget(Profile("target-a", "cm1", kCalibrated)).ok());
  StatusOr<v1::HardwareProfile> target = store_->GetTarget("target-a");
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->calibrated_unix_ms(), kCalibrated + 20);
  EXPECT_FALSE(store_->BestPlan(GraphHash(1), "target-a", "cm1").ok());
}

TEST_P(PlanStoreContract, StaleFilterInSqlAgreesWithStaleFlag) {
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

// fusord's QueryPlans reply and `fusor db query` print what the store reads back here.
TEST_P(PlanStoreContract, QueryPlansNamesEachPlansModelAndWhyItIsStale) {
  Put(Plan({.graph_hash = GraphHash(1),
            .cost_model_version = "cm1",
            .created_unix_ms = kCalibrated + 2000}),
      "resnet18");
  Put(Plan({.graph_hash = GraphHash(2),
            .cost_model_version = "cm0",
            .created_unix_ms = kCalibrated + 1000}),
      "bert");
  PlanQuery query;
  query.current_cost_model_version = "cm1";
  std::vector<StoredPlan> plans = All(query);
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0].model_name, "resnet18");
  EXPECT_FALSE(plans[0].stale) << plans[0].stale_reason;
  EXPECT_EQ(plans[0].stale_reason, "");
  EXPECT_EQ(plans[1].model_name, "bert");
  EXPECT_TRUE(plans[1].stale);
  EXPECT_NE(plans[1].stale_reason.find("cm0"), std::string::npos) << plans[1].stale_reason;
}

TEST_P(PlanStoreContract, FiltersSelectExactlyTheMatchingPlans) {
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

TEST_P(PlanStoreContract, PagesCoverEveryPlanOnceNewestFirst) {
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

// The SQL that overwrites the stored plan of `graph_hash` with the bytes `hex` (hex digits; ""
// for 0 bytes) in the backend's dialect.
std::string OverwritePlanSql(const std::string& backend, const std::string& graph_hash,
                             const std::string& hex) {
  const std::string bytes = backend == "sqlite" ? "X'" + hex + "'" : "decode('" + hex + "', 'hex')";
  return "UPDATE plans SET plan = " + bytes + " WHERE graph_hash = '" + graph_hash + "'";
}

// The audit's holes: one corrupt row failed every page of QueryPlans that held it, and a 0-byte
// plan parsed as an empty plan and was served.
TEST_P(PlanStoreContract, ACorruptPlanRowIsLeftOutOfItsPageAndNamed) {
  for (int i = 0; i < 6; ++i) {
    Put(Plan({.graph_hash = GraphHash(i), .created_unix_ms = kCalibrated + 10 * i}));
  }
  RawQuery(OverwritePlanSql(GetParam().name, GraphHash(2), "ff"));
  RawQuery(OverwritePlanSql(GetParam().name, GraphHash(4), ""));
  PlanQuery q;
  q.page_size = 3;
  std::vector<std::string> corrupt;
  std::vector<StoredPlan> seen;
  do {
    StatusOr<PlanPage> page = store_->QueryPlans(q);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (StoredPlan& p : page->plans) seen.push_back(std::move(p));
    corrupt.insert(corrupt.end(), page->corrupt_plans.begin(), page->corrupt_plans.end());
    q.page_token = page->next_page_token;
  } while (!q.page_token.empty());
  EXPECT_EQ(seen.size(), 4u);
  for (const StoredPlan& p : seen) {
    EXPECT_NE(p.plan.graph_hash(), GraphHash(2));
    EXPECT_NE(p.plan.graph_hash(), GraphHash(4));
  }
  EXPECT_NE(std::find(corrupt.begin(), corrupt.end(), GraphHash(2) + " target-a"), corrupt.end());
  EXPECT_NE(std::find(corrupt.begin(), corrupt.end(), GraphHash(4) + " target-a"), corrupt.end());
}

TEST_P(PlanStoreContract, AZeroBytePlanIsCorruptionNeverAnEmptyPlan) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1)});
  Put(plan);
  RawQuery(OverwritePlanSql(GetParam().name, GraphHash(1), ""));
  StatusOr<StoredPlan> got = store_->GetPlan(PlanKey::Of(plan), "cm1");
  EXPECT_EQ(got.status().code(), Status::Code::kCorruption) << got.status().ToString();
  EXPECT_NE(got.status().message().find("0 bytes"), std::string::npos) << got.status().ToString();
  EXPECT_EQ(store_->BestPlan(GraphHash(1), "target-a", "cm1").status().code(),
            Status::Code::kCorruption);
}

TEST_P(PlanStoreContract, ForeignPageTokenIsRejected) {
  PlanQuery q;
  q.page_token = "not-a-token";
  EXPECT_EQ(store_->QueryPlans(q).status().code(), Status::Code::kInvalidArgument);
  q.page_token = "";
  q.page_size = -1;
  EXPECT_EQ(store_->QueryPlans(q).status().code(), Status::Code::kInvalidArgument);
}

TEST_P(PlanStoreContract, MeasurementsAreSummarisedAndReplacedWithThePlan) {
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

TEST_P(PlanStoreContract, BadMeasurementsAreRefused) {
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

TEST_P(PlanStoreContract, DeleteRemovesPlanAndMeasurements) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(1)});
  std::vector<Measurement> m(1);
  m[0].samples_ns = {1, 2, 3};
  ASSERT_TRUE(store_->PutPlan(plan, Graph("m", 4), m).ok());
  ASSERT_TRUE(store_->DeletePlan(PlanKey::Of(plan)).ok());
  EXPECT_EQ(store_->GetPlan(PlanKey::Of(plan), "cm1").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(store_->DeletePlan(PlanKey::Of(plan)).code(), Status::Code::kNotFound);
  EXPECT_EQ(RawQuery("SELECT count(*) FROM measurements"), "0");
}

TEST_P(PlanStoreContract, ExpireByAgeAndStalenessDropsOrphanGraphs) {
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
  EXPECT_EQ(RawQuery("SELECT count(*) FROM tuning_history WHERE event = 'expired'"), "2");
  EXPECT_EQ(store_->ExpirePlans({}).status().code(), Status::Code::kInvalidArgument);
}

TEST_P(PlanStoreContract, StatsCountWhatIsStored) {
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

TEST_P(PlanStoreContract, PlanKeyLockMakesASecondStoreOnTheDatabaseWaitForTheFirst) {
  std::unique_ptr<TuningDatabase> other = backend_->Open();  // As a second fusord would open it.
  ASSERT_NE(other, nullptr);
  PlanKey key{GraphHash(1), "target-a", "cm1", ""};
  StatusOr<std::unique_ptr<PlanKeyLock>> held = store_->LockPlanKey(key, nullptr);
  ASSERT_TRUE(held.ok()) << held.status().ToString();

  StatusOr<std::unique_ptr<PlanKeyLock>> free_key =
      other->LockPlanKey({GraphHash(2), "target-a", "cm1", ""}, nullptr);
  ASSERT_TRUE(free_key.ok()) << free_key.status().ToString();

  std::atomic<bool> cancelled{true};
  EXPECT_EQ(other->LockPlanKey(key, &cancelled).status().code(), Status::Code::kCancelled);

  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    StatusOr<std::unique_ptr<PlanKeyLock>> lock = other->LockPlanKey(key, nullptr);
    EXPECT_TRUE(lock.ok()) << lock.status().ToString();
    acquired = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(acquired.load());  // Still held by the first store.
  held->reset();
  waiter.join();
  EXPECT_TRUE(acquired.load());
}

// The calibration log ---------------------------------------------------------------------------

TEST_P(PlanStoreContract, RunsRoundTripNewestFirstWithTheirSamples) {
  int64_t first = Append(*store_, SampleRun("target-a", "cm1", 3, kCalibrated + 1));
  int64_t second = Append(*store_, SampleRun("target-a", "cm1", 2, kCalibrated + 2));
  EXPECT_GT(second, first);
  std::vector<CalibrationRun> runs = Runs(*store_, "target-a", "cm1");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].run_id, second);
  EXPECT_EQ(runs[0].run_unix_ms, kCalibrated + 2);
  EXPECT_EQ(runs[0].samples.size(), 2u);
  EXPECT_EQ(runs[0].database, backend_->Name());
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

TEST_P(PlanStoreContract, ZeroRunTimeMeansNow) {
  Append(*store_, SampleRun("target-a", "cm1", 1));
  std::vector<CalibrationRun> runs = Runs(*store_, "target-a", "cm1");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_GT(runs[0].run_unix_ms, kCalibrated);
}

TEST_P(PlanStoreContract, OnlyTheTargetsRunsUnderTheAskedCostModelVersion) {
  Append(*store_, SampleRun("target-a", "cm1", 2));
  Append(*store_, SampleRun("target-a", "cm2", 5));  // Features of another cost model.
  Append(*store_, SampleRun("target-b", "cm1", 4));
  std::vector<CalibrationRun> runs = Runs(*store_, "target-a", "cm1");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].samples.size(), 2u);
  EXPECT_EQ(Runs(*store_, "target-a", "cm2").at(0).samples.size(), 5u);
  EXPECT_TRUE(Runs(*store_, "target-c", "cm1").empty());
}

TEST_P(PlanStoreContract, TheCapKeepsTheNewestRuns) {
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

TEST_P(PlanStoreContract, BadRunsAreRefusedNamingWhatIsWrong) {
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

TEST_P(PlanStoreContract, StatsCountSamplesAndRuns) {
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

// The learned residual's log and fits -------------------------------------------------------------

ResidualSampleRow ResidualRow(const std::string& target, const std::string& cmv, int n,
                              const std::string& features_version = "f29-abc") {
  ResidualSampleRow r;
  r.target_id = target;
  r.cost_model_version = cmv;
  r.graph_hash = GraphHash(static_cast<uint64_t>(n));
  r.source = n % 2 ? "plan" : "region Conv+Relu:fused";
  r.features_version = features_version;
  r.features_json = "{\"groups\": [[" + std::to_string(n) + ", 1, 0.5]]}";
  r.measured_ns = 1000.5 + n;
  return r;
}

std::vector<ResidualSampleRow> One(ResidualSampleRow row) { return {std::move(row)}; }

std::vector<ResidualSampleRow> ResidualRows(CalibrationLog& store, const std::string& target,
                                            const std::string& cmv, int64_t after = 0,
                                            int32_t max = 4096) {
  StatusOr<std::vector<ResidualSampleRow>> rows = store.ResidualSamples({target, cmv, after, max});
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  return rows.ok() ? *rows : std::vector<ResidualSampleRow>();
}

TEST_P(PlanStoreContract, ResidualSamplesRoundTripOldestFirstUnderTheirTargetAndVersion) {
  std::vector<ResidualSampleRow> rows = {ResidualRow("target-a", "cm1", 1),
                                         ResidualRow("target-a", "cm1", 2, "f30-def")};
  ASSERT_TRUE(store_->AppendResidualSamples(rows).ok());
  ASSERT_TRUE(store_->AppendResidualSamples(One(ResidualRow("target-a", "cm2", 3))).ok());
  ASSERT_TRUE(store_->AppendResidualSamples(One(ResidualRow("target-b", "cm1", 4))).ok());
  std::vector<ResidualSampleRow> back = ResidualRows(*store_, "target-a", "cm1");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_LT(back[0].sample_id, back[1].sample_id);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_GT(back[i].sample_id, 0);
    EXPECT_EQ(back[i].target_id, "target-a");
    EXPECT_EQ(back[i].cost_model_version, "cm1");
    EXPECT_EQ(back[i].graph_hash, rows[i].graph_hash);
    EXPECT_EQ(back[i].source, rows[i].source);
    EXPECT_EQ(back[i].features_version, rows[i].features_version);
    EXPECT_EQ(back[i].features_json, rows[i].features_json);
    EXPECT_EQ(back[i].measured_ns, rows[i].measured_ns);
    EXPECT_GT(back[i].measured_unix_ms, kCalibrated);  // 0 when appended: now.
  }
  EXPECT_EQ(ResidualRows(*store_, "target-a", "cm2").size(), 1u);
  EXPECT_EQ(ResidualRows(*store_, "target-b", "cm1").size(), 1u);
  EXPECT_TRUE(ResidualRows(*store_, "target-c", "cm1").empty());
}

TEST_P(PlanStoreContract, ResidualSamplesAfterAnIdAndTheCapKeepTheNewest) {
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(store_->AppendResidualSamples(One(ResidualRow("target-a", "cm1", i))).ok());
  std::vector<ResidualSampleRow> all = ResidualRows(*store_, "target-a", "cm1");
  ASSERT_EQ(all.size(), 5u);
  std::vector<ResidualSampleRow> newest = ResidualRows(*store_, "target-a", "cm1", 0, 2);
  ASSERT_EQ(newest.size(), 2u);
  EXPECT_EQ(newest[0].sample_id, all[3].sample_id);
  EXPECT_EQ(newest[1].sample_id, all[4].sample_id);
  std::vector<ResidualSampleRow> after = ResidualRows(*store_, "target-a", "cm1", all[2].sample_id);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0].sample_id, all[3].sample_id);
  EXPECT_EQ(store_->ResidualSamples({"target-a", "cm1", 0, 0}).status().code(),
            Status::Code::kInvalidArgument);
}

TEST_P(PlanStoreContract, BadResidualSamplesAreRefusedAndNothingIsHalfWritten) {
  ResidualSampleRow nan_time = ResidualRow("target-a", "cm1", 2);
  nan_time.measured_ns = std::nan("");
  std::vector<ResidualSampleRow> rows = {ResidualRow("target-a", "cm1", 1), nan_time};
  Status s = store_->AppendResidualSamples(rows);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("target-a"), std::string::npos) << s.message();
  ResidualSampleRow no_version = ResidualRow("target-a", "cm1", 3, "");
  EXPECT_EQ(store_->AppendResidualSamples(One(no_version)).code(), Status::Code::kInvalidArgument);
  rows = {ResidualRow("target-a", "cm1", 4), ResidualRow("target-z", "cm1", 5)};
  Status unknown = store_->AppendResidualSamples(rows);
  EXPECT_EQ(unknown.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(unknown.message().find("target-z"), std::string::npos) << unknown.message();
  EXPECT_TRUE(ResidualRows(*store_, "target-a", "cm1").empty());
}

TEST_P(PlanStoreContract, AResidualIsStoredPerTargetAndTheNextFitReplacesIt) {
  EXPECT_EQ(store_->GetResidual("target-a").status().code(), Status::Code::kNotFound);
  StoredResidual r{"target-a", "cm1", "{\"format\": \"fusor.residual.v1\"}", 12, 34, 0, ""};
  ASSERT_TRUE(store_->PutResidual(r).ok());
  StatusOr<StoredResidual> back = store_->GetResidual("target-a");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->target_id, "target-a");
  EXPECT_EQ(back->cost_model_version, "cm1");
  EXPECT_EQ(back->residual_json, r.residual_json);
  EXPECT_EQ(back->training_samples, 12);
  EXPECT_EQ(back->last_sample_id, 34);
  EXPECT_GT(back->fitted_unix_ms, kCalibrated);
  EXPECT_EQ(back->database, backend_->Name());
  EXPECT_EQ(store_->GetResidual("target-b").status().code(), Status::Code::kNotFound);

  StoredResidual next{"target-a", "cm2", "{}", 40, 90, kCalibrated + 5, ""};
  ASSERT_TRUE(store_->PutResidual(next).ok());
  back = store_->GetResidual("target-a");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->cost_model_version, "cm2");
  EXPECT_EQ(back->training_samples, 40);
  EXPECT_EQ(back->last_sample_id, 90);
  EXPECT_EQ(back->fitted_unix_ms, kCalibrated + 5);

  EXPECT_EQ(store_->PutResidual({"target-z", "cm1", "{}", 1, 1, 0, ""}).code(),
            Status::Code::kFailedPrecondition);
  EXPECT_EQ(store_->PutResidual({"target-a", "", "{}", 1, 1, 0, ""}).code(),
            Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace fusor::db
