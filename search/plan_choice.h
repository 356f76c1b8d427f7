// The one protocol by which Fusor chooses between whole plans by timing them: the in-process
// tuner (search/autotune.h) and a measurement agent (client/measurement_agent.h, with the choice
// made by server/agent_dispatch.h from what the agent reports) both run it.
//
// TimeCandidates times the candidate plans (the searched plan, the rules baseline and the unfused
// plan) side by side in alternating rounds (one Measurer::MeasurePlans call each), at least
// `min_rounds`, and goes on until the timings are Settled or `max_rounds` or the caller's budget
// ends. Each round gives each plan one median; a plan's time is the median of its round medians,
// and two plans are compared by the ratio of their medians within a round (the rounds pair them,
// so a slow stretch of a shared host falls on both). The noise of a time or a ratio is the 95%
// percentile-bootstrap interval of its median over the rounds (fixed seed: the same timings give
// the same interval; with three rounds it is their range).
//
// ChoosePlan picks the measured-fastest plan only when every other plan is slower beyond the
// noise (its ratio's interval above 1 and its median ratio at least 1 + noise_margin); otherwise,
// among the fastest and the plans it does not clearly beat, the one with the lowest predicted
// time, and the choice says so ("within noise: chosen by prediction"). Timings of fewer than
// `min_rounds` rounds (an older agent's single timing) never decide.
//
// Pure functions except TimeCandidates, which uses the Measurer (one thread at a time).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/plan.h"
#include "runtime/measurer.h"

namespace fusor {

struct ChoiceOptions {
  int min_rounds = 3;  // Rounds always timed: the fewest whose interval can exclude a tie.
  int max_rounds = 7;  // Rounds at most, while the timings do not settle.
  // Relative difference below which two plans count as equally fast, whatever the interval says.
  double noise_margin = 0.03;
  // Width of a plan's interval, relative to its time, above which its time is not settled.
  double max_spread = 0.10;
};

// A 95% interval; [0, +inf] when there are too few values to say anything.
struct Interval {
  double low = 0;
  double high = 0;
};

// The percentile-bootstrap interval of the median of `values` (at least `min_values` of them).
Interval MedianInterval(const std::vector<double>& values, int min_values);

// One candidate's timings, round by round.
struct CandidateTiming {
  std::vector<double> round_ns;     // The plan's median in each round, in order.
  std::vector<int64_t> samples_ns;  // Every timed run of every round, ascending.
  int unstable_rounds = 0;          // Rounds whose own spread stayed high (Measurement::unstable).
  double MedianNs() const;          // Median of round_ns; 0 when none.
};

struct CandidateTimings {
  std::vector<CandidateTiming> plans;  // In the order of the candidates.
  int rounds = 0;
  bool settled = false;  // Settled() held when the timing stopped.
};

// Relative width of a plan's interval: (high - low) / median; +inf when it cannot be told.
double Spread(const CandidateTiming& plan, const ChoiceOptions& options);
// The interval of plans[a] / plans[b], round by round.
Interval RatioInterval(const CandidateTimings& t, size_t a, size_t b, const ChoiceOptions& options);

// Whether more rounds are needed: settled when every plan's spread is within max_spread and the
// measured-fastest is, against every other plan, either clearly faster or surely within the
// noise margin (the ratio's whole interval below 1 + noise_margin).
bool Settled(const CandidateTimings& t, const ChoiceOptions& options);

// Times `plans` of `g` in rounds until Settled, max_rounds, or `may_go_on` (asked before each
// round past min_rounds; null: always) says no.
StatusOr<CandidateTimings> TimeCandidates(Measurer* measurer, const Graph& g,
                                          const std::vector<FusionPlan>& plans,
                                          const ChoiceOptions& options,
                                          const std::function<bool()>& may_go_on = {});

inline constexpr char kChosenByMeasurement[] = "chosen by measurement";
inline constexpr char kChosenByPrediction[] = "within noise: chosen by prediction";
inline constexpr char kOnlyCandidate[] = "the only candidate";

struct PlanChoice {
  size_t index = 0;             // The candidate chosen.
  bool by_measurement = false;  // False: the timings could not tell it from another candidate.
  std::string decision;         // kChosenByMeasurement, kChosenByPrediction or kOnlyCandidate.
};

// `predicted_ns` has one prediction per candidate.
PlanChoice ChoosePlan(const CandidateTimings& t, const std::vector<double>& predicted_ns,
                      const ChoiceOptions& options);

// The chosen plan's timings as one Measurement (median of its rounds, every sample, flagged
// unstable when its spread is above max_spread), for what is stored and shown.
Measurement MeasurementOf(const CandidateTiming& plan, const ChoiceOptions& options);

// How far a choice can be trusted, for people: its timings' rounds and samples, the spread of the
// chosen plan's and the unfused plan's times, and the interval of the speed-up over unfused.
struct ChoiceConfidence {
  int rounds = 0;
  int samples = 0;            // Timed runs of the chosen plan.
  double spread = 0;          // Of the chosen plan's time.
  double unfused_spread = 0;  // 0 when the unfused plan was not a candidate.
  Interval speedup;           // Unfused over chosen; {0, 0} when unfused was not a candidate.
  bool settled = false;
  bool unstable = false;  // The chosen or the unfused plan's spread is above max_spread.
  PlanChoice choice;
};

// `unfused` is the unfused plan's candidate index, or -1 when it was not a candidate.
ChoiceConfidence ConfidenceOf(const CandidateTimings& t, const PlanChoice& choice, int unfused,
                              const ChoiceOptions& options);

}  // namespace fusor
