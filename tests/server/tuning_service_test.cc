// The tuning core end to end, in process: a real SQLite file, real oneDNN measurements.
#include "server/tuning_service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "costmodel/hardware_profile.h"
#include "db/sqlite_plan_store.h"
#include "graph/canonical.h"
#include "graph/graph_proto.h"
#include "graph/onnx_import.h"
#include "graph/plan.h"
#include "graph/plan_json.h"
#include "lowering/plan_legality.h"
#include "runtime/measurer_factory.h"
#include "server/calibration_fit_samples.h"
#include "tests/graph/ir_builder.h"
#include "tests/server/captured_log.h"

namespace fusor {
namespace {

class TuningServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fusor_service_XXXXXX";
    dir_ = mkdtemp(tmpl);
    Reopen(Options());
    auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/squeezenet1_1.onnx");
    ASSERT_TRUE(g.ok());
    graph_ = *g;
  }
  TuningServiceOptions Options() const {
    TuningServiceOptions o;
    o.db_location = dir_ + "/tuning.db";
    o.default_measure_budget = 3;
    o.min_measure_ms = 5;
    o.measure_uncalibrated = true;  // Calibrating first has a test of its own.
    // These tests check what a calibration fits and stores, not how fast: ctest runs another
    // binary beside this one, and a busy host must not turn the 60 s default into a failure.
    o.calibration_time_limit_s = 600;
    return o;
  }
  // For tests of the calibration log, not of the fit: short timings, no waiting.
  void ReopenForQuickCalibrations() {
    TuningServiceOptions quick = Options();
    quick.calibration_benchmark_ms = 5;
    quick.calibration_quiet_wait_ms = 0;
    Reopen(quick);
  }
  void Reopen(const TuningServiceOptions& o) {
    service_.reset();
    auto s = TuningService::Open(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    service_ = std::move(s).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  StatusOr<v1::TuneEvent::Result> Tune(v1::TuneRequest request,
                                       std::vector<std::string>* stages = nullptr,
                                       const std::atomic<bool>* cancelled = nullptr) {
    v1::TuneEvent::Result result;
    int results = 0;
    Status s = service_->Tune(
        request,
        [&](const v1::TuneEvent& e) {
          if (e.has_result()) {
            result = e.result();
            ++results;
          } else if (stages) {
            stages->push_back(e.progress().stage());
          }
        },
        cancelled);
    if (!s.ok()) return s;
    EXPECT_EQ(results, 1);
    return result;
  }

  v1::TuneRequest Request() {
    v1::TuneRequest r;
    *r.mutable_graph() = ToProto(graph_);
    return r;
  }

  std::string dir_;
  std::unique_ptr<TuningService> service_;
  Graph graph_;
};

TEST_F(TuningServiceTest, TuneMeasuresStoresAndThenHitsTheCache) {
  std::vector<std::string> stages;
  auto first = Tune(Request(), &stages);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->cache_hit());
  const v1::Plan& plan = first->plan();
  EXPECT_EQ(plan.graph_hash(), CanonicalHash(graph_));
  EXPECT_EQ(plan.target_id(), service_->local_target_id());
  EXPECT_GT(plan.measured_ns(), 0);
  EXPECT_GT(plan.unfused_measured_ns(), 0);
  EXPECT_GT(plan.predicted_ns(), 0);
  // Fused, unless the unfused plan was measured faster (autotune's safety net; timing on a loaded
  // machine can do that), in which case the stored plan is the unfused one.
  EXPECT_LE(plan.predicted_ns(), plan.unfused_predicted_ns());
  EXPECT_LE(plan.groups_size(), static_cast<int>(graph_.num_nodes()));
  auto legal = PlanFromProto(graph_, plan);
  EXPECT_TRUE(legal.ok()) << legal.status().ToString();
  EXPECT_EQ(stages.front(), "validate");
  EXPECT_NE(std::find(stages.begin(), stages.end(), "measure"), stages.end());

  auto second = Tune(Request());
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->cache_hit());
  EXPECT_EQ(second->plan().created_unix_ms(), plan.created_unix_ms());

