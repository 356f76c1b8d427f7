#include "server/tuning_service.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <set>
#include <span>

#include "accuracy/measured_time.h"
#include "costmodel/calibration.h"
#include "costmodel/cost_model.h"
#include "db/open_plan_store.h"
#include "db/staleness.h"
#include "graph/canonical.h"
#include "graph/graph_proto.h"
#include "lowering/plan_legality.h"
#include "runtime/constant_evaluator.h"
#include "runtime/measurer.h"
#include "runtime/measurer_factory.h"
#include "runtime/onednn_info.h"
#include "runtime/timing_policy.h"
#include "search/autotune.h"
#include "search/plan_search.h"
#include "server/agent_dispatch.h"
#include "server/calibration_fit_samples.h"
#include "server/learned_residual.h"
#include "server/service_metrics.h"
#include "server/timed_database.h"

namespace fusor {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

v1::TuneEvent Progress(const std::string& stage, double fraction, const std::string& detail) {
  v1::TuneEvent e;
  e.mutable_progress()->set_stage(stage);
  e.mutable_progress()->set_fraction(fraction);
  e.mutable_progress()->set_detail(detail);
  return e;
}

StatusOr<SearchOptions> SearchOptionsOf(const v1::TuneOptions& o,
                                        const TuningServiceOptions& limits) {
  SearchOptions s;
  FUSOR_ASSIGN_OR_RETURN(s.algorithm, ParseAlgorithm(o.algorithm()));
  s.seed = o.seed();
  if (o.memory_budget_bytes() < 0 || o.measure_budget() < 0 || !(o.time_limit_s() >= 0)) {
    return Status::InvalidArgument(
        "memory_budget_bytes, measure_budget and time_limit_s must not be negative (0 means the "
        "server's default)");
  }
  if (o.measure_budget() > limits.max_measure_budget) {
    return Status::InvalidArgument(
        fmt::format("measure_budget {} is above this server's maximum of {}", o.measure_budget(),
                    limits.max_measure_budget));
  }
  if (o.time_limit_s() > limits.max_time_limit_s) {
    return Status::InvalidArgument(
        fmt::format("time_limit_s {} is above this server's maximum of {} s", o.time_limit_s(),
                    limits.max_time_limit_s));
  }
  s.memory_budget_bytes = o.memory_budget_bytes();
  return s;
}

void FillGroupPredictions(const PlanCost& cost, v1::Plan* plan) {
  for (int i = 0; i < plan->groups_size() && i < static_cast<int>(cost.groups.size()); ++i) {
    const CostTerms& t = cost.groups[i];
    auto* p = plan->mutable_groups(i)->mutable_predicted();
    p->set_compute_ns(t.compute_ns);
    p->set_memory_ns(t.memory_ns);
    p->set_spill_ns(t.spill_ns);
    p->set_launch_ns(t.launch_ns);
    p->set_reorder_ns(t.reorder_ns);
    p->set_total_ns(t.total_ns);
  }
}

void FillMaterialized(const Graph& g, const FusionPlan& plan, v1::Plan* out) {
  auto materialized = AllMaterializedOutputs(g, plan);
  for (size_t i = 0; i < materialized.size(); ++i) {
    for (TensorId t : materialized[i]) out->mutable_groups(i)->add_materialized(g.tensor(t).name);
  }
}

// The response to a calibration: the fitted profile, what the fit used, and (when asked) every
// sample it used (`used`: run ids included) with the fitted profile's prediction.
v1::CalibrateResponse CalibrateResponseOf(const CalibrationResult& result,
                                          const LoggedSamples& used, size_t run_samples,
                                          int64_t run_id, const std::vector<RunSlowdown>& slow,
                                          int slow_timings, bool include_samples) {
  v1::CalibrateResponse response;
  ProfileToProto(result.profile, response.mutable_profile());
  response.set_samples_used(static_cast<int32_t>(used.samples.size()));
  response.set_runs_used(used.runs);
  response.set_run_samples(static_cast<int32_t>(run_samples));
  response.set_run_id(run_id);
  response.set_samples_skipped(used.skipped);
  response.set_slow_timings(slow_timings);
  for (const std::string& name : result.unstable) response.add_unstable(name);
  for (const RunSlowdown& r : slow) {
    v1::SlowCalibrationRun* out = response.add_slow_runs();
    out->set_run_id(r.run_id);
    out->set_slowdown(r.slowdown);
  }
  for (size_t i = 0; include_samples && i < used.samples.size(); ++i)
    *response.add_samples() = FittedSampleOf(used.samples[i], used.run_ids[i], result.profile);
  return response;
}

// Seconds since each stored target's calibration, for the calibration-age gauge.
metrics::GaugeSamples CalibrationAges(db::PlanStore& store) {
  metrics::GaugeSamples out;
  auto targets = store.ListTargets();
  if (!targets.ok()) return out;
  const int64_t now = NowMs();
  for (const v1::HardwareProfile& p : *targets) {
    // Never calibrated: +Inf, so an alert on the age (> N seconds) fires for the worst case too.
    const double age = p.calibrated_unix_ms() == 0
                           ? std::numeric_limits<double>::infinity()
                           : static_cast<double>(now - p.calibrated_unix_ms()) / 1000;
    out.push_back({{p.target().id()}, age});
  }
  return out;
}

// The measurement protocol's account of a chosen plan, as the plan carries it.
v1::MeasuredConfidence ConfidenceProto(const ChoiceConfidence& c, bool uncalibrated,
                                       const std::string& measured_by) {
  v1::MeasuredConfidence out;
  out.set_rounds(c.rounds);
  out.set_samples(c.samples);
  out.set_spread(c.spread);
  out.set_unfused_spread(c.unfused_spread);
  out.set_speedup_low(c.speedup.low);
  out.set_speedup_high(c.speedup.high);
  out.set_decision(c.choice.decision);
  out.set_settled(c.settled);
  out.set_unstable(c.unstable);
  out.set_uncalibrated(uncalibrated);
  out.set_measured_by(measured_by);
  return out;
}

std::vector<double> PredictedTimes(const CostModel& model, const Graph& g,
                                   const std::vector<FusionPlan>& plans) {
  std::vector<double> out;
  for (const FusionPlan& plan : plans) out.push_back(model.WholePlan(g, plan).total_ns);
  return out;
}

db::Measurement ToDb(const Measurement& m) {
  db::Measurement d;
  for (int64_t s : m.samples_ns) d.samples_ns.push_back(static_cast<double>(s));
  if (d.samples_ns.empty()) d.samples_ns.push_back(static_cast<double>(m.median_ns));
  return d;
}

}  // namespace

