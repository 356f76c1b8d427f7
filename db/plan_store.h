// PlanStore: the plans of the tuning database as the rest of Fusor sees them. It keeps targets (a
// CPU fingerprint with its latest calibrated hardware profile), graphs (by canonical hash), plans
// keyed by (graph hash, target, cost-model version, search options), the measurements behind each
// plan and an append-only tuning history. The database's other concerns have interfaces of their
// own: the calibration log and the learned residual's log (calibration_log.h), and the
// measurement agents' job queue (measurement_queue.h). No SQL leaves db/: callers use these
// interfaces, and unit tests elsewhere may fake them. SqlitePlanStore (one file) and
// PostgresPlanStore (one PostgreSQL database shared by fusord replicas) keep every concern
// (TuningDatabase, tuning_database.h); LayeredPlanStore (a writable store over read-only
// snapshots) keeps plans; OpenPlanStore (open_plan_store.h) turns a location ("path.db",
// "sqlite:path", "postgresql://...") into a store.
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

  // One entry per database file behind the store.
  virtual StatusOr<std::vector<DatabaseStats>> Stats(
      std::string_view current_cost_model_version) = 0;
};

}  // namespace fusor::db