  v1::TuneRequest force = Request();
  force.set_force(true);
  auto third = Tune(force);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->cache_hit());

  v1::GetPlanRequest get;
  get.set_graph_hash(plan.graph_hash());
  auto got = service_->GetPlan(get);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got->stale());
  EXPECT_EQ(got->plan().graph_hash(), plan.graph_hash());

  v1::QueryPlansRequest query;
  query.set_model_name("squeezenet1_1");
  auto page = service_->QueryPlans(query);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->plans_size(), 1);  // Same key: the forced retune replaced it.
}

// A plan stored under an older lowering, which ran DepthToSpace alone as an opaque group (the
// stored plan's JSON edited so), fails the plan check against the graph: a Tune never serves it
// but tunes the key again, logs why, and replaces it with a plan that passes.
TEST_F(TuningServiceTest, AStoredPlanTheGraphsLoweringNoLongerFitsIsTunedAgainNotServed) {
  testing::IrBuilder b;
  TensorId x = b.Input("x", {1, 12, 16, 16}), d = b.Act("d", {1, 3, 32, 32});
  TensorId y = b.Act("y", {1, 3, 32, 32});
  b.Op("DepthToSpace", {x}, {d}, {testing::Int("blocksize", 2)});
  b.Op("Sigmoid", {d}, {y});
  b.Output(y);
  graph_ = b.Build();
  v1::TuneRequest request = Request();
  request.mutable_options()->set_algorithm("none");
  request.mutable_options()->set_measure_budget(1);
  auto first = Tune(request);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const db::PlanKey key = db::PlanKey::Of(first->plan());
  const Graph canonical = Canonicalize(graph_);
  // The plan an older lowering made: every node alone, DepthToSpace's group opaque.
  const NodeId d2s = canonical.node(0).op_type == "DepthToSpace" ? 0 : 1;
  nlohmann::json j = PlanToJson(UnfusedPlan(canonical), {key.graph_hash, key.target_id});
  size_t group = 0;
  while (j["groups"][group]["nodes"][0] != d2s) ++group;
  ASSERT_EQ(j["groups"][group]["kind"], "single");
  j["groups"][group]["kind"] = "opaque";
  auto stale = DecodePlanJson(canonical, j, key.target_id);
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  v1::Plan edited = first->plan();
  PlanToProto(*stale, &edited);
  {
    auto store = db::SqlitePlanStore::Open(dir_ + "/tuning.db", {});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->PutPlan(edited, ToProto(canonical), {}).ok());
  }
  ASSERT_FALSE(PlanFromProto(canonical, edited).ok());

  testing::CapturedLog log;
  auto again = Tune(request);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->cache_hit());
  EXPECT_TRUE(PlanFromProto(canonical, again->plan()).ok());
  const std::string text = log.text();
  EXPECT_NE(text.find("stored plan (tuned "), std::string::npos) << text;
  EXPECT_NE(text.find("does not fit the graph's lowering, tuning it again: group " +
                      std::to_string(group) + ": "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("is declared opaque but its nodes form single"), std::string::npos) << text;
  auto store = db::SqlitePlanStore::Open(dir_ + "/tuning.db", {});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto replaced = (*store)->GetPlan(key, kCostModelVersion);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_TRUE(PlanFromProto(canonical, replaced->plan).ok());
  auto third = Tune(request);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_TRUE(third->cache_hit());
}

