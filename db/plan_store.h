// PlanStore: the tuning database as the rest of Fusor sees it. It keeps targets (a CPU fingerprint
// with its latest calibrated hardware profile), graphs (by canonical hash), plans keyed by
// (graph hash, target, cost-model version, search options), the measurements behind each plan, an
// append-only tuning history, the append-only calibration log (every micro-benchmark sample
// of every calibration run, so fits can be rerun over all samples so far), and the learned
// residual's log (every plan or region a tune timed, with its features) and fitted residual per
// target. No SQL leaves db/:
// callers use this interface, and unit tests elsewhere may fake it. SqlitePlanStore (one file),
// PostgresPlanStore (one PostgreSQL database shared by fusord replicas) and LayeredPlanStore (a
// writable store over read-only snapshots) implement it; OpenPlanStore (open_plan_store.h) turns
// a location ("path.db", "sqlite:path", "postgresql://...") into one.
//
// Never serving a wrong plan: plans are always looked up under their target, so a plan tuned on
// one CPU is never returned for another. A plan is stale when it was scored by a cost model other
// than the current one, or created before its target's latest calibration (see staleness.h);
// readers get stale plans flagged, and BestPlan never returns one.
//
// The value types below own their data. Implementations are safe to call from many threads at
// once; results are copies the caller owns.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "proto/graph.pb.h"
#include "proto/plan.pb.h"
#include "proto/target.pb.h"
#include "proto/tuner.pb.h"

namespace fusor::db {

// The unique key of a stored plan. search_options is the canonical text of the search options
// (Plan.search_options); the empty string is a valid value (the defaults).
struct PlanKey {
  std::string graph_hash;
  std::string target_id;
  std::string cost_model_version;
  std::string search_options;

  static PlanKey Of(const v1::Plan& plan) {
    return {plan.graph_hash(), plan.target_id(), plan.cost_model_version(), plan.search_options()};
  }
  bool operator==(const PlanKey&) const = default;
};

// A plan as read back, with what the reader needs to judge it.
struct StoredPlan {
  v1::Plan plan;
  std::string model_name;    // Of the plan's graph.
  bool stale = false;        // True when the plan must not be served as current.
  std::string stale_reason;  // Why it is stale ("" when current), for people.
  std::string database;      // Path of the database file the plan came from.
};

// One timing of a whole plan or of one of its groups. The store computes median_ns and spread from
// samples_ns when writing; values passed in for them are ignored.
struct Measurement {
  std::optional<int32_t> group_id;  // FusionGroup.id, or nullopt for the whole plan.
  std::vector<double> samples_ns;   // Every sample, in the order taken.
  double median_ns = 0;
  double spread = 0;  // Interquartile range over median: 0.05 means the middle half is within 5%.
  int64_t measured_unix_ms = 0;  // 0 when writing: the store uses the plan's created time.
  // The measurement agent that timed it; empty when fusord (or the CLI) timed it itself.
  std::string agent_id;
};

// A measurement agent: one process on a machine of its target that leases that target's jobs.
struct AgentRecord {
  std::string agent_id;
  std::string target_id;
  std::string name;  // What the agent calls itself (its host), for people.
  int64_t registered_unix_ms = 0;
  int64_t last_seen_unix_ms = 0;  // Its latest call; set by the store.
};

// The states of a measurement job: queued (no agent holds it), leased (an agent holds it until
// lease_expires_unix_ms, then it is as good as queued), done (an agent reported), cancelled (the
// Tune that enqueued it stopped waiting).
inline constexpr std::string_view kJobQueued = "queued";
inline constexpr std::string_view kJobLeased = "leased";
inline constexpr std::string_view kJobDone = "done";
inline constexpr std::string_view kJobCancelled = "cancelled";

// A measurement job as stored. The store keeps `job` (graph, plans, timing) and `result` as they
// are given; the job's id and lease fields are filled in when it is read.
struct MeasurementJobRow {
  int64_t job_id = 0;
  std::string target_id;
  std::string state;     // kJobQueued, ...
  std::string agent_id;  // The holder while leased; who reported when done.
  int64_t lease = 0;     // Times leased: a lease is (job_id, agent_id, lease).
  int64_t lease_expires_unix_ms = 0;
  int64_t created_unix_ms = 0;
  int64_t finished_unix_ms = 0;  // When reported or cancelled; 0 before.
  v1::MeasurementJob job;
  v1::MeasurementResult result;  // When done.
};

// What ListAgents and ListJobs return: the rows and the store's clock when it read them, so a
// reader judges liveness and ages by the same clock the leases run on.
struct AgentListing {
  int64_t now_unix_ms = 0;
  std::vector<AgentRecord> agents;  // Latest heard from first.
};
struct JobListing {
  int64_t now_unix_ms = 0;
  std::vector<MeasurementJobRow> jobs;  // Oldest first.
};

// Who holds which lease of a job, as the agent names it when renewing or reporting.
struct JobLease {
  int64_t job_id = 0;
  std::string agent_id;
  int64_t lease = 0;
};

// Filters for QueryPlans; every set field must match. Results come newest first (created time),
// ties broken by key, and pages continue with next_page_token.
struct PlanQuery {
  std::string model_name;         // Exact model name of the graph; "" for any.
  std::string target_id;          // "" for any.
  std::string graph_hash_prefix;  // Lower-case hex prefix of the graph hash (a full hash works).
  int64_t created_after_unix_ms = 0;   // Inclusive; 0 for no bound.
  int64_t created_before_unix_ms = 0;  // Exclusive; 0 for no bound.
  double min_speedup = 0;              // Speed-up over unfused (SpeedUp()); 0 for no bound.
  bool only_current = false;           // Leave out stale plans.
  // The cost model in use; "" means each target's calibrated cost_model_version.
  std::string current_cost_model_version;
  int32_t page_size = 0;   // 0 for kDefaultPageSize; at most kMaxPageSize.
  std::string page_token;  // "" for the first page.

