// The service's side of the learned residual on a real SQLite file, without measuring: a tune's
// timings go in as rows with their features and come back as the same ResidualSamples; rows of
// another features version or unreadable rows are skipped and logged, never misread; a fit is
// stored with its training set's size and the newest row it saw, counts new rows from there, and
// a failed fit keeps the stored residual; a stored residual of another cost model or one that
// does not read back is refused naming the target.
#include "server/learned_residual.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "costmodel/hardware_profile.h"
#include "db/sqlite_plan_store.h"
#include "graph/onnx_import.h"
#include "lowering/plan_legality.h"
#include "tests/server/captured_log.h"

namespace fusor {
namespace {

constexpr const char* kTarget = "target-a";

class LearnedResidualTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fusor_learned_residual_XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto store = db::SqlitePlanStore::Open(dir_ + "/tuning.db", {});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    v1::HardwareProfile target;
    target.mutable_target()->set_id(kTarget);
    target.set_cost_model_version(kCostModelVersion);
    ASSERT_TRUE(store_->PutTarget(target).ok());
    auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/squeezenet1_1.onnx");
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    graph_ = *std::move(g);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A tune's timings: the unfused and the most fused plan of the whole graph, and one region's
  // plan, each "measured" at `scale` times the analytical prediction.
  std::vector<TimedPlan> Timings(double scale) const {
    std::vector<TimedPlan> timed;
    for (const FusionPlan& plan : {UnfusedPlan(graph_), MaxFusionPlan(graph_)})
      timed.push_back({nullptr, "plan", plan, scale * base_.Cost(graph_, plan).total.total_ns});
    FusionPlan fused = MaxFusionPlan(graph_);
    const FusionGroup& group = fused.groups.front();
    auto region = std::make_shared<const Graph>(graph_.ExtractRegion(group.nodes));
    FusionPlan alone = UnfusedPlan(*region);
    timed.push_back({region, "region", alone, scale * base_.Cost(*region, alone).total.total_ns});
    return timed;
  }

  void Keep(double scale) {
    auto rows = ResidualRowsOf(base_, graph_, std::string(64, 'a'), kTarget, Timings(scale));
    ASSERT_EQ(rows.size(), 3u);
    Status s = store_->AppendResidualSamples(rows);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::string dir_;
  std::unique_ptr<db::SqlitePlanStore> store_;
  Graph graph_;
  AnalyticalCostModel base_{HardwareProfile{}};
};

TEST_F(LearnedResidualTest, TimingsComeBackAsTheSamplesTheyWere) {
  Keep(1.5);
  StatusOr<LoadedResidualSamples> loaded = LoadResidualSamples(*store_, kTarget, 100);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->samples.size(), 3u);
  EXPECT_EQ(loaded->other_features, 0);
  EXPECT_EQ(loaded->unreadable, 0);
  std::vector<TimedPlan> timed = Timings(1.5);
  ResidualSample expected = ResidualSampleOf(base_, graph_, timed[1].plan, timed[1].measured_ns);
  EXPECT_EQ(loaded->samples[1].x, expected.x);
  EXPECT_EQ(loaded->samples[1].predicted_ns, expected.predicted_ns);
  EXPECT_EQ(loaded->samples[1].measured_ns, expected.measured_ns);
  EXPECT_EQ(loaded->samples[2].x.size(), timed[2].plan.groups.size());
}

TEST_F(LearnedResidualTest, RowsOfAnotherFeatureLayoutOrUnreadableAreSkippedNeverMisread) {
  Keep(1.5);
  auto rows = ResidualRowsOf(base_, graph_, std::string(64, 'b'), kTarget, Timings(2));
  rows[0].features_version = "f28-000000000000";
  rows[1].features_json = "{\"groups\": [[1, 2, 3]], \"measured_ns\": 5}";
  ASSERT_TRUE(store_->AppendResidualSamples(rows).ok());
  testing::CapturedLog log;
  StatusOr<LoadedResidualSamples> loaded = LoadResidualSamples(*store_, kTarget, 100);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->samples.size(), 4u);
  EXPECT_EQ(loaded->other_features, 1);
  EXPECT_EQ(loaded->unreadable, 1);
  std::string text = log.text();
  EXPECT_NE(text.find("f28-000000000000"), std::string::npos) << text;
  EXPECT_NE(text.find("group 0"), std::string::npos) << text;
}

