// MeasurementAgent: `fusor agent`'s work on a target machine. It registers this machine's
// calibrated profile with a fusord (a token with the 'agent' role), then leases the measurement
// jobs of its target one at a time, times each job's plans by the measurement protocol of an
// in-process tune (search/plan_choice.h: side by side, in alternating rounds until settled; real
// oneDNN runs under the tune timing policy, runtime/timing_policy.h) while a helper thread renews
// the lease, and reports every round's timings (fusord chooses from them). A job it cannot run (a
// plan that does not build) is reported with the error, so the Tune that queued it falls back to
// the prediction at once.
//
// The agent borrows the connection to fusord (any TunerApi; RemoteTuner in the CLI), which must
// outlive it. One thread drives it; the lease renewal runs on a thread of its own per job.
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "proto/tuner.pb.h"
#include "runtime/measurer_factory.h"
#include "server/tuner_api.h"
#include "server/tuning_service.h"

namespace fusor {

struct MeasurementAgentOptions {
  std::string name;           // Who the agent is (default: the host name).
  int measure_threads = 0;    // OpenMP threads for measurements; 0: all cores.
  double min_measure_ms = 0;  // Repeat each plan's timing this long; 0: as the job says.
  double poll_s = 20;         // How long one lease poll waits for a job.
  int max_jobs = 0;           // Stop after this many jobs; 0: run until stopped.
  MeasurerFactory measurers;  // Null: real oneDNN runs (OneDnnMeasurers).
};

// This machine's calibrated profile from its own tuning service: the stored calibration when it
// fits the current cost model, else a calibration run now (about a minute).
StatusOr<v1::HardwareProfile> CalibratedLocalProfile(TuningService& local);

class MeasurementAgent {
 public:
  MeasurementAgent(TunerApi* server, MeasurementAgentOptions options);

  // Registers the profile's target and this agent with fusord; the agent id is agent_id() after.
  Status Register(const v1::HardwareProfile& profile);
  const std::string& agent_id() const { return agent_id_; }
  const std::string& target_id() const { return target_id_; }

  // One lease poll: a job of the agent's target, or nullopt when none came within poll_s.
  StatusOr<std::optional<v1::MeasurementJob>> Lease(const std::atomic<bool>* stop);
  // Times the job's plans by the protocol; a job that cannot be run gives a result with its error.
  v1::MeasurementResult Measure(const v1::MeasurementJob& job);
  Status Report(const v1::MeasurementJob& job, const v1::MeasurementResult& result);
  // Measure and Report, renewing the lease every third of its time meanwhile.
  Status MeasureAndReport(const v1::MeasurementJob& job);

  // Leases, measures and reports until *stop turns true or max_jobs are done, logging one line
  // per job (lease, plans, result, time) and one at the end. A job whose lease was lost
  // meanwhile (reported by another agent) is logged and skipped; fusord unreachable is retried
  // every few seconds. Returns the first other error.
  Status Run(const std::atomic<bool>* stop);

 private:
  // Run's loop; *done counts the jobs measured.
  Status RunJobs(const std::atomic<bool>* stop, int* done);

  TunerApi* const server_;
  MeasurementAgentOptions options_;
  std::string agent_id_;
  std::string target_id_;
  double lease_s_ = 60;
};

}  // namespace fusor
