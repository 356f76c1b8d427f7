#include "db/tables.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>

#include <spdlog/fmt/fmt.h>

#include "db/plan_order.h"
#include "db/store_rules.h"

namespace fusor::db::tables {
namespace {

SqlValue OptionalReal(double value) {
  if (value > 0) return value;
  return std::monostate{};
}

SqlValue OptionalReal(std::optional<double> value) {
  if (value) return *value;
  return std::monostate{};
}

template <typename Message>
StatusOr<Message> ParseColumn(const Statement& row, int column, std::string_view what,
                              const std::string& database) {
  return ParseStored<Message>(row.Bytes(column), what, database);
}

}  // namespace

StatusOr<StoredPlan> ReadStoredPlan(const Statement& row, std::string_view current_cmv,
                                    const std::string& database) {
  FUSOR_ASSIGN_OR_RETURN(v1::Plan plan, ParseStoredPlan(row.Bytes(0), database));
  return JudgedPlan(std::move(plan), row.Text(1), row.Text(2), row.Int(3), current_cmv, database);
}

ListingPosition RowPosition(const Statement& row) {
  return {row.Int(kPlanGraphColumn + 4),
          {row.Text(kPlanGraphColumn), row.Text(kPlanGraphColumn + 1),
           row.Text(kPlanGraphColumn + 2), row.Text(kPlanGraphColumn + 3)}};
}

// Targets ----------------------------------------------------------------------------------------

StatusOr<bool> UpsertTarget(SqliteConnection& c, const v1::HardwareProfile& profile,
                            int64_t now_ms) {
  const v1::TargetFingerprint& fp = profile.target();
  FUSOR_RETURN_IF_ERROR(
      c.Execute(UpsertTargetSql({"?", "?", "?", "?", "?", "?", "?", "?", "?", "?"}),
                {fp.id(), fp.cpu_model(), fp.isa(), int64_t{fp.cores()}, fp.onednn_version(),
                 profile.cost_model_version(), profile.calibrated_unix_ms(),
                 Blob{fp.SerializeAsString()}, Blob{profile.SerializeAsString()}, now_ms}));
  return c.changes() > 0;
}

StatusOr<std::optional<v1::HardwareProfile>> FindTarget(SqliteConnection& c,
                                                        std::string_view target_id) {
  FUSOR_ASSIGN_OR_RETURN(StatementLease row,
                         c.Prepare("SELECT profile FROM targets WHERE target_id = ?"));
  FUSOR_RETURN_IF_ERROR(row->Bind({std::string(target_id)}));
  FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
  if (!found) return std::optional<v1::HardwareProfile>();
  FUSOR_ASSIGN_OR_RETURN(v1::HardwareProfile profile,
                         ParseColumn<v1::HardwareProfile>(*row, 0, "target profile", c.path()));
  return std::optional<v1::HardwareProfile>(std::move(profile));
}

StatusOr<std::vector<v1::HardwareProfile>> AllTargets(SqliteConnection& c) {
  FUSOR_ASSIGN_OR_RETURN(StatementLease row,
                         c.Prepare("SELECT profile FROM targets ORDER BY target_id"));
  std::vector<v1::HardwareProfile> profiles;
  for (;;) {
    FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
    if (!found) return profiles;
    FUSOR_ASSIGN_OR_RETURN(v1::HardwareProfile profile,
                           ParseColumn<v1::HardwareProfile>(*row, 0, "target profile", c.path()));
    profiles.push_back(std::move(profile));
  }
}

// Graphs -----------------------------------------------------------------------------------------

StatusOr<bool> InsertGraphIfMissing(SqliteConnection& c, std::string_view graph_hash,
                                    const v1::Graph& graph, int64_t now_ms) {
  FUSOR_RETURN_IF_ERROR(
      c.Execute("INSERT INTO graphs (graph_hash, model_name, node_count, graph, created_unix_ms) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (graph_hash) DO NOTHING",
                {std::string(graph_hash), graph.model_name(), int64_t{graph.nodes_size()},
                 Blob{graph.SerializeAsString()}, now_ms}));
  return c.changes() > 0;
}

StatusOr<std::optional<v1::Graph>> FindGraph(SqliteConnection& c, std::string_view graph_hash) {
  FUSOR_ASSIGN_OR_RETURN(StatementLease row,
                         c.Prepare("SELECT graph FROM graphs WHERE graph_hash = ?"));
  FUSOR_RETURN_IF_ERROR(row->Bind({std::string(graph_hash)}));
  FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
  if (!found) return std::optional<v1::Graph>();
  FUSOR_ASSIGN_OR_RETURN(v1::Graph graph, ParseColumn<v1::Graph>(*row, 0, "graph", c.path()));
  return std::optional<v1::Graph>(std::move(graph));
}

StatusOr<int64_t> DeleteOrphanGraphs(SqliteConnection& c) {
  FUSOR_RETURN_IF_ERROR(
      c.Execute("DELETE FROM graphs WHERE NOT EXISTS "
                "(SELECT 1 FROM plans p WHERE p.graph_hash = graphs.graph_hash)"));
  return c.changes();
}

// Plans ------------------------------------------------------------------------------------------

StatusOr<std::optional<PlanRow>> FindPlanRow(SqliteConnection& c, const PlanKey& key) {
  FUSOR_ASSIGN_OR_RETURN(
      StatementLease row,
      c.Prepare("SELECT plan_id, plan FROM plans WHERE graph_hash = ? AND target_id = ? AND "
                "cost_model_version = ? AND search_options = ?"));
  FUSOR_RETURN_IF_ERROR(
      row->Bind({key.graph_hash, key.target_id, key.cost_model_version, key.search_options}));
  FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
  if (!found) return std::optional<PlanRow>();
  PlanRow plan_row{row->Int(0), {}};
  FUSOR_ASSIGN_OR_RETURN(plan_row.plan, ParseStoredPlan(row->Bytes(1), c.path()));
  return std::optional<PlanRow>(std::move(plan_row));
}

StatusOr<int64_t> InsertPlan(SqliteConnection& c, const v1::Plan& plan) {
  FUSOR_RETURN_IF_ERROR(c.Execute(
      "INSERT INTO plans (graph_hash, target_id, cost_model_version, search_options, plan, "
      "predicted_ns, measured_ns, unfused_predicted_ns, unfused_measured_ns, speedup, "
      "group_count, peak_memory_bytes, created_unix_ms) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      {plan.graph_hash(), plan.target_id(), plan.cost_model_version(), plan.search_options(),
       Blob{plan.SerializeAsString()}, plan.predicted_ns(), OptionalReal(plan.measured_ns()),
       OptionalReal(plan.unfused_predicted_ns()), OptionalReal(plan.unfused_measured_ns()),
       OptionalReal(SpeedUp(plan)), int64_t{plan.groups_size()}, plan.peak_memory_bytes(),
       plan.created_unix_ms()}));
  return c.last_insert_rowid();
}