TEST_F(TuningServiceTest, NamesWhatIsWrongWithARequest) {
  v1::TuneRequest bad = Request();
  bad.mutable_graph()->mutable_nodes(0)->set_inputs(0, "nowhere");
  auto r = Tune(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'nowhere'"), std::string::npos) << r.status().message();

  v1::TuneRequest unknown = Request();
  unknown.set_target_id("feedfacefeedfacefeedface");
  r = Tune(unknown);
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound);

  v1::TuneRequest algo = Request();
  algo.mutable_options()->set_algorithm("fastest");
  EXPECT_EQ(Tune(algo).status().code(), Status::Code::kInvalidArgument);

  v1::TuneRequest negative = Request();
  negative.mutable_options()->set_measure_budget(-1);
  EXPECT_EQ(Tune(negative).status().code(), Status::Code::kInvalidArgument);

  // Beyond the server's caps (and INT32_MAX, which once overflowed the budget it measures).
  v1::TuneRequest huge_budget = Request();
  huge_budget.mutable_options()->set_measure_budget(std::numeric_limits<int32_t>::max());
  r = Tune(huge_budget);
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("above this server's maximum of 64"), std::string::npos)
      << r.status().message();
  v1::TuneRequest forever = Request();
  forever.mutable_options()->set_time_limit_s(1e12);
  EXPECT_EQ(Tune(forever).status().code(), Status::Code::kInvalidArgument);
  v1::TuneRequest nan = Request();
  nan.mutable_options()->set_time_limit_s(std::nan(""));
  EXPECT_EQ(Tune(nan).status().code(), Status::Code::kInvalidArgument);
  v1::CalibrateRequest long_calibration;
  long_calibration.set_time_limit_s(1e9);
  EXPECT_EQ(service_->Calibrate(long_calibration).status().code(), Status::Code::kInvalidArgument);

  v1::GetPlanRequest short_hash;
  short_hash.set_graph_hash("abc");
  EXPECT_EQ(service_->GetPlan(short_hash).status().code(), Status::Code::kInvalidArgument);
  v1::GetPlanRequest missing;
  missing.set_graph_hash(std::string(64, 'a'));
  EXPECT_EQ(service_->GetPlan(missing).status().code(), Status::Code::kNotFound);
}

TEST_F(TuningServiceTest, AGraphWithNoNodesIsRefusedAsHavingNothingToTune) {
  testing::IrBuilder b;
  b.Output(b.Input("x", {2, 3}));
  v1::TuneRequest request;
  *request.mutable_graph() = ToProto(b.Build());
  auto r = Tune(request);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("nothing to tune"), std::string::npos)
      << r.status().message();
}

TEST_F(TuningServiceTest, ARegisteredRemoteTargetIsTunedByPredictionOnly) {
  HardwareProfile remote;
  remote.target.cpu_model = "Remote Xeon";
  remote.target.isa = "avx512_core";
  remote.target.vector_registers = 32;
  remote.target.vector_width_bits = 512;
  remote.target.onednn_version = "2.6.3";
  remote.calibrated_unix_ms = 1;
  v1::RegisterTargetRequest reg;
  ProfileToProto(remote, reg.mutable_profile());
  auto id = service_->RegisterTarget(reg);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->target_id(), remote.target.Id());
  auto targets = service_->ListTargets({});
  ASSERT_TRUE(targets.ok());
  EXPECT_EQ(targets->profiles_size(), 2);  // This CPU and the remote one.

  v1::TuneRequest request = Request();
  request.set_target_id(remote.target.Id());
  auto r = Tune(request);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->plan().target_id(), remote.target.Id());
  EXPECT_EQ(r->plan().measured_ns(), 0);  // Not this CPU: nothing measured here.
  EXPECT_NE(
      r->unmeasured_reason().find("no live measurement agent of target " + remote.target.Id()),
      std::string::npos)
      << r->unmeasured_reason();
  // A plan for one target is never served for another.
  v1::GetPlanRequest local;
  local.set_graph_hash(r->plan().graph_hash());
  EXPECT_EQ(service_->GetPlan(local).status().code(), Status::Code::kNotFound);
}