struct TuningService::State {
  TuningServiceOptions options;
  MeasurerFactory measurers;                     // options.measurers, or real oneDNN runs.
  const Clock* clock;                            // options.clock, or the steady clock.
  std::unique_ptr<db::TuningDatabase> database;  // The database it was handed.
  // The database's concerns, each timed (server/timed_database.h).
  std::unique_ptr<TimedPlanStore> store;
  std::unique_ptr<TimedCalibrationLog> calibration;
  std::unique_ptr<TimedMeasurementQueue> queue;
  TargetFingerprint local;
  mutable std::mutex profile_mu;
  HardwareProfile local_profile;  // Guarded by profile_mu.
  // One measurement at a time: two would share the cores and disturb each other's timings.
  std::mutex measure_mu;
  std::unique_ptr<AgentDispatch> agents;  // Over `queue`.
  // One residual fit at a time (two tunes may finish together); guards residual_version_logged.
  std::mutex residual_mu;
  // Targets whose stored residual of another cost-model version was logged: once each.
  std::set<std::string> residual_version_logged;
  // Last, so the callback reading `store` is removed before the store closes.
  metrics::CallbackRegistration calibration_age;

  // The model a Tune scores with: the analytical model, with the target's stored residual on top
  // when `use_residual` and one is usable; records on `out` which residual (and its training
  // set's size) chose the plan. A residual that is not usable is reported and left out: the
  // tune goes on with the analytical model.
  std::unique_ptr<CostModel> ScoringModel(const HardwareProfile& profile,
                                          const std::string& target_id, bool use_residual,
                                          const EventSink& on_event, v1::Plan* out) {
    if (!use_residual) return std::make_unique<AnalyticalCostModel>(profile);
    StatusOr<std::optional<UsableResidual>> stored = StoredResidualFor(*calibration, target_id);
    if (!stored.ok()) {
      ReportUnusedResidual(target_id, stored.status(), on_event);
      return std::make_unique<AnalyticalCostModel>(profile);
    }
    if (!stored->has_value()) return std::make_unique<AnalyticalCostModel>(profile);
    UsableResidual& r = **stored;
    out->set_learned_residual(r.json);
    out->set_residual_training_samples(r.model.training_samples);
    return std::make_unique<CorrectedCostModel>(profile, std::move(r.model));
  }

  // Another cost model's residual is logged once per target; anything else (an unreadable
  // residual, a database error) every time, and told to the caller.
  void ReportUnusedResidual(const std::string& target_id, const Status& why,
                            const EventSink& on_event) {
    if (why.code() == Status::Code::kFailedPrecondition) {
      std::lock_guard<std::mutex> lock(residual_mu);
      if (residual_version_logged.insert(target_id).second) spdlog::info("tune: {}", why.message());
      return;
    }
    spdlog::error("tune: {}; scoring with the analytical model alone", why.message());
    on_event(Progress("search", 0.05, why.message() + "; scoring with the analytical model alone"));
  }

  // Keeps a tune's stable timings in the residual log, then refits the target's residual when
  // enough arrived since its last fit. Failures are logged: the tune's plan stands without them.
  void KeepTimings(const AnalyticalCostModel& base, const Graph& g, const std::string& hash,
                   const std::string& target_id, const std::vector<TimedPlan>& timed) {
    std::vector<db::ResidualSampleRow> rows = ResidualRowsOf(base, g, hash, target_id, timed);
    if (rows.empty()) return;
    Status kept = calibration->AppendResidualSamples(rows);
    if (!kept.ok()) {
      spdlog::warn("tune: graph={} target={} timings not kept for the learned residual: {}",
                   hash.substr(0, 16), target_id, kept.message());
      return;
    }
    if (!options.learned_residual) return;
    std::lock_guard<std::mutex> lock(residual_mu);
    StatusOr<int> fresh = NewResidualSamples(*calibration, target_id, options.residual_refit_every);
    if (fresh.ok() && *fresh < options.residual_refit_every) return;
    if (!fresh.ok()) {
      spdlog::warn("tune: target={} cannot count new timings: {}", target_id,
                   fresh.status().message());
      return;
    }
    RefitResidualLocked(target_id, "timings since the last fit");
  }

  // Fits the target's residual now (Calibrate); the previous residual stays when it fails.
  void RefitResidual(const std::string& target_id, const char* why) {
    if (!options.learned_residual) return;
    std::lock_guard<std::mutex> lock(residual_mu);
    RefitResidualLocked(target_id, why);
  }

  void RefitResidualLocked(const std::string& target_id, const char* why) {
    StatusOr<db::StoredResidual> fitted =
        fusor::RefitResidual(*calibration, target_id, options.residual_max_samples);
    if (fitted.ok()) {
      spdlog::info("residual: target={} refitted ({}) on {} timings", target_id, why,
                   fitted->training_samples);
      residual_version_logged.erase(target_id);
    } else if (fitted.status().code() == Status::Code::kFailedPrecondition) {
      spdlog::info("residual: target={} not fitted: {}", target_id, fitted.status().message());
    } else {
      spdlog::warn("residual: target={} fit failed, the previous residual stays: {}", target_id,
                   fitted.status().message());
    }
  }

  HardwareProfile LocalProfile() const {
    std::lock_guard<std::mutex> lock(profile_mu);
    return local_profile;
  }

  // This CPU's profile, taking a newer calibration from the store: another fusord sharing the
  // store (a replica on a host of this CPU) may have calibrated or registered it since.
  StatusOr<HardwareProfile> FreshLocalProfile() {
    auto stored = store->GetTarget(local.Id());
    if (!stored.ok() && stored.status().code() != Status::Code::kNotFound) return stored.status();
    std::lock_guard<std::mutex> lock(profile_mu);
    bool newer = stored.ok() && stored->cost_model_version() == kCostModelVersion &&
                 stored->calibrated_unix_ms() > local_profile.calibrated_unix_ms;
    if (newer) {
      FUSOR_ASSIGN_OR_RETURN(local_profile, ProfileFromProto(*stored));
      spdlog::info("tuning service: target {} recalibrated elsewhere at {} ms; using that profile",
                   local.Id(), local_profile.calibrated_unix_ms);
    }
    return local_profile;
  }

  StatusOr<HardwareProfile> ProfileOf(const std::string& target_id) {
    if (target_id.empty() || target_id == local.Id()) return FreshLocalProfile();
    auto p = store->GetTarget(target_id);
    if (!p.ok()) {
      if (p.status().code() != Status::Code::kNotFound) return p.status();
      return Status::NotFound("target '" + target_id +
                              "' is not registered; register its calibrated profile first "
                              "(fusor targets register) or tune for this server's own CPU");
    }
    FUSOR_ASSIGN_OR_RETURN(HardwareProfile profile, ProfileFromProto(*p));
    if (profile.cost_model_version != kCostModelVersion) {
      return Status::FailedPrecondition(
          "target '" + target_id + "' was calibrated for cost model '" +
          profile.cost_model_version + "', this server uses '" + kCostModelVersion +
          "'; recalibrate it with this fusor version and register it again");
    }
    return profile;
  }

  // The samples of this CPU's latest earlier calibrations under this cost model; none when fresh.
  StatusOr<LoggedSamples> EarlierCalibrations(bool fresh) const {
    int earlier_runs = options.calibration_runs_fitted - 1;
    if (fresh || earlier_runs < 1) return LoggedSamples();
    return LoadCalibrationLog(*calibration, {local.Id(), kCostModelVersion, earlier_runs});
  }

