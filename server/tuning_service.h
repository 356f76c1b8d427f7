// TuningService: the transport-free core of the tuning service (TunerApi). Tune validates the
// untrusted graph (FromProto with limits), canonicalises and hashes it, answers from the database
// when a current plan is stored for (hash, target, cost-model version, options), and otherwise
// searches with the target's calibrated cost model, refines the result by measuring alternatives
// on this CPU when the target is this machine, or on a measurement agent of the target
// (server/agent_dispatch.h) when one is live, and stores the plan with its measurements.
// RegisterTarget / ListTargets / Calibrate manage hardware profiles; the service's own CPU is
// detected at Open and calibrated on demand. Calibrate appends its samples to the database's
// calibration log and fits over them and the samples of earlier runs it keeps
// (server/calibration_fit_samples.h).
//
// Owns the tuning database it is handed (db::TuningDatabase: its plans, calibration log and
// measurement queue; Open(options) opens the one options name). Tune takes the store's lock on
// the plan key before searching, so replicas sharing a PostgreSQL store search an identical
// request once. Thread-safe: Tune calls may run concurrently (each measurement
// runs under a lock, since two measurements at once on one CPU would disturb each other).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "base/clock.h"
#include "costmodel/hardware_profile.h"
#include "db/tuning_database.h"
#include "graph/validate.h"
#include "runtime/measurer_factory.h"
#include "runtime/timing_policy.h"
#include "server/tuner_api.h"

namespace fusor {

struct TuningServiceOptions {
  // Where the tuning database is, for Open(options): a SQLite file (created if missing),
  // sqlite:PATH or postgresql://... (db/open_plan_store.h).
  std::string db_location;
  ValidationLimits limits;            // Node count and tensor size caps for submitted graphs.
  int measure_threads = 0;            // OpenMP threads for measurements; 0: all cores.
  int default_measure_budget = 7;     // Measurements per Tune when the request says 0.
  double default_time_limit_s = 120;  // Wall-clock limit per Tune when the request says 0.
  // What a request may ask for at most; more is InvalidArgument naming the cap.
  double max_time_limit_s = 3600;
  int max_measure_budget = 64;
  double calibration_time_limit_s = 60;
  double max_calibration_time_limit_s = 600;
  // Each calibration benchmark is timed for this long, after waiting up to
  // calibration_quiet_wait_ms for a quiet host (runtime/measurer.h). Shorter only where the fit's
  // accuracy does not matter (tests of the calibration log).
  double calibration_benchmark_ms = 100;
  int calibration_quiet_wait_ms = kQuietWaitMs;
  // Calibration runs a fit uses, this one included: the newest of the calibration log, so a long
  // log never makes calibration slow. 1: every calibration fits its own samples alone.
  int calibration_runs_fitted = 8;
  double min_measure_ms = 30;  // Timing: repeat each measurement until this much time.
  // Calibrate this CPU before the first Tune for it if it was never calibrated (the CLI's local
  // mode does; a server is calibrated deliberately, through Calibrate, or before a Tune measures).
  bool auto_calibrate = false;
  // A Tune that measures on this CPU before it was calibrated measures with the defaults, its
  // plan's confidence saying so (`uncalibrated`); false (the default): it calibrates this CPU
  // first, since a measured plan searched with the defaults mixes this machine's time with
  // constants of no machine. For tests of other things, which must not spend a minute on it.
  bool measure_uncalibrated = false;
  // How the service measures and reads time: real oneDNN runs (OneDnnMeasurers) and the steady
  // clock unless a test or another measurement path hands in its own. The clock must outlive the
  // service.
  MeasurerFactory measurers;
  const Clock* clock = nullptr;

  // Measurement agents (`fusor agent`). A Tune for a target with a live agent enqueues its
  // candidate plans as a measurement job and waits for an agent's timings; a job not renewed for
  // agent_lease_s goes to another agent. An agent is live while it was heard from (a lease poll,
  // a renewal, a report) within agent_live_s. An agent's poll waits up to agent_poll_s for a job.
  double agent_lease_s = 60;
  double agent_live_s = 90;
  double agent_poll_s = 20;
  // This CPU's Tunes go to live agents of this CPU too, and fusord measures only when none is
  // live: replicas sharing a host then never time plans against each other.
  bool measure_on_agents = false;
  // The learned residual (server/learned_residual.h, docs/costmodel.md). On: a Tune scores with
  // the target's stored residual on top of the analytical model unless the request says
  // no_residual, and residuals are fitted. Off: every Tune scores with the analytical model
  // alone and nothing is fitted. Either way every stable timing of a tune is kept in the
  // database's residual log.
  bool learned_residual = false;
  // A target's residual is fitted again on Calibrate, and once this many timings were kept since
  // its last fit. A tune at the default budget keeps 6-9 (its regions' alternatives and 2-3 whole
  // plans), so 32 is about four tunes: often enough that a new target gets a residual after its
  // first few models, rarely enough that a batch of tunes is not scored by a model that changes
  // under it after every one for a few percent more data. A fit itself is cheap (29 weights,
  // milliseconds over a few hundred timings).
  int residual_refit_every = 32;
  // A fit uses the newest this-many timings of the target, so a long log never makes it slow: a
  // whole plan's row of a 100-group model is ~60 KB of JSON, read and parsed at every refit.
  int residual_max_samples = 2048;
};

class TuningService final : public TunerApi {
 public:
  // Opens the database at options.db_location (db::OpenTuningDatabase) and the service over it.
  static StatusOr<std::unique_ptr<TuningService>> Open(const TuningServiceOptions& options);
  // The service over a database it is handed (options.db_location only names it in logs).
  static StatusOr<std::unique_ptr<TuningService>> Open(std::unique_ptr<db::TuningDatabase> database,
                                                       const TuningServiceOptions& options);
  ~TuningService() override;

