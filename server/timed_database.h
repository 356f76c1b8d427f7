// TimedPlanStore, TimedCalibrationLog and TimedMeasurementQueue: each forwards every call of its
// interface to the tuning database's and observes how long each took in
// fusor_db_operation_duration_seconds{operation} (server/service_metrics.h), so the database's
// latency is measured in one place whatever store is behind it.
//
// Each wraps an interface it does not own, which must outlive it. Thread-safe when the wrapped
// interface is.
#pragma once

#include <memory>

#include "db/calibration_log.h"
#include "db/measurement_queue.h"
#include "db/plan_store.h"

namespace fusor {

class TimedPlanStore final : public db::PlanStore {
 public:
  explicit TimedPlanStore(db::PlanStore& store);

  Status PutTarget(const v1::HardwareProfile& profile) override;
  StatusOr<v1::HardwareProfile> GetTarget(std::string_view target_id) override;
  StatusOr<std::vector<v1::HardwareProfile>> ListTargets() override;
  StatusOr<v1::Graph> GetGraph(std::string_view graph_hash) override;
  Status PutPlan(const v1::Plan& plan, const v1::Graph& graph,
                 std::span<const db::Measurement> measurements) override;
  StatusOr<db::StoredPlan> GetPlan(const db::PlanKey& key,
                                   std::string_view current_cost_model_version) override;
  StatusOr<db::StoredPlan> BestPlan(std::string_view graph_hash, std::string_view target_id,
                                    std::string_view current_cost_model_version) override;
  StatusOr<db::PlanPage> QueryPlans(const db::PlanQuery& query) override;
  StatusOr<std::vector<db::Measurement>> GetMeasurements(const db::PlanKey& key) override;
  StatusOr<std::vector<db::HistoryEvent>> History(const db::HistoryQuery& query) override;
  Status DeletePlan(const db::PlanKey& key) override;
  StatusOr<int64_t> ExpirePlans(const db::ExpireRule& rule) override;
  StatusOr<std::vector<db::DatabaseStats>> Stats(
      std::string_view current_cost_model_version) override;
  // Forwarded untimed: it waits for another replica's tune, not for the database.
  StatusOr<std::unique_ptr<db::PlanKeyLock>> LockPlanKey(
      const db::PlanKey& key, const std::atomic<bool>* cancelled) override;

 private:
  db::PlanStore& store_;
};

class TimedCalibrationLog final : public db::CalibrationLog {
 public:
  explicit TimedCalibrationLog(db::CalibrationLog& log);

  StatusOr<int64_t> AppendCalibrationRun(const db::CalibrationRun& run) override;
  StatusOr<std::vector<db::CalibrationRun>> CalibrationRuns(
      const db::CalibrationRunQuery& query) override;
  Status AppendResidualSamples(std::span<const db::ResidualSampleRow> rows) override;
  StatusOr<std::vector<db::ResidualSampleRow>> ResidualSamples(
      const db::ResidualSampleQuery& query) override;
  Status PutResidual(const db::StoredResidual& residual) override;
  StatusOr<db::StoredResidual> GetResidual(std::string_view target_id) override;

 private:
  db::CalibrationLog& log_;
};

class TimedMeasurementQueue final : public db::MeasurementQueue {
 public:
  explicit TimedMeasurementQueue(db::MeasurementQueue& queue);

  Status PutAgent(const db::AgentRecord& agent) override;
  StatusOr<db::AgentRecord> TouchAgent(std::string_view agent_id) override;
  StatusOr<int64_t> CountLiveAgents(std::string_view target_id, int64_t live_ms) override;
  StatusOr<int64_t> EnqueueJob(const v1::MeasurementJob& job) override;
  StatusOr<std::optional<db::MeasurementJobRow>> LeaseJob(std::string_view target_id,
                                                          std::string_view agent_id,
                                                          int64_t lease_ms) override;
  StatusOr<int64_t> RenewLease(const db::JobLease& lease, int64_t lease_ms) override;
  Status FinishJob(const db::JobLease& lease, const v1::MeasurementResult& result) override;
  Status CancelJob(int64_t job_id) override;
  StatusOr<int64_t> PruneJobs(int64_t older_than_ms) override;
  StatusOr<db::MeasurementJobRow> GetJob(int64_t job_id) override;
  StatusOr<db::AgentListing> ListAgents() override;
  StatusOr<db::JobListing> ListJobs(bool include_finished) override;

 private:
  db::MeasurementQueue& queue_;
};

}  // namespace fusor