  // Measures a calibration benchmark (each ~100 ms, two retries, so most stay stable on a shared
  // machine) until `limit_s` has passed since this call, recording each benchmark's cv; with
  // `backend`, for the benchmarks that pin oneDNN's rates (CalibrationBenchmark::onednn_chain).
  MeasureFn CalibrationMeasure(double limit_s, std::map<std::string, double>* cv_by_benchmark,
                               const std::atomic<bool>* cancelled,
                               ChainBackend backend = ChainBackend::kAuto) {
    OneDnnMeasurerOptions options =
        MeasurerOptions(TimingPolicy::kCalibrate, this->options.calibration_benchmark_ms);
    options.executor.chain_backend = backend;
    // The fit should describe the host in its quiet state (runtime/timing_policy.h). On a host
    // that never quiets the wait is up to 3 x 250 ms per benchmark, so the waiting stops once half
    // the time limit has passed, and the rest is timed as the host is.
    options.timing.quiet_wait_ms = this->options.calibration_quiet_wait_ms;
    std::shared_ptr<Measurer> patient = measurers(TimingPolicy::kCalibrate, options);
    options.timing.quiet_wait_ms = 0;
    std::shared_ptr<Measurer> hurried = measurers(TimingPolicy::kCalibrate, options);
    const Clock* clock = this->clock;
    const int64_t start = clock->NowNs();
    const int64_t deadline = start + static_cast<int64_t>(limit_s * 1e9);
    const int64_t stop_waiting = start + static_cast<int64_t>(limit_s / 2 * 1e9);
    return [patient, hurried, clock, deadline, stop_waiting, limit_s, cv_by_benchmark, cancelled](
               const Graph& g, const FusionPlan& plan) -> StatusOr<MeasuredTime> {
      if (cancelled != nullptr && cancelled->load()) {
        return Status::Cancelled("calibration was cancelled");
      }
      const int64_t now = clock->NowNs();
      if (now > deadline) {
        return Status::DeadlineExceeded("calibration passed its time limit of " +
                                        std::to_string(limit_s) + " s");
      }
      Measurer* measurer = now < stop_waiting ? patient.get() : hurried.get();
      FUSOR_ASSIGN_OR_RETURN(Measurement m, measurer->MeasurePlan(g, plan));
      (*cv_by_benchmark)[g.model_name] = m.cv;
      return MeasuredTimeOf(m);
    };
  }

  // Measures the calibration suite and fits, from the documented defaults, over this run's samples
  // and the earlier ones. Starting from the defaults rather than the previous profile keeps one
  // calibration on a loaded machine from dragging every later one into the same bad minimum;
  // refitting over the earlier samples is what makes calibrations add up.
  StatusOr<CalibrationResult> MeasureAndFit(double limit_s, const LoggedSamples& earlier,
                                            std::map<std::string, double>* cv_by_benchmark,
                                            const std::atomic<bool>* cancelled = nullptr) {
    HardwareProfile start;
    start.target = local;
    MeasureFn measure = CalibrationMeasure(limit_s, cv_by_benchmark, cancelled);
    MeasureFn onednn =
        CalibrationMeasure(limit_s, cv_by_benchmark, cancelled, ChainBackend::kOneDnn);
    StatusOr<CalibrationResult> fitted =
        fusor::Calibrate(CalibrationSuite(local), start, measure, {}, earlier.samples, onednn);
    if (fitted.ok() || earlier.samples.empty()) return fitted;
    return fitted.status().WithContext(
        fmt::format("calibrating with {} samples of {} earlier runs (--fresh fits this run alone)",
                    earlier.samples.size(), earlier.runs));
  }

  // Times the in-plan suite's groups alone and inside their plans (the quickest of three rounds)
  // and fits what a plan adds to its groups (costmodel/in_plan.h) into `out`. Without a fit (a
  // measurer that cannot time groups in a plan, no cold byte) every constant is 0: whole plans are
  // predicted as the sum of their groups. Returns the line `fusor calibrate` prints about it.
  std::string FitInPlan(InPlanConstants* out) {
    constexpr int kRounds = 3;
    std::unique_ptr<Measurer> measurer =
        measurers(TimingPolicy::kCalibrate, MeasurerOptions(TimingPolicy::kCalibrate, 0));
    const int64_t start = clock->NowNs();
    const std::vector<CalibrationBenchmark> suite = InPlanSuite(local);
    StatusOr<InPlanConstants> fitted =
        CalibrateInPlan(suite, local, MeasureGroupsInPlanWith(measurer.get(), kRounds));
    const double seconds = static_cast<double>(clock->NowNs() - start) / 1e9;
    *out = fitted.ok() ? *fitted : InPlanConstants{};
    if (!fitted.ok()) {
      return fmt::format(
          "in-plan term not fitted ({}): whole plans are predicted as the sum of their groups",
          fitted.status().message());
    }
    return fmt::format(
        "in-plan term fitted on {} groups of {} plans in {:.1f} s: L1->L2 {:.2f}, L2->L3 {:.2f}, "
        "L3->DRAM {:.2f} ns per KiB read colder than alone",
        out->samples, suite.size(), seconds, out->ns_per_byte[0] * 1024, out->ns_per_byte[1] * 1024,
        out->ns_per_byte[2] * 1024);
  }

  OneDnnMeasurerOptions MeasurerOptions(TimingPolicy policy, double min_ms) const {
    OneDnnMeasurerOptions m;
    m.executor.threads = options.measure_threads;
    m.timing = TimingFor(policy, min_ms);
    return m;
  }
};

TuningService::TuningService(std::unique_ptr<State> state) : state_(std::move(state)) {}
TuningService::~TuningService() = default;

StatusOr<std::unique_ptr<TuningService>> TuningService::Open(const TuningServiceOptions& options) {
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<db::TuningDatabase> database,
                         db::OpenTuningDatabase(options.db_location));
  return Open(std::move(database), options);
}