  Status Tune(const v1::TuneRequest& request, const EventSink& on_event,
              const std::atomic<bool>* cancelled) override;
  StatusOr<v1::GetPlanResponse> GetPlan(const v1::GetPlanRequest& request) override;
  StatusOr<v1::QueryPlansResponse> QueryPlans(const v1::QueryPlansRequest& request) override;
  StatusOr<v1::RegisterTargetResponse> RegisterTarget(
      const v1::RegisterTargetRequest& request) override;
  StatusOr<v1::ListTargetsResponse> ListTargets(const v1::ListTargetsRequest& request) override;
  using TunerApi::Calibrate;
  StatusOr<v1::CalibrateResponse> Calibrate(const v1::CalibrateRequest& request,
                                            const std::atomic<bool>* cancelled) override;
  // Measurement agents (server/agent_dispatch.h). RegisterAgent stores the agent's calibrated
  // profile as RegisterTarget does (the newer calibration wins) and records the agent.
  StatusOr<v1::RegisterAgentResponse> RegisterAgent(
      const v1::RegisterAgentRequest& request) override;
  StatusOr<v1::LeaseMeasurementJobResponse> LeaseMeasurementJob(
      const v1::LeaseMeasurementJobRequest& request, const std::atomic<bool>* cancelled) override;
  StatusOr<v1::RenewMeasurementLeaseResponse> RenewMeasurementLease(
      const v1::RenewMeasurementLeaseRequest& request) override;
  StatusOr<v1::ReportMeasurementResponse> ReportMeasurement(
      const v1::ReportMeasurementRequest& request) override;
  StatusOr<v1::ListAgentsResponse> ListAgents(const v1::ListAgentsRequest& request) override;
  StatusOr<v1::ListMeasurementJobsResponse> ListMeasurementJobs(
      const v1::ListMeasurementJobsRequest& request) override;

  // The fingerprint id of the CPU this service runs on.
  std::string local_target_id() const;

 private:
  struct State;
  explicit TuningService(std::unique_ptr<State> state);

  // The stages of Tune, in the order it runs them (tuning_service.cc). Each reads what the ones
  // before it resolved into a Tuning and adds its own part.
  struct Tuning;
  StatusOr<Tuning> ImportGraph(const v1::TuneRequest& request, const EventSink& on_event);
  Status ResolveTarget(const v1::TuneRequest& request, const EventSink& on_event, Tuning& t);
  Status ChooseWhereToMeasure(const v1::TuneRequest& request, Tuning& t);
  StatusOr<std::unique_ptr<db::PlanKeyLock>> LockUnlessStored(const v1::TuneRequest& request,
                                                              const EventSink& on_event,
                                                              const std::atomic<bool>* cancelled,
                                                              const Tuning& t);
  Status SearchForPlan(const EventSink& on_event, const std::atomic<bool>* cancelled, Tuning& t);
  Status MeasureOnAgents(const EventSink& on_event, const std::atomic<bool>* cancelled, Tuning& t);
  Status MeasureHere(const EventSink& on_event, const std::atomic<bool>* cancelled, Tuning& t);
  Status StorePlan(const EventSink& on_event, Tuning& t);
  void ReplyWithPlan(const EventSink& on_event, const Tuning& t);

  // The stages of Calibrate, in the order it runs them (tuning_service.cc), each adding its part
  // to one Calibration.
  struct Calibration;
  StatusOr<Calibration> ReadCalibrationRequest(const v1::CalibrateRequest& request);
  Status MeasureSuite(const std::atomic<bool>* cancelled, Calibration& c);
  Status AppendRun(Calibration& c);
  Status FitWithoutSlowRuns(Calibration& c);
  Status StoreProfile(const v1::CalibrateRequest& request, Calibration& c);
  void LogCalibration(const Calibration& c);

  // Answers a Tune from the store when a current plan that fits graph `g` (CheckPlan) is stored
  // under key; false when none is. A stored plan that no longer fits (tuned under an older
  // lowering: a group kind the graph's nodes no longer form) is never served: it is logged with
  // the reason and counted stale, and the Tune tunes the key again, replacing it. Counts the
  // lookup when it hits, or when count_miss.
  StatusOr<bool> ServeStored(const db::PlanKey& key, const Graph& g, const EventSink& on_event,
                             bool count_miss);
  std::unique_ptr<State> state_;
};

}  // namespace fusor
