// Calibration: the micro-benchmarks that pin the profile's constants, and the driver that measures
// them and fits. Each benchmark is a small graph that runs as one group, chosen to isolate terms:
// streaming at sizes that sit in each cache level (read-heavy, write-heavy, both), elementwise and
// transcendental chains of growing length, matmul and conv shapes across arithmetic intensities
// (plain, depthwise), reductions, tiny kernels for dispatch overhead, conv post-op chains of
// growing length, and wide fused loops for register pressure.
//
// Measuring is the caller's: costmodel/ does not link the runtime (docs/architecture.md), so the
// driver takes a MeasureFn, which the CLI and the server implement with runtime/'s OneDnnMeasurer.
// Every sample is kept (the append-only calibration log) so fits can be rerun over all samples so
// far. Stateless functions; thread-safe if the MeasureFn is.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "costmodel/cost_model.h"
#include "costmodel/fit.h"
#include "costmodel/hardware_profile.h"
#include "graph/graph.h"
#include "graph/plan.h"

namespace fusor {

struct CalibrationBenchmark {
  std::string name;  // "stream_relu_l2_256KiB", "matmul_256x256x256", ...
  Graph graph;
  FusionPlan plan;  // One group.
  // Timed with the runtime held to oneDNN's primitive chain for groups it could also run as our
  // loop: the rates of oneDNN's jit Exp / Sigmoid / swish are pinned even where our loop is the
  // faster and the runtime, left to choose, would never run them.
  bool onednn_chain = false;
};

// The suite for a target (sizes follow its cache sizes). `scale` < 1 shrinks the number of points
// per family, for quick runs and tests.
std::vector<CalibrationBenchmark> CalibrationSuite(const TargetFingerprint& target,
                                                   double scale = 1.0);

struct MeasuredTime {
  double median_ns = 0;
  double cv = 0;
  bool unstable = false;
  // Per group, when the measurer knows: the group ran as oneDNN's primitive chain (the features'
  // `or_else`) rather than our loop. Calibration then fits that alternative's features alone.
  std::vector<bool> primitive_chain;
  // The host was in one of its slow states when the timing ended (runtime/measurer.h).
  bool disturbed = false;
};
using MeasureFn = std::function<StatusOr<MeasuredTime>(const Graph&, const FusionPlan&)>;
using ProgressFn = std::function<void(size_t done, size_t total, const std::string& name)>;

struct CalibrationResult {
  HardwareProfile profile;
  FitReport report;
  std::vector<CalibrationSample> samples;
  int skipped_unstable = 0;  // Benchmarks whose timing stayed too noisy: not used in the fit.
  std::vector<std::string> unstable;  // Their names.
  // Timings taken again, after the rest of the suite, of benchmarks timed in one of the host's slow
  // states (up to three passes; the quickest timing is kept, as a slow state only adds time), and
  // the benchmarks still slow after them.
  int retimed_disturbed = 0;
  std::vector<std::string> disturbed;
};

// Measures every benchmark, turns each into a sample (its features under `target`) and fits a
// profile starting from `start` (defaults, or the previous calibration). Samples from earlier
// calibrations of the same target may be passed in `previous` and are fitted together with the new.
// `measure_onednn_chain` times the benchmarks marked `onednn_chain`; without it they are left out.
StatusOr<CalibrationResult> Calibrate(const std::vector<CalibrationBenchmark>& suite,
                                      const HardwareProfile& start, const MeasureFn& measure,
                                      const ProgressFn& progress = {},
                                      const std::vector<CalibrationSample>& previous = {},
                                      const MeasureFn& measure_onednn_chain = {});

// What a plan adds to its groups' times (costmodel/in_plan.h), pinned apart from the suite above:
// for each cold step (L1 to L2, L2 to L3, L3 to DRAM), a chain of MatMuls of one row against
// square weights of a quarter of the step's upper level each (cores times the per-core L1 and L2,
// the L3), every MatMul a group of its own. Alone a group's weights stay in that level; in the plan
// the other groups' weights pass between two reads of them, so they come from the level below.
std::vector<CalibrationBenchmark> InPlanSuite(const TargetFingerprint& target);

// Each group of a plan timed alone and inside the plan, ns (runtime/measurer.h,
// Measurer::MeasureGroupsInPlan).
struct InPlanTimes {
  std::vector<double> alone_ns, in_plan_ns;
};
using InPlanMeasureFn = std::function<StatusOr<InPlanTimes>(const Graph&, const FusionPlan&)>;

// Times the groups of each plan of `suite` alone and inside the plan, and fits the in-plan
// constants to them (FitInPlanConstants) with the reads' cold bytes under `target`. An error when a
// timing fails or no group reads a byte below its alone level.
StatusOr<InPlanConstants> CalibrateInPlan(const std::vector<CalibrationBenchmark>& suite,
                                          const TargetFingerprint& target,
                                          const InPlanMeasureFn& measure);

// The calibration log: samples as JSON lines, one object per sample.
nlohmann::json SampleToJson(const CalibrationSample& s);
StatusOr<CalibrationSample> SampleFromJson(const nlohmann::json& j);

}  // namespace fusor