// The measurer seam: real oneDNN measurers, made by the factory the service is handed, and told
// which timing policy they serve.
class RecordingFactory {
 public:
  MeasurerFactory Factory() {
    return [this](TimingPolicy policy, const OneDnnMeasurerOptions& options) {
      policies.push_back(policy);
      return OneDnnMeasurers()(policy, options);
    };
  }
  std::vector<TimingPolicy> policies;
};

TEST_F(TuningServiceTest, TuneMeasuresThroughTheMeasurerFactoryItIsHanded) {
  RecordingFactory made;
  TuningServiceOptions o = Options();
  o.measurers = made.Factory();
  Reopen(o);
  auto r = Tune(Request());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->plan().measured_ns(), 0);
  EXPECT_EQ(made.policies, std::vector<TimingPolicy>{TimingPolicy::kTune});
}

// A real measurer that moves a manual clock on by `step` after each plan it times.
class ClockMovingMeasurer final : public Measurer {
 public:
  ClockMovingMeasurer(std::unique_ptr<Measurer> real, const ManualClock* clock,
                      std::chrono::seconds step)
      : real_(std::move(real)), clock_(clock), step_(step) {}
  StatusOr<Measurement> MeasurePlan(const Graph& g, const FusionPlan& plan) override {
    auto m = real_->MeasurePlan(g, plan);
    clock_->Advance(step_);
    return m;
  }
  StatusOr<Measurement> MeasureGroup(const Graph& g, const FusionGroup& group) override {
    return real_->MeasureGroup(g, group);
  }

 private:
  std::unique_ptr<Measurer> real_;
  const ManualClock* clock_;
  std::chrono::seconds step_;
};

TEST_F(TuningServiceTest, CalibrationKeepsItsTimeLimitOnTheClockItIsHanded) {
  ManualClock clock;
  std::vector<TimingPolicy> policies;
  TuningServiceOptions o = Options();
  o.calibration_benchmark_ms = 5;
  o.calibration_quiet_wait_ms = 0;
  o.clock = &clock;
  o.measurers = [&](TimingPolicy policy, const OneDnnMeasurerOptions& options) {
    policies.push_back(policy);
    return std::make_unique<ClockMovingMeasurer>(OneDnnMeasurers()(policy, options), &clock,
                                                 std::chrono::seconds(1000));
  };
  Reopen(o);
  // The first benchmark takes 1000 s on this clock, past the 600 s limit: the second is refused.
  auto calibrated = service_->Calibrate({});
  EXPECT_EQ(calibrated.status().code(), Status::Code::kDeadlineExceeded)
      << calibrated.status().ToString();
  ASSERT_FALSE(policies.empty());
  for (TimingPolicy p : policies) EXPECT_EQ(p, TimingPolicy::kCalibrate);
  auto targets = service_->ListTargets({});
  ASSERT_TRUE(targets.ok());
  EXPECT_EQ(targets->profiles(0).calibrated_unix_ms(), 0);  // Nothing stored.
}

