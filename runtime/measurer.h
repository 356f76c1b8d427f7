// Measurer: the seam through which the search and the CLI time fusion groups and whole plans.
// OneDnnMeasurer runs them for real (Executor on random inputs and weights of a fixed seed);
// RecordedMeasurer answers from a table, for unit tests of code above the runtime. TimeRepeated is
// the timing discipline both the measurer and the benchmarks use: warm-up, repeats until a minimum
// total time, median and coefficient of variation, optional cache flush between repeats (not
// timed), retries while the spread stays high; a result still too noisy is flagged `unstable`,
// never silently passed off as a clean number. Optionally each attempt first waits for a quiet
// host (TimingOptions::quiet_wait_ms).
//
// A Measurer is used by one thread at a time (it changes the OpenMP thread count it is told to
// use); RecordedMeasurer's table is guarded by a mutex and may be shared.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "graph/graph.h"
#include "graph/plan.h"
#include "runtime/executor.h"

namespace fusor {

// Whether the host is as quiet as it has been: a probe (by default CrossCoreProbeNs) within a
// margin of the quickest it has returned through this object. Thread-safe. A process that starts
// in a slow state and stays in it sees only slow probes: SettleHost checks against an absolute
// ratio instead.
class HostQuietness {
 public:
  explicit HostQuietness(std::function<int64_t()> probe);
  bool Quiet(double margin);  // Probes once. A probe of 0 or less (nothing to probe) is quiet.
  static HostQuietness& Default();  // The cross-core probe, shared by the process.

