// PostgresPlanStore: the tuning database (TuningDatabase: plans, calibration log, measurement
// queue) over one PostgreSQL database (libpqxx), for build farms where several fusord replicas
// share one tuning database. Same semantics as SqlitePlanStore: the same schema versions (a 'meta'
// row holds the version; migration N runs in one transaction under an advisory lock, so replicas
// starting together migrate once), target keying, staleness (staleness.h, through store_rules.h),
// listing order and page tokens (plan_order.h), measurements, history, expiry, the calibration log
// and stats. The tables are documented in postgres_schema.cc beside the SQL; text keys use the "C"
// collation so that listing order is byte order, as in SQLite and plan_order.h.
//
// One concern a file: postgres_connection.cc (the pool and transactions), postgres_schema.cc (the
// schema and its migration), postgres_plans.cc (PlanStore), postgres_plan_key_lock.cc
// (LockPlanKey), postgres_calibration_log.cc (CalibrationLog), postgres_job_queue.cc
// (MeasurementQueue); postgres_sql.h holds what they share.
//
// Connections: a small pool, opened on demand. A server that is unreachable or goes away makes the
// call fail with Unavailable naming the server and database (never the password); the pool is
// dropped and the next call connects again, so the store recovers when the server returns. A call
// that finds its pooled connection dead before anything was committed is retried once on a new
// connection.
//
// LockPlanKey holds a PostgreSQL session advisory lock on a connection of its own, so a replica
// that dies releases it with its session.
//
// Thread safety: every method may be called from many threads at once; each call uses its own
// connection. Every logical write is one transaction.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "db/tuning_database.h"

namespace pqxx {
class dbtransaction;
}  // namespace pqxx

namespace fusor::db {

struct PostgresOpenOptions {
  // Queries only: no migration, and writes fail with FailedPrecondition.
  bool read_only = false;
};

class PostgresPlanStore final : public TuningDatabase {
 public:
  // Connects to the database at uri (a libpq connection URI, postgresql://...), checks it is a
  // Fusor tuning database (or empty) and, when writable, migrates it to kSchemaVersion.
  static StatusOr<std::unique_ptr<PostgresPlanStore>> Open(const std::string& uri,
                                                           PostgresOpenOptions options);
  ~PostgresPlanStore() override;

  Status PutTarget(const v1::HardwareProfile& profile) override;
  StatusOr<v1::HardwareProfile> GetTarget(std::string_view target_id) override;
  StatusOr<std::vector<v1::HardwareProfile>> ListTargets() override;
  StatusOr<v1::Graph> GetGraph(std::string_view graph_hash) override;
  Status PutPlan(const v1::Plan& plan, const v1::Graph& graph,
                 std::span<const Measurement> measurements) override;
  StatusOr<StoredPlan> GetPlan(const PlanKey& key,
                               std::string_view current_cost_model_version) override;
  StatusOr<StoredPlan> BestPlan(std::string_view graph_hash, std::string_view target_id,
                                std::string_view current_cost_model_version) override;
  StatusOr<PlanPage> QueryPlans(const PlanQuery& query) override;
  StatusOr<std::vector<Measurement>> GetMeasurements(const PlanKey& key) override;
  StatusOr<std::vector<HistoryEvent>> History(const HistoryQuery& query) override;
  Status DeletePlan(const PlanKey& key) override;
  StatusOr<int64_t> ExpirePlans(const ExpireRule& rule) override;
  StatusOr<int64_t> AppendCalibrationRun(const CalibrationRun& run) override;
  StatusOr<std::vector<CalibrationRun>> CalibrationRuns(const CalibrationRunQuery& query) override;
  Status AppendResidualSamples(std::span<const ResidualSampleRow> rows) override;
  StatusOr<std::vector<ResidualSampleRow>> ResidualSamples(
      const ResidualSampleQuery& query) override;
  Status PutResidual(const StoredResidual& residual) override;
  StatusOr<StoredResidual> GetResidual(std::string_view target_id) override;
  StatusOr<std::vector<DatabaseStats>> Stats(std::string_view current_cost_model_version) override;
  StatusOr<std::unique_ptr<PlanKeyLock>> LockPlanKey(const PlanKey& key,
                                                     const std::atomic<bool>* cancelled) override;
  // Measurement agents and jobs; a lease is SELECT ... FOR UPDATE SKIP LOCKED, so leasers on
  // several replicas never get one job and never wait on each other's rows.
  Status PutAgent(const AgentRecord& agent) override;
  StatusOr<AgentRecord> TouchAgent(std::string_view agent_id) override;
  StatusOr<int64_t> CountLiveAgents(std::string_view target_id, int64_t live_ms) override;
  StatusOr<int64_t> EnqueueJob(const v1::MeasurementJob& job) override;
  StatusOr<std::optional<MeasurementJobRow>> LeaseJob(std::string_view target_id,
                                                      std::string_view agent_id,
                                                      int64_t lease_ms) override;
  StatusOr<int64_t> RenewLease(const JobLease& lease, int64_t lease_ms) override;
  Status FinishJob(const JobLease& lease, const v1::MeasurementResult& result) override;
  Status CancelJob(int64_t job_id) override;
  StatusOr<int64_t> PruneJobs(int64_t older_than_ms) override;
  StatusOr<MeasurementJobRow> GetJob(int64_t job_id) override;
  StatusOr<AgentListing> ListAgents() override;
  StatusOr<JobListing> ListJobs(bool include_finished) override;

  // The location without its password, as StoredPlan::database and messages name it.
  const std::string& name() const { return name_; }
  int schema_version() const { return schema_version_; }

 private:
  using Body = std::function<Status(pqxx::dbtransaction&)>;
  struct Connection;  // A pqxx::connection (postgres_sql.h).

  PostgresPlanStore(std::string uri, std::string name, PostgresOpenOptions options);

  StatusOr<std::unique_ptr<Connection>> NewConnection();
  // Runs body in one transaction on a pooled connection (committed when write and body succeeds),
  // turning libpqxx's exceptions into a Status with `what` as context.
  Status Run(std::string_view what, bool write, const Body& body);
  Status Read(std::string_view what, const Body& body) { return Run(what, false, body); }
  Status Write(std::string_view what, const Body& body);
  Status Migrate();
  // FailedPrecondition naming the target when it is not stored.
  Status RequireTarget(pqxx::dbtransaction& txn, std::string_view target_id);

  const std::string uri_;   // With the password: never logged.
  const std::string name_;  // Redacted.
  const PostgresOpenOptions options_;
  int schema_version_ = 0;

  static constexpr size_t kMaxIdleConnections = 8;
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Connection>> idle_;  // Guarded by pool_mu_.
};

}  // namespace fusor::db
