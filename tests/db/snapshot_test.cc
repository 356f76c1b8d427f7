// Deployment snapshots on real files: export keeps only the best current plan per graph for one
// target, the file is complete and read-only, and import merges without duplicates.
#include "db/snapshot.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "db/layered_plan_store.h"
#include "tests/db/test_db.h"

namespace fusor::db {
namespace {

using testing::Graph;
using testing::GraphHash;
using testing::kCalibrated;
using testing::Plan;
using testing::PlanSpec;
using testing::Profile;

class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = testing::OpenWritable(dir_.File("server.db"));
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->PutTarget(Profile("target-a", "cm1", kCalibrated)).ok());
    ASSERT_TRUE(store_->PutTarget(Profile("target-b", "cm1", kCalibrated)).ok());
    // Graph 1: two options, "fast" is best. Graph 2: only a stale plan. Graph 3: other target.
    std::vector<Measurement> m(1);
    m[0].samples_ns = {300, 310, 290};
    Put(Plan({.graph_hash = GraphHash(1), .search_options = "slow", .measured_ns = 500}), {});
    Put(Plan({.graph_hash = GraphHash(1), .search_options = "fast", .measured_ns = 300}), m);
    Put(Plan({.graph_hash = GraphHash(2), .cost_model_version = "cm0"}), {});
    Put(Plan({.graph_hash = GraphHash(3), .target_id = "target-b"}), {});
  }

  void Put(const v1::Plan& plan, const std::vector<Measurement>& m) {
    Status s = store_->PutPlan(plan, Graph("model", 4), m);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  static int64_t Count(const std::string& path, const std::string& table) {
    return std::stoll(testing::RawQuery(path, "SELECT count(*) FROM " + table));
  }

  testing::TempDir dir_;
  std::unique_ptr<SqlitePlanStore> store_;
};

TEST_F(SnapshotTest, ExportKeepsOnlyTheBestCurrentPlanPerGraph) {
  std::string out = dir_.File("deploy.db");
  StatusOr<ExportSummary> summary = ExportSnapshot(*store_, "target-a", "cm1", out, false);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->plans, 1);
  EXPECT_EQ(summary->graphs, 1);
  std::unique_ptr<SqlitePlanStore> snapshot = testing::OpenReadOnly(out);
  ASSERT_NE(snapshot, nullptr);
  EXPECT_EQ(snapshot->schema().snapshot_of_target, "target-a");
  StatusOr<StoredPlan> best = snapshot->BestPlan(GraphHash(1), "target-a", "cm1");
  ASSERT_TRUE(best.ok()) << best.status().ToString();
  EXPECT_EQ(best->plan.search_options(), "fast");
  StatusOr<std::vector<Measurement>> m = snapshot->GetMeasurements(PlanKey::Of(best->plan));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->size(), 1u);
  EXPECT_EQ(Count(out, "targets"), 1);
  EXPECT_EQ(Count(out, "tuning_history"), 0);
}

