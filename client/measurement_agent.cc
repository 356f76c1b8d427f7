#include "client/measurement_agent.h"

#include <unistd.h>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>

#include "base/periodic.h"
#include "costmodel/hardware_profile.h"
#include "db/staleness.h"
#include "graph/canonical.h"
#include "graph/graph_proto.h"
#include "graph/plan.h"
#include "lowering/plan_legality.h"
#include "runtime/measurer.h"
#include "search/plan_choice.h"

namespace fusor {
namespace {

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "agent";
  return name;
}

// How long the agent waits before polling again when fusord cannot be reached.
constexpr auto kRetryAfter = std::chrono::seconds(2);

StatusOr<std::vector<FusionPlan>> PlansOf(const Graph& g, const v1::MeasurementJob& job) {
  std::vector<FusionPlan> plans;
  for (int i = 0; i < job.plans_size(); ++i) {
    auto plan = PlanFromProto(g, job.plans(i));
    if (!plan.ok()) return plan.status().WithContext(fmt::format("plan {} of the job", i));
    plans.push_back(std::move(plan).value());
  }
  return plans;
}

// One candidate's timings by the measurement protocol, as the job's result carries them.
v1::PlanTiming TimingOf(const CandidateTiming& t, const ChoiceOptions& options) {
  const Measurement m = MeasurementOf(t, options);
  v1::PlanTiming out;
  for (int64_t s : m.samples_ns) out.add_samples_ns(static_cast<double>(s));
  out.set_median_ns(static_cast<double>(m.median_ns));
  out.set_cv(m.cv);
  out.set_unstable(m.unstable);
  for (double r : t.round_ns) out.add_round_ns(r);
  return out;
}

// Renews a lease every third of its time while the returned task lives; a renewal refused (the
// lease went to another agent) is logged, ends the renewals, and the report then says so too.
std::unique_ptr<PeriodicTask> KeepLease(TunerApi* server, v1::RenewMeasurementLeaseRequest renew,
                                        double lease_s) {
  const auto every = std::chrono::milliseconds(static_cast<int64_t>(lease_s * 1000 / 3));
  return std::make_unique<PeriodicTask>(every, [server, renew = std::move(renew)] {
    auto renewed = server->RenewMeasurementLease(renew);
    if (renewed.ok()) return true;
    spdlog::warn("agent: renewing the lease of job {}: {}", renew.job_id(),
                 renewed.status().ToString());
    return renewed.status().code() != Status::Code::kFailedPrecondition;
  });
}

// What the agent measured, in words: "3 plans timed in 4 rounds" or the error.
std::string ResultText(const v1::MeasurementResult& result) {
  if (!result.error().empty()) return "could not measure: " + result.error();
  int rounds = 0;
  for (const v1::PlanTiming& t : result.timings()) rounds = std::max(rounds, t.round_ns_size());
  return fmt::format("{} plans timed in {} rounds", result.timings_size(), rounds);
}

// One line per job, with the ids a person greps for: info when measured and reported, warning
// when the plans could not be measured or the report was refused.
void LogJob(const v1::MeasurementJob& job, const v1::MeasurementResult& result,
            const Status& reported, std::chrono::steady_clock::duration took) {
  const bool ok = reported.ok() && result.error().empty();
  spdlog::log(ok ? spdlog::level::info : spdlog::level::warn,
              "agent: job {} graph={} lease={} plans={}: {} in {:.1f} s; {}", job.job_id(),
              job.graph_hash().substr(0, 16), job.lease(), job.plans_size(), ResultText(result),
              std::chrono::duration<double>(took).count(),
              reported.ok() ? "reported" : "report refused: " + reported.ToString());
}

}  // namespace

StatusOr<v1::HardwareProfile> CalibratedLocalProfile(TuningService& local) {
  FUSOR_ASSIGN_OR_RETURN(v1::ListTargetsResponse targets, local.ListTargets({}));
  for (const v1::HardwareProfile& p : targets.profiles()) {
    if (p.target().id() == local.local_target_id() && p.calibrated_unix_ms() != 0 &&
        p.cost_model_version() == kCostModelVersion) {
      spdlog::info("agent: using this machine's stored calibration of {}",
                   db::UtcText(p.calibrated_unix_ms()));
      return p;
    }
  }
  spdlog::warn(
      "agent: this machine has no calibration for cost model {}; calibrating (about a "
      "minute)",
      kCostModelVersion);
  FUSOR_ASSIGN_OR_RETURN(v1::CalibrateResponse calibrated, local.Calibrate({}));
  return calibrated.profile();
}

MeasurementAgent::MeasurementAgent(TunerApi* server, MeasurementAgentOptions options)
    : server_(server), options_(std::move(options)) {
  if (options_.name.empty()) options_.name = HostName();
  if (!options_.measurers) options_.measurers = OneDnnMeasurers();
}