Status ReplacePlan(SqliteConnection& c, int64_t plan_id, const v1::Plan& plan) {
  FUSOR_RETURN_IF_ERROR(c.Execute("DELETE FROM measurements WHERE plan_id = ?", {plan_id}));
  return c.Execute(
      "UPDATE plans SET plan = ?, predicted_ns = ?, measured_ns = ?, unfused_predicted_ns = ?, "
      "unfused_measured_ns = ?, speedup = ?, group_count = ?, peak_memory_bytes = ?, "
      "created_unix_ms = ? WHERE plan_id = ?",
      {Blob{plan.SerializeAsString()}, plan.predicted_ns(), OptionalReal(plan.measured_ns()),
       OptionalReal(plan.unfused_predicted_ns()), OptionalReal(plan.unfused_measured_ns()),
       OptionalReal(SpeedUp(plan)), int64_t{plan.groups_size()}, plan.peak_memory_bytes(),
       plan.created_unix_ms(), plan_id});
}

Status DeletePlanRow(SqliteConnection& c, int64_t plan_id) {
  return c.Execute("DELETE FROM plans WHERE plan_id = ?", {plan_id});
}

// Measurements -----------------------------------------------------------------------------------

Status InsertMeasurements(SqliteConnection& c, int64_t plan_id,
                          std::span<const Measurement> measurements, int64_t default_unix_ms) {
  for (const Measurement& m : measurements) {
    SampleSummary summary = Summarize(m.samples_ns);
    SqlValue group = m.group_id ? SqlValue(int64_t{*m.group_id}) : SqlValue(std::monostate{});
    int64_t at = m.measured_unix_ms != 0 ? m.measured_unix_ms : default_unix_ms;
    SqlValue agent = m.agent_id.empty() ? SqlValue(std::monostate{}) : SqlValue(m.agent_id);
    FUSOR_RETURN_IF_ERROR(c.Execute(
        "INSERT INTO measurements (plan_id, group_id, samples, sample_count, median_ns, spread, "
        "measured_unix_ms, agent_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        {plan_id, group, SamplesJson(m.samples_ns), static_cast<int64_t>(m.samples_ns.size()),
         summary.median_ns, summary.spread, at, agent}));
  }
  return Status::Ok();
}