TEST_F(SnapshotTest, SnapshotIsOneReadOnlyFile) {
  std::string out = dir_.File("deploy.db");
  ASSERT_TRUE(ExportSnapshot(*store_, "target-a", "cm1", out, false).ok());
  struct stat st {};
  ASSERT_EQ(stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  EXPECT_FALSE(std::filesystem::exists(out + "-wal"));
  EXPECT_EQ(testing::RawQuery(out, "PRAGMA journal_mode"), "delete");
  StatusOr<std::unique_ptr<SqlitePlanStore>> writable =
      SqlitePlanStore::Open(out, SqliteOpenOptions());
  EXPECT_EQ(writable.status().code(), Status::Code::kFailedPrecondition);
  // Even where file modes do not stop a writer (root), the snapshot marker does.
  ASSERT_EQ(chmod(out.c_str(), 0644), 0);
  writable = SqlitePlanStore::Open(out, SqliteOpenOptions());
  EXPECT_EQ(writable.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(writable.status().message().find("snapshot"), std::string::npos);
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_EQ(entry.path().string().find(".partial"), std::string::npos) << entry.path();
  }
}

TEST_F(SnapshotTest, ExportRefusesToOverwriteOrToExportNothing) {
  std::string out = dir_.File("deploy.db");
  ASSERT_TRUE(ExportSnapshot(*store_, "target-a", "cm1", out, false).ok());
  EXPECT_EQ(ExportSnapshot(*store_, "target-a", "cm1", out, false).status().code(),
            Status::Code::kAlreadyExists);
  EXPECT_TRUE(ExportSnapshot(*store_, "target-a", "cm1", out, true).ok());
  EXPECT_EQ(ExportSnapshot(*store_, "target-a", "cm9", dir_.File("x.db"), false).status().code(),
            Status::Code::kFailedPrecondition);
  EXPECT_FALSE(std::filesystem::exists(dir_.File("x.db")));
  EXPECT_EQ(ExportSnapshot(*store_, "target-z", "cm1", dir_.File("y.db"), false).status().code(),
            Status::Code::kNotFound);
}

TEST_F(SnapshotTest, ImportRoundTripsWithoutDuplicates) {
  std::string out = dir_.File("deploy.db");
  ASSERT_TRUE(ExportSnapshot(*store_, "target-a", "cm1", out, false).ok());
  std::unique_ptr<SqlitePlanStore> edge = testing::OpenWritable(dir_.File("edge.db"));
  ASSERT_NE(edge, nullptr);
  StatusOr<MergeCounts> first = ImportSnapshot(out, *edge);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->plans_added, 1);
  EXPECT_EQ(first->graphs_added, 1);
  EXPECT_EQ(first->targets_updated, 1);
  StatusOr<MergeCounts> again = ImportSnapshot(out, *edge);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->plans_added, 0);
  EXPECT_EQ(again->plans_kept, 1);
  EXPECT_EQ(again->graphs_added, 0);
  EXPECT_EQ(again->targets_updated, 0);
  EXPECT_EQ(Count(edge->path(), "plans"), 1);
  EXPECT_EQ(Count(edge->path(), "measurements"), 1);
  StatusOr<StoredPlan> best = edge->BestPlan(GraphHash(1), "target-a", "cm1");
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(best->plan.search_options(), "fast");
}

TEST_F(SnapshotTest, ImportKeepsTheNewerPlanUnderOneKey) {
  std::string out = dir_.File("deploy.db");
  ASSERT_TRUE(ExportSnapshot(*store_, "target-a", "cm1", out, false).ok());
  std::unique_ptr<SqlitePlanStore> edge = testing::OpenWritable(dir_.File("edge.db"));
  ASSERT_TRUE(edge->PutTarget(Profile("target-a", "cm1", kCalibrated)).ok());
  v1::Plan newer = Plan({.graph_hash = GraphHash(1),
                         .search_options = "fast",
                         .measured_ns = 999,
                         .created_unix_ms = 1'800'000'000'000});
  ASSERT_TRUE(edge->PutPlan(newer, Graph("model", 4), {}).ok());
  StatusOr<MergeCounts> counts = ImportSnapshot(out, *edge);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->plans_kept, 1);
  EXPECT_EQ(edge->GetPlan(PlanKey::Of(newer), "cm1")->plan.measured_ns(), 999);

  v1::Plan older = newer;
  older.set_created_unix_ms(1'000);
  ASSERT_TRUE(edge->PutPlan(older, Graph("model", 4), {}).ok());
  counts = ImportSnapshot(out, *edge);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->plans_replaced, 1);
  EXPECT_EQ(edge->GetPlan(PlanKey::Of(newer), "cm1")->plan.measured_ns(), 300);
}

TEST_F(SnapshotTest, ImportIntoItselfIsRefused) {
  EXPECT_EQ(ImportSnapshot(store_->path(), *store_).status().code(),
            Status::Code::kInvalidArgument);
}

TEST_F(SnapshotTest, ExportFromLayeredStoreUsesEveryLayer) {
  std::string first = dir_.File("first.db");
  ASSERT_TRUE(ExportSnapshot(*store_, "target-a", "cm1", first, false).ok());
  std::unique_ptr<SqlitePlanStore> top = testing::OpenWritable(dir_.File("top.db"));
  ASSERT_TRUE(top->PutTarget(Profile("target-a", "cm1", kCalibrated)).ok());
  ASSERT_TRUE(top->PutPlan(Plan({.graph_hash = GraphHash(7)}), Graph("other", 2), {}).ok());
  std::vector<std::unique_ptr<PlanStore>> layers;
  layers.push_back(std::move(top));
  layers.push_back(testing::OpenReadOnly(first));
  LayeredPlanStore layered(std::move(layers));
  StatusOr<ExportSummary> summary =
      ExportSnapshot(layered, "target-a", "cm1", dir_.File("merged.db"), false);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->plans, 2);
}

}  // namespace
}  // namespace fusor::db