// The audit's hole: the time limit bounded the search alone, and the measuring got the whole limit
// again (a Tune with a 5 s limit took 10 s). Here the limit is spent once the search starts (the
// clock jumps past it at the "search" event): nothing is left to measure with, and the result
// says so instead of measuring past the deadline.
TEST_F(TuningServiceTest, TheTimeLimitBoundsTheWholeTuneNotOnlyTheSearch) {
  ManualClock clock;
  TuningServiceOptions o = Options();
  o.clock = &clock;
  Reopen(o);
  v1::TuneRequest request = Request();
  request.mutable_options()->set_time_limit_s(10);
  v1::TuneEvent::Result result;
  Status s = service_->Tune(
      request,
      [&](const v1::TuneEvent& e) {
        if (e.has_result()) result = e.result();
        if (e.has_progress() && e.progress().stage() == "search") {
          clock.Advance(std::chrono::seconds(11));
        }
      },
      nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(result.plan().measured_ns(), 0);
  EXPECT_NE(result.unmeasured_reason().find("time limit of 10 s was spent before measuring"),
            std::string::npos)
      << result.unmeasured_reason();
}

TEST_F(TuningServiceTest, RecalibrationMakesStoredPlansStale) {
  v1::TuneRequest request = Request();
  request.mutable_options()->set_algorithm("greedy");
  auto first = Tune(request);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  // A newer profile of this very CPU arrives (as `fusor targets register` would send).
  auto targets = service_->ListTargets({});
  ASSERT_TRUE(targets.ok());
  v1::RegisterTargetRequest reg;
  for (const auto& p : targets->profiles()) {
    if (p.target().id() == service_->local_target_id()) *reg.mutable_profile() = p;
  }
  reg.mutable_profile()->set_calibrated_unix_ms(first->plan().created_unix_ms() + 1000);
  ASSERT_TRUE(service_->RegisterTarget(reg).ok());
  v1::GetPlanRequest get;
  get.set_graph_hash(first->plan().graph_hash());
  auto got = service_->GetPlan(get);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->stale());
  auto again = Tune(request);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->cache_hit());
}

// How long calibration takes is a speed goal, reported by bench/costmodel_lab, not asserted here.
TEST_F(TuningServiceTest, CalibrationFitsThisCpuPlausibly) {
  auto r = service_->Calibrate({});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto p = ProfileFromProto(r->profile());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_GT(p->calibrated_unix_ms, 0);
  EXPECT_TRUE(CheckPlausible(*p).ok());
  // Ranges, not constants: any CPU of this decade.
  EXPECT_GT(p->matmul_gflops.value, 1);
  EXPECT_LT(p->matmul_gflops.value, 20000);
  EXPECT_GT(p->dram_read_gbps.value, 0.5);
  EXPECT_LT(p->dram_read_gbps.value, 2000);
  EXPECT_GT(p->dispatch_ns.value, 10);
  EXPECT_LT(p->dispatch_ns.value, 1e6);
  EXPECT_GT(p->matmul_gflops.samples, 0);
  // What a plan adds to its groups: fitted on the in-plan suite's 18 groups, and said so.
  EXPECT_EQ(p->in_plan.samples, 18) << r->in_plan_fit();
  EXPECT_NE(r->in_plan_fit().find("in-plan term fitted on 18 groups"), std::string::npos)
      << r->in_plan_fit();
}

// A real measurer without the timing of groups inside a plan (Measurer's default).
class PlanOnlyMeasurer final : public Measurer {
 public:
  explicit PlanOnlyMeasurer(std::unique_ptr<Measurer> real) : real_(std::move(real)) {}
  StatusOr<Measurement> MeasurePlan(const Graph& g, const FusionPlan& plan) override {
    return real_->MeasurePlan(g, plan);
  }
  StatusOr<Measurement> MeasureGroup(const Graph& g, const FusionGroup& group) override {
    return real_->MeasureGroup(g, group);
  }

 private:
  std::unique_ptr<Measurer> real_;
};

TEST_F(TuningServiceTest, ACalibrationThatCannotTimeGroupsInAPlanStoresNoInPlanTermAndSaysSo) {
  TuningServiceOptions o = Options();
  o.calibration_benchmark_ms = 5;
  o.calibration_quiet_wait_ms = 0;
  o.measurers = [](TimingPolicy policy, const OneDnnMeasurerOptions& options) {
    return std::make_unique<PlanOnlyMeasurer>(OneDnnMeasurers()(policy, options));
  };
  Reopen(o);
  auto r = service_->Calibrate({});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto p = ProfileFromProto(r->profile());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->in_plan.ns_per_byte, (std::array<double, kColdSteps>{0, 0, 0}));
  EXPECT_EQ(p->in_plan.samples, 0);
  EXPECT_NE(r->in_plan_fit().find("in-plan term not fitted (this measurer cannot time the groups"),
            std::string::npos)
      << r->in_plan_fit();
  EXPECT_NE(r->in_plan_fit().find("predicted as the sum of their groups"), std::string::npos);
}