  static constexpr int32_t kDefaultPageSize = 50;
  static constexpr int32_t kMaxPageSize = 1000;
};

struct PlanPage {
  std::vector<StoredPlan> plans;
  std::string next_page_token;  // "" when this page was the last.
  // "GRAPH_HASH TARGET_ID" of rows on this page whose plan is corrupt (does not parse, or is 0
  // bytes): left out of `plans` and logged, so one bad row never fails every page holding it.
  std::vector<std::string> corrupt_plans;
};

// One row of the tuning history. Events: "stored", "replaced", "imported", "deleted", "expired",
// "calibrated" (target_id only).
struct HistoryEvent {
  int64_t at_unix_ms = 0;
  std::string event;
  PlanKey key;
  double predicted_ns = 0;
  double measured_ns = 0;
  std::string detail;
  std::string database;
};

struct HistoryQuery {
  std::string graph_hash_prefix;  // "" for any.
  std::string target_id;          // "" for any.
  int32_t limit = 100;            // Newest first.
};

// Which plans ExpirePlans deletes: those matching either rule.
struct ExpireRule {
  int64_t created_before_unix_ms = 0;  // Plans created before this time; 0 disables the rule.
  bool stale = false;                  // Plans stale under current_cost_model_version.
  std::string current_cost_model_version;
};

// One micro-benchmark of a calibration run, as the calibration log keeps it. The features are the
// JSON object the cost model wrote (costmodel's SampleToJson); db/ stores the text and never reads
// it, since only the cost model that computed the features can.
struct CalibrationSampleRow {
  int64_t sample_id = 0;  // Row id, set when read, so a bad row can be named; ignored on append.
  std::string benchmark;
  std::string features_json;
  double measured_ns = 0;  // Median time.
  double cv = 0;           // Coefficient of variation of the timing.
};

// The samples one calibration of one target measured. Features computed by one cost-model version
// are not comparable with another's, so a run is read back only under its own version.
struct CalibrationRun {
  int64_t run_id = 0;  // Set by the store on append (increasing); local to its database file.
  std::string target_id;
  std::string cost_model_version;
  int64_t run_unix_ms = 0;  // When measured; 0 when appending means now.
  std::vector<CalibrationSampleRow> samples;
  std::string database;  // Path of the database file the run came from, set when read.
};

// Which runs CalibrationRuns returns: the newest max_runs of one target under one cost-model
// version. The cap keeps a long log from making every fit slower.
struct CalibrationRunQuery {
  std::string target_id;
  std::string cost_model_version;
  int32_t max_runs = 8;
};

// One timed plan or region of a tune, as the learned residual's log keeps it. features_json is
// the JSON the cost model wrote (costmodel's ResidualSampleToJson) and features_version the
// layout of its features (ResidualFeaturesVersion); db/ stores both and never reads the JSON.
struct ResidualSampleRow {
  int64_t sample_id = 0;  // Set by the store (increasing); ignored on append.
  std::string target_id;
  std::string cost_model_version;
  std::string graph_hash;  // The graph tuned (a region's too: the graph it was cut from).
  std::string source;      // What was timed: "plan", or "region Conv+Relu" and the like.
  std::string features_version;
  std::string features_json;
  double measured_ns = 0;        // Median time, finite and > 0.
  int64_t measured_unix_ms = 0;  // 0 when appending means now.
};

// Which samples ResidualSamples returns: the newest max_samples of one target under one
// cost-model version with a sample id above after_sample_id, oldest first.
struct ResidualSampleQuery {
  std::string target_id;
  std::string cost_model_version;
  int64_t after_sample_id = 0;
  int32_t max_samples = 4096;
};

// A target's fitted residual (one per target, replaced by each fit).
struct StoredResidual {
  std::string target_id;
  std::string cost_model_version;  // The cost model it corrects.
  std::string residual_json;       // costmodel's ResidualToJson; db/ does not read it.
  int64_t training_samples = 0;
  int64_t last_sample_id = 0;  // The newest sample the fit saw: later ones are new to it.
  int64_t fitted_unix_ms = 0;  // 0 when writing means now.
  std::string database;        // Set when read.
};

struct TargetStats {
  std::string target_id;
  std::string cpu_model;
  std::string isa;
  int64_t calibrated_unix_ms = 0;
  int64_t plans = 0;
  int64_t stale_plans = 0;
  int64_t calibration_samples = 0;  // Every cost-model version.
};

// Counts for one database file.
struct DatabaseStats {
  std::string path;
  int schema_version = 0;
  bool read_only = false;
  std::string snapshot_of_target;  // Non-empty for an exported deployment snapshot.
  int64_t file_bytes = 0;          // Main file plus write-ahead log.
  int64_t targets = 0;
  int64_t graphs = 0;
  int64_t plans = 0;
  int64_t stale_plans = 0;  // Judged within this file alone.
  int64_t measurements = 0;
  int64_t history_events = 0;
  int64_t calibration_runs = 0;
  int64_t calibration_samples = 0;
  std::vector<TargetStats> per_target;
};

// Held while one caller tunes one plan key; released when destroyed (or when the process holding
// it dies).
class PlanKeyLock {
 public:
  virtual ~PlanKeyLock() = default;
};

class PlanStore {
 public:
  virtual ~PlanStore() = default;