StatusOr<std::unique_ptr<TuningService>> TuningService::Open(
    std::unique_ptr<db::TuningDatabase> database, const TuningServiceOptions& options) {
  auto state = std::make_unique<State>();
  state->options = options;
  state->measurers = options.measurers ? options.measurers : OneDnnMeasurers();
  state->clock = options.clock != nullptr ? options.clock : &Clock::Real();
  state->database = std::move(database);
  state->store = std::make_unique<TimedPlanStore>(*state->database);
  state->calibration = std::make_unique<TimedCalibrationLog>(*state->database);
  state->queue = std::make_unique<TimedMeasurementQueue>(*state->database);
  if (!(options.agent_lease_s > 0) || !(options.agent_live_s > 0) || !(options.agent_poll_s >= 0)) {
    return Status::InvalidArgument(
        "agent_lease_s and agent_live_s must be positive and agent_poll_s not negative");
  }
  state->agents = std::make_unique<AgentDispatch>(
      state->queue.get(), state->clock,
      AgentDispatchOptions{options.agent_lease_s, options.agent_live_s, options.agent_poll_s,
                           options.min_measure_ms});
  FUSOR_ASSIGN_OR_RETURN(state->local, DetectTarget(OneDnnIsa(), OneDnnVersion()));
  auto stored = state->store->GetTarget(state->local.Id());
  if (stored.ok() && stored->cost_model_version() != kCostModelVersion) {
    // Fitted for another cost model, whose features its constants priced: as uncalibrated (the
    // defaults; a local tune calibrates first). The stored profile stays until Calibrate
    // replaces it.
    spdlog::warn(
        "tuning service: this CPU's profile was fitted for cost model '{}', not '{}'; "
        "it is not used until recalibrated",
        stored->cost_model_version(), kCostModelVersion);
    state->local_profile.target = state->local;
  } else if (stored.ok()) {
    FUSOR_ASSIGN_OR_RETURN(state->local_profile, ProfileFromProto(*stored));
  } else if (stored.status().code() == Status::Code::kNotFound) {
    // Uncalibrated: the documented defaults, until Calibrate runs.
    state->local_profile.target = state->local;
    v1::HardwareProfile p;
    ProfileToProto(state->local_profile, &p);
    FUSOR_RETURN_IF_ERROR(state->store->PutTarget(p));
  } else {
    return stored.status();
  }
  Metrics();  // Registers every family before a scrape can run the callback below.
  db::PlanStore* timed = state->store.get();
  state->calibration_age = metrics::Registry::Default().AddGaugeCallback(
      ServiceMetrics::kCalibrationAge,
      "Seconds since each target's calibration; +Inf for a target never calibrated", {"target"},
      [timed] { return CalibrationAges(*timed); });
  spdlog::info("tuning service: db={} target={} isa={} calibrated={}",
               db::RedactedLocation(options.db_location), state->local.Id(), state->local.isa,
               state->local_profile.calibrated_unix_ms != 0);
  return std::unique_ptr<TuningService>(new TuningService(std::move(state)));
}

std::string TuningService::local_target_id() const { return state_->local.Id(); }

// One Tune as its stages resolve it: what each stage reads of the ones before it.
struct TuningService::Tuning {
  double limit_s = 0;       // The Tune's time limit...
  int64_t deadline_ns = 0;  // ...as a deadline on the service's clock.
  Graph graph;              // Validated, constants folded, canonical.
  std::string hash;         // CanonicalHash(graph).
  std::string target_id;
  bool local = false;  // The target is this CPU.
  HardwareProfile profile;
  SearchOptions search;
  int budget = 0;                 // Measurements asked for.
  bool on_agents = false;         // Timed on a live agent of the target...
  bool measure_here = false;      // ...or here...
  std::string unmeasured_reason;  // ...or not at all, and why.
  bool use_residual = false;
  bool choose_kernels =
      true;  // Each anchor group's kernel by measurement (search/kernel_choice.h).
  db::PlanKey key;
  std::unique_ptr<CostModel> model;  // What the search and the choice of plan score with.
  FusionPlan plan;                   // Searched, then chosen by the measurements.
  std::vector<db::Measurement> measurements;
  std::string measured_by;       // The agent that timed the plan; "" for this CPU or none.
  std::vector<TimedPlan> timed;  // The stable timings of a measurement here.
  v1::Plan out;                  // The plan as stored, filled in stage by stage.
};

StatusOr<bool> TuningService::ServeStored(const db::PlanKey& key, const Graph& g,
                                          const EventSink& on_event, bool count_miss) {
  auto cached = state_->store->GetPlan(key, kCostModelVersion);
  if (!cached.ok() && cached.status().code() != Status::Code::kNotFound) return cached.status();
  bool hit = cached.ok() && !cached->stale;
  if (hit) {
    if (Status fits = PlanFromProto(g, cached->plan).status(); !fits.ok()) {
      // Logged once a Tune: at the lookup under the key's lock, which every Tune that is not
      // answered at once reaches.
      if (count_miss) {
        spdlog::warn(
            "tune: graph={} target={} stored plan (tuned {}) does not fit the graph's lowering, "
            "tuning it again: {}",
            key.graph_hash.substr(0, 16), key.target_id,
            db::UtcText(cached->plan.created_unix_ms()), fits.message());
      }
      hit = false;
    }
  }
  if (hit || count_miss) {
    Metrics()
        .plan_cache_lookups.With({"Tune", hit           ? "hit"
                                          : cached.ok() ? "stale"
                                                        : "miss"})
        .Increment();
  }
  if (!hit) return false;
  spdlog::info("tune: graph={} target={} cache hit", key.graph_hash.substr(0, 16), key.target_id);
  v1::TuneEvent e;
  *e.mutable_result()->mutable_plan() = cached->plan;
  e.mutable_result()->set_cache_hit(true);
  on_event(e);
  return true;
}

// The tuning pipeline, one stage a function, in the order they run.
Status TuningService::Tune(const v1::TuneRequest& request, const EventSink& on_event,
                           const std::atomic<bool>* cancelled) {
  FUSOR_ASSIGN_OR_RETURN(Tuning t, ImportGraph(request, on_event));
  FUSOR_RETURN_IF_ERROR(ResolveTarget(request, on_event, t));
  FUSOR_RETURN_IF_ERROR(ChooseWhereToMeasure(request, t));
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<db::PlanKeyLock> key_lock,
                         LockUnlessStored(request, on_event, cancelled, t));
  if (key_lock == nullptr) return Status::Ok();  // Answered with the stored plan.
  FUSOR_RETURN_IF_ERROR(SearchForPlan(on_event, cancelled, t));
  FUSOR_RETURN_IF_ERROR(MeasureOnAgents(on_event, cancelled, t));
  FUSOR_RETURN_IF_ERROR(MeasureHere(on_event, cancelled, t));
  if (cancelled != nullptr && cancelled->load()) return Status::Cancelled("tuning was cancelled");
  FUSOR_RETURN_IF_ERROR(StorePlan(on_event, t));
  state_->KeepTimings(AnalyticalCostModel(t.profile), t.graph, t.hash, t.target_id, t.timed);
  ReplyWithPlan(on_event, t);
  return Status::Ok();
}

// Validates the untrusted graph, folds nodes over constants as the tools do, canonicalises and
// hashes it, and starts the Tune's one deadline: it bounds the search, the wait for an agent and
// the measuring.
StatusOr<TuningService::Tuning> TuningService::ImportGraph(const v1::TuneRequest& request,
                                                           const EventSink& on_event) {
  Tuning t;
  t.limit_s = request.options().time_limit_s() > 0 ? request.options().time_limit_s()
                                                   : state_->options.default_time_limit_s;
  t.deadline_ns = state_->clock->NowNs() + static_cast<int64_t>(t.limit_s * 1e9);
  on_event(Progress("validate", 0.0, "checking the graph"));
  auto parsed = FromProto(request.graph(), state_->options.limits);
  if (!parsed.ok())
    return parsed.status().WithContext("graph '" + request.graph().model_name() + "'");
  // A client that did not fold nodes over constants gets the graph, and hash, the tools make.
  FUSOR_RETURN_IF_ERROR(FoldNodesOverConstants(&*parsed));
  t.graph = Canonicalize(*parsed);
  if (t.graph.num_nodes() == 0) {
    return Status::InvalidArgument("graph '" + request.graph().model_name() +
                                   "' has no nodes once constants are folded (its outputs are "
                                   "constants or inputs): there is nothing to tune; run it as is");
  }
  t.hash = CanonicalHash(t.graph);
  return t;
}

