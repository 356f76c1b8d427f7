#include "server/timed_database.h"

#include "server/service_metrics.h"

namespace fusor {
namespace {

// Runs `call` and observes its duration under `operation`.
template <typename Call>
auto Timed(const char* operation, Call call) {
  ScopedTimer timer(Metrics().db_seconds.With({operation}));
  return call();
}

}  // namespace

TimedPlanStore::TimedPlanStore(db::PlanStore& store) : store_(store) {}

Status TimedPlanStore::PutTarget(const v1::HardwareProfile& profile) {
  return Timed("put_target", [&] { return store_.PutTarget(profile); });
}
StatusOr<v1::HardwareProfile> TimedPlanStore::GetTarget(std::string_view target_id) {
  return Timed("get_target", [&] { return store_.GetTarget(target_id); });
}
StatusOr<std::vector<v1::HardwareProfile>> TimedPlanStore::ListTargets() {
  return Timed("list_targets", [&] { return store_.ListTargets(); });
}
StatusOr<v1::Graph> TimedPlanStore::GetGraph(std::string_view graph_hash) {
  return Timed("get_graph", [&] { return store_.GetGraph(graph_hash); });
}
Status TimedPlanStore::PutPlan(const v1::Plan& plan, const v1::Graph& graph,
                               std::span<const db::Measurement> measurements) {
  return Timed("put_plan", [&] { return store_.PutPlan(plan, graph, measurements); });
}
StatusOr<db::StoredPlan> TimedPlanStore::GetPlan(const db::PlanKey& key,
                                                 std::string_view current_cost_model_version) {
  return Timed("get_plan", [&] { return store_.GetPlan(key, current_cost_model_version); });
}
StatusOr<db::StoredPlan> TimedPlanStore::BestPlan(std::string_view graph_hash,
                                                  std::string_view target_id,
                                                  std::string_view current_cost_model_version) {
  return Timed("best_plan",
               [&] { return store_.BestPlan(graph_hash, target_id, current_cost_model_version); });
}
StatusOr<db::PlanPage> TimedPlanStore::QueryPlans(const db::PlanQuery& query) {
  return Timed("query_plans", [&] { return store_.QueryPlans(query); });
}
StatusOr<std::vector<db::Measurement>> TimedPlanStore::GetMeasurements(const db::PlanKey& key) {
  return Timed("get_measurements", [&] { return store_.GetMeasurements(key); });
}
StatusOr<std::vector<db::HistoryEvent>> TimedPlanStore::History(const db::HistoryQuery& query) {
  return Timed("history", [&] { return store_.History(query); });
}
Status TimedPlanStore::DeletePlan(const db::PlanKey& key) {
  return Timed("delete_plan", [&] { return store_.DeletePlan(key); });
}
StatusOr<int64_t> TimedPlanStore::ExpirePlans(const db::ExpireRule& rule) {
  return Timed("expire_plans", [&] { return store_.ExpirePlans(rule); });
}
StatusOr<std::vector<db::DatabaseStats>> TimedPlanStore::Stats(
    std::string_view current_cost_model_version) {
  return Timed("stats", [&] { return store_.Stats(current_cost_model_version); });
}
StatusOr<std::unique_ptr<db::PlanKeyLock>> TimedPlanStore::LockPlanKey(
    const db::PlanKey& key, const std::atomic<bool>* cancelled) {
  return store_.LockPlanKey(key, cancelled);
}

TimedCalibrationLog::TimedCalibrationLog(db::CalibrationLog& log) : log_(log) {}

Status TimedCalibrationLog::AppendResidualSamples(std::span<const db::ResidualSampleRow> rows) {
  return Timed("append_residual_samples", [&] { return log_.AppendResidualSamples(rows); });
}
StatusOr<std::vector<db::ResidualSampleRow>> TimedCalibrationLog::ResidualSamples(
    const db::ResidualSampleQuery& query) {
  return Timed("residual_samples", [&] { return log_.ResidualSamples(query); });
}
Status TimedCalibrationLog::PutResidual(const db::StoredResidual& residual) {
  return Timed("put_residual", [&] { return log_.PutResidual(residual); });
}
StatusOr<db::StoredResidual> TimedCalibrationLog::GetResidual(std::string_view target_id) {
  return Timed("get_residual", [&] { return log_.GetResidual(target_id); });
}
StatusOr<int64_t> TimedCalibrationLog::AppendCalibrationRun(const db::CalibrationRun& run) {
  return Timed("append_calibration_run", [&] { return log_.AppendCalibrationRun(run); });
}
StatusOr<std::vector<db::CalibrationRun>> TimedCalibrationLog::CalibrationRuns(
    const db::CalibrationRunQuery& query) {
  return Timed("calibration_runs", [&] { return log_.CalibrationRuns(query); });
}

TimedMeasurementQueue::TimedMeasurementQueue(db::MeasurementQueue& queue) : queue_(queue) {}

Status TimedMeasurementQueue::PutAgent(const db::AgentRecord& agent) {
  return Timed("put_agent", [&] { return queue_.PutAgent(agent); });
}
StatusOr<db::AgentRecord> TimedMeasurementQueue::TouchAgent(std::string_view agent_id) {
  return Timed("touch_agent", [&] { return queue_.TouchAgent(agent_id); });
}
StatusOr<int64_t> TimedMeasurementQueue::CountLiveAgents(std::string_view target_id,
                                                         int64_t live_ms) {
  return Timed("count_live_agents", [&] { return queue_.CountLiveAgents(target_id, live_ms); });
}
StatusOr<int64_t> TimedMeasurementQueue::EnqueueJob(const v1::MeasurementJob& job) {
  return Timed("enqueue_job", [&] { return queue_.EnqueueJob(job); });
}
StatusOr<std::optional<db::MeasurementJobRow>> TimedMeasurementQueue::LeaseJob(
    std::string_view target_id, std::string_view agent_id, int64_t lease_ms) {
  return Timed("lease_job", [&] { return queue_.LeaseJob(target_id, agent_id, lease_ms); });
}
StatusOr<int64_t> TimedMeasurementQueue::RenewLease(const db::JobLease& lease, int64_t lease_ms) {
  return Timed("renew_lease", [&] { return queue_.RenewLease(lease, lease_ms); });
}
Status TimedMeasurementQueue::FinishJob(const db::JobLease& lease,
                                        const v1::MeasurementResult& result) {
  return Timed("finish_job", [&] { return queue_.FinishJob(lease, result); });
}
Status TimedMeasurementQueue::CancelJob(int64_t job_id) {
  return Timed("cancel_job", [&] { return queue_.CancelJob(job_id); });
}
StatusOr<int64_t> TimedMeasurementQueue::PruneJobs(int64_t older_than_ms) {
  return Timed("prune_jobs", [&] { return queue_.PruneJobs(older_than_ms); });
}
StatusOr<db::MeasurementJobRow> TimedMeasurementQueue::GetJob(int64_t job_id) {
  return Timed("get_job", [&] { return queue_.GetJob(job_id); });
}

StatusOr<db::AgentListing> TimedMeasurementQueue::ListAgents() {
  return Timed("list_agents", [&] { return queue_.ListAgents(); });
}

StatusOr<db::JobListing> TimedMeasurementQueue::ListJobs(bool include_finished) {
  return Timed("list_jobs", [&] { return queue_.ListJobs(include_finished); });
}

}  // namespace fusor
