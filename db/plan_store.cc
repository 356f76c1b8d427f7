#include "db/plan_store.h"

namespace fusor::db {
namespace {

Status NoJobs() {
  return Status::Unimplemented(
      "this store keeps no measurement agents or jobs (a snapshot or layered store); serve "
      "agents from a writable SQLite or PostgreSQL tuning database");
}

}  // namespace

Status PlanStore::PutAgent(const AgentRecord&) { return NoJobs(); }
StatusOr<AgentRecord> PlanStore::TouchAgent(std::string_view) { return NoJobs(); }
StatusOr<int64_t> PlanStore::CountLiveAgents(std::string_view, int64_t) { return NoJobs(); }
StatusOr<int64_t> PlanStore::EnqueueJob(const v1::MeasurementJob&) { return NoJobs(); }
StatusOr<std::optional<MeasurementJobRow>> PlanStore::LeaseJob(std::string_view, std::string_view,
                                                               int64_t) {
  return NoJobs();
}
StatusOr<int64_t> PlanStore::RenewLease(const JobLease&, int64_t) { return NoJobs(); }
Status PlanStore::FinishJob(const JobLease&, const v1::MeasurementResult&) { return NoJobs(); }
Status PlanStore::CancelJob(int64_t) { return NoJobs(); }
StatusOr<int64_t> PlanStore::PruneJobs(int64_t) { return NoJobs(); }
StatusOr<MeasurementJobRow> PlanStore::GetJob(int64_t) { return NoJobs(); }
StatusOr<AgentListing> PlanStore::ListAgents() { return NoJobs(); }
StatusOr<JobListing> PlanStore::ListJobs(bool) { return NoJobs(); }

}  // namespace fusor::db
