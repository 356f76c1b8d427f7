// Measured refinement of a searched plan (autotuning). The cost model is wrong sometimes; the
// runtime is the judge. The plan's fused groups are visited largest predicted time first; for each,
// its alternatives (as fused, split as the rules baseline would, every op alone, and the exact
// search's best partition when it differs) are ranked by predicted time, and the top `per_region`
// are measured on the group's region alone. A different alternative replaces the fused group only
// if it is measured faster by more than `noise_margin` (so noise does not undo good fusions).
// Finally the resulting plan, the rules baseline's plan and the unfused plan, each with its Conv /
// MatMul / Gemm groups' kernels chosen among oneDNN's implementations by timing them on the
// group's region (search/kernel_choice.h; AutotuneOptions::choose_kernels: whichever plan wins
// carries its kernels, and the unfused baseline runs on them too, so the speed-up is fusion's
// alone; the resulting plan on oneDNN's first choices is a candidate too), are chosen between by
// the one measurement protocol (search/plan_choice.h): timed side by
// side in alternating rounds until settled, the measured-fastest taken only when it is faster
// beyond the noise, else the best-predicted of those the noise cannot tell apart; `confidence` says
// which happened. A tuned plan is thus never knowingly slower than the rules baseline or than no
// fusion at all, and no single slow stretch of a shared host decides (one made MobileNetV2's tuned
// plan the unfused one). Every measurement counts against `measure_budget`, which does not refuse
// the protocol's rounds (ChoiceOptions::max_rounds at most); `time_limit_s` and the cancelled flag
// stop early with what is known.
// Also returns each single-group measurement as a calibration sample, for later refits, and every
// stable timing of a region alternative or whole plan (the learned residual's training data).
// Uses the runtime through the Measurer seam; not thread-safe (one measurement at a time).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "costmodel/calibration.h"
#include "costmodel/cost_model.h"
#include "runtime/measurer.h"
#include "search/kernel_choice.h"
#include "search/plan_choice.h"
#include "search/plan_search.h"

namespace fusor {

struct AutotuneOptions {
  int measure_budget = 8;      // Region alternatives plus the three whole-plan measurements.
  int per_region = 3;          // Alternatives measured per region, best predicted first.
  double noise_margin = 0.03;  // Relative gain an alternative needs to displace the fused group.
  double time_limit_s = 120;
  ChoiceOptions choice;  // The whole-plan choice.
  // Choose each anchor group's kernel among oneDNN's implementations by measurement
  // (search/kernel_choice.h) before the whole-plan choice; false keeps oneDNN's first choice (the
  // baseline, for comparison). Its timings count against the time limit, not `measure_budget`.
  bool choose_kernels = true;
  KernelChoiceOptions kernels;
};

struct RegionTrial {
  std::string ops;  // "Conv+Relu"
  std::string alternative;
  double predicted_ns = 0;
  double measured_ns = 0;
  bool chosen = false;
};

// One stable timing: a plan of a region cut from the graph, or (region null) of the whole graph.
struct TimedPlan {
  std::shared_ptr<const Graph> region;  // Null: the plan is of the graph Autotune was given.
  std::string what;                     // "plan", or "region Conv+Relu:fused" and the like.
  FusionPlan plan;
  double measured_ns = 0;
};

struct AutotuneResult {
  FusionPlan plan;
  Measurement measured;          // The final plan, whole (MeasurementOf its rounds).
  Measurement unfused_measured;  // Every op alone, whole: the baseline for the speed-up.
  ChoiceConfidence confidence;   // How the final plan was chosen, and how far to trust its time.
  std::vector<RegionTrial> trials;
  std::vector<CalibrationSample> samples;
  std::vector<TimedPlan> timed;  // In the order measured; whole plans by the median of rounds.
  int measurements = 0;
  bool stopped_early = false;  // Budget, time limit or cancellation cut the refinement short.
};

using AutotuneProgress = std::function<void(double fraction, const std::string& detail)>;

StatusOr<AutotuneResult> Autotune(const Graph& g, const CostModel& model,
                                  const TargetFingerprint& target, const FusionPlan& start,
                                  Measurer* measurer, const AutotuneOptions& options,
                                  const AutotuneProgress& progress = {},
                                  const std::atomic<bool>* cancelled = nullptr);

}  // namespace fusor
