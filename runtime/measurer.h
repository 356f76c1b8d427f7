// Measurer: the seam through which the search and the CLI time fusion groups and whole plans.
// OneDnnMeasurer runs them for real (Executor on random inputs and weights of a fixed seed);
// RecordedMeasurer answers from a table, for unit tests of code above the runtime. TimeRepeated is
// the timing discipline both the measurer and the benchmarks use: warm-up, repeats until a minimum
// total time, median and coefficient of variation, optional cache flush between repeats (not
// timed), retries while the spread stays high; a result still too noisy is flagged `unstable`,
// never silently passed off as a clean number.
//
// A Measurer is used by one thread at a time (it changes the OpenMP thread count it is told to
// use); RecordedMeasurer's table is guarded by a mutex and may be shared.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/plan.h"
#include "runtime/executor.h"

namespace fusor {

struct TimingOptions {
  int warmup = 2;  // Untimed runs first (page faults, JIT, caches).
  int min_repeats = 5;
  int max_repeats = 1000;
  int64_t min_total_ns = 200'000'000;  // Keep repeating until the timed runs add up to this.
  bool flush_cache = false;  // Overwrite `flush_bytes` between repeats (cold-cache timing).
  int64_t flush_bytes = int64_t{64} << 20;
  double max_cv = 0.05;  // Spread above this triggers a retry...
  int retries = 2;       // ...this many times, then the result is flagged unstable.
};

struct Measurement {
  int64_t median_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  double cv = 0;  // Standard deviation / mean of the middle 80% of the samples (when 10+).
  int samples = 0;
  int attempts = 1;  // 1 + retries used.
  int threads = 0;
  bool unstable = false;            // cv stayed above max_cv after every retry.
  std::vector<int64_t> samples_ns;  // Every timed run of the kept attempt, ascending.
  std::string ToString() const;     // "1.234 ms (cv 1.2%, n=57, 2 threads)".
};

Measurement TimeRepeated(const std::function<void()>& run, const TimingOptions& options);

class Measurer {
 public:
  virtual ~Measurer() = default;
  // Time of one run of the whole plan.
  virtual StatusOr<Measurement> MeasurePlan(const Graph& g, const FusionPlan& plan) = 0;
  // Time of one group run alone, with its inputs in memory (a region of the graph).
  virtual StatusOr<Measurement> MeasureGroup(const Graph& g, const FusionGroup& group) = 0;
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

 private:
  OneDnnMeasurerOptions options_;
};

// A table of measurements keyed by PlanKey / GroupKey; NotFound for anything not recorded.
class RecordedMeasurer : public Measurer {
 public:
  static std::string PlanKey(const Graph& g, const FusionPlan& plan);
  static std::string GroupKey(const Graph& g, const FusionGroup& group);
  void Record(const std::string& key, const Measurement& m);
  StatusOr<Measurement> MeasurePlan(const Graph& g, const FusionPlan& plan) override;
  StatusOr<Measurement> MeasureGroup(const Graph& g, const FusionGroup& group) override;

 private:
  StatusOr<Measurement> Find(const std::string& key) const;
  mutable std::mutex mu_;
  std::map<std::string, Measurement> table_;  // Guarded by mu_.
};

}  // namespace fusor