StatusOr<std::vector<Measurement>> ReadMeasurements(SqliteConnection& c, int64_t plan_id,
                                                    bool with_agents) {
  FUSOR_ASSIGN_OR_RETURN(
      StatementLease row,
      c.Prepare(fmt::format(
          "SELECT group_id, samples, median_ns, spread, measured_unix_ms, {} FROM measurements "
          "WHERE plan_id = ? ORDER BY group_id IS NOT NULL, group_id, measurement_id",
          with_agents ? "agent_id" : "NULL")));
  FUSOR_RETURN_IF_ERROR(row->Bind({plan_id}));
  std::vector<Measurement> measurements;
  for (;;) {
    FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
    if (!found) return measurements;
    Measurement m;
    if (!row->IsNull(0)) m.group_id = static_cast<int32_t>(row->Int(0));
    FUSOR_ASSIGN_OR_RETURN(m.samples_ns, ParseSamplesJson(row->Text(1), c.path()));
    m.median_ns = row->Double(2);
    m.spread = row->Double(3);
    m.measured_unix_ms = row->Int(4);
    if (!row->IsNull(5)) m.agent_id = row->Text(5);
    measurements.push_back(std::move(m));
  }
}

// Tuning history ---------------------------------------------------------------------------------

Status AppendHistory(SqliteConnection& c, const HistoryEvent& e) {
  auto text_or_null = [](const std::string& s) -> SqlValue {
    if (s.empty()) return std::monostate{};
    return s;
  };
  bool plan_event = !e.key.graph_hash.empty();
  return c.Execute(
      "INSERT INTO tuning_history (at_unix_ms, event, graph_hash, target_id, cost_model_version, "
      "search_options, predicted_ns, measured_ns, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
      {e.at_unix_ms, e.event, text_or_null(e.key.graph_hash), e.key.target_id,
       plan_event ? SqlValue(e.key.cost_model_version) : SqlValue(std::monostate{}),
       plan_event ? SqlValue(e.key.search_options) : SqlValue(std::monostate{}),
       OptionalReal(e.predicted_ns), OptionalReal(e.measured_ns), e.detail});
}

StatusOr<std::vector<HistoryEvent>> ReadHistory(SqliteConnection& c, const HistoryQuery& query) {
  FUSOR_ASSIGN_OR_RETURN(
      StatementLease row,
      c.Prepare("SELECT at_unix_ms, event, graph_hash, target_id, cost_model_version, "
                "search_options, predicted_ns, measured_ns, detail FROM tuning_history "
                "WHERE (?1 = '' OR substr(graph_hash, 1, length(?1)) = ?1) "
                "AND (?2 = '' OR target_id = ?2) ORDER BY event_id DESC LIMIT ?3"));
  FUSOR_RETURN_IF_ERROR(
      row->Bind({query.graph_hash_prefix, query.target_id, int64_t{query.limit}}));
  std::vector<HistoryEvent> events;
  for (;;) {
    FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
    if (!found) return events;
    HistoryEvent e;
    e.at_unix_ms = row->Int(0);
    e.event = row->Text(1);
    e.key = {row->Text(2), row->Text(3), row->Text(4), row->Text(5)};
    e.predicted_ns = row->Double(6);
    e.measured_ns = row->Double(7);
    e.detail = row->Text(8);
    e.database = c.path();
    events.push_back(std::move(e));
  }
}

// Calibration log -------------------------------------------------------------------------------

StatusOr<int64_t> InsertCalibrationRun(SqliteConnection& c, const CalibrationRun& run,
                                       int64_t now_ms) {
  FUSOR_ASSIGN_OR_RETURN(int64_t last,
                         c.QueryInt("SELECT coalesce(max(run_id), 0) FROM calibration_samples"));
  int64_t at = run.run_unix_ms != 0 ? run.run_unix_ms : now_ms;
  for (const CalibrationSampleRow& sample : run.samples) {
    FUSOR_RETURN_IF_ERROR(c.Execute(
        "INSERT INTO calibration_samples (target_id, cost_model_version, run_id, run_unix_ms, "
        "benchmark, features, measured_ns, cv) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        {run.target_id, run.cost_model_version, last + 1, at, sample.benchmark,
         sample.features_json, sample.measured_ns, sample.cv}));
  }
  return last + 1;
}