// The target's calibrated profile and the search options. This CPU is calibrated before a Tune
// measures on it (measure_uncalibrated aside), or before any Tune when the service calibrates on
// first use.
Status TuningService::ResolveTarget(const v1::TuneRequest& request, const EventSink& on_event,
                                    Tuning& t) {
  t.target_id = request.target_id().empty() ? state_->local.Id() : request.target_id();
  FUSOR_ASSIGN_OR_RETURN(t.profile, state_->ProfileOf(t.target_id));
  t.local = t.target_id == state_->local.Id();
  FUSOR_ASSIGN_OR_RETURN(t.search, SearchOptionsOf(request.options(), state_->options));
  t.budget = request.options().measure_budget() > 0 ? request.options().measure_budget()
                                                    : state_->options.default_measure_budget;
  const bool calibrate_first =
      state_->options.auto_calibrate || (t.budget > 0 && !state_->options.measure_uncalibrated);
  if (t.local && t.profile.calibrated_unix_ms == 0 && calibrate_first) {
    on_event(Progress("calibrate", 0.02, "calibrating this CPU once (oneDNN micro-benchmarks)"));
    FUSOR_RETURN_IF_ERROR(Calibrate({}).status().WithContext("calibrating this CPU"));
    t.profile = state_->LocalProfile();
  }
  return Status::Ok();
}

// Where the plans are timed: on a live agent of the target (any target but this CPU, and this CPU
// too with measure_on_agents), else here for this CPU, else nowhere (the prediction). The plan key
// says so, and whether the learned residual scores: a plan scored by the analytical model alone
// is kept apart from one the residual helped pick.
Status TuningService::ChooseWhereToMeasure(const v1::TuneRequest& request, Tuning& t) {
  if (t.budget > 0 && (!t.local || state_->options.measure_on_agents)) {
    FUSOR_ASSIGN_OR_RETURN(int64_t live, state_->agents->LiveAgents(t.target_id));
    t.on_agents = live > 0;
  }
  t.measure_here = t.local && t.budget > 0 && !t.on_agents;
  if (!t.local && t.budget > 0 && !t.on_agents) {
    t.unmeasured_reason = "no live measurement agent of target " + t.target_id +
                          " (run `fusor agent` on a machine of it); the plan is the cost "
                          "model's prediction";
  }
  t.use_residual = state_->options.learned_residual && !request.options().no_residual();
  t.choose_kernels = !request.options().no_kernel_choice();
  std::string options_text =
      t.search.CanonicalText() +
      ";measure_budget=" + std::to_string(t.measure_here || t.on_agents ? t.budget : 0) +
      (t.use_residual ? ";residual=on" : "") + (t.choose_kernels ? "" : ";kernel_choice=off");
  t.key = {t.hash, t.target_id, kCostModelVersion, options_text};
  return Status::Ok();
}

// Answers from the store when a current plan is stored under the key (unless the request forces a
// new tune) and returns null; otherwise returns the key's lock, held while this Tune searches.
// Processes sharing the store tune one key once: one arriving while another tunes it waits for
// the lock, then finds the plan the other stored. One cache lookup is counted per Tune: a hit at
// once, else what is found once the lock is held.
StatusOr<std::unique_ptr<db::PlanKeyLock>> TuningService::LockUnlessStored(
    const v1::TuneRequest& request, const EventSink& on_event, const std::atomic<bool>* cancelled,
    const Tuning& t) {
  if (!request.force()) {
    FUSOR_ASSIGN_OR_RETURN(bool served,
                           ServeStored(t.key, t.graph, on_event, /*count_miss=*/false));
    if (served) return std::unique_ptr<db::PlanKeyLock>();
  }
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<db::PlanKeyLock> key_lock,
                         state_->store->LockPlanKey(t.key, cancelled));
  if (!request.force()) {
    FUSOR_ASSIGN_OR_RETURN(bool served, ServeStored(t.key, t.graph, on_event, /*count_miss=*/true));
    if (served) return std::unique_ptr<db::PlanKeyLock>();
  }
  return key_lock;
}

// Searches with the scoring model until the Tune's deadline or cancellation, keeping the plan it
// has then.
Status TuningService::SearchForPlan(const EventSink& on_event, const std::atomic<bool>* cancelled,
                                    Tuning& t) {
  t.model = state_->ScoringModel(t.profile, t.target_id, t.use_residual, on_event, &t.out);
  on_event(Progress("search", 0.1, std::string(AlgorithmName(t.search.algorithm)) + " search"));
  const int64_t search_start_ns = state_->clock->NowNs();
  SearchStop stop;
  stop.cancelled = cancelled;
  stop.clock = state_->clock;
  stop.deadline_ns = t.deadline_ns;
  StatusOr<SearchResult> search_result = SearchPlan(t.graph, *t.model, t.search, stop);
  Metrics()
      .search_seconds.With({std::string(AlgorithmName(t.search.algorithm))})
      .Observe(static_cast<double>(state_->clock->NowNs() - search_start_ns) / 1e9);
  FUSOR_ASSIGN_OR_RETURN(SearchResult searched, std::move(search_result));
  const SearchStats& st = searched.stats;
  spdlog::info(
      "search: graph={} algorithm={} nodes={} groups={} candidates={} candidates_ms={:.1f} "
      "search_ms={:.1f} merges={} recomputes={} regions={} optimal_gain_ns={:.0f} "
      "stopped_early={}",
      t.hash.substr(0, 16), AlgorithmName(t.search.algorithm), t.graph.num_nodes(),
      searched.plan.groups.size(), st.candidates, st.candidates_ms, st.search_ms, st.merges,
      st.recomputes, st.regions_optimized, st.optimal_gain_ns, st.stopped_early);
  on_event(Progress("search", 0.25,
                    std::to_string(searched.plan.groups.size()) + " groups, " +
                        std::to_string(st.candidates) + " candidates in " +
                        std::to_string(static_cast<int>(st.search_ms)) + " ms" +
                        (st.stopped_early ? " (stopped at the time limit)" : "")));
  if (cancelled != nullptr && cancelled->load()) return Status::Cancelled("tuning was cancelled");
  t.plan = std::move(searched.plan);
  return Status::Ok();
}

