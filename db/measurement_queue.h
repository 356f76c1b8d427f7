// MeasurementQueue: the tuning database's measurement agents and their job queue (schema version
// 3), as the rest of Fusor sees them. A Tune for a target with a live agent enqueues its candidate
// plans as a job; an agent of the target leases it, renews the lease while it measures, and
// reports. Times are the store's clock (the database server's for PostgreSQL), so replicas on
// hosts whose clocks differ agree on which lease has expired and which agent is live. Jobs name a
// target of the PlanStore of the same database (plan_store.h).
//
// SqlitePlanStore and PostgresPlanStore implement it (TuningDatabase, tuning_database.h); stores
// no fusord serves agents through (snapshots, layered stores) do not. The value types own their
// data. Implementations are safe to call from many threads at once; results are copies the
// caller owns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "proto/tuner.pb.h"

namespace fusor::db {

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

class MeasurementQueue {
 public:
  virtual ~MeasurementQueue() = default;

  // Records an agent (registered and last seen now); an agent id registered again is replaced.
  virtual Status PutAgent(const AgentRecord& agent) = 0;
  // Marks an agent as heard from now and returns it; NotFound when never registered.
  virtual StatusOr<AgentRecord> TouchAgent(std::string_view agent_id) = 0;
  // Agents of the target heard from within the last live_ms.
  virtual StatusOr<int64_t> CountLiveAgents(std::string_view target_id, int64_t live_ms) = 0;

  // Queues a job for job.target_id() (a stored target) and returns its id.
  virtual StatusOr<int64_t> EnqueueJob(const v1::MeasurementJob& job) = 0;
  // Leases the oldest job of the target that is queued or whose lease expired to agent_id for
  // lease_ms, in one transaction that other leasers skip past (never one job to two agents);
  // nullopt when there is none. The lease number grows by one with every lease.
  virtual StatusOr<std::optional<MeasurementJobRow>> LeaseJob(std::string_view target_id,
                                                              std::string_view agent_id,
                                                              int64_t lease_ms) = 0;
  // Extends a lease the agent still holds to now + lease_ms and returns the new expiry;
  // FailedPrecondition naming the job's state and holder when it no longer holds it.
  virtual StatusOr<int64_t> RenewLease(const JobLease& lease, int64_t lease_ms) = 0;
  // Stores the result of a job the agent still holds (this very lease, expired or not, as long as
  // no other agent took the job since) and marks it done; FailedPrecondition as RenewLease.
  virtual Status FinishJob(const JobLease& lease, const v1::MeasurementResult& result) = 0;
  // Cancels a job that is not done (a done job stays done); NotFound when unknown.
  virtual Status CancelJob(int64_t job_id) = 0;
  // Deletes the jobs that finished (done or cancelled) more than older_than_ms ago and returns
  // how many; queued and leased jobs stay. InvalidArgument when older_than_ms is negative.
  virtual StatusOr<int64_t> PruneJobs(int64_t older_than_ms) = 0;
  // The job as stored; NotFound when unknown.
  virtual StatusOr<MeasurementJobRow> GetJob(int64_t job_id) = 0;
  // Every registered agent, for people and metrics (`fusor agents list`).
  virtual StatusOr<AgentListing> ListAgents() = 0;
  // The queued and leased jobs, and with include_finished the done and cancelled ones still kept
  // (PruneJobs), for people and metrics (`fusor jobs list`).
  virtual StatusOr<JobListing> ListJobs(bool include_finished) = 0;
};

}  // namespace fusor::db