StatusOr<std::vector<CalibrationRun>> ReadCalibrationRuns(SqliteConnection& c,
                                                          const CalibrationRunQuery& query) {
  FUSOR_ASSIGN_OR_RETURN(
      StatementLease row,
      c.Prepare("SELECT run_id, run_unix_ms, sample_id, benchmark, features, measured_ns, cv "
                "FROM calibration_samples WHERE target_id = ?1 AND cost_model_version = ?2 "
                "AND run_id IN (SELECT DISTINCT run_id FROM calibration_samples "
                "WHERE target_id = ?1 AND cost_model_version = ?2 ORDER BY run_id DESC LIMIT ?3) "
                "ORDER BY run_id DESC, sample_id"));
  FUSOR_RETURN_IF_ERROR(
      row->Bind({query.target_id, query.cost_model_version, int64_t{query.max_runs}}));
  std::vector<CalibrationRun> runs;
  for (;;) {
    FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
    if (!found) return runs;
    if (runs.empty() || runs.back().run_id != row->Int(0)) {
      runs.push_back(
          {row->Int(0), query.target_id, query.cost_model_version, row->Int(1), {}, c.path()});
    }
    runs.back().samples.push_back(
        {row->Int(2), row->Text(3), row->Text(4), row->Double(5), row->Double(6)});
  }
}

Status CountCalibrationLog(SqliteConnection& c, DatabaseStats& stats) {
  FUSOR_ASSIGN_OR_RETURN(stats.calibration_samples,
                         c.QueryInt("SELECT count(*) FROM calibration_samples"));
  FUSOR_ASSIGN_OR_RETURN(stats.calibration_runs,
                         c.QueryInt("SELECT count(DISTINCT run_id) FROM calibration_samples"));
  FUSOR_ASSIGN_OR_RETURN(
      StatementLease row,
      c.Prepare("SELECT target_id, count(*) FROM calibration_samples GROUP BY target_id"));
  for (;;) {
    FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
    if (!found) return Status::Ok();
    for (TargetStats& t : stats.per_target) {
      if (t.target_id == row->Text(0)) t.calibration_samples = row->Int(1);
    }
  }
}

// Learned residual ------------------------------------------------------------------------------

Status InsertResidualSamples(SqliteConnection& c, std::span<const ResidualSampleRow> rows,
                             int64_t now_ms) {
  for (const ResidualSampleRow& r : rows) {
    FUSOR_RETURN_IF_ERROR(c.Execute(
        "INSERT INTO residual_samples (target_id, cost_model_version, graph_hash, source, "
        "features_version, features, measured_ns, measured_unix_ms) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        {r.target_id, r.cost_model_version, r.graph_hash, r.source, r.features_version,
         r.features_json, r.measured_ns, r.measured_unix_ms != 0 ? r.measured_unix_ms : now_ms}));
  }
  return Status::Ok();
}

StatusOr<std::vector<ResidualSampleRow>> ReadResidualSamples(SqliteConnection& c,
                                                             const ResidualSampleQuery& query) {
  FUSOR_ASSIGN_OR_RETURN(
      StatementLease row,
      c.Prepare("SELECT * FROM (SELECT sample_id, graph_hash, source, features_version, features, "
                "measured_ns, measured_unix_ms FROM residual_samples WHERE target_id = ?1 AND "
                "cost_model_version = ?2 AND sample_id > ?3 ORDER BY sample_id DESC LIMIT ?4) "
                "ORDER BY sample_id"));
  FUSOR_RETURN_IF_ERROR(row->Bind({query.target_id, query.cost_model_version, query.after_sample_id,
                                   int64_t{query.max_samples}}));
  std::vector<ResidualSampleRow> rows;
  for (;;) {
    FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
    if (!found) return rows;
    rows.push_back({row->Int(0), query.target_id, query.cost_model_version, row->Text(1),
                    row->Text(2), row->Text(3), row->Text(4), row->Double(5), row->Int(6)});
  }
}

Status UpsertResidual(SqliteConnection& c, const StoredResidual& r, int64_t now_ms) {
  return c.Execute(
      "INSERT OR REPLACE INTO residuals (target_id, cost_model_version, residual, "
      "training_samples, last_sample_id, fitted_unix_ms) VALUES (?, ?, ?, ?, ?, ?)",
      {r.target_id, r.cost_model_version, r.residual_json, r.training_samples, r.last_sample_id,
       r.fitted_unix_ms != 0 ? r.fitted_unix_ms : now_ms});
}