Status MeasurementAgent::Register(const v1::HardwareProfile& profile) {
  v1::RegisterAgentRequest request;
  *request.mutable_profile() = profile;
  request.set_name(options_.name);
  FUSOR_ASSIGN_OR_RETURN(v1::RegisterAgentResponse registered, server_->RegisterAgent(request));
  agent_id_ = registered.agent_id();
  target_id_ = registered.target_id();
  lease_s_ = registered.lease_s() > 0 ? registered.lease_s() : lease_s_;
  spdlog::info("agent: registered as {} for target {} (leases of {:.0f} s)", agent_id_, target_id_,
               lease_s_);
  return Status::Ok();
}

StatusOr<std::optional<v1::MeasurementJob>> MeasurementAgent::Lease(const std::atomic<bool>* stop) {
  v1::LeaseMeasurementJobRequest request;
  request.set_agent_id(agent_id_);
  request.set_wait_s(options_.poll_s);
  FUSOR_ASSIGN_OR_RETURN(v1::LeaseMeasurementJobResponse leased,
                         server_->LeaseMeasurementJob(request, stop));
  if (!leased.leased()) return std::optional<v1::MeasurementJob>();
  return std::optional<v1::MeasurementJob>(std::move(*leased.mutable_job()));
}

v1::MeasurementResult MeasurementAgent::Measure(const v1::MeasurementJob& job) {
  v1::MeasurementResult result;
  auto fail = [&](const Status& s) {
    result.Clear();
    result.set_error(s.ToString());
    return result;
  };
  auto g = FromProto(job.graph());
  if (!g.ok()) return fail(g.status().WithContext("the job's graph"));
  if (CanonicalHash(*g) != job.graph_hash()) {
    return fail(Status::InvalidArgument(
        fmt::format("the job's graph does not hash to its graph_hash {}", job.graph_hash())));
  }
  auto plans = PlansOf(*g, job);
  if (!plans.ok()) return fail(plans.status());
  OneDnnMeasurerOptions m;
  m.executor.threads = options_.measure_threads;
  double min_ms = options_.min_measure_ms > 0 ? options_.min_measure_ms : job.min_measure_ms();
  m.timing = TimingFor(TimingPolicy::kTune, min_ms);
  std::unique_ptr<Measurer> measurer = options_.measurers(TimingPolicy::kTune, m);
  SettleHost(kSettleHostMaxMs, "agent job");
  // The same protocol as an in-process tune; fusord chooses from the rounds (ChoosePlan).
  const ChoiceOptions choice;
  auto timed = TimeCandidates(measurer.get(), *g, *plans, choice);
  if (!timed.ok()) return fail(timed.status());
  for (const CandidateTiming& t : timed->plans) *result.add_timings() = TimingOf(t, choice);
  return result;
}

Status MeasurementAgent::Report(const v1::MeasurementJob& job,
                                const v1::MeasurementResult& result) {
  v1::ReportMeasurementRequest request;
  request.set_agent_id(agent_id_);
  request.set_job_id(job.job_id());
  request.set_lease(job.lease());
  *request.mutable_result() = result;
  return server_->ReportMeasurement(request).status();
}

Status MeasurementAgent::MeasureAndReport(const v1::MeasurementJob& job) {
  const auto start = std::chrono::steady_clock::now();
  v1::MeasurementResult result;
  {
    v1::RenewMeasurementLeaseRequest renew;
    renew.set_agent_id(agent_id_);
    renew.set_job_id(job.job_id());
    renew.set_lease(job.lease());
    auto keeper = KeepLease(server_, renew, lease_s_);
    result = Measure(job);
  }
  Status reported = Report(job, result);
  LogJob(job, result, reported, std::chrono::steady_clock::now() - start);
  return reported;
}

Status MeasurementAgent::Run(const std::atomic<bool>* stop) {
  int done = 0;
  Status ended = RunJobs(stop, &done);
  spdlog::info("agent: {} stopping after {} jobs: {}", agent_id_, done,
               !ended.ok()                                          ? ended.ToString()
               : options_.max_jobs > 0 && done >= options_.max_jobs ? "--max-jobs reached"
                                                                    : "asked to stop");
  return ended;
}

Status MeasurementAgent::RunJobs(const std::atomic<bool>* stop, int* done_out) {
  int& done = *done_out;
  while (!(stop != nullptr && stop->load()) &&
         (options_.max_jobs == 0 || done < options_.max_jobs)) {
    auto job = Lease(stop);
    if (stop != nullptr && stop->load()) return Status::Ok();
    if (!job.ok()) {
      if (job.status().code() != Status::Code::kUnavailable) return job.status();
      spdlog::warn("agent: {}; polling again in {} s", job.status().ToString(),
                   kRetryAfter.count());
      std::this_thread::sleep_for(kRetryAfter);
      continue;
    }
    if (!*job) continue;
    Status reported = MeasureAndReport(**job);
    ++done;
    // A lost lease or fusord gone meanwhile is logged with the job (LogJob); the agent goes on.
    if (!reported.ok() && reported.code() != Status::Code::kFailedPrecondition &&
        reported.code() != Status::Code::kUnavailable) {
      return reported;
    }
  }
  return Status::Ok();
}

}  // namespace fusor
