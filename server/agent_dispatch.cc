#include "server/agent_dispatch.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <random>

#include "db/staleness.h"
#include "graph/graph_proto.h"
#include "search/plan_choice.h"
#include "search/plan_search.h"
#include "server/measurement_report.h"
#include "server/service_metrics.h"

namespace fusor {
namespace {

// How often a waiting Tune reads its job, and a waiting agent's poll tries to lease one: short
// next to a lease (a minute) and to a measurement (seconds), long next to one store round trip
// (a lease attempt is a write transaction, so idle agents poll less often).
constexpr auto kPollInterval = std::chrono::milliseconds(100);
constexpr auto kLeasePollInterval = std::chrono::milliseconds(200);

bool Cancelled(const std::atomic<bool>* cancelled) {
  return cancelled != nullptr && cancelled->load();
}

// 8 random hex digits: the part of an agent id that keeps two agents of one name apart.
std::string RandomSuffix() {
  std::random_device device;
  return fmt::format("{:08x}", device());
}

// A name fit for an id: letters, digits, '.', '_' and '-' kept, anything else '_'.
std::string IdSafe(const std::string& name) {
  std::string out = name.empty() ? "agent" : name.substr(0, 64);
  for (char& c : out) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return out;
}

// A result an agent reports for a job: an error, or one sane timing per plan.
}  // namespace

AgentDispatch::AgentDispatch(db::MeasurementQueue* queue, const Clock* clock,
                             AgentDispatchOptions options)
    : queue_(queue), clock_(clock), options_(options) {
  Metrics();  // Registers every family before a scrape can run the callbacks below.
  metrics::Registry& r = metrics::Registry::Default();
  gauges_.push_back(r.AddGaugeCallback(ServiceMetrics::kAgentsLive,
                                       "Measurement agents heard from within the liveness window, "
                                       "by target",
                                       {"target"}, [this] { return LiveAgentSamples(); }));
  gauges_.push_back(r.AddGaugeCallback(
      ServiceMetrics::kAgentJobs,
      "Measurement jobs waiting (queued), held (leased) or held past an expired lease "
      "(lease_expired), by target",
      {"target", "state"}, [this] { return JobSamples().first; }));
  gauges_.push_back(
      r.AddGaugeCallback(ServiceMetrics::kAgentJobAge,
                         "Age of the oldest measurement job not yet done or cancelled, by target",
                         {"target"}, [this] { return JobSamples().second; }));
}

metrics::GaugeSamples AgentDispatch::LiveAgentSamples() const {
  metrics::GaugeSamples out;
  StatusOr<v1::ListAgentsResponse> agents = ListAgents();
  if (!agents.ok()) return out;
  std::map<std::string, int> live;
  for (const v1::AgentStatus& a : agents->agents()) live[a.target_id()] += a.live() ? 1 : 0;
  for (const auto& [target, n] : live) out.push_back({{target}, static_cast<double>(n)});
  return out;
}

// Job counts by target and state, and each target's oldest open job's age in seconds.
std::pair<metrics::GaugeSamples, metrics::GaugeSamples> AgentDispatch::JobSamples() const {
  std::pair<metrics::GaugeSamples, metrics::GaugeSamples> out;
  StatusOr<db::JobListing> listing = queue_->ListJobs(/*include_finished=*/false);
  if (!listing.ok()) return out;
  std::map<std::pair<std::string, std::string>, int> counts;
  std::map<std::string, int64_t> oldest;
  for (const db::MeasurementJobRow& j : listing->jobs) {
    const bool expired =
        j.state == db::kJobLeased && j.lease_expires_unix_ms < listing->now_unix_ms;
    ++counts[{j.target_id, expired ? "lease_expired" : j.state}];
    auto [it, added] = oldest.emplace(j.target_id, j.created_unix_ms);
    if (!added) it->second = std::min(it->second, j.created_unix_ms);
  }
  for (const auto& [key, n] : counts) {
    out.first.push_back({{key.first, key.second}, static_cast<double>(n)});
  }
  for (const auto& [target, created] : oldest) {
    out.second.push_back({{target}, static_cast<double>(listing->now_unix_ms - created) / 1000});
  }
  return out;
}

StatusOr<v1::RegisterAgentResponse> AgentDispatch::Register(const std::string& name,
                                                            const std::string& target_id) {
  db::AgentRecord agent;
  agent.agent_id = IdSafe(name) + "-" + RandomSuffix();
  agent.target_id = target_id;
  agent.name = name;
  FUSOR_RETURN_IF_ERROR(queue_->PutAgent(agent));
  spdlog::info("agent: registered {} for target {}", agent.agent_id, target_id);
  v1::RegisterAgentResponse response;
  response.set_agent_id(agent.agent_id);
  response.set_target_id(target_id);
  response.set_lease_s(options_.lease_s);
  return response;
}

StatusOr<int64_t> AgentDispatch::LiveAgents(const std::string& target_id) {
  return queue_->CountLiveAgents(target_id, static_cast<int64_t>(options_.live_s * 1000));
}

StatusOr<v1::ListAgentsResponse> AgentDispatch::ListAgents() const {
  FUSOR_ASSIGN_OR_RETURN(db::AgentListing listing, queue_->ListAgents());
  v1::ListAgentsResponse response;
  response.set_now_unix_ms(listing.now_unix_ms);
  response.set_live_s(options_.live_s);
  const int64_t live_after = listing.now_unix_ms - static_cast<int64_t>(options_.live_s * 1000);
  for (const db::AgentRecord& a : listing.agents) {
    v1::AgentStatus* out = response.add_agents();
    out->set_agent_id(a.agent_id);
    out->set_target_id(a.target_id);
    out->set_name(a.name);
    out->set_registered_unix_ms(a.registered_unix_ms);
    out->set_last_seen_unix_ms(a.last_seen_unix_ms);
    out->set_live(a.last_seen_unix_ms >= live_after);
  }
  return response;
}

StatusOr<v1::ListMeasurementJobsResponse> AgentDispatch::ListJobs(bool include_finished) const {
  FUSOR_ASSIGN_OR_RETURN(db::JobListing listing, queue_->ListJobs(include_finished));
  v1::ListMeasurementJobsResponse response;
  response.set_now_unix_ms(listing.now_unix_ms);
  for (const db::MeasurementJobRow& j : listing.jobs) {
    v1::MeasurementJobStatus* out = response.add_jobs();
    out->set_job_id(j.job_id);
    out->set_target_id(j.target_id);
    out->set_graph_hash(j.job.graph_hash());
    out->set_state(j.state);
    out->set_agent_id(j.agent_id);
    out->set_lease(j.lease);
    out->set_lease_expires_unix_ms(j.state == db::kJobLeased ? j.lease_expires_unix_ms : 0);
    out->set_created_unix_ms(j.created_unix_ms);
    out->set_finished_unix_ms(j.finished_unix_ms);
    out->set_plans(j.job.plans_size());
    out->set_error(j.result.error());
  }
  return response;
}

// Polls the queue until a job of the agent's target can be leased or the wait is over; each call
// counts as hearing from the agent, so an agent that keeps polling stays live.
StatusOr<v1::LeaseMeasurementJobResponse> AgentDispatch::Lease(
    const v1::LeaseMeasurementJobRequest& request, const std::atomic<bool>* cancelled) {
  if (!(request.wait_s() >= 0)) {
    return Status::InvalidArgument(
        fmt::format("wait_s {} must not be negative (0: do not wait)", request.wait_s()));
  }
  const double wait_s = std::min(request.wait_s(), options_.poll_s);
  const int64_t until = clock_->NowNs() + static_cast<int64_t>(wait_s * 1e9);
  v1::LeaseMeasurementJobResponse response;
  FUSOR_ASSIGN_OR_RETURN(db::AgentRecord agent, queue_->TouchAgent(request.agent_id()));
  for (;;) {
    FUSOR_ASSIGN_OR_RETURN(std::optional<db::MeasurementJobRow> job,
                           queue_->LeaseJob(agent.target_id, agent.agent_id, LeaseMs()));
    if (job) {
      spdlog::info("agent: job {} (graph {}) leased to {} (lease {})", job->job_id,
                   job->job.graph_hash().substr(0, 16), agent.agent_id, job->lease);
      Metrics().agent_leases.With({agent.target_id}).Increment();
      if (job->lease > 1) Metrics().agent_releases.With({agent.target_id}).Increment();
      response.set_leased(true);
      *response.mutable_job() = std::move(job->job);
      return response;
    }
    if (Cancelled(cancelled) || clock_->NowNs() >= until) return response;
    clock_->SleepFor(kLeasePollInterval);
  }
}

StatusOr<v1::RenewMeasurementLeaseResponse> AgentDispatch::Renew(
    const v1::RenewMeasurementLeaseRequest& request) {
  FUSOR_RETURN_IF_ERROR(queue_->TouchAgent(request.agent_id()).status());
  FUSOR_ASSIGN_OR_RETURN(
      int64_t expires,
      queue_->RenewLease({request.job_id(), request.agent_id(), request.lease()}, LeaseMs()));
  v1::RenewMeasurementLeaseResponse response;
  response.set_lease_expires_unix_ms(expires);
  return response;
}

// The agent's error text is escaped and capped before anything else sees it: it is logged here,
// stored with the job and shown in the Tune result of whoever asked for the tuning.
StatusOr<v1::ReportMeasurementResponse> AgentDispatch::Report(
    const v1::ReportMeasurementRequest& request) {
  FUSOR_RETURN_IF_ERROR(queue_->TouchAgent(request.agent_id()).status());
  FUSOR_ASSIGN_OR_RETURN(db::MeasurementJobRow job, queue_->GetJob(request.job_id()));
  FUSOR_ASSIGN_OR_RETURN(v1::MeasurementResult result,
                         CheckedMeasurementResult(request.result(), job.job));
  FUSOR_RETURN_IF_ERROR(
      queue_->FinishJob({request.job_id(), request.agent_id(), request.lease()}, result));
  spdlog::info("agent: job {} reported by {}{}", request.job_id(), request.agent_id(),
               result.error().empty() ? "" : ": " + result.error());
  return v1::ReportMeasurementResponse();
}

std::vector<FusionPlan> AgentDispatch::Candidates(const Graph& g, const FusionPlan& searched,
                                                  int budget, int max_group_nodes) {
  std::vector<FusionPlan> out = {searched};
  for (FusionPlan baseline : {RulesPlan(g, max_group_nodes), UnfusedPlan(g)}) {
    if (static_cast<int>(out.size()) >= budget) break;
    if (std::find(out.begin(), out.end(), baseline) == out.end()) out.push_back(baseline);
  }
  return out;
}

StatusOr<AgentOutcome> AgentDispatch::Measure(
    const Graph& g, const std::string& graph_hash, const std::string& target_id,
    const std::vector<FusionPlan>& candidates, const std::vector<double>& predicted_ns,
    int64_t deadline_ns, const std::atomic<bool>* cancelled,
    const std::function<void(const std::string&)>& progress) {
  v1::MeasurementJob job;
  job.set_target_id(target_id);
  job.set_graph_hash(graph_hash);
  *job.mutable_graph() = ToProto(g);
  for (const FusionPlan& plan : candidates) PlanToProto(plan, job.add_plans());
  job.set_min_measure_ms(options_.min_measure_ms);
  FUSOR_ASSIGN_OR_RETURN(int64_t job_id, queue_->EnqueueJob(job));
  spdlog::info("agent: job {} queued: graph={} target={} plans={}", job_id,
               graph_hash.substr(0, 16), target_id, candidates.size());
  progress(fmt::format("measurement job {} queued for the agents of target {}", job_id, target_id));
  // Pruning is housekeeping: a failure is logged and the Tune goes on.
  StatusOr<int64_t> pruned =
      queue_->PruneJobs(static_cast<int64_t>(options_.finished_job_retention_s * 1000));
  if (!pruned.ok()) {
    spdlog::warn("agent: pruning finished jobs: {}", pruned.status().ToString());
  } else if (*pruned > 0) {
    spdlog::info("agent: pruned {} finished jobs older than {} s", *pruned,
                 options_.finished_job_retention_s);
  }
  StatusOr<db::MeasurementJobRow> done = WaitForJob(job_id, deadline_ns, cancelled, progress);
  if (!done.ok() || done->state != db::kJobDone) {
    // Stopped waiting: the job is nobody's any more (an agent holding it is told so when it
    // reports).
    Status cancel = queue_->CancelJob(job_id);
    if (!cancel.ok()) spdlog::warn("agent: cancelling job {}: {}", job_id, cancel.ToString());
  }
  if (!done.ok()) return done.status();
  if (done->state != db::kJobDone) {
    AgentOutcome outcome;
    outcome.unmeasured_reason = fmt::format(
        "no agent of target {} reported measurement job {} within the Tune's time limit; the "
        "plan is the cost model's prediction",
        target_id, job_id);
    return outcome;
  }
  return Choose(*done, candidates, predicted_ns, g);
}

namespace {

int64_t WallNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a Tune waiting on job `row` is waiting for, and until when: a lease, an agent measuring,
// or a new lease after an agent went silent. The key changes only when the state does.
struct WaitState {
  std::string key;
  std::string text;
};

WaitState WaitStateOf(const db::MeasurementJobRow& row, int64_t give_up_unix_ms) {
  const std::string until = db::UtcText(give_up_unix_ms);
  if (row.state != db::kJobLeased) {
    return {"queued", fmt::format("job {} waits for a lease until {} (the Tune's time limit; "
                                  "agents of target {})",
                                  row.job_id, until, row.target_id)};
  }
  if (row.lease_expires_unix_ms < WallNowMs()) {
    return {fmt::format("expired {}", row.lease),
            fmt::format("job {} waits for a new lease until {}: agent {} stopped renewing (its "
                        "lease expired {})",
                        row.job_id, until, row.agent_id, db::UtcText(row.lease_expires_unix_ms))};
  }
  return {fmt::format("leased {}", row.lease),
          fmt::format("measuring on agent {} until {} at the latest (job {}, lease {}{})",
                      row.agent_id, until, row.job_id, row.lease,
                      row.lease > 1 ? ": an earlier agent's lease expired" : "")};
}

}  // namespace

StatusOr<db::MeasurementJobRow> AgentDispatch::WaitForJob(
    int64_t job_id, int64_t deadline_ns, const std::atomic<bool>* cancelled,
    const std::function<void(const std::string&)>& progress) {
  const int64_t give_up_unix_ms = WallNowMs() + (deadline_ns - clock_->NowNs()) / 1'000'000;
  std::string announced;
  for (;;) {
    FUSOR_ASSIGN_OR_RETURN(db::MeasurementJobRow row, queue_->GetJob(job_id));
    if (row.state == db::kJobDone || row.state == db::kJobCancelled) return row;
    WaitState state = WaitStateOf(row, give_up_unix_ms);
    if (state.key != announced) {
      announced = state.key;
      progress(state.text);
    }
    if (Cancelled(cancelled)) return Status::Cancelled("tuning was cancelled");
    if (clock_->NowNs() >= deadline_ns) return row;
    clock_->SleepFor(kPollInterval);
  }
}

namespace {

// The timings an agent reported, as the measurement protocol reads them. An agent older than the
// protocol reports one timing per plan and no rounds: that one timing counts as one round, which
// never decides between plans.
CandidateTimings TimingsOf(const v1::MeasurementResult& result) {
  CandidateTimings t;
  for (const v1::PlanTiming& timing : result.timings()) {
    CandidateTiming plan;
    plan.round_ns.assign(timing.round_ns().begin(), timing.round_ns().end());
    if (plan.round_ns.empty()) plan.round_ns = {timing.median_ns()};
    for (double s : timing.samples_ns()) plan.samples_ns.push_back(static_cast<int64_t>(s));
    std::sort(plan.samples_ns.begin(), plan.samples_ns.end());
    t.rounds = std::max(t.rounds, static_cast<int>(plan.round_ns.size()));
    t.plans.push_back(std::move(plan));
  }
  return t;
}

}  // namespace

// The plan the measurement protocol chooses from the agent's rounds (search/plan_choice.h), the
// same choice an in-process tune makes.
AgentOutcome AgentDispatch::Choose(const db::MeasurementJobRow& job,
                                   const std::vector<FusionPlan>& candidates,
                                   const std::vector<double>& predicted_ns, const Graph& g) const {
  AgentOutcome outcome;
  const v1::MeasurementResult& result = job.result;
  if (!result.error().empty() || result.timings_size() != static_cast<int>(candidates.size())) {
    outcome.unmeasured_reason = fmt::format(
        "agent {} could not measure job {}: {}; the plan is the cost model's prediction",
        job.agent_id, job.job_id,
        result.error().empty() ? "its result does not match the job" : result.error());
    return outcome;
  }
  const ChoiceOptions options;
  CandidateTimings timings = TimingsOf(result);
  timings.settled = Settled(timings, options);
  const PlanChoice choice = ChoosePlan(timings, predicted_ns, options);
  const auto unfused = std::find(candidates.begin(), candidates.end(), UnfusedPlan(g));
  const int unfused_index =
      unfused == candidates.end() ? -1 : static_cast<int>(unfused - candidates.begin());
  if (unfused_index >= 0) outcome.unfused_measured_ns = timings.plans[unfused_index].MedianNs();
  outcome.measured = true;
  outcome.plan = candidates[choice.index];
  outcome.measured_ns = timings.plans[choice.index].MedianNs();
  outcome.agent_id = job.agent_id;
  outcome.confidence = ConfidenceOf(timings, choice, unfused_index, options);
  const CandidateTiming& chosen = timings.plans[choice.index];
  outcome.measurement.samples_ns.assign(chosen.samples_ns.begin(), chosen.samples_ns.end());
  if (outcome.measurement.samples_ns.empty())
    outcome.measurement.samples_ns = {outcome.measured_ns};
  outcome.measurement.agent_id = job.agent_id;
  spdlog::info("agent: job {}: plan {} of {} {} ({} rounds{})", job.job_id, choice.index + 1,
               candidates.size(), choice.decision, timings.rounds,
               timings.settled ? "" : ", not settled");
  return outcome;
}

}  // namespace fusor
