// Honest accuracy of a cost model on held-out groups. From each model, sets of ops that form a
// legal group (taken from structural fusion plans, at most `max_ops` ops, one per distinct
// structure by canonical hash) are cut out as regions; each region is run under its alternatives
// (fused as one group, every op alone, and every legal split into two groups), measured through the
// caller's measure function (all alternatives of a region together, side by side where it can, in
// rounds) and predicted by the model. Reported:
//   - MAPE of predicted vs measured time over every (region, alternative);
//   - Kendall's tau between predicted and measured order among the alternatives of each region,
//     averaged over regions weighted by their number of pairs;
//   - the share of fuse-or-not decisions (fused vs every op alone) where the model picks the
//     measured winner, over all regions and over the decisive ones (measured gap >= 5%);
//   - the same tau and share with the measurement standing in for the model: the median of the
//     even rounds against that of the odd rounds. Near-ties are ordered by noise, so this says
//     how far any model could agree with these measurements (an estimate, from half the rounds
//     each, so a little pessimistic).
// Stateless; thread-safe if the measure function is.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "costmodel/calibration.h"
#include "costmodel/cost_model.h"
#include "graph/graph.h"

namespace fusor {

struct HeldOutRegion {
  std::string model;
  std::string ops;    // "Conv+BatchNormalization+Relu"
  std::string where;  // The model's name of its first node and its output shape, to find it.
  Graph graph;
  std::vector<std::pair<std::string, FusionPlan>> alternatives;  // "fused", "unfused", "split@2".
};

// Up to `max_regions` regions of 2..max_ops ops from `g`, deterministic for a seed.
std::vector<HeldOutRegion> HeldOutRegions(const Graph& g, int max_ops, int max_regions,
                                          uint64_t seed);

struct ValidationItem {
  int region = 0;  // Index among the measured regions; a region's alternatives share it.
  std::string model, ops, where, alternative;
  double predicted_ns = 0, measured_ns = 0;  // measured_ns: the median of rounds_ns.
  std::vector<double> rounds_ns;             // Each interleaved round's median, in order.
};

// Tau over the pairs of alternatives whose measured times are [min_gap, max_gap) apart (relative
// to the faster), for the model and for the measurement's even rounds against its odd ones: where
// the model's order and the measurement's own repeatability part.
struct GapBucket {
  double min_gap = 0, max_gap = 0;
  int pairs = 0;
  double tau = 0;
  int repeat_pairs = 0;
  double repeat_tau = 0;
};

struct ValidationReport {
  std::vector<ValidationItem> items;
  double mape = 0;                // Percent.
  double kendall_tau = 0;         // Pair-weighted mean over regions.
  double decisive_tau = 0;        // The same over pairs whose measured times differ by >= 5%.
  double agreement = 0;           // Fraction of fuse-or-not decisions the model gets right.
  double decisive_agreement = 0;  // The same over decisions with a measured gap >= 5%.
  int regions = 0, decisions = 0, decisive_decisions = 0, skipped_unstable = 0;
  // Even rounds against odd rounds (rounds >= 2; else 0): the measurement's own repeatability.
  double repeat_tau = 0;
  double repeat_agreement = 0;
  // Mean relative difference of each alternative's even-round median from its odd-round one (in
  // percent, against the smaller): the measurement's own error, a floor under any model's MAPE.
  double repeat_mape = 0;
  // Measured gaps < 1%, 1-2%, 2-5%, 5-10%, >= 10%.
  std::vector<GapBucket> by_gap;
  // Rounds measured, and those left out as taken in one of the host's slow states (a region whose
  // every round was keeps them all).
  int rounds = 0, disturbed_rounds = 0;
};

// A fuse-or-not decision the model got wrong: fused against unfused, as measured and predicted.
struct WrongFuseCall {
  int region = 0;
  std::string model, ops, where;
  double measured_ratio = 0, predicted_ratio = 0;  // Fused time / unfused time.
  bool decisive = false;                           // Measured >= 5% apart.
};
// The report's wrong fuse-or-not decisions, decisive ones first, then by measured gap, largest
// first: where a person should look first.
std::vector<WrongFuseCall> WrongFuseCalls(const ValidationReport& r);

// Times of each of a region's alternatives, in their order. The CLI measures them side by side
// (Measurer::MeasurePlans), so that a change of the host's speed falls on all of them alike.
using MeasureAlternativesFn =
    std::function<StatusOr<std::vector<MeasuredTime>>(const HeldOutRegion&)>;

// Each alternative measured alone with `measure`, one after the other.
MeasureAlternativesFn OneAfterAnother(MeasureFn measure);

// Each region's alternatives are measured together `rounds` times and each alternative is scored
// by the median of its rounds; a region is skipped as unstable when more than half of some
// alternative's rounds were.
StatusOr<ValidationReport> ValidateCostModel(const std::vector<HeldOutRegion>& regions,
                                             const CostModel& model,
                                             const MeasureAlternativesFn& measure,
                                             const ProgressFn& progress = {}, int rounds = 4);

// How this machine runs now compared with when its profile was fitted: the calibration
// benchmarks measured again, as the median of measured / predicted time. The fit leaves that
// median near 1 (it is unbiased in log space), so a ratio of 1.3 says the machine is 30% slower
// than at calibration (another tenant on a shared host, frequency, thermal state), and held-out
// errors measured now mix that drift with the model's own error. Benchmarks whose timing stays
// unstable are left out, as in calibration.
struct MachineCheck {
  int benchmarks = 0;
  double median_ratio = 0;  // Measured / predicted, median over the benchmarks.
  double p10_ratio = 0, p90_ratio = 0;
};
StatusOr<MachineCheck> CheckMachine(const std::vector<CalibrationBenchmark>& suite,
                                    const HardwareProfile& profile, const MeasureFn& measure,
                                    const ProgressFn& progress = {});

// Drift beyond this share (either way) makes `fusor costmodel validate` warn that the figures it
// prints mix machine drift with model error, and advise recalibrating.
inline constexpr double kMachineDriftTolerance = 0.10;
bool MachineDrifted(const MachineCheck& c);

// Kendall's tau-a over pairs not tied in either ranking; 0 pairs -> 0. With min_gap > 0, only
// pairs whose `b` values differ by at least that fraction count (measurement noise is no order).
double KendallTau(const std::vector<double>& a, const std::vector<double>& b, int* pairs,
                  double min_gap = 0);

nlohmann::json ReportToJson(const ValidationReport& r);

}  // namespace fusor