// Has an agent of the target time the searched plan and its alternatives, and takes the plan the
// measurement protocol chooses from its timings. A Tune that no agent measured (or that had no
// agent to ask) says why here.
Status TuningService::MeasureOnAgents(const EventSink& on_event, const std::atomic<bool>* cancelled,
                                      Tuning& t) {
  if (t.on_agents) {
    on_event(Progress("measure", 0.3, "measuring on an agent of target " + t.target_id));
    const std::vector<FusionPlan> candidates =
        AgentDispatch::Candidates(t.graph, t.plan, t.budget, t.search.max_group_nodes);
    FUSOR_ASSIGN_OR_RETURN(
        AgentOutcome outcome,
        state_->agents->Measure(
            t.graph, t.hash, t.target_id, candidates, PredictedTimes(*t.model, t.graph, candidates),
            t.deadline_ns, cancelled,
            [&](const std::string& d) { on_event(Progress("measure", 0.5, d)); }));
    if (outcome.measured) {
      t.plan = outcome.plan;
      t.out.set_measured_ns(outcome.measured_ns);
      t.out.set_unfused_measured_ns(outcome.unfused_measured_ns);
      t.measurements.push_back(outcome.measurement);
      t.measured_by = outcome.agent_id;
      *t.out.mutable_confidence() =
          ConfidenceProto(outcome.confidence, t.profile.calibrated_unix_ms == 0, t.measured_by);
    } else {
      t.unmeasured_reason = outcome.unmeasured_reason;
    }
  }
  if (!t.unmeasured_reason.empty()) on_event(Progress("measure", 0.9, t.unmeasured_reason));
  return Status::Ok();
}

// Times the searched plan and its alternatives on this CPU (Autotune, the measurement protocol)
// within what is left of the deadline, one measurement at a time, and takes the plan it chooses.
Status TuningService::MeasureHere(const EventSink& on_event, const std::atomic<bool>* cancelled,
                                  Tuning& t) {
  if (!t.measure_here) return Status::Ok();
  const double measure_s = static_cast<double>(t.deadline_ns - state_->clock->NowNs()) / 1e9;
  if (measure_s <= 0) {
    t.unmeasured_reason = fmt::format(
        "the Tune's time limit of {} s was spent before measuring; the plan is the cost model's "
        "prediction",
        t.limit_s);
    on_event(Progress("measure", 0.9, t.unmeasured_reason));
    return Status::Ok();
  }
  on_event(Progress("measure", 0.3, "measuring alternatives on this CPU"));
  std::lock_guard<std::mutex> lock(state_->measure_mu);
  // Waiting for the lock and for a quiet host comes out of the same deadline; the whole plans
  // are still timed once after it (Autotune), which takes a few runs of the model.
  auto left_ms = [&] { return (t.deadline_ns - state_->clock->NowNs()) / 1'000'000; };
  if (state_->options.calibration_quiet_wait_ms > 0) {
    SettleHost(static_cast<int>(std::clamp<int64_t>(left_ms() / 2, 0, kSettleHostMaxMs)), "tune");
  }
  std::unique_ptr<Measurer> measurer = state_->measurers(
      TimingPolicy::kTune,
      state_->MeasurerOptions(TimingPolicy::kTune, state_->options.min_measure_ms));
  AutotuneOptions autotune;
  autotune.measure_budget = t.budget + 2;
  autotune.time_limit_s = std::max<double>(0, static_cast<double>(left_ms()) / 1000);
  autotune.choose_kernels = t.choose_kernels;
  ScopedTimer measure_timer(Metrics().measure_seconds.With({}));
  FUSOR_ASSIGN_OR_RETURN(
      AutotuneResult tuned,
      Autotune(
          t.graph, *t.model, t.profile.target, t.plan, measurer.get(), autotune,
          [&](double f, const std::string& d) { on_event(Progress("measure", 0.3 + 0.6 * f, d)); },
          cancelled));
  t.plan = tuned.plan;
  t.out.set_measured_ns(static_cast<double>(tuned.measured.median_ns));
  t.out.set_unfused_measured_ns(static_cast<double>(tuned.unfused_measured.median_ns));
  t.measurements.push_back(ToDb(tuned.measured));
  *t.out.mutable_confidence() =
      ConfidenceProto(tuned.confidence, t.profile.calibrated_unix_ms == 0, "");
  t.timed = std::move(tuned.timed);
  return Status::Ok();
}

// Completes the plan's record (groups, predictions, key) and stores it with its graph and
// measurements.
Status TuningService::StorePlan(const EventSink& on_event, Tuning& t) {
  on_event(Progress("store", 0.95, "storing the plan"));
  const CostModel& model = *t.model;
  const WholePlanCost whole = model.WholePlan(t.graph, t.plan);
  const PlanCost& cost = whole.groups;
  PlanToProto(t.plan, &t.out);
  FillGroupPredictions(cost, &t.out);
  FillMaterialized(t.graph, t.plan, &t.out);
  t.out.set_graph_hash(t.hash);
  t.out.set_target_id(t.target_id);
  t.out.set_cost_model_version(kCostModelVersion);
  t.out.set_search_options(t.key.search_options);
  t.out.set_predicted_ns(whole.total_ns);
  t.out.set_in_plan_ns(whole.in_plan_ns);
  t.out.set_unfused_predicted_ns(model.WholePlan(t.graph, UnfusedPlan(t.graph)).total_ns);
  t.out.set_peak_memory_bytes(cost.peak_activation_bytes);
  t.out.set_created_unix_ms(NowMs());
  FUSOR_RETURN_IF_ERROR(state_->store->PutPlan(t.out, ToProto(t.graph), t.measurements));
  spdlog::info(
      "tune: graph={} target={} groups={} predicted={:.3f}ms measured={:.3f}ms "
      "residual_training_samples={}{}",
      t.hash.substr(0, 16), t.target_id, t.out.groups_size(), t.out.predicted_ns() / 1e6,
      t.out.measured_ns() / 1e6, t.out.residual_training_samples(),
      t.measured_by.empty() ? "" : " agent=" + t.measured_by);
  return Status::Ok();
}

void TuningService::ReplyWithPlan(const EventSink& on_event, const Tuning& t) {
  v1::TuneEvent e;
  *e.mutable_result()->mutable_plan() = t.out;
  e.mutable_result()->set_cache_hit(false);
  e.mutable_result()->set_measured_by(t.measured_by);
  e.mutable_result()->set_unmeasured_reason(t.unmeasured_reason);
  on_event(e);
}