// The calibration log end to end (real oneDNN runs, real SQLite file): each calibration appends
// its samples and fits over every run so far under this cost model; a stored row that does not
// read back is skipped and counted; samples of another cost-model version are never fitted;
// --fresh fits the new run alone and deletes nothing.
TEST_F(TuningServiceTest, CalibrationFitsOverEveryRunSoFar) {
  ReopenForQuickCalibrations();
  auto first = service_->Calibrate({});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->runs_used(), 1);
  EXPECT_GT(first->run_samples(), 0);
  EXPECT_EQ(first->samples_used(), first->run_samples());
  EXPECT_EQ(first->samples_skipped(), 0);
  EXPECT_EQ(first->samples_size(), 0);  // Not asked for.

  // Beside the service, as another process would: a corrupt row in the first run, and a run of
  // another cost model, whose features mean nothing to this one.
  auto db = db::SqlitePlanStore::Open(dir_ + "/tuning.db", {});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  std::string target = service_->local_target_id();
  db::CalibrationRun other{0, target, "analytical-0", 0, {}, ""};
  other.samples.push_back({0, "stream_relu_16KiB", "{}", 1000, 0.01});
  auto other_id = (*db)->AppendCalibrationRun(other);
  ASSERT_TRUE(other_id.ok()) << other_id.status().ToString();
  db::CalibrationRun corrupt{0, target, kCostModelVersion, 0, {}, ""};
  corrupt.samples.push_back({0, "corrupt_row", "{\"flops\": [1,", 1000, 0.01});
  auto corrupt_id = (*db)->AppendCalibrationRun(corrupt);
  ASSERT_TRUE(corrupt_id.ok()) << corrupt_id.status().ToString();

  v1::CalibrateRequest with_samples;
  with_samples.set_include_samples(true);
  auto second = service_->Calibrate(with_samples);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->runs_used(), 2);  // The corrupt run gave nothing usable.
  // Short timings on a shared host: some may be over 1.35x their benchmark's quickest, and are
  // left out (how many depends on the machine; calibration_fit_samples_test checks the rule on
  // fixed data).
  EXPECT_EQ(second->samples_used() + second->slow_timings(),
            first->run_samples() + second->run_samples());
  EXPECT_EQ(second->samples_skipped(), 1);
  ASSERT_EQ(second->samples_size(), second->samples_used());
  for (const v1::FittedSample& s : second->samples()) {
    EXPECT_TRUE(s.run_id() == first->run_id() || s.run_id() == second->run_id()) << s.run_id();
    EXPECT_GT(s.measured_ns(), 0);
    EXPECT_GT(s.predicted_ns(), 0) << s.benchmark();
    EXPECT_NE(s.features_json().find("\"flops\""), std::string::npos);
  }

  v1::CalibrateRequest fresh;
  fresh.set_fresh(true);
  auto third = service_->Calibrate(fresh);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(third->runs_used(), 1);
  EXPECT_EQ(third->samples_used(), third->run_samples());
  EXPECT_EQ(third->samples_skipped(), 0);
  auto runs = (*db)->CalibrationRuns({target, kCostModelVersion, 100});
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->size(), 4u);  // Three calibrations and the corrupt run: nothing was deleted.
  auto stored = service_->ListTargets({});
  ASSERT_TRUE(stored.ok());
  for (const auto& p : stored->profiles()) {
    if (p.target().id() == target) {
      EXPECT_EQ(p.calibrated_unix_ms(), third->profile().calibrated_unix_ms());
    }
  }
}

