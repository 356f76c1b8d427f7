// AgentDispatch: the tuning service's side of measurement agents (`fusor agent`). It registers
// agents, hands them the jobs of their target from the database's queue (a lease poll waits for
// a job), renews and takes back their leases, and, for a Tune, queues the candidate plans of a
// graph as one job and waits for an agent's timings. The queue and the leases live in the tuning
// database's MeasurementQueue (db/measurement_queue.h), so fusord replicas sharing a PostgreSQL
// database share one queue: an agent polling any replica takes a job any replica queued, and a
// lease not renewed in time goes to another agent.
//
// Borrows the queue and the clock, which must outlive it. Thread-safe: every call may run
// concurrently (the queue serialises what must be).
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/metrics.h"
#include "db/measurement_queue.h"
#include "db/plan_store.h"
#include "graph/graph.h"
#include "graph/plan.h"
#include "proto/tuner.pb.h"
#include "search/plan_choice.h"

namespace fusor {

struct AgentDispatchOptions {
  double lease_s = 60;         // A lease lasts this long unless renewed.
  double live_s = 90;          // An agent heard from within this long is live.
  double poll_s = 20;          // A lease poll waits up to this long for a job.
  double min_measure_ms = 30;  // How long an agent repeats each plan's timing.
  // Finished (done or cancelled) jobs older than this are deleted when a job is queued: nothing
  // reads a finished job once its Tune has its result, and a day keeps them for a person
  // looking into a Tune.
  double finished_job_retention_s = 86'400;
};

// What the agents measured for a Tune: the plan chosen from the candidates, its time and who
// timed it; or, when nothing was measured, why.
struct AgentOutcome {
  bool measured = false;
  FusionPlan plan;
  double measured_ns = 0;
  double unfused_measured_ns = 0;  // 0 when the unfused plan was not a candidate.
  db::Measurement measurement;     // The chosen plan's timing, with the agent's id.
  ChoiceConfidence confidence;     // How it was chosen (search/plan_choice.h).
  std::string agent_id;
  std::string unmeasured_reason;
};

class AgentDispatch {
 public:
  AgentDispatch(db::MeasurementQueue* queue, const Clock* clock, AgentDispatchOptions options);

  // Records an agent of a stored target, calibrated as the profile says; its id is `name` (a
  // host name; "agent" when empty) and a random suffix.
  StatusOr<v1::RegisterAgentResponse> Register(const std::string& name,
                                               const std::string& target_id);
  StatusOr<v1::LeaseMeasurementJobResponse> Lease(const v1::LeaseMeasurementJobRequest& request,
                                                  const std::atomic<bool>* cancelled);
  StatusOr<v1::RenewMeasurementLeaseResponse> Renew(
      const v1::RenewMeasurementLeaseRequest& request);
  // The error text an agent reports is escaped and capped (base/untrusted_text.h) before it is
  // logged, stored or shown in a Tune result.
  StatusOr<v1::ReportMeasurementResponse> Report(const v1::ReportMeasurementRequest& request);

  // Live agents of the target.
  StatusOr<int64_t> LiveAgents(const std::string& target_id);
  // Every agent, each marked live or not, and the jobs (queued and leased, or every kept one).
  StatusOr<v1::ListAgentsResponse> ListAgents() const;
  StatusOr<v1::ListMeasurementJobsResponse> ListJobs(bool include_finished) const;

  // The plans a job times: the searched plan first, then the rules baseline's and the unfused
  // plan where they differ from it, up to `budget` plans (at least the searched one).
  static std::vector<FusionPlan> Candidates(const Graph& g, const FusionPlan& searched, int budget,
                                            int max_group_nodes);

  // Queues the candidates of graph g (canonical, hash `graph_hash`) as one job of the target and
  // waits until an agent reports (then chooses by the measurement protocol, ChoosePlan, with
  // `predicted_ns`, one per candidate), the clock passes deadline_ns, or *cancelled turns true
  // (then Cancelled). A job that ends unreported is cancelled, and the outcome says why nothing was
  // measured. `progress` gets a line for people at each step.
  StatusOr<AgentOutcome> Measure(const Graph& g, const std::string& graph_hash,
                                 const std::string& target_id,
                                 const std::vector<FusionPlan>& candidates,
                                 const std::vector<double>& predicted_ns, int64_t deadline_ns,
                                 const std::atomic<bool>* cancelled,
                                 const std::function<void(const std::string&)>& progress);

 private:
  StatusOr<db::MeasurementJobRow> WaitForJob(
      int64_t job_id, int64_t deadline_ns, const std::atomic<bool>* cancelled,
      const std::function<void(const std::string&)>& progress);
  AgentOutcome Choose(const db::MeasurementJobRow& job, const std::vector<FusionPlan>& candidates,
                      const std::vector<double>& predicted_ns, const Graph& g) const;
  int64_t LeaseMs() const { return static_cast<int64_t>(options_.lease_s * 1000); }
  metrics::GaugeSamples LiveAgentSamples() const;
  std::pair<metrics::GaugeSamples, metrics::GaugeSamples> JobSamples() const;

  db::MeasurementQueue* const queue_;
  const Clock* const clock_;
  const AgentDispatchOptions options_;
  // The agents and queue gauges (service_metrics.h), read from the queue at each scrape.
  std::vector<metrics::CallbackRegistration> gauges_;
};

}  // namespace fusor
