// fusord's metrics, by name: every family the tuning service and its gRPC layer count into,
// registered together in the process-wide registry (base/metrics.h) the first time Metrics() is
// called, so a scrape lists every family (HELP and TYPE) from the start. The names follow
// Prometheus' conventions (fusor_ prefix, _total for counters, _seconds for durations);
// deploy/README.md lists them with what they count.
//
// The families live as long as the process. Thread-safe.
#pragma once

#include <chrono>
#include <string_view>

#include "base/metrics.h"

namespace fusor {

struct ServiceMetrics {
  // RPCs of fusor.v1.FusionTuner by method and gRPC status code name ("OK", "NOT_FOUND").
  metrics::Family<metrics::Counter>& rpcs;
  metrics::Family<metrics::Histogram>& rpc_seconds;
  // Tune requests that joined an identical queued or running job instead of starting one.
  metrics::Family<metrics::Counter>& tune_joins;
  // Plan cache lookups by RPC (Tune, GetPlan) and result (hit, miss, stale).
  metrics::Family<metrics::Counter>& plan_cache_lookups;
  metrics::Family<metrics::Histogram>& search_seconds;   // Plan search per Tune, by algorithm.
  metrics::Family<metrics::Histogram>& measure_seconds;  // Measured refinement per Tune.
  metrics::Family<metrics::Histogram>& db_seconds;       // Tuning database calls, by operation.
  // Measurement jobs leased to agents by this replica, by target; and of those, the leases of a
  // job an earlier agent's lease had expired on (a lost agent's job taken over).
  metrics::Family<metrics::Counter>& agent_leases;
  metrics::Family<metrics::Counter>& agent_releases;
  // Names of the gauges read at scrape time (registered with Registry::AddGaugeCallback).
  static constexpr const char* kJobsQueued = "fusor_tune_jobs_queued";
  static constexpr const char* kJobsRunning = "fusor_tune_jobs_running";
  static constexpr const char* kJobSubscribers = "fusor_tune_job_subscribers";
  static constexpr const char* kCalibrationAge = "fusor_target_calibration_age_seconds";
  // Measurement agents and their queue, read from the database (shared by replicas).
  static constexpr const char* kAgentsLive = "fusor_measurement_agents_live";
  static constexpr const char* kAgentJobs = "fusor_measurement_jobs";
  static constexpr const char* kAgentJobAge = "fusor_measurement_job_oldest_age_seconds";
};

// fusord's metrics in Registry::Default().
ServiceMetrics& Metrics();

// Observes the time from construction to destruction in one histogram of a family.
class ScopedTimer {
 public:
  explicit ScopedTimer(metrics::Histogram& histogram)
      : histogram_(histogram), start_(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() { histogram_.Observe(metrics::SecondsSince(start_)); }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  metrics::Histogram& histogram_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace fusor