  // Waits until no other process sharing this store holds the lock of key, then holds it, so that
  // identical Tunes arriving at several fusord processes on one store search once: the others
  // wait here and then find the stored plan. Cancelled when *cancelled turns true while waiting.
  // The lock goes with the holder's process if it dies. Identical requests within one process are
  // joined before they reach the store (server/tune_jobs.h). This default, for stores no process
  // tunes through (snapshots, test fakes), waits for nothing.
  virtual StatusOr<std::unique_ptr<PlanKeyLock>> LockPlanKey(const PlanKey& key,
                                                             const std::atomic<bool>* cancelled) {
    (void)key;
    (void)cancelled;
    return std::make_unique<PlanKeyLock>();
  }

  // Stores a target's hardware profile. When the target is known, the newer calibration wins, so
  // replaying an old profile never makes stale plans current again.
  virtual Status PutTarget(const v1::HardwareProfile& profile) = 0;
  // The latest profile of a target; NotFound when unknown.
  virtual StatusOr<v1::HardwareProfile> GetTarget(std::string_view target_id) = 0;
  virtual StatusOr<std::vector<v1::HardwareProfile>> ListTargets() = 0;

  // The graph stored under a full canonical hash; NotFound when unknown.
  virtual StatusOr<v1::Graph> GetGraph(std::string_view graph_hash) = 0;

  // Stores a plan, its graph (kept once per hash) and its measurements in one transaction. A plan
  // with the same key replaces the stored one (a forced re-tune); the history keeps both. The
  // target must already be stored. created_unix_ms 0 means now.
  virtual Status PutPlan(const v1::Plan& plan, const v1::Graph& graph,
                         std::span<const Measurement> measurements) = 0;
  // The plan under exactly this key, flagged stale or not; NotFound when absent.
  virtual StatusOr<StoredPlan> GetPlan(const PlanKey& key,
                                       std::string_view current_cost_model_version) = 0;
  // The best current plan for a graph on a target over all search options (BetterPlan order).
  // Never stale: NotFound when every stored plan is stale or there is none.
  virtual StatusOr<StoredPlan> BestPlan(std::string_view graph_hash, std::string_view target_id,
                                        std::string_view current_cost_model_version) = 0;
  virtual StatusOr<PlanPage> QueryPlans(const PlanQuery& query) = 0;
  // The measurements stored with a plan, whole-plan first, then by group.
  virtual StatusOr<std::vector<Measurement>> GetMeasurements(const PlanKey& key) = 0;
  virtual StatusOr<std::vector<HistoryEvent>> History(const HistoryQuery& query) = 0;

