// SqlitePlanStore's measurement agents and job queue (db/measurement_queue.h; tables.cc holds the
// rows). A lease is taken in one BEGIN IMMEDIATE transaction, which holds the file's write lock,
// so two leasers (threads or processes) never get one job.
#include <spdlog/fmt/fmt.h>

#include "db/sqlite_plan_store.h"
#include "db/store_rules.h"
#include "db/tables.h"

namespace fusor::db {

Status SqlitePlanStore::PutAgent(const AgentRecord& agent) {
  FUSOR_RETURN_IF_ERROR(ValidateAgent(agent));
  return Write(fmt::format("register agent '{}'", agent.agent_id), [&](SqliteConnection& c) {
    FUSOR_RETURN_IF_ERROR(RequireTarget(c, agent.target_id));
    return tables::UpsertAgent(c, agent, NowUnixMs());
  });
}

StatusOr<AgentRecord> SqlitePlanStore::TouchAgent(std::string_view agent_id) {
  std::optional<AgentRecord> agent;
  FUSOR_RETURN_IF_ERROR(Write("note an agent's call", [&](SqliteConnection& c) -> Status {
    FUSOR_ASSIGN_OR_RETURN(agent, tables::TouchAgent(c, agent_id, NowUnixMs()));
    return Status::Ok();
  }));
  if (!agent) {
    return Status::NotFound(fmt::format(
        "agent '{}' is not registered in database '{}'; register it (fusor agent does at start)",
        agent_id, path_));
  }
  return *std::move(agent);
}

StatusOr<int64_t> SqlitePlanStore::CountLiveAgents(std::string_view target_id, int64_t live_ms) {
  if (schema_.version < kAgentsVersion) return 0;
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  return tables::CountLiveAgents(*c, target_id, NowUnixMs() - live_ms);
}

StatusOr<int64_t> SqlitePlanStore::EnqueueJob(const v1::MeasurementJob& job) {
  FUSOR_RETURN_IF_ERROR(ValidateJob(job));
  int64_t job_id = 0;
  FUSOR_RETURN_IF_ERROR(
      Write(fmt::format("queue a measurement job for target '{}'", job.target_id()),
            [&](SqliteConnection& c) -> Status {
              FUSOR_RETURN_IF_ERROR(RequireTarget(c, job.target_id()));
              FUSOR_ASSIGN_OR_RETURN(job_id, tables::InsertJob(c, job, NowUnixMs()));
              return Status::Ok();
            }));
  return job_id;
}

StatusOr<std::optional<MeasurementJobRow>> SqlitePlanStore::LeaseJob(std::string_view target_id,
                                                                     std::string_view agent_id,
                                                                     int64_t lease_ms) {
  FUSOR_RETURN_IF_ERROR(ValidateLease({1, std::string(agent_id), 1}, lease_ms));
  std::optional<MeasurementJobRow> leased;
  FUSOR_RETURN_IF_ERROR(Write("lease a measurement job", [&](SqliteConnection& c) -> Status {
    leased.reset();
    int64_t now = NowUnixMs();
    FUSOR_ASSIGN_OR_RETURN(std::optional<int64_t> job_id, tables::LeasableJob(c, target_id, now));
    if (!job_id) return Status::Ok();
    FUSOR_RETURN_IF_ERROR(tables::SetJobLease(c, *job_id, agent_id, now + lease_ms));
    FUSOR_ASSIGN_OR_RETURN(leased, tables::FindJob(c, *job_id));
    return Status::Ok();
  }));
  return leased;
}

StatusOr<MeasurementJobRow> SqlitePlanStore::HeldJob(SqliteConnection& c, const JobLease& lease) {
  FUSOR_ASSIGN_OR_RETURN(std::optional<MeasurementJobRow> row, tables::FindJob(c, lease.job_id));
  if (!row) return UnknownJob(lease.job_id, path_);
  FUSOR_RETURN_IF_ERROR(CheckHoldsLease(lease, *row, path_));
  return *std::move(row);
}

StatusOr<int64_t> SqlitePlanStore::RenewLease(const JobLease& lease, int64_t lease_ms) {
  FUSOR_RETURN_IF_ERROR(ValidateLease(lease, lease_ms));
  int64_t expires = 0;
  FUSOR_RETURN_IF_ERROR(Write(fmt::format("renew the lease of measurement job {}", lease.job_id),
                              [&](SqliteConnection& c) -> Status {
                                FUSOR_RETURN_IF_ERROR(HeldJob(c, lease).status());
                                expires = NowUnixMs() + lease_ms;
                                return tables::ExtendJobLease(c, lease.job_id, expires);
                              }));
  return expires;
}

Status SqlitePlanStore::FinishJob(const JobLease& lease, const v1::MeasurementResult& result) {
  FUSOR_RETURN_IF_ERROR(ValidateLease(lease, 1));
  return Write(fmt::format("store the result of measurement job {}", lease.job_id),
               [&](SqliteConnection& c) -> Status {
                 FUSOR_RETURN_IF_ERROR(HeldJob(c, lease).status());
                 return tables::EndJob(c, lease.job_id, kJobDone, &result, NowUnixMs());
               });
}

Status SqlitePlanStore::CancelJob(int64_t job_id) {
  return Write(
      fmt::format("cancel measurement job {}", job_id), [&](SqliteConnection& c) -> Status {
        FUSOR_ASSIGN_OR_RETURN(std::optional<MeasurementJobRow> row, tables::FindJob(c, job_id));
        if (!row) return UnknownJob(job_id, path_);
        if (row->state == kJobDone) return Status::Ok();
        return tables::EndJob(c, job_id, kJobCancelled, nullptr, NowUnixMs());
      });
}

StatusOr<int64_t> SqlitePlanStore::PruneJobs(int64_t older_than_ms) {
  FUSOR_RETURN_IF_ERROR(ValidatePruneAge(older_than_ms));
  int64_t pruned = 0;
  FUSOR_RETURN_IF_ERROR(
      Write("prune finished measurement jobs", [&](SqliteConnection& c) -> Status {
        FUSOR_ASSIGN_OR_RETURN(pruned, tables::DeleteFinishedJobs(c, NowUnixMs() - older_than_ms));
        return Status::Ok();
      }));
  return pruned;
}

StatusOr<AgentListing> SqlitePlanStore::ListAgents() {
  AgentListing listing;
  listing.now_unix_ms = NowUnixMs();
  if (schema_.version < kAgentsVersion) return listing;
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  FUSOR_ASSIGN_OR_RETURN(listing.agents, tables::ReadAgents(*c));
  return listing;
}

StatusOr<JobListing> SqlitePlanStore::ListJobs(bool include_finished) {
  JobListing listing;
  listing.now_unix_ms = NowUnixMs();
  if (schema_.version < kAgentsVersion) return listing;
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  FUSOR_ASSIGN_OR_RETURN(listing.jobs, tables::ReadJobs(*c, include_finished));
  return listing;
}

StatusOr<MeasurementJobRow> SqlitePlanStore::GetJob(int64_t job_id) {
  if (schema_.version < kAgentsVersion) return UnknownJob(job_id, path_);
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  FUSOR_ASSIGN_OR_RETURN(std::optional<MeasurementJobRow> row, tables::FindJob(*c, job_id));
  if (!row) return UnknownJob(job_id, path_);
  return *std::move(row);
}

}  // namespace fusor::db