TEST_F(LearnedResidualTest, AFitIsStoredWithItsTrainingSetAndCountsNewTimingsFromThere) {
  EXPECT_EQ(RefitResidual(*store_, kTarget, 100).status().code(),
            Status::Code::kFailedPrecondition);
  EXPECT_EQ(store_->GetResidual(kTarget).status().code(), Status::Code::kNotFound);
  Keep(1.5);
  Keep(1.6);
  StatusOr<int> fresh = NewResidualSamples(*store_, kTarget, 100);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(*fresh, 6);

  StatusOr<db::StoredResidual> fitted = RefitResidual(*store_, kTarget, 100);
  ASSERT_TRUE(fitted.ok()) << fitted.status().ToString();
  EXPECT_EQ(fitted->training_samples, 6);
  EXPECT_EQ(fitted->cost_model_version, kCostModelVersion);
  EXPECT_EQ(*NewResidualSamples(*store_, kTarget, 100), 0);
  Keep(1.7);
  EXPECT_EQ(*NewResidualSamples(*store_, kTarget, 100), 3);

  // Timings 1.5-1.7x the prediction: the stored residual scales a group up.
  StatusOr<std::optional<UsableResidual>> usable = StoredResidualFor(*store_, kTarget);
  ASSERT_TRUE(usable.ok()) << usable.status().ToString();
  ASSERT_TRUE(usable->has_value());
  EXPECT_EQ((*usable)->model.training_samples, 6);
  ResidualSample s = ResidualSampleOf(base_, graph_, MaxFusionPlan(graph_), 1);
  EXPECT_GT((*usable)->model.Factor(s.x.front()), 1.2);

  // Deterministic: the same rows fit the same weights.
  db::StoredResidual before = *store_->GetResidual(kTarget);
  StatusOr<db::StoredResidual> again = RefitResidual(*store_, kTarget, 6);
  ASSERT_TRUE(again.ok());
  StatusOr<db::StoredResidual> twice = RefitResidual(*store_, kTarget, 6);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(again->residual_json, twice->residual_json);
  EXPECT_NE(before.residual_json, again->residual_json);
}

TEST_F(LearnedResidualTest, AnUnreadableResidualIsReplacedByTheSameFitWithoutNewTimings) {
  Keep(1.5);
  StatusOr<db::StoredResidual> fitted = RefitResidual(*store_, kTarget, 100);
  ASSERT_TRUE(fitted.ok()) << fitted.status().ToString();
  ASSERT_TRUE(store_
                  ->PutResidual({kTarget, kCostModelVersion, "{garbage", fitted->training_samples,
                                 fitted->last_sample_id, 0, ""})
                  .ok());
  StatusOr<db::StoredResidual> again = RefitResidual(*store_, kTarget, 100);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->residual_json, fitted->residual_json) << "the fit is deterministic";
  StatusOr<std::optional<UsableResidual>> usable = StoredResidualFor(*store_, kTarget);
  ASSERT_TRUE(usable.ok()) << usable.status().ToString();
  EXPECT_TRUE(usable->has_value());
}

TEST_F(LearnedResidualTest, AFailedFitKeepsTheStoredResidual) {
  Keep(1.5);
  ASSERT_TRUE(RefitResidual(*store_, kTarget, 100).ok());
  db::StoredResidual before = *store_->GetResidual(kTarget);
  // Only rows of another feature layout: nothing to fit on.
  auto rows = ResidualRowsOf(base_, graph_, std::string(64, 'c'), kTarget, Timings(3));
  for (auto& r : rows) r.features_version = "f28-000000000000";
  ASSERT_TRUE(store_->AppendResidualSamples(rows).ok());
  Status failed = RefitResidual(*store_, kTarget, 3).status();
  EXPECT_EQ(failed.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(failed.message().find(kTarget), std::string::npos) << failed.message();
  db::StoredResidual after = *store_->GetResidual(kTarget);
  EXPECT_EQ(after.residual_json, before.residual_json);
  EXPECT_EQ(after.training_samples, before.training_samples);
}

TEST_F(LearnedResidualTest, AResidualOfAnotherCostModelOrUnreadableIsRefusedNamingTheTarget) {
  StatusOr<std::optional<UsableResidual>> none = StoredResidualFor(*store_, kTarget);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  ASSERT_TRUE(store_->PutResidual({kTarget, "analytical-1", "{}", 5, 5, 0, ""}).ok());
  Status other = StoredResidualFor(*store_, kTarget).status();
  EXPECT_EQ(other.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(other.message().find("analytical-1"), std::string::npos) << other.message();
  EXPECT_NE(other.message().find(kTarget), std::string::npos) << other.message();

  ASSERT_TRUE(
      store_->PutResidual({kTarget, kCostModelVersion, "{\"weights\": 3", 5, 5, 0, ""}).ok());
  Status corrupt = StoredResidualFor(*store_, kTarget).status();
  EXPECT_EQ(corrupt.code(), Status::Code::kCorruption);
  EXPECT_NE(corrupt.message().find(kTarget), std::string::npos) << corrupt.message();
  EXPECT_NE(corrupt.message().find("tuning.db"), std::string::npos) << corrupt.message();
}

}  // namespace
}  // namespace fusor