  // Deletes one plan and its measurements; NotFound when absent.
  virtual Status DeletePlan(const PlanKey& key) = 0;
  // Deletes the plans the rule selects, then graphs no plan uses; returns how many plans went.
  virtual StatusOr<int64_t> ExpirePlans(const ExpireRule& rule) = 0;

  // Appends one calibration run to the calibration log in one transaction and returns its run id.
  // The target must already be stored; the run needs at least one sample, each with a benchmark
  // name, a finite time > 0 and a finite cv >= 0. Samples are never updated or deleted.
  virtual StatusOr<int64_t> AppendCalibrationRun(const CalibrationRun& run) = 0;
  // The newest runs the query selects, newest first, each with its samples in the order appended.
  // A database older than the calibration log (schema version 1) has none.
  virtual StatusOr<std::vector<CalibrationRun>> CalibrationRuns(
      const CalibrationRunQuery& query) = 0;

  // Appends timed plans or regions to the learned residual's log in one transaction. Each row's
  // target must be stored, and it needs a cost-model version, a features version, features and a
  // finite time > 0. Rows are never updated or deleted.
  virtual Status AppendResidualSamples(std::span<const ResidualSampleRow> rows) = 0;
  // The samples the query selects. A database older than the log (schema version 4) has none.
  virtual StatusOr<std::vector<ResidualSampleRow>> ResidualSamples(
      const ResidualSampleQuery& query) = 0;
  // Stores a target's residual, replacing the one stored; the target must be stored.
  virtual Status PutResidual(const StoredResidual& residual) = 0;
  // The residual stored for a target, of whatever cost-model version; NotFound when none.
  virtual StatusOr<StoredResidual> GetResidual(std::string_view target_id) = 0;

  // One entry per database file behind the store.
  virtual StatusOr<std::vector<DatabaseStats>> Stats(
      std::string_view current_cost_model_version) = 0;

  // Measurement agents and their job queue (schema version 3). Times are the store's clock (the
  // database server's for PostgreSQL), so replicas on hosts whose clocks differ agree on which
  // lease has expired and which agent is live. The defaults, for stores no fusord serves agents
  // through (snapshots, layered stores), refuse with Unimplemented.

  // Records an agent (registered and last seen now); an agent id registered again is replaced.
  virtual Status PutAgent(const AgentRecord& agent);
  // Marks an agent as heard from now and returns it; NotFound when never registered.
  virtual StatusOr<AgentRecord> TouchAgent(std::string_view agent_id);
  // Agents of the target heard from within the last live_ms.
  virtual StatusOr<int64_t> CountLiveAgents(std::string_view target_id, int64_t live_ms);

  // Queues a job for job.target_id() (a stored target) and returns its id.
  virtual StatusOr<int64_t> EnqueueJob(const v1::MeasurementJob& job);
  // Leases the oldest job of the target that is queued or whose lease expired to agent_id for
  // lease_ms, in one transaction that other leasers skip past (never one job to two agents);
  // nullopt when there is none. The lease number grows by one with every lease.
  virtual StatusOr<std::optional<MeasurementJobRow>> LeaseJob(std::string_view target_id,
                                                              std::string_view agent_id,
                                                              int64_t lease_ms);
  // Extends a lease the agent still holds to now + lease_ms and returns the new expiry;
  // FailedPrecondition naming the job's state and holder when it no longer holds it.
  virtual StatusOr<int64_t> RenewLease(const JobLease& lease, int64_t lease_ms);
  // Stores the result of a job the agent still holds (this very lease, expired or not, as long as
  // no other agent took the job since) and marks it done; FailedPrecondition as RenewLease.
  virtual Status FinishJob(const JobLease& lease, const v1::MeasurementResult& result);
  // Cancels a job that is not done (a done job stays done); NotFound when unknown.
  virtual Status CancelJob(int64_t job_id);
  // Deletes the jobs that finished (done or cancelled) more than older_than_ms ago and returns
  // how many; queued and leased jobs stay. InvalidArgument when older_than_ms is negative.
  virtual StatusOr<int64_t> PruneJobs(int64_t older_than_ms);
  // The job as stored; NotFound when unknown.
  virtual StatusOr<MeasurementJobRow> GetJob(int64_t job_id);
  // Every registered agent, for people and metrics (`fusor agents list`).
  virtual StatusOr<AgentListing> ListAgents();
  // The queued and leased jobs, and with include_finished the done and cancelled ones still kept
  // (PruneJobs), for people and metrics (`fusor jobs list`).
  virtual StatusOr<JobListing> ListJobs(bool include_finished);
};

}  // namespace fusor::db
