// PostgresPlanStore's measurement agents and job queue (db/measurement_queue.h). A lease is
// SELECT ... FOR UPDATE SKIP LOCKED, so leasers on several replicas never get one job and never
// wait on each other's rows; every time is the database server's clock.
#include "db/postgres_plan_store.h"
#include "db/postgres_sql.h"
#include "db/schema.h"
#include "db/store_rules.h"

namespace fusor::db {

namespace {

// The database server's clock, in Unix milliseconds: every replica judges leases by it.
int64_t DbNowMs(pqxx::dbtransaction& txn) {
  return txn.exec1("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")[0]
      .as<int64_t>();
}

constexpr std::string_view kSelectJob =
    "SELECT job_id, target_id, state, agent_id, lease, lease_expires_unix_ms, created_unix_ms, "
    "finished_unix_ms, job, result FROM measurement_jobs";

StatusOr<MeasurementJobRow> ReadJob(const pqxx::row& r, const std::string& database) {
  MeasurementJobRow j;
  j.job_id = r[0].as<int64_t>();
  j.target_id = r[1].as<std::string>();
  j.state = r[2].as<std::string>();
  j.agent_id = TextOrEmpty(r[3]);
  j.lease = r[4].as<int64_t>();
  j.lease_expires_unix_ms = r[5].as<int64_t>();
  j.created_unix_ms = r[6].as<int64_t>();
  j.finished_unix_ms = r[7].is_null() ? 0 : r[7].as<int64_t>();
  FUSOR_ASSIGN_OR_RETURN(
      j.job, ParseStored<v1::MeasurementJob>(BytesOf(r[8]), "measurement job", database));
  if (!r[9].is_null()) {
    FUSOR_ASSIGN_OR_RETURN(j.result, ParseStored<v1::MeasurementResult>(
                                         BytesOf(r[9]), "measurement result", database));
  }
  FillJobLease(j);
  return j;
}

// The job's row, locked until the transaction ends (`lock`); nullopt when unknown.
StatusOr<std::optional<MeasurementJobRow>> FindJob(pqxx::dbtransaction& txn, int64_t job_id,
                                                   bool lock, const std::string& database) {
  Params p;
  pqxx::result r = p.Exec(txn, fmt::format("{} WHERE job_id = {}{}", kSelectJob, p.Int(job_id),
                                           lock ? " FOR UPDATE" : ""));
  if (r.empty()) return std::optional<MeasurementJobRow>();
  FUSOR_ASSIGN_OR_RETURN(MeasurementJobRow row, ReadJob(r[0], database));
  return std::optional<MeasurementJobRow>(std::move(row));
}

}  // namespace

Status PostgresPlanStore::PutAgent(const AgentRecord& agent) {
  FUSOR_RETURN_IF_ERROR(ValidateAgent(agent));
  return Write(
      fmt::format("register agent '{}'", agent.agent_id), [&](pqxx::dbtransaction& txn) -> Status {
        FUSOR_RETURN_IF_ERROR(RequireTarget(txn, agent.target_id));
        Params p;
        std::string now = p.Int(DbNowMs(txn));
        p.Exec(txn, fmt::format(
                        "INSERT INTO agents (agent_id, target_id, name, "
                        "registered_unix_ms, last_seen_unix_ms) VALUES ({1}, {2}, {3}, {0}, "
                        "{0}) ON CONFLICT (agent_id) DO UPDATE SET target_id = "
                        "excluded.target_id, name = excluded.name, registered_unix_ms = "
                        "excluded.registered_unix_ms, last_seen_unix_ms = "
                        "excluded.last_seen_unix_ms",
                        now, p.Text(agent.agent_id), p.Text(agent.target_id), p.Text(agent.name)));
        return Status::Ok();
      });
}

StatusOr<AgentRecord> PostgresPlanStore::TouchAgent(std::string_view agent_id) {
  std::optional<AgentRecord> agent;
  FUSOR_RETURN_IF_ERROR(Write("note an agent's call", [&](pqxx::dbtransaction& txn) -> Status {
    agent.reset();
    Params p;
    pqxx::result r = p.Exec(
        txn, fmt::format("UPDATE agents SET last_seen_unix_ms = {} WHERE agent_id = {} RETURNING "
                         "agent_id, target_id, name, registered_unix_ms, last_seen_unix_ms",
                         p.Int(DbNowMs(txn)), p.Text(agent_id)));
    if (r.empty()) return Status::Ok();
    agent = AgentRecord{r[0][0].as<std::string>(), r[0][1].as<std::string>(),
                        r[0][2].as<std::string>(), r[0][3].as<int64_t>(), r[0][4].as<int64_t>()};
    return Status::Ok();
  }));
  if (!agent) {
    return Status::NotFound(fmt::format(
        "agent '{}' is not registered in database '{}'; register it (fusor agent does at start)",
        agent_id, name_));
  }
  return *std::move(agent);
}

StatusOr<int64_t> PostgresPlanStore::CountLiveAgents(std::string_view target_id, int64_t live_ms) {
  if (schema_version_ < kAgentsVersion) return 0;
  int64_t live = 0;
  FUSOR_RETURN_IF_ERROR(Read("count live agents", [&](pqxx::dbtransaction& txn) -> Status {
    Params p;
    std::string sql =
        fmt::format("SELECT count(*) FROM agents WHERE target_id = {} AND last_seen_unix_ms >= {}",
                    p.Text(target_id), p.Int(DbNowMs(txn) - live_ms));
    live = p.Exec(txn, sql)[0][0].as<int64_t>();
    return Status::Ok();
  }));
  return live;
}

StatusOr<int64_t> PostgresPlanStore::EnqueueJob(const v1::MeasurementJob& job) {
  FUSOR_RETURN_IF_ERROR(ValidateJob(job));
  int64_t job_id = 0;
  FUSOR_RETURN_IF_ERROR(
      Write(fmt::format("queue a measurement job for target '{}'", job.target_id()),
            [&](pqxx::dbtransaction& txn) -> Status {
              FUSOR_RETURN_IF_ERROR(RequireTarget(txn, job.target_id()));
              Params p;
              std::string sql = fmt::format(
                  "INSERT INTO measurement_jobs (target_id, graph_hash, state, created_unix_ms, "
                  "job) VALUES ({}, {}, {}, {}, {}) RETURNING job_id",
                  p.Text(job.target_id()), p.Text(job.graph_hash()), p.Text(kJobQueued),
                  p.Int(DbNowMs(txn)), p.Bytes(job.SerializeAsString()));
              job_id = p.Exec(txn, sql)[0][0].as<int64_t>();
              return Status::Ok();
            }));
  return job_id;
}

StatusOr<std::optional<MeasurementJobRow>> PostgresPlanStore::LeaseJob(std::string_view target_id,
                                                                       std::string_view agent_id,
                                                                       int64_t lease_ms) {
  FUSOR_RETURN_IF_ERROR(ValidateLease({1, std::string(agent_id), 1}, lease_ms));
  std::optional<MeasurementJobRow> leased;
  FUSOR_RETURN_IF_ERROR(Write("lease a measurement job", [&](pqxx::dbtransaction& txn) -> Status {
    leased.reset();
    int64_t now = DbNowMs(txn);
    Params p;
    std::string sql = fmt::format(
        "SELECT job_id FROM measurement_jobs WHERE target_id = {} AND {} ORDER BY job_id LIMIT 1 "
        "FOR UPDATE SKIP LOCKED",
        p.Text(target_id), LeasableJobSql(p.Int(now)));
    pqxx::result r = p.Exec(txn, sql);
    if (r.empty()) return Status::Ok();
    int64_t job_id = r[0][0].as<int64_t>();
    Params u;
    u.Exec(txn,
           fmt::format("UPDATE measurement_jobs SET state = {}, agent_id = {}, lease = "
                       "lease + 1, lease_expires_unix_ms = {} WHERE job_id = {}",
                       u.Text(kJobLeased), u.Text(agent_id), u.Int(now + lease_ms), u.Int(job_id)));
    FUSOR_ASSIGN_OR_RETURN(leased, FindJob(txn, job_id, false, name_));
    return Status::Ok();
  }));
  return leased;
}

StatusOr<int64_t> PostgresPlanStore::RenewLease(const JobLease& lease, int64_t lease_ms) {
  FUSOR_RETURN_IF_ERROR(ValidateLease(lease, lease_ms));
  int64_t expires = 0;
  FUSOR_RETURN_IF_ERROR(
      Write(fmt::format("renew the lease of measurement job {}", lease.job_id),
            [&](pqxx::dbtransaction& txn) -> Status {
              FUSOR_ASSIGN_OR_RETURN(std::optional<MeasurementJobRow> row,
                                     FindJob(txn, lease.job_id, true, name_));
              if (!row) return UnknownJob(lease.job_id, name_);
              FUSOR_RETURN_IF_ERROR(CheckHoldsLease(lease, *row, name_));
              expires = DbNowMs(txn) + lease_ms;
              Params p;
              p.Exec(txn, fmt::format("UPDATE measurement_jobs SET lease_expires_unix_ms = {} "
                                      "WHERE job_id = {}",
                                      p.Int(expires), p.Int(lease.job_id)));
              return Status::Ok();
            }));
  return expires;
}

Status PostgresPlanStore::FinishJob(const JobLease& lease, const v1::MeasurementResult& result) {
  FUSOR_RETURN_IF_ERROR(ValidateLease(lease, 1));
  return Write(fmt::format("store the result of measurement job {}", lease.job_id),
               [&](pqxx::dbtransaction& txn) -> Status {
                 FUSOR_ASSIGN_OR_RETURN(std::optional<MeasurementJobRow> row,
                                        FindJob(txn, lease.job_id, true, name_));
                 if (!row) return UnknownJob(lease.job_id, name_);
                 FUSOR_RETURN_IF_ERROR(CheckHoldsLease(lease, *row, name_));
                 Params p;
                 p.Exec(txn, fmt::format("UPDATE measurement_jobs SET state = {}, result = {}, "
                                         "finished_unix_ms = {} WHERE job_id = {}",
                                         p.Text(kJobDone), p.Bytes(result.SerializeAsString()),
                                         p.Int(DbNowMs(txn)), p.Int(lease.job_id)));
                 return Status::Ok();
               });
}

Status PostgresPlanStore::CancelJob(int64_t job_id) {
  return Write(
      fmt::format("cancel measurement job {}", job_id), [&](pqxx::dbtransaction& txn) -> Status {
        FUSOR_ASSIGN_OR_RETURN(std::optional<MeasurementJobRow> row,
                               FindJob(txn, job_id, true, name_));
        if (!row) return UnknownJob(job_id, name_);
        if (row->state == kJobDone) return Status::Ok();
        Params p;
        p.Exec(txn, fmt::format("UPDATE measurement_jobs SET state = {}, "
                                "finished_unix_ms = {} WHERE job_id = {}",
                                p.Text(kJobCancelled), p.Int(DbNowMs(txn)), p.Int(job_id)));
        return Status::Ok();
      });
}

StatusOr<int64_t> PostgresPlanStore::PruneJobs(int64_t older_than_ms) {
  FUSOR_RETURN_IF_ERROR(ValidatePruneAge(older_than_ms));
  int64_t pruned = 0;
  FUSOR_RETURN_IF_ERROR(
      Write("prune finished measurement jobs", [&](pqxx::dbtransaction& txn) -> Status {
        Params p;
        pruned =
            static_cast<int64_t>(p.Exec(txn, fmt::format("DELETE FROM measurement_jobs WHERE "
                                                         "state IN ({}, {}) AND "
                                                         "finished_unix_ms < {}",
                                                         p.Text(kJobDone), p.Text(kJobCancelled),
                                                         p.Int(DbNowMs(txn) - older_than_ms)))
                                     .affected_rows());
        return Status::Ok();
      }));
  return pruned;
}

StatusOr<AgentListing> PostgresPlanStore::ListAgents() {
  AgentListing listing;
  FUSOR_RETURN_IF_ERROR(Read("list agents", [&](pqxx::dbtransaction& txn) -> Status {
    listing.now_unix_ms = DbNowMs(txn);
    if (schema_version_ < kAgentsVersion) return Status::Ok();
    for (const pqxx::row& r :
         txn.exec("SELECT agent_id, target_id, name, registered_unix_ms, last_seen_unix_ms FROM "
                  "agents ORDER BY last_seen_unix_ms DESC, agent_id")) {
      listing.agents.push_back({r[0].as<std::string>(), r[1].as<std::string>(),
                                r[2].as<std::string>(), r[3].as<int64_t>(), r[4].as<int64_t>()});
    }
    return Status::Ok();
  }));
  return listing;
}

StatusOr<JobListing> PostgresPlanStore::ListJobs(bool include_finished) {
  JobListing listing;
  FUSOR_RETURN_IF_ERROR(Read("list measurement jobs", [&](pqxx::dbtransaction& txn) -> Status {
    listing.now_unix_ms = DbNowMs(txn);
    if (schema_version_ < kAgentsVersion) return Status::Ok();
    std::string sql = fmt::format("{}{} ORDER BY job_id", kSelectJob,
                                  include_finished ? "" : " WHERE state IN ('queued', 'leased')");
    for (const pqxx::row& r : txn.exec(sql)) {
      FUSOR_ASSIGN_OR_RETURN(listing.jobs.emplace_back(), ReadJob(r, name_));
    }
    return Status::Ok();
  }));
  return listing;
}

StatusOr<MeasurementJobRow> PostgresPlanStore::GetJob(int64_t job_id) {
  if (schema_version_ < kAgentsVersion) return UnknownJob(job_id, name_);
  std::optional<MeasurementJobRow> found;
  FUSOR_RETURN_IF_ERROR(Read("read a measurement job", [&](pqxx::dbtransaction& txn) -> Status {
    FUSOR_ASSIGN_OR_RETURN(found, FindJob(txn, job_id, false, name_));
    return Status::Ok();
  }));
  if (!found) return UnknownJob(job_id, name_);
  return *std::move(found);
}

}  // namespace fusor::db