StatusOr<v1::GetPlanResponse> TuningService::GetPlan(const v1::GetPlanRequest& request) {
  if (request.graph_hash().size() != 64) {
    return Status::InvalidArgument(
        "graph_hash must be 64 hex characters (a canonical hash), got '" + request.graph_hash() +
        "'");
  }
  std::string target = request.target_id().empty() ? state_->local.Id() : request.target_id();
  v1::GetPlanResponse response;
  auto best = state_->store->BestPlan(request.graph_hash(), target, kCostModelVersion);
  if (best.ok()) {
    Metrics().plan_cache_lookups.With({"GetPlan", "hit"}).Increment();
    *response.mutable_plan() = best->plan;
    return response;
  }
  if (best.status().code() != Status::Code::kNotFound) return best.status();
  // Nothing current: say so with the newest stale plan, if any.
  db::PlanQuery q;
  q.graph_hash_prefix = request.graph_hash();
  q.target_id = target;
  q.current_cost_model_version = kCostModelVersion;
  q.page_size = 1;
  FUSOR_ASSIGN_OR_RETURN(db::PlanPage page, state_->store->QueryPlans(q));
  Metrics().plan_cache_lookups.With({"GetPlan", page.plans.empty() ? "miss" : "stale"}).Increment();
  if (page.plans.empty()) {
    return Status::NotFound("no plan for graph " + request.graph_hash() + " on target " + target);
  }
  *response.mutable_plan() = page.plans[0].plan;
  response.set_stale(true);
  return response;
}

StatusOr<v1::QueryPlansResponse> TuningService::QueryPlans(const v1::QueryPlansRequest& request) {
  if (request.page_size() < 0) return Status::InvalidArgument("page_size must not be negative");
  db::PlanQuery q;
  q.model_name = request.model_name();
  q.target_id = request.target_id();
  q.created_after_unix_ms = request.created_after_unix_ms();
  q.created_before_unix_ms = request.created_before_unix_ms();
  q.min_speedup = request.min_speedup();
  q.current_cost_model_version = kCostModelVersion;
  q.page_size = request.page_size();
  q.page_token = request.page_token();
  FUSOR_ASSIGN_OR_RETURN(db::PlanPage page, state_->store->QueryPlans(q));
  v1::QueryPlansResponse response;
  for (auto& p : page.plans) {
    *response.add_plans() = std::move(p.plan);
    v1::StoredPlanStatus* status = response.add_statuses();
    status->set_model_name(p.model_name);
    status->set_stale(p.stale);
    status->set_stale_reason(p.stale_reason);
  }
  for (auto& key : page.corrupt_plans) response.add_corrupt_plans(std::move(key));
  response.set_next_page_token(page.next_page_token);
  return response;
}

StatusOr<v1::RegisterTargetResponse> TuningService::RegisterTarget(
    const v1::RegisterTargetRequest& request) {
  FUSOR_ASSIGN_OR_RETURN(HardwareProfile p, ProfileFromProto(request.profile()));
  if (p.cost_model_version != kCostModelVersion) {
    return Status::FailedPrecondition("profile was fitted for cost model '" + p.cost_model_version +
                                      "', this server uses '" + kCostModelVersion +
                                      "'; recalibrate the target with this fusor version");
  }
  v1::HardwareProfile canonical;
  ProfileToProto(p, &canonical);
  FUSOR_RETURN_IF_ERROR(state_->store->PutTarget(canonical));
  if (p.target.Id() == state_->local.Id()) {
    std::lock_guard<std::mutex> lock(state_->profile_mu);
    state_->local_profile = p;
  }
  v1::RegisterTargetResponse response;
  response.set_target_id(p.target.Id());
  return response;
}

StatusOr<v1::RegisterAgentResponse> TuningService::RegisterAgent(
    const v1::RegisterAgentRequest& request) {
  if (request.profile().calibrated_unix_ms() == 0) {
    return Status::InvalidArgument(
        "the agent's profile of target '" + request.profile().target().id() +
        "' was never calibrated; an agent registers its machine's calibrated profile (fusor "
        "agent calibrates first)");
  }
  v1::RegisterTargetRequest target;
  *target.mutable_profile() = request.profile();
  FUSOR_ASSIGN_OR_RETURN(v1::RegisterTargetResponse registered, RegisterTarget(target));
  return state_->agents->Register(request.name(), registered.target_id());
}

StatusOr<v1::LeaseMeasurementJobResponse> TuningService::LeaseMeasurementJob(
    const v1::LeaseMeasurementJobRequest& request, const std::atomic<bool>* cancelled) {
  return state_->agents->Lease(request, cancelled);
}

StatusOr<v1::RenewMeasurementLeaseResponse> TuningService::RenewMeasurementLease(
    const v1::RenewMeasurementLeaseRequest& request) {
  return state_->agents->Renew(request);
}

StatusOr<v1::ReportMeasurementResponse> TuningService::ReportMeasurement(
    const v1::ReportMeasurementRequest& request) {
  return state_->agents->Report(request);
}

StatusOr<v1::ListAgentsResponse> TuningService::ListAgents(const v1::ListAgentsRequest&) {
  return state_->agents->ListAgents();
}

StatusOr<v1::ListMeasurementJobsResponse> TuningService::ListMeasurementJobs(
    const v1::ListMeasurementJobsRequest& request) {
  return state_->agents->ListJobs(request.include_finished());
}

StatusOr<v1::ListTargetsResponse> TuningService::ListTargets(const v1::ListTargetsRequest&) {
  FUSOR_ASSIGN_OR_RETURN(auto targets, state_->store->ListTargets());
  v1::ListTargetsResponse response;
  for (auto& t : targets) *response.add_profiles() = std::move(t);
  return response;
}

// One Calibrate as its stages resolve it: what each stage reads of the ones before it.
struct TuningService::Calibration {
  LoggedSamples earlier;  // The target's stored runs the fit starts from (none when fresh).
  double limit_s = 0;     // The time the suite may take.
  std::map<std::string, double> cv_by_benchmark;
  CalibrationResult result;  // Measured and fitted over `earlier` and this run...
  std::span<const CalibrationSample> run_samples;  // ...whose samples these are,
  int64_t run_id = 0;                              // appended to the log as this run.
  FitSamples chosen;        // What the fit used: all but slow runs and slow timings.
  std::string in_plan_fit;  // What the fit of the in-plan constants found (State::FitInPlan).
  v1::CalibrateResponse response;
};

// The calibration pipeline, one stage a function, in the order they run: measures the suite,
// appends this run to the calibration log, and fits over this run and the target's latest earlier
// runs under this cost model (unless fresh).
StatusOr<v1::CalibrateResponse> TuningService::Calibrate(const v1::CalibrateRequest& request,
                                                         const std::atomic<bool>* cancelled) {
  std::lock_guard<std::mutex> lock(state_->measure_mu);
  FUSOR_ASSIGN_OR_RETURN(Calibration c, ReadCalibrationRequest(request));
  FUSOR_RETURN_IF_ERROR(MeasureSuite(cancelled, c));
  FUSOR_RETURN_IF_ERROR(AppendRun(c));
  FUSOR_RETURN_IF_ERROR(FitWithoutSlowRuns(c));
  FUSOR_RETURN_IF_ERROR(StoreProfile(request, c));
  LogCalibration(c);
  return std::move(c.response);
}

