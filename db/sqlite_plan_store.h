// SqlitePlanStore: the tuning database (TuningDatabase: plans, calibration log, measurement
// queue) over one SQLite file (schema in schema.cc, docs/database.md). One concern a file:
// sqlite_plan_store.cc (opening the file, the connection pool, write transactions),
// sqlite_plans.cc (PlanStore, and Merge), sqlite_plan_key_lock.cc (LockPlanKey),
// sqlite_calibration_log.cc (CalibrationLog) and sqlite_job_queue.cc (MeasurementQueue); the rows
// themselves are tables.cc's.
//
// Open checks what the file is before anything else (see PrepareSchema): a damaged or non-SQLite
// file, a newer schema, a read-only file opened for writing, or a snapshot opened for writing each
// fail with an error naming the file. A writable store uses WAL; every logical write is one
// BEGIN IMMEDIATE transaction, so a crash at any point leaves each write either whole or absent.
//
// Thread safety: every method may be called from many threads at once. Each call borrows a
// connection from a small pool (one thread per connection at a time), so reads run in parallel;
// writes from this process queue on a mutex, and writes from other processes wait on SQLite's lock
// with retries, so SQLITE_BUSY never reaches a caller. Many processes may open the same file. A
// store must not be used in a child after fork(): open a new one there.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "db/schema.h"
#include "db/sqlite_connection.h"
#include "db/tuning_database.h"

namespace fusor::db {

struct SqliteOpenOptions {
  // Queries only: the file must exist, nothing is written (not even a migration), and the file may
  // be read-only. Writes fail with FailedPrecondition.
  bool read_only = false;
};

// What export and import move between databases.
struct PlanBundle {
  struct Entry {
    v1::Plan plan;
    std::vector<Measurement> measurements;
  };
  std::vector<v1::HardwareProfile> targets;
  std::vector<std::pair<std::string, v1::Graph>> graphs;  // (canonical hash, graph).
  std::vector<Entry> plans;
};

struct MergeCounts {
  int64_t plans_added = 0;
  int64_t plans_replaced = 0;  // An older plan under the same key gave way.
  int64_t plans_kept = 0;      // The stored plan was newer (or as new and better): kept.
  int64_t graphs_added = 0;
  int64_t targets_updated = 0;
};

class SqlitePlanStore final : public TuningDatabase {
 public:
  // Opens (creating and migrating when writable) the database at path.
  static StatusOr<std::unique_ptr<SqlitePlanStore>> Open(const std::string& path,
                                                         SqliteOpenOptions options);
  ~SqlitePlanStore() override;

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
  // An open-file-description lock on one byte (the key's lock id) of the file PATH-tunelock beside
  // the database, so fusord processes sharing one file tune a key once; the kernel releases it
  // when its holder closes it or dies. FailedPrecondition on a read-only store.
  StatusOr<std::unique_ptr<PlanKeyLock>> LockPlanKey(const PlanKey& key,
                                                     const std::atomic<bool>* cancelled) override;
  // Measurement agents and jobs. A lease is taken in one BEGIN IMMEDIATE transaction, which
  // holds the file's write lock, so two leasers (threads or processes) never get one job.
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

  // Merges a bundle in one transaction, without duplicates: a target keeps the newer calibration,
  // a graph is added once, and a plan under an existing key replaces the stored one only when
  // IncomingPlanWins (newer; on a tie, better). Measurements travel with the winning plan. When
  // record_history, each plan taken is logged as 'imported' with source as detail.
  StatusOr<MergeCounts> Merge(const PlanBundle& bundle, const std::string& source,
                              bool record_history);

  const std::string& path() const { return path_; }
  bool read_only() const { return options_.read_only; }
  const SchemaInfo& schema() const { return schema_; }

 private:
  // A connection lent to one call; back to the pool when the lease ends.
  class ConnectionLease {
   public:
    ConnectionLease(SqlitePlanStore* store, std::unique_ptr<SqliteConnection> connection)
        : store_(store), connection_(std::move(connection)) {}
    ConnectionLease(ConnectionLease&& other) noexcept = default;
    ConnectionLease& operator=(ConnectionLease&&) = delete;
    ~ConnectionLease() {
      if (connection_) store_->ReturnConnection(std::move(connection_));
    }
    SqliteConnection& operator*() const { return *connection_; }
    SqliteConnection* operator->() const { return connection_.get(); }

   private:
    SqlitePlanStore* store_;
    std::unique_ptr<SqliteConnection> connection_;
  };

  SqlitePlanStore(std::string path, SqliteOpenOptions options, SchemaInfo schema,
                  std::unique_ptr<SqliteConnection> first);

  StatusOr<ConnectionLease> Connect();
  void ReturnConnection(std::unique_ptr<SqliteConnection> connection);
  // Runs body in one write transaction; errors get what as context.
  Status Write(std::string_view what, const std::function<Status(SqliteConnection&)>& body);
  // FailedPrecondition naming the target when it is not stored.
  Status RequireTarget(SqliteConnection& c, std::string_view target_id);
  Status PutPlanLocked(SqliteConnection& c, const v1::Plan& plan, const v1::Graph& graph,
                       std::span<const Measurement> measurements);
  Status MergePlanLocked(SqliteConnection& c, const PlanBundle::Entry& entry,
                         const std::string& source, bool record_history, MergeCounts& counts);
  StatusOr<std::optional<StoredPlan>> ReadOnePlan(SqliteConnection& c, std::string_view sql,
                                                  const std::vector<SqlValue>& values,
                                                  std::string_view current_cost_model_version);
  StatusOr<DatabaseStats> StatsLocked(SqliteConnection& c, std::string_view current_cmv);
  // The job under its row, held by the lease (CheckHoldsLease), inside a write transaction.
  StatusOr<MeasurementJobRow> HeldJob(SqliteConnection& c, const JobLease& lease);

  const std::string path_;
  const SqliteOpenOptions options_;
  const SchemaInfo schema_;

  static constexpr size_t kMaxIdleConnections = 8;
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<SqliteConnection>> idle_;  // Guarded by pool_mu_.

  // Serialises this process's write transactions, so its threads queue here instead of polling
  // SQLite's file lock. Guards no data: SQLite's lock protects the file across processes.
  std::mutex write_mu_;
};

}  // namespace fusor::db