StatusOr<std::optional<StoredResidual>> FindResidual(SqliteConnection& c,
                                                     std::string_view target_id) {
  FUSOR_ASSIGN_OR_RETURN(
      StatementLease row,
      c.Prepare("SELECT cost_model_version, residual, training_samples, last_sample_id, "
                "fitted_unix_ms FROM residuals WHERE target_id = ?"));
  FUSOR_RETURN_IF_ERROR(row->Bind({std::string(target_id)}));
  FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
  if (!found) return std::optional<StoredResidual>();
  return std::optional<StoredResidual>(StoredResidual{std::string(target_id), row->Text(0),
                                                      row->Text(1), row->Int(2), row->Int(3),
                                                      row->Int(4), c.path()});
}

}  // namespace fusor::db::tables

namespace fusor::db::tables {

// Measurement agents and jobs ------------------------------------------------------------------

Status UpsertAgent(SqliteConnection& c, const AgentRecord& agent, int64_t now_ms) {
  return c.Execute(
      "INSERT INTO agents (agent_id, target_id, name, registered_unix_ms, last_seen_unix_ms) "
      "VALUES (?, ?, ?, ?, ?) ON CONFLICT (agent_id) DO UPDATE SET target_id = "
      "excluded.target_id, name = excluded.name, registered_unix_ms = "
      "excluded.registered_unix_ms, last_seen_unix_ms = excluded.last_seen_unix_ms",
      {agent.agent_id, agent.target_id, agent.name, now_ms, now_ms});
}

StatusOr<std::optional<AgentRecord>> TouchAgent(SqliteConnection& c, std::string_view agent_id,
                                                int64_t now_ms) {
  FUSOR_RETURN_IF_ERROR(c.Execute("UPDATE agents SET last_seen_unix_ms = ? WHERE agent_id = ?",
                                  {now_ms, std::string(agent_id)}));
  FUSOR_ASSIGN_OR_RETURN(
      StatementLease row,
      c.Prepare("SELECT agent_id, target_id, name, registered_unix_ms, last_seen_unix_ms "
                "FROM agents WHERE agent_id = ?"));
  FUSOR_RETURN_IF_ERROR(row->Bind({std::string(agent_id)}));
  FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
  if (!found) return std::optional<AgentRecord>();
  return std::optional<AgentRecord>(
      AgentRecord{row->Text(0), row->Text(1), row->Text(2), row->Int(3), row->Int(4)});
}

StatusOr<int64_t> CountLiveAgents(SqliteConnection& c, std::string_view target_id,
                                  int64_t seen_after_ms) {
  FUSOR_ASSIGN_OR_RETURN(
      StatementLease row,
      c.Prepare("SELECT count(*) FROM agents WHERE target_id = ? AND last_seen_unix_ms >= ?"));
  FUSOR_RETURN_IF_ERROR(row->Bind({std::string(target_id), seen_after_ms}));
  FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
  return found ? row->Int(0) : 0;
}

StatusOr<int64_t> InsertJob(SqliteConnection& c, const v1::MeasurementJob& job, int64_t now_ms) {
  FUSOR_RETURN_IF_ERROR(
      c.Execute("INSERT INTO measurement_jobs (target_id, graph_hash, state, created_unix_ms, job) "
                "VALUES (?, ?, ?, ?, ?)",
                {job.target_id(), job.graph_hash(), std::string(kJobQueued), now_ms,
                 Blob{job.SerializeAsString()}}));
  return c.last_insert_rowid();
}

StatusOr<std::optional<int64_t>> LeasableJob(SqliteConnection& c, std::string_view target_id,
                                             int64_t now_ms) {
  FUSOR_ASSIGN_OR_RETURN(StatementLease row,
                         c.Prepare("SELECT job_id FROM measurement_jobs WHERE target_id = ? AND " +
                                   LeasableJobSql("?") + " ORDER BY job_id LIMIT 1"));
  FUSOR_RETURN_IF_ERROR(row->Bind({std::string(target_id), now_ms}));
  FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
  if (!found) return std::optional<int64_t>();
  return std::optional<int64_t>(row->Int(0));
}

Status SetJobLease(SqliteConnection& c, int64_t job_id, std::string_view agent_id,
                   int64_t expires_ms) {
  return c.Execute(
      "UPDATE measurement_jobs SET state = ?, agent_id = ?, lease = lease + 1, "
      "lease_expires_unix_ms = ? WHERE job_id = ?",
      {std::string(kJobLeased), std::string(agent_id), expires_ms, job_id});
}

Status ExtendJobLease(SqliteConnection& c, int64_t job_id, int64_t expires_ms) {
  return c.Execute("UPDATE measurement_jobs SET lease_expires_unix_ms = ? WHERE job_id = ?",
                   {expires_ms, job_id});
}

Status EndJob(SqliteConnection& c, int64_t job_id, std::string_view state,
              const v1::MeasurementResult* result, int64_t now_ms) {
  SqlValue blob = result ? SqlValue(Blob{result->SerializeAsString()}) : SqlValue(std::monostate{});
  return c.Execute(
      "UPDATE measurement_jobs SET state = ?, result = ?, finished_unix_ms = ? WHERE job_id = ?",
      {std::string(state), blob, now_ms, job_id});
}

StatusOr<int64_t> DeleteFinishedJobs(SqliteConnection& c, int64_t finished_before_ms) {
  FUSOR_RETURN_IF_ERROR(
      c.Execute("DELETE FROM measurement_jobs WHERE state IN (?, ?) AND finished_unix_ms < ?",
                {std::string(kJobDone), std::string(kJobCancelled), finished_before_ms}));
  return c.changes();
}

namespace {

constexpr std::string_view kSelectJobs =
    "SELECT job_id, target_id, state, agent_id, lease, lease_expires_unix_ms, created_unix_ms, "
    "finished_unix_ms, job, result FROM measurement_jobs";

StatusOr<MeasurementJobRow> JobOfRow(Statement& row, const std::string& path) {
  MeasurementJobRow j;
  j.job_id = row.Int(0);
  j.target_id = row.Text(1);
  j.state = row.Text(2);
  j.agent_id = row.IsNull(3) ? "" : row.Text(3);
  j.lease = row.Int(4);
  j.lease_expires_unix_ms = row.Int(5);
  j.created_unix_ms = row.Int(6);
  j.finished_unix_ms = row.IsNull(7) ? 0 : row.Int(7);
  FUSOR_ASSIGN_OR_RETURN(j.job, ParseColumn<v1::MeasurementJob>(row, 8, "measurement job", path));
  if (!row.IsNull(9)) {
    FUSOR_ASSIGN_OR_RETURN(j.result,
                           ParseColumn<v1::MeasurementResult>(row, 9, "measurement result", path));
  }
  FillJobLease(j);
  return j;
}

}  // namespace

StatusOr<std::optional<MeasurementJobRow>> FindJob(SqliteConnection& c, int64_t job_id) {
  FUSOR_ASSIGN_OR_RETURN(StatementLease row,
                         c.Prepare(std::string(kSelectJobs) + " WHERE job_id = ?"));
  FUSOR_RETURN_IF_ERROR(row->Bind({job_id}));
  FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
  if (!found) return std::optional<MeasurementJobRow>();
  FUSOR_ASSIGN_OR_RETURN(MeasurementJobRow j, JobOfRow(*row, c.path()));
  return std::optional<MeasurementJobRow>(std::move(j));
}

StatusOr<std::vector<AgentRecord>> ReadAgents(SqliteConnection& c) {
  FUSOR_ASSIGN_OR_RETURN(
      StatementLease row,
      c.Prepare("SELECT agent_id, target_id, name, registered_unix_ms, last_seen_unix_ms "
                "FROM agents ORDER BY last_seen_unix_ms DESC, agent_id"));
  std::vector<AgentRecord> agents;
  for (;;) {
    FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
    if (!found) return agents;
    agents.push_back({row->Text(0), row->Text(1), row->Text(2), row->Int(3), row->Int(4)});
  }
}

StatusOr<std::vector<MeasurementJobRow>> ReadJobs(SqliteConnection& c, bool include_finished) {
  FUSOR_ASSIGN_OR_RETURN(
      StatementLease row,
      c.Prepare(std::string(kSelectJobs) +
                (include_finished ? "" : " WHERE state IN ('queued', 'leased')") +
                " ORDER BY job_id"));
  std::vector<MeasurementJobRow> jobs;
  for (;;) {
    FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
    if (!found) return jobs;
    FUSOR_ASSIGN_OR_RETURN(jobs.emplace_back(), JobOfRow(*row, c.path()));
  }
}

}  // namespace fusor::db::tables