// The earlier runs to fit over and the time limit, checked against the service's bound.
StatusOr<TuningService::Calibration> TuningService::ReadCalibrationRequest(
    const v1::CalibrateRequest& request) {
  Calibration c;
  FUSOR_ASSIGN_OR_RETURN(c.earlier, state_->EarlierCalibrations(request.fresh()));
  if (!(request.time_limit_s() >= 0) ||
      request.time_limit_s() > state_->options.max_calibration_time_limit_s) {
    return Status::InvalidArgument(
        fmt::format("time_limit_s {} is not in [0, {}] (0: the server's default)",
                    request.time_limit_s(), state_->options.max_calibration_time_limit_s));
  }
  c.limit_s = request.time_limit_s() > 0 ? request.time_limit_s()
                                         : state_->options.calibration_time_limit_s;
  return c;
}

// Times the suite on this CPU and fits over it and the earlier runs; nothing is stored when
// cancelled.
Status TuningService::MeasureSuite(const std::atomic<bool>* cancelled, Calibration& c) {
  // A process can start with the host in a slow state and stay in it while it keeps the cores
  // busy (runtime/measurer.h, CrossCoreRatio): give it a few seconds to leave it first.
  if (state_->options.calibration_quiet_wait_ms > 0) SettleHost(kSettleHostMaxMs, "calibrate");
  FUSOR_ASSIGN_OR_RETURN(
      c.result, state_->MeasureAndFit(c.limit_s, c.earlier, &c.cv_by_benchmark, cancelled));
  if (cancelled != nullptr && cancelled->load()) {
    return Status::Cancelled("calibration was cancelled; nothing was stored");
  }
  c.in_plan_fit = state_->FitInPlan(&c.result.profile.in_plan);
  return Status::Ok();
}

// Appends this run's samples to the calibration log, whatever the fit leaves out: later fits
// compare runs again.
Status TuningService::AppendRun(Calibration& c) {
  c.run_samples = std::span(c.result.samples).subspan(c.earlier.samples.size());
  FUSOR_ASSIGN_OR_RETURN(
      c.run_id, state_->calibration->AppendCalibrationRun(RunToAppend(
                    state_->local.Id(), kCostModelVersion, c.run_samples, c.cv_by_benchmark)));
  return Status::Ok();
}

// What the fit uses: the earlier runs and this one, less a run much slower than the quickest (this
// one or an earlier one), and then any timing much slower than its benchmark's quickest; if that
// leaves anything out, the profile is fitted again, from the defaults as MeasureAndFit does.
Status TuningService::FitWithoutSlowRuns(Calibration& c) {
  LoggedSamples all = c.earlier;
  for (const CalibrationSample& s : c.run_samples) {
    all.samples.push_back(s);
    all.run_ids.push_back(c.run_id);
  }
  all.runs += c.run_samples.empty() ? 0 : 1;
  c.chosen = ChooseFitSamples(all, c.run_id);
  std::string compared;
  for (const RunSlowdown& r : c.chosen.compared) {
    compared += fmt::format(" run {} {:.2f}x", r.run_id, r.slowdown);
  }
  if (!compared.empty()) {
    spdlog::info("calibrate: runs against the quickest (median benchmark):{}", compared);
  }
  if (c.chosen.used.samples.size() < all.samples.size()) {
    HardwareProfile refit;
    refit.target = state_->local;
    FUSOR_ASSIGN_OR_RETURN(c.result.report, FitProfile(c.chosen.used.samples, &refit));
    refit.calibrated_unix_ms = c.result.profile.calibrated_unix_ms;
    refit.cost_model_version = kCostModelVersion;
    refit.in_plan = c.result.profile.in_plan;  // Fitted on its own plans (FitInPlan).
    FUSOR_RETURN_IF_ERROR(CheckPlausible(refit).WithContext("profile fitted without slow timings"));
    c.result.profile = refit;
  }
  for (const RunSlowdown& r : c.chosen.slow) {
    spdlog::warn(
        "calibrate: run {}{} timed the suite {:.2f}x slower than the quickest run loaded (its "
        "median benchmark): a slow state of a shared host, or a slower machine since (then "
        "calibrate with --fresh). Left out of the fit",
        r.run_id, r.run_id == c.run_id ? " (this calibration)" : "", r.slowdown);
  }
  const std::vector<std::string>& slow_timings = c.chosen.slow_timings;
  if (!slow_timings.empty()) {
    spdlog::info(
        "calibrate: {} timings left out of the fit, each over {:.2f}x its benchmark's quickest in "
        "the runs loaded (first: {})",
        slow_timings.size(), kSlowCalibrationRun, slow_timings.front());
  }
  return Status::Ok();
}

// Stores the fitted profile as this CPU's target, serves it from now on, and fits the target's
// learned residual again under it.
Status TuningService::StoreProfile(const v1::CalibrateRequest& request, Calibration& c) {
  c.response = CalibrateResponseOf(c.result, c.chosen.used, c.run_samples.size(), c.run_id,
                                   c.chosen.slow, static_cast<int>(c.chosen.slow_timings.size()),
                                   request.include_samples());
  c.response.set_in_plan_fit(c.in_plan_fit);
  FUSOR_RETURN_IF_ERROR(state_->store->PutTarget(c.response.profile()));
  {
    std::lock_guard<std::mutex> plock(state_->profile_mu);
    state_->local_profile = c.result.profile;
  }
  state_->RefitResidual(state_->local.Id(), "calibrate");
  return Status::Ok();
}

// One line for the fit, and what the suite could not time well.
void TuningService::LogCalibration(const Calibration& c) {
  const CalibrationResult& result = c.result;
  spdlog::info(
      "calibrate: target={} run={} fitted {} samples from {} runs ({} from this run, {} stored "
      "samples skipped) rms_error={:.3f} skipped_unstable={}",
      state_->local.Id(), c.run_id, c.response.samples_used(), c.response.runs_used(),
      c.run_samples.size(), c.earlier.skipped, result.report.rms_rel_error,
      result.skipped_unstable);
  spdlog::info("calibrate: target={} {}", state_->local.Id(), c.in_plan_fit);
  for (const auto& name : result.unstable)
    spdlog::info("calibrate: unstable, not fitted: {}", name);
  if (result.retimed_disturbed > 0) {
    spdlog::info(
        "calibrate: {} timing(s) taken again of benchmarks timed in a slow state of the host",
        result.retimed_disturbed);
  }
  if (!result.disturbed.empty()) {
    // One line, not one per benchmark: a slow stretch of the host can cover most of the suite, and
    // the first `./demo.sh` on a fresh machine printed 38 lines of this.
    constexpr size_t kNamesShown = 4;
    std::string names;
    for (size_t i = 0; i < result.disturbed.size() && i < kNamesShown; ++i)
      names += (i ? ", " : "") + result.disturbed[i];
    if (result.disturbed.size() > kNamesShown)
      names += fmt::format(" and {} more", result.disturbed.size() - kNamesShown);
    spdlog::warn(
        "calibrate: {} of {} benchmarks were timed in a slow state of the host even when timed "
        "again ({}); their constants may be slow. Run `fusor calibrate` on a quiet host: the fit "
        "averages over the stored runs",
        result.disturbed.size(), c.run_samples.size() + result.unstable.size(), names);
  }
}

}  // namespace fusor
