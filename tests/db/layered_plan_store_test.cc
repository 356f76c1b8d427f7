// LayeredPlanStore over real files: a writable database over read-only ones. Upper layers hide the
// same key below, staleness uses the newest calibration of any layer, and pages merge correctly.
#include "db/layered_plan_store.h"

#include <gtest/gtest.h>

#include "db/sqlite_plan_store.h"
#include "tests/db/test_db.h"

namespace fusor::db {
namespace {

using testing::Graph;
using testing::GraphHash;
using testing::kCalibrated;
using testing::Plan;
using testing::PlanSpec;
using testing::Profile;

class LayeredPlanStoreTest : public ::testing::Test {
 protected:
  // Fills database `name` with the plans, then closes it.
  void Fill(const std::string& name, const std::vector<v1::Plan>& plans,
            int64_t calibrated = kCalibrated) {
    std::unique_ptr<SqlitePlanStore> store = testing::OpenWritable(dir_.File(name));
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->PutTarget(Profile("target-a", "cm1", calibrated)).ok());
    for (const v1::Plan& plan : plans) {
      Status s = store->PutPlan(plan, Graph(name, 3), {});
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }

  // Top layer writable, the others read-only, in the order given.
  std::unique_ptr<LayeredPlanStore> Layers(const std::vector<std::string>& names) {
    std::vector<std::unique_ptr<PlanStore>> layers;
    for (size_t i = 0; i < names.size(); ++i) {
      std::string path = dir_.File(names[i]);
      if (i == 0) {
        layers.push_back(testing::OpenWritable(path));
      } else {
        layers.push_back(testing::OpenReadOnly(path));
      }
    }
    return std::make_unique<LayeredPlanStore>(std::move(layers));
  }

  testing::TempDir dir_;
};

TEST_F(LayeredPlanStoreTest, UpperLayerHidesTheSameKeyBelow) {
  Fill("top.db", {Plan({.graph_hash = GraphHash(1), .predicted_ns = 500})});
  Fill("snap.db", {Plan({.graph_hash = GraphHash(1), .predicted_ns = 100}),
                   Plan({.graph_hash = GraphHash(2)})});
  std::unique_ptr<LayeredPlanStore> store = Layers({"top.db", "snap.db"});
  StatusOr<StoredPlan> got = store->GetPlan(PlanKey::Of(Plan({.graph_hash = GraphHash(1)})), "");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->plan.predicted_ns(), 500);
  EXPECT_EQ(got->database, dir_.File("top.db"));
  StatusOr<StoredPlan> best = store->BestPlan(GraphHash(1), "target-a", "cm1");
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(best->plan.predicted_ns(), 500);  // The hidden faster copy is not served.
  StatusOr<PlanPage> page = store->QueryPlans(PlanQuery());
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->plans.size(), 2u);
  EXPECT_TRUE(store->BestPlan(GraphHash(2), "target-a", "cm1").ok());
}

TEST_F(LayeredPlanStoreTest, BestPlanComparesAcrossLayers) {
  Fill("top.db", {Plan({.graph_hash = GraphHash(1), .search_options = "a", .measured_ns = 900})});
  Fill("snap.db", {Plan({.graph_hash = GraphHash(1), .search_options = "b", .measured_ns = 400})});
  StatusOr<StoredPlan> best = Layers({"top.db", "snap.db"})->BestPlan(GraphHash(1), "target-a", "");
  ASSERT_TRUE(best.ok()) << best.status().ToString();
  EXPECT_EQ(best->plan.search_options(), "b");
}

TEST_F(LayeredPlanStoreTest, NewerCalibrationInAnyLayerMakesSnapshotPlansStale) {
  Fill("snap.db", {Plan({.graph_hash = GraphHash(1), .created_unix_ms = kCalibrated + 10})});
  Fill("top.db", {}, kCalibrated + 20);  // The target was recalibrated since the snapshot.
  std::unique_ptr<LayeredPlanStore> store = Layers({"top.db", "snap.db"});
  StatusOr<StoredPlan> got = store->GetPlan(PlanKey::Of(Plan({.graph_hash = GraphHash(1)})), "cm1");
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->stale);
  EXPECT_EQ(store->BestPlan(GraphHash(1), "target-a", "cm1").status().code(),
            Status::Code::kNotFound);
  PlanQuery current;
  current.only_current = true;
  StatusOr<PlanPage> page = store->QueryPlans(current);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->plans.empty());
  // On its own the snapshot still calls it current: only the layered view knows better.
  EXPECT_TRUE(
      testing::OpenReadOnly(dir_.File("snap.db"))->BestPlan(GraphHash(1), "target-a", "cm1").ok());
}

TEST_F(LayeredPlanStoreTest, PagesMergeLayersInOrderWithoutDuplicates) {
  std::vector<std::vector<v1::Plan>> plans(3);
  for (int i = 0; i < 30; ++i) {
    plans[i % 3].push_back(Plan({.graph_hash = GraphHash(i), .created_unix_ms = kCalibrated + i}));
  }
  plans[2].push_back(Plan({.graph_hash = GraphHash(0), .created_unix_ms = kCalibrated + 100}));
  Fill("a.db", plans[0]);
  Fill("b.db", plans[1]);
  Fill("c.db", plans[2]);  // Also holds graph 0, hidden by a.db.
  std::unique_ptr<LayeredPlanStore> store = Layers({"a.db", "b.db", "c.db"});
  PlanQuery q;
  q.page_size = 4;
  std::vector<StoredPlan> seen = testing::AllPages(*store, q);
  EXPECT_EQ(seen.size(), 30u);
  testing::ExpectListedOnceInOrder(seen);
}

TEST_F(LayeredPlanStoreTest, WritesGoToTheTopLayerOnly) {
  Fill("top.db", {});
  Fill("snap.db", {Plan({.graph_hash = GraphHash(1)})});
  std::unique_ptr<LayeredPlanStore> store = Layers({"top.db", "snap.db"});
  ASSERT_TRUE(store->PutPlan(Plan({.graph_hash = GraphHash(2)}), Graph("m", 1), {}).ok());
  store.reset();
  EXPECT_EQ(testing::RawQuery(dir_.File("top.db"), "SELECT count(*) FROM plans"), "1");
  EXPECT_EQ(testing::RawQuery(dir_.File("snap.db"), "SELECT count(*) FROM plans"), "1");
}

TEST_F(LayeredPlanStoreTest, StatsListEveryDatabase) {
  Fill("top.db", {});
  Fill("snap.db", {Plan({.graph_hash = GraphHash(1)})});
  StatusOr<std::vector<DatabaseStats>> stats = Layers({"top.db", "snap.db"})->Stats("");
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->size(), 2u);
  EXPECT_FALSE((*stats)[0].read_only);
  EXPECT_TRUE((*stats)[1].read_only);
  EXPECT_EQ((*stats)[1].plans, 1);
}

}  // namespace
}  // namespace fusor::db
