// Row-level reads and writes of the tuning database, grouped by table, for SqlitePlanStore. Each
// function works on a connection the caller holds and, when it writes, inside the caller's
// transaction; none begins or commits one. The tables are described in schema.cc. Internal to db/.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "db/plan_order.h"
#include "db/sqlite_connection.h"
#include "db/tuning_database.h"

namespace fusor::db::tables {

// SQL condition, true when plan row p joined with its target row t is current; it takes one
// parameter, the current cost-model version ('' for the target's own). Mirrors StaleReason().
inline constexpr std::string_view kPlanIsCurrent =
    "(p.cost_model_version = COALESCE(NULLIF(?, ''), t.cost_model_version) AND "
    "p.created_unix_ms >= t.calibrated_unix_ms)";

// The start of every plan read: the columns ReadStoredPlan expects, from plans p, graphs g and
// targets t, then the row's key and creation time (from kPlanGraphColumn on), which place and
// name a row whose plan is corrupt.
inline constexpr std::string_view kSelectPlans =
    "SELECT p.plan, g.model_name, t.cost_model_version, t.calibrated_unix_ms, p.graph_hash, "
    "p.target_id, p.cost_model_version, p.search_options, p.created_unix_ms "
    "FROM plans p JOIN graphs g ON g.graph_hash = p.graph_hash "
    "JOIN targets t ON t.target_id = p.target_id";

inline constexpr int kPlanGraphColumn = 4;

// Where a row of kSelectPlans stands in listing order, from its own columns.
ListingPosition RowPosition(const Statement& row);

// The order BetterPlan() defines, as an ORDER BY list over plans p.
inline constexpr std::string_view kBestFirst =
    "(p.measured_ns IS NOT NULL) DESC, COALESCE(p.measured_ns, p.predicted_ns) ASC, "
    "p.created_unix_ms DESC";

// Builds a StoredPlan from a row of kSelectPlans, judging staleness against current_cmv.
StatusOr<StoredPlan> ReadStoredPlan(const Statement& row, std::string_view current_cmv,
                                    const std::string& database);

// Targets. UpsertTarget stores a profile unless the stored one is newer or identical; true if
// stored.
StatusOr<bool> UpsertTarget(SqliteConnection& c, const v1::HardwareProfile& profile,
                            int64_t now_ms);
StatusOr<std::optional<v1::HardwareProfile>> FindTarget(SqliteConnection& c,
                                                        std::string_view target_id);
StatusOr<std::vector<v1::HardwareProfile>> AllTargets(SqliteConnection& c);

// Graphs. InsertGraphIfMissing returns true when the graph was new.
StatusOr<bool> InsertGraphIfMissing(SqliteConnection& c, std::string_view graph_hash,
                                    const v1::Graph& graph, int64_t now_ms);
StatusOr<std::optional<v1::Graph>> FindGraph(SqliteConnection& c, std::string_view graph_hash);
// Deletes graphs no plan refers to; returns how many.
StatusOr<int64_t> DeleteOrphanGraphs(SqliteConnection& c);

// Plans.
struct PlanRow {
  int64_t plan_id = 0;
  v1::Plan plan;
};
StatusOr<std::optional<PlanRow>> FindPlanRow(SqliteConnection& c, const PlanKey& key);
StatusOr<int64_t> InsertPlan(SqliteConnection& c, const v1::Plan& plan);
// Overwrites a plan row in place and drops the measurements of the plan it replaces.
Status ReplacePlan(SqliteConnection& c, int64_t plan_id, const v1::Plan& plan);
Status DeletePlanRow(SqliteConnection& c, int64_t plan_id);

// Measurements. Median and spread are computed here from the samples; a measurement without a time
// gets default_unix_ms.
Status InsertMeasurements(SqliteConnection& c, int64_t plan_id,
                          std::span<const Measurement> measurements, int64_t default_unix_ms);
// with_agents: the file has measurements.agent_id (schema version 3).
StatusOr<std::vector<Measurement>> ReadMeasurements(SqliteConnection& c, int64_t plan_id,
                                                    bool with_agents);

// Tuning history.
Status AppendHistory(SqliteConnection& c, const HistoryEvent& event);
StatusOr<std::vector<HistoryEvent>> ReadHistory(SqliteConnection& c, const HistoryQuery& query);

// Calibration log (schema version 2). InsertCalibrationRun gives the run the next run id of the
// file and returns it; a run without a time gets now_ms.
StatusOr<int64_t> InsertCalibrationRun(SqliteConnection& c, const CalibrationRun& run,
                                       int64_t now_ms);
StatusOr<std::vector<CalibrationRun>> ReadCalibrationRuns(SqliteConnection& c,
                                                          const CalibrationRunQuery& query);
// Adds the log's counts (runs, samples, samples per target) to stats.
Status CountCalibrationLog(SqliteConnection& c, DatabaseStats& stats);

// Measurement agents and jobs (schema version 3). UpsertAgent registers an agent now; TouchAgent
// sets its last_seen to now and reads it back (nullopt when unknown).
Status UpsertAgent(SqliteConnection& c, const AgentRecord& agent, int64_t now_ms);
StatusOr<std::optional<AgentRecord>> TouchAgent(SqliteConnection& c, std::string_view agent_id,
                                                int64_t now_ms);
StatusOr<int64_t> CountLiveAgents(SqliteConnection& c, std::string_view target_id,
                                  int64_t seen_after_ms);
StatusOr<int64_t> InsertJob(SqliteConnection& c, const v1::MeasurementJob& job, int64_t now_ms);
// The oldest job of the target that may be leased at now_ms (LeasableJobSql).
StatusOr<std::optional<int64_t>> LeasableJob(SqliteConnection& c, std::string_view target_id,
                                             int64_t now_ms);
// Leases the job to the agent until expires_ms (the lease number grows by one).
Status SetJobLease(SqliteConnection& c, int64_t job_id, std::string_view agent_id,
                   int64_t expires_ms);
Status ExtendJobLease(SqliteConnection& c, int64_t job_id, int64_t expires_ms);
// Moves a job to done (with its result) or cancelled.
Status EndJob(SqliteConnection& c, int64_t job_id, std::string_view state,
              const v1::MeasurementResult* result, int64_t now_ms);
// Deletes done and cancelled jobs that finished before finished_before_ms; returns how many.
StatusOr<int64_t> DeleteFinishedJobs(SqliteConnection& c, int64_t finished_before_ms);
StatusOr<std::optional<MeasurementJobRow>> FindJob(SqliteConnection& c, int64_t job_id);
StatusOr<std::vector<AgentRecord>> ReadAgents(SqliteConnection& c);
// Queued and leased jobs (with include_finished, every job kept), oldest first.
StatusOr<std::vector<MeasurementJobRow>> ReadJobs(SqliteConnection& c, bool include_finished);
// The learned residual's log and fits (schema version 4). Rows without a time get now_ms.
Status InsertResidualSamples(SqliteConnection& c, std::span<const ResidualSampleRow> rows,
                             int64_t now_ms);
StatusOr<std::vector<ResidualSampleRow>> ReadResidualSamples(SqliteConnection& c,
                                                             const ResidualSampleQuery& query);
Status UpsertResidual(SqliteConnection& c, const StoredResidual& residual, int64_t now_ms);
StatusOr<std::optional<StoredResidual>> FindResidual(SqliteConnection& c,
                                                     std::string_view target_id);

}  // namespace fusor::db::tables