// A calibration much slower than the quickest run stored (a shared host slow for a whole
// calibration) is left out of the fit, and so is an earlier one: with a stored copy of the first
// run at half its times, the first run and the new one (both ~2x slower) are named and the fit
// uses the quick copy alone. Their samples stay in the log.
TEST_F(TuningServiceTest, CalibrationRunsMuchSlowerThanTheQuickestAreLeftOut) {
  ReopenForQuickCalibrations();
  auto first = service_->Calibrate({});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->slow_runs_size(), 0);  // Nothing to compare with.
  auto db = db::SqlitePlanStore::Open(dir_ + "/tuning.db", {});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  std::string target = service_->local_target_id();
  auto runs = (*db)->CalibrationRuns({target, kCostModelVersion, 1});
  ASSERT_TRUE(runs.ok() && runs->size() == 1u);
  db::CalibrationRun copy = runs->front();
  copy.run_id = 0;
  copy.run_unix_ms = 0;
  for (auto& row : copy.samples) row.measured_ns *= 0.5;
  auto quick_id = (*db)->AppendCalibrationRun(copy);
  ASSERT_TRUE(quick_id.ok()) << quick_id.status().ToString();

  auto second = service_->Calibrate({});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  std::map<int64_t, double> slow;
  for (const auto& r : second->slow_runs()) slow[r.run_id()] = r.slowdown();
  ASSERT_EQ(slow.size(), 2u);
  EXPECT_GT(slow.at(first->run_id()), kSlowCalibrationRun);
  EXPECT_GT(slow.at(second->run_id()), kSlowCalibrationRun);
  EXPECT_EQ(second->runs_used(), 1);
  EXPECT_EQ(second->samples_used(), static_cast<int>(copy.samples.size()));
  // The profile is the fit over the quick copy: its conv rate about twice the first run's.
  EXPECT_GT(second->profile().conv_gflops().value(), 1.5 * first->profile().conv_gflops().value());
  auto all = (*db)->CalibrationRuns({target, kCostModelVersion, 100});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u);
}

// After an upgrade that changes the cost model, a profile fitted for the old one is not used: this
// CPU's is recalibrated by the first local tune, another target's is refused with what to do.
TEST_F(TuningServiceTest, AProfileFittedForAnotherCostModelIsNotUsed) {
  auto targets = service_->ListTargets({});
  ASSERT_TRUE(targets.ok());
  v1::HardwareProfile old_local;
  for (const auto& p : targets->profiles()) {
    if (p.target().id() == service_->local_target_id()) old_local = p;
  }
  old_local.set_cost_model_version("analytical-0");
  old_local.set_calibrated_unix_ms(5);
  HardwareProfile remote;
  remote.target.cpu_model = "Remote Xeon";
  remote.target.isa = "avx512_core";
  remote.target.onednn_version = "2.6.3";
  remote.calibrated_unix_ms = 5;
  remote.cost_model_version = "analytical-0";
  v1::HardwareProfile old_remote;
  ProfileToProto(remote, &old_remote);
  service_.reset();
  {
    auto db = db::SqlitePlanStore::Open(dir_ + "/tuning.db", {});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    ASSERT_TRUE((*db)->PutTarget(old_local).ok());
    ASSERT_TRUE((*db)->PutTarget(old_remote).ok());
  }
  TuningServiceOptions o = Options();
  o.default_measure_budget = 1;
  o.auto_calibrate = true;
  o.calibration_benchmark_ms = 5;  // The recalibration is tested, not its fit.
  o.calibration_quiet_wait_ms = 0;
  Reopen(o);

  v1::TuneRequest request = Request();
  request.set_target_id(remote.target.Id());
  auto refused = Tune(request);
  EXPECT_EQ(refused.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("analytical-0"), std::string::npos)
      << refused.status().ToString();

  std::vector<std::string> stages;
  request.mutable_options()->set_algorithm("greedy");
  request.clear_target_id();
  auto tuned = Tune(request, &stages);
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_NE(std::find(stages.begin(), stages.end(), "calibrate"), stages.end());
  auto after = service_->ListTargets({});
  ASSERT_TRUE(after.ok());
  for (const auto& p : after->profiles()) {
    if (p.target().id() == service_->local_target_id()) {
      EXPECT_EQ(p.cost_model_version(), kCostModelVersion);
      EXPECT_GT(p.calibrated_unix_ms(), 5);
    }
  }
}