 private:
  std::function<int64_t()> probe_;
  std::atomic<int64_t> quickest_ns_{std::numeric_limits<int64_t>::max()};
};

// Each of two cores rewrites its half of a 512 KiB buffer, then reads the half the other wrote:
// the cost of moving data between the team's cores, which is what a shared host's slow states
// change. Median of 5 runs, ns (~80 us on an idle 2-vCPU guest); 0 with fewer than 2 threads.
int64_t CrossCoreProbeNs();

// CrossCoreProbeNs over the same work with each core reading back the half it wrote: 1.0-1.2 on
// this 2-vCPU guest when its vCPUs sit close on the host, 1.9-2.9 when they do not; every plan
// then ran ~1.9x slower (SqueezeNet 7.9 ms against 4.1: its kernels hand their outputs from one
// core to the other), for as long as the process kept the cores busy, while each core alone
// (integer chain, FMA, reads) ran as fast. 1 with fewer than 2 threads.
double CrossCoreRatio();
// Above this CrossCoreRatio the host is in a slow state, whatever the process has seen.
inline constexpr double kMaxCrossCoreRatio = 1.6;

// Before a series of timings (`what`: "calibrate", ...): while CrossCoreRatio is above
// kMaxCrossCoreRatio, sleeps in steps of 100 ms, up to `max_ms` (an idle guest's vCPUs are placed
// afresh by the host when they wake: of 25 processes here 11 were slow, 7 of them left the state
// within 0.2-2.4 s, but at timing 9 were slow again); then probes HostQuietness::Default() once,
// so its quickest is a quiet one. Logs a
// warning naming the ratio when the state did not end. True when the host is quiet.
// `ratio` and `clock` are seams for tests (null: CrossCoreRatio and Clock::Real()).
bool SettleHost(int max_ms, const std::string& what, const std::function<double()>& ratio = {},
                const Clock* clock = nullptr);

// How long every timed command, the tuner's measurements and the benches let SettleHost wait
// before they start: 3 s covers the 0.2-2.4 s in which most slow states ended (above) and is short
// next to any of them.
inline constexpr int kSettleHostMaxMs = 3000;

struct TimingOptions {
  int warmup = 2;  // Untimed runs first (page faults, JIT, caches).
  int min_repeats = 5;
  int max_repeats = 1000;
  int64_t min_total_ns = 200'000'000;  // Keep repeating until the timed runs add up to this.
  bool flush_cache = false;  // Overwrite `flush_bytes` between repeats (cold-cache timing).
  int64_t flush_bytes = int64_t{64} << 20;
  double max_cv = 0.05;  // Spread above this triggers a retry...
  int retries = 2;       // ...this many times, then the result is flagged unstable.
  // A shared host moves, for seconds at a time, between states where moving data between cores
  // costs up to 2-3x more: on a 2-vCPU KVM guest a conv group of 60 us took 60, 80, 100 or 160 us,
  // tracking a probe in which each core reads what the other just wrote (runtime/measurer.cc),
  // while single-core arithmetic did not change. The spread within an attempt stays low, so the
  // spread check cannot see it. Before each attempt the probe must come within `quiet_margin` of
  // the quickest it has been in this process (waiting up to `quiet_wait_ms`), and the probe after
  // it sets Measurement::disturbed, as does (with the default probe) a CrossCoreRatio above
  // kMaxCrossCoreRatio: a process that started in a slow state has seen only slow probes, and a
  // first calibration timed there fitted conv at 130 GFLOP/s against 230 and validated at 38-44%
  // MAPE. 0 (the default: tests, and the tuner's confirmations, which
  // compare alternatives side by side) turns both off; calibration and validation, whose times
  // are compared with a profile, turn it on.
  int quiet_wait_ms = 0;
  double quiet_margin = 1.10;
  HostQuietness* quietness = nullptr;  // Null: HostQuietness::Default().
  const Clock* clock = nullptr;        // Times the runs and the waits. Null: Clock::Real().
};

struct Measurement {
  int64_t median_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  double cv = 0;  // Standard deviation / mean of the middle 80% of the samples (when 10+).
  int samples = 0;
  int attempts = 1;  // 1 + retries used.
  int threads = 0;
  bool unstable = false;   // cv stayed above max_cv after every retry.
  bool disturbed = false;  // The host was in a slow state after the kept attempt (quiet_wait_ms).
  // Per group of a measured plan: it ran as oneDNN's primitive chain, not our loop (empty when
  // not known, as for a recorded measurement).
  std::vector<bool> primitive_chain;
  std::vector<int64_t> samples_ns;  // Every timed run of the kept attempt, ascending.
  std::string ToString() const;     // "1.234 ms (cv 1.2%, n=57, 2 threads)".
};

Measurement TimeRepeated(const std::function<void()>& run, const TimingOptions& options);

// Times alternatives side by side: in short bursts taken in turn (A A A, B B B, C C C, A A A,
// ...), each burst opened by an untimed run that puts the alternative's data back in cache, so
// every timed run follows a run of its own, as in TimeRepeated, while a change of the host's
// speed lasting more than a few milliseconds falls on all alternatives alike. Timed runs of a
// burst add up to `burst_ns` (at least one run). Each alternative's result is as TimeRepeated's:
// min_repeats / min_total_ns / max_repeats count its own timed runs; when one's spread stays
// above max_cv after the retries, all are timed again and the attempt with the lowest highest
// spread is kept, its noisy ones flagged unstable; `disturbed` as for TimeRepeated. Comparing two
// plans this way halved the spread of their measured ratio from one such measurement to the next
// on a shared 2-vCPU host (docs/decisions.md, "Alternatives are timed side by side").
std::vector<Measurement> TimeSideBySide(const std::vector<std::function<void()>>& runs,
                                        const TimingOptions& options, int64_t burst_ns = 2'000'000);

// Each group of a plan timed alone (Executor::RunGroup again and again: its own working set warm
// in the caches) and inside the plan (Executor::RunProfiled: its inputs just written by the group
// before, everything else where the other groups left it), ns per group.
struct GroupTimesInPlan {
  std::vector<double> alone_ns, in_plan_ns;
};

// Profiled runs of the plan at least: each group's in-plan time is the median of its share of
// them, which a preemption on a shared host moves only when it hits that group in half of them.
inline constexpr int kInPlanProfiledRuns = 21;

// One timing of `exec`'s groups both ways: each group alone (median over `group_min_ms`), then
// profiled runs of the whole plan (at least kInPlanProfiledRuns and `plan_min_ms`).
GroupTimesInPlan TimeGroupsInPlan(Executor& exec, double group_min_ms, double plan_min_ms);

class Measurer {
 public:
  virtual ~Measurer() = default;
  // Time of one run of the whole plan.
  virtual StatusOr<Measurement> MeasurePlan(const Graph& g, const FusionPlan& plan) = 0;
  // Time of one group run alone, with its inputs in memory (a region of the graph).
  virtual StatusOr<Measurement> MeasureGroup(const Graph& g, const FusionGroup& group) = 0;
  // Times of one run of each plan, measured side by side where the measurer can (TimeSideBySide);
  // this default measures them one after the other.
  virtual StatusOr<std::vector<Measurement>> MeasurePlans(const Graph& g,
                                                          const std::vector<FusionPlan>& plans);
  // Per group of `plan`, oneDNN's implementations of its anchor primitive on the measuring CPU
  // (Executor::Implementations); this default knows of none, so nothing is chosen among them.
  virtual StatusOr<std::vector<KernelImplementations>> Implementations(const Graph& g,
                                                                       const FusionPlan& plan);
  // Each group of `plan` timed alone and inside the plan, the quickest of `rounds` timings
  // (TimeGroupsInPlan; a slow state of the host only adds time); this default cannot
  // (Unimplemented).
  virtual StatusOr<GroupTimesInPlan> MeasureGroupsInPlan(const Graph& g, const FusionPlan& plan,
                                                         int rounds);
};

struct OneDnnMeasurerOptions {
  TimingOptions timing;
  ExecutorOptions executor;
  uint64_t seed = 1;  // Random inputs and weights.
};

class OneDnnMeasurer : public Measurer {
 public:
  explicit OneDnnMeasurer(OneDnnMeasurerOptions options) : options_(std::move(options)) {}
  StatusOr<Measurement> MeasurePlan(const Graph& g, const FusionPlan& plan) override;
  StatusOr<Measurement> MeasureGroup(const Graph& g, const FusionGroup& group) override;
  StatusOr<std::vector<Measurement>> MeasurePlans(const Graph& g,
                                                  const std::vector<FusionPlan>& plans) override;
  StatusOr<std::vector<KernelImplementations>> Implementations(const Graph& g,
                                                               const FusionPlan& plan) override;
  StatusOr<GroupTimesInPlan> MeasureGroupsInPlan(const Graph& g, const FusionPlan& plan,
                                                 int rounds) override;

 private:
  OneDnnMeasurerOptions options_;
};

// A table of measurements keyed by PlanKey / GroupKey; NotFound for anything not recorded.
class RecordedMeasurer : public Measurer {
 public:
  static std::string PlanKey(const Graph& g, const FusionPlan& plan);
  static std::string GroupKey(const Graph& g, const FusionGroup& group);
  void Record(const std::string& key, const Measurement& m);
  // Answers for `key` in this order, one per call, the last one repeating.
  void RecordSequence(const std::string& key, std::vector<Measurement> answers);
  StatusOr<Measurement> MeasurePlan(const Graph& g, const FusionPlan& plan) override;
  StatusOr<Measurement> MeasureGroup(const Graph& g, const FusionGroup& group) override;

 private:
  struct Answers {
    std::vector<Measurement> in_order;
    size_t next = 0;
  };
  StatusOr<Measurement> Find(const std::string& key);
  std::mutex mu_;
  std::map<std::string, Answers> table_;  // Guarded by mu_.
};

}  // namespace fusor