// A server is not calibrated on first use (auto_calibrate), but a Tune that measures on its CPU
// calibrates it first: a measured plan searched with the defaults would mix this machine's time
// with constants of no machine. Measuring uncalibrated instead (a test's choice) says so.
TEST_F(TuningServiceTest, AnUncalibratedCpuIsCalibratedBeforeItsFirstMeasuredTune) {
  TuningServiceOptions o = Options();
  o.measure_uncalibrated = false;
  o.default_measure_budget = 0;    // A request's budget 0 is the default: none.
  o.calibration_benchmark_ms = 5;  // That it calibrates is tested, not its fit.
  o.calibration_quiet_wait_ms = 0;
  Reopen(o);
  v1::TuneRequest predicted_only = Request();
  predicted_only.mutable_options()->set_algorithm("greedy");
  std::vector<std::string> stages;
  auto unmeasured = Tune(predicted_only, &stages);
  ASSERT_TRUE(unmeasured.ok()) << unmeasured.status().ToString();
  EXPECT_EQ(std::find(stages.begin(), stages.end(), "calibrate"), stages.end())
      << "a Tune that measures nothing does not calibrate";

  v1::TuneRequest measured = Request();
  measured.mutable_options()->set_algorithm("greedy");
  measured.mutable_options()->set_measure_budget(1);
  stages.clear();
  auto tuned = Tune(measured, &stages);
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_NE(std::find(stages.begin(), stages.end(), "calibrate"), stages.end());
  const v1::MeasuredConfidence& c = tuned->plan().confidence();
  EXPECT_FALSE(c.uncalibrated());
  EXPECT_GE(c.rounds(), 3);
  EXPECT_NE(c.decision(), "");
  EXPECT_EQ(c.measured_by(), "");
}

TEST_F(TuningServiceTest, AMeasurementOnAnUncalibratedCpuSaysSo) {
  v1::TuneRequest request = Request();
  request.mutable_options()->set_algorithm("greedy");
  request.mutable_options()->set_measure_budget(1);
  auto tuned = Tune(request);
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_GT(tuned->plan().measured_ns(), 0);
  EXPECT_TRUE(tuned->plan().confidence().uncalibrated());
  // Stored with the plan, as GetPlan serves it.
  v1::GetPlanRequest get;
  get.set_graph_hash(tuned->plan().graph_hash());
  auto got = service_->GetPlan(get);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->plan().confidence().uncalibrated());
  EXPECT_EQ(got->plan().confidence().rounds(), tuned->plan().confidence().rounds());
}

TEST_F(TuningServiceTest, ACancelledJobStopsWithCancelled) {
  std::atomic<bool> cancelled{true};
  auto r = Tune(Request(), nullptr, &cancelled);
  EXPECT_EQ(r.status().code(), Status::Code::kCancelled);
}

// fusord cancels a Calibrate whose caller left or whose grace ran out at shutdown: it stops before
// the next benchmark and stores no run.
TEST_F(TuningServiceTest, ACancelledCalibrationStopsAndStoresNothing) {
  ReopenForQuickCalibrations();
  std::atomic<bool> cancelled{true};
  auto r = service_->Calibrate({}, &cancelled);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCancelled) << r.status().ToString();
  auto db = db::SqlitePlanStore::Open(dir_ + "/tuning.db", {});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto runs = (*db)->CalibrationRuns({service_->local_target_id(), kCostModelVersion});
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  EXPECT_TRUE(runs->empty());
}

}  // namespace
}  // namespace fusor
