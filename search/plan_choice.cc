#include "search/plan_choice.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

namespace fusor {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Resamples of the bootstrap, and its seed: fixed, so equal timings give equal intervals.
constexpr int kResamples = 2000;
constexpr uint64_t kBootstrapSeed = 46;

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<double> Ratios(const CandidateTimings& t, size_t a, size_t b) {
  const auto& ra = t.plans[a].round_ns;
  const auto& rb = t.plans[b].round_ns;
  std::vector<double> out;
  for (size_t k = 0; k < std::min(ra.size(), rb.size()); ++k) {
    out.push_back(rb[k] > 0 ? ra[k] / rb[k] : kInf);
  }
  return out;
}

// The measured-fastest candidate: lowest median of its rounds (an untimed one never).
size_t Fastest(const CandidateTimings& t) {
  size_t best = 0;
  auto time = [&](size_t i) {
    double m = t.plans[i].MedianNs();
    return m > 0 ? m : kInf;
  };
  for (size_t i = 1; i < t.plans.size(); ++i) {
    if (time(i) < time(best)) best = i;
  }
  return best;
}

// Plan i is slower than plan `fastest` beyond the noise and beyond the margin.
bool ClearlySlower(const CandidateTimings& t, size_t i, size_t fastest,
                   const ChoiceOptions& options) {
  Interval ratio = RatioInterval(t, i, fastest, options);
  return ratio.low > 1 && MedianOf(Ratios(t, i, fastest)) >= 1 + options.noise_margin;
}

// Plan i is within the margin of plan `fastest`, beyond the noise.
bool SurelyTied(const CandidateTimings& t, size_t i, size_t fastest, const ChoiceOptions& options) {
  return RatioInterval(t, i, fastest, options).high < 1 + options.noise_margin;
}

// Standard deviation over mean of the middle 80% of ascending samples (as Measurement::cv).
double CvOf(const std::vector<int64_t>& sorted) {
  const size_t trim = sorted.size() >= 10 ? sorted.size() / 10 : 0;
  if (sorted.size() < 2 + 2 * trim) return 0;
  auto first = sorted.begin() + static_cast<std::ptrdiff_t>(trim);
  auto last = sorted.end() - static_cast<std::ptrdiff_t>(trim);
  const double kept = static_cast<double>(last - first);
  const double mean = std::accumulate(first, last, 0.0) / kept;
  double var = 0;
  for (auto it = first; it != last; ++it) var += std::pow(static_cast<double>(*it) - mean, 2);
  return mean > 0 ? std::sqrt(var / (kept - 1)) / mean : 0;
}

}  // namespace

Interval MedianInterval(const std::vector<double>& values, int min_values) {
  if (values.empty() || static_cast<int>(values.size()) < min_values) return {0, kInf};
  std::mt19937_64 random(kBootstrapSeed);
  std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
  std::vector<double> medians(kResamples), resample(values.size());
  for (double& m : medians) {
    for (double& v : resample) v = values[pick(random)];
    m = MedianOf(resample);
  }
  std::sort(medians.begin(), medians.end());
  const size_t low = static_cast<size_t>(0.025 * kResamples);
  const size_t high = static_cast<size_t>(std::ceil(0.975 * kResamples)) - 1;
  return {medians[low], medians[high]};
}

double CandidateTiming::MedianNs() const { return MedianOf(round_ns); }

double Spread(const CandidateTiming& plan, const ChoiceOptions& options) {
  const double median = plan.MedianNs();
  const Interval interval = MedianInterval(plan.round_ns, options.min_rounds);
  return median > 0 ? (interval.high - interval.low) / median : kInf;
}

Interval RatioInterval(const CandidateTimings& t, size_t a, size_t b,
                       const ChoiceOptions& options) {
  return MedianInterval(Ratios(t, a, b), options.min_rounds);
}

bool Settled(const CandidateTimings& t, const ChoiceOptions& options) {
  for (const CandidateTiming& plan : t.plans) {
    if (!(Spread(plan, options) <= options.max_spread)) return false;
  }
  const size_t fastest = Fastest(t);
  for (size_t i = 0; i < t.plans.size(); ++i) {
    if (i == fastest) continue;
    if (!ClearlySlower(t, i, fastest, options) && !SurelyTied(t, i, fastest, options)) {
      return false;
    }
  }
  return true;
}

StatusOr<CandidateTimings> TimeCandidates(Measurer* measurer, const Graph& g,
                                          const std::vector<FusionPlan>& plans,
                                          const ChoiceOptions& options,
                                          const std::function<bool()>& may_go_on) {
  CandidateTimings t;
  t.plans.resize(plans.size());
  for (int round = 0; round < options.max_rounds; ++round) {
    if (round >= options.min_rounds) {
      if (Settled(t, options)) break;
      if (may_go_on && !may_go_on()) break;
    }
    FUSOR_ASSIGN_OR_RETURN(std::vector<Measurement> ms, measurer->MeasurePlans(g, plans));
    for (size_t i = 0; i < plans.size() && i < ms.size(); ++i) {
      CandidateTiming& plan = t.plans[i];
      plan.round_ns.push_back(static_cast<double>(ms[i].median_ns));
      plan.samples_ns.insert(plan.samples_ns.end(), ms[i].samples_ns.begin(),
                             ms[i].samples_ns.end());
      if (ms[i].unstable) ++plan.unstable_rounds;
    }
    t.rounds = round + 1;
  }
  for (CandidateTiming& plan : t.plans) std::sort(plan.samples_ns.begin(), plan.samples_ns.end());
  t.settled = Settled(t, options);
  return t;
}

PlanChoice ChoosePlan(const CandidateTimings& t, const std::vector<double>& predicted_ns,
                      const ChoiceOptions& options) {
  PlanChoice choice;
  if (t.plans.size() < 2) return {0, false, kOnlyCandidate};
  const size_t fastest = Fastest(t);
  std::vector<size_t> contenders;
  for (size_t i = 0; i < t.plans.size(); ++i) {
    if (i == fastest || !ClearlySlower(t, i, fastest, options)) contenders.push_back(i);
  }
  if (contenders.size() == 1 && t.plans.size() > 1) {
    return {fastest, true, kChosenByMeasurement};
  }
  auto predicted = [&](size_t i) { return i < predicted_ns.size() ? predicted_ns[i] : kInf; };
  choice.index = *std::min_element(contenders.begin(), contenders.end(),
                                   [&](size_t a, size_t b) { return predicted(a) < predicted(b); });
  choice.decision = kChosenByPrediction;
  return choice;
}

Measurement MeasurementOf(const CandidateTiming& plan, const ChoiceOptions& options) {
  Measurement m;
  m.median_ns = static_cast<int64_t>(plan.MedianNs());
  m.samples_ns = plan.samples_ns;
  m.samples = static_cast<int>(plan.samples_ns.size());
  if (!plan.samples_ns.empty()) {
    m.min_ns = plan.samples_ns.front();
    m.max_ns = plan.samples_ns.back();
  }
  m.cv = CvOf(plan.samples_ns);
  m.attempts = static_cast<int>(plan.round_ns.size());
  m.unstable = !(Spread(plan, options) <= options.max_spread);
  return m;
}

ChoiceConfidence ConfidenceOf(const CandidateTimings& t, const PlanChoice& choice, int unfused,
                              const ChoiceOptions& options) {
  ChoiceConfidence c;
  c.rounds = t.rounds;
  c.settled = t.settled;
  c.choice = choice;
  if (choice.index >= t.plans.size()) return c;
  const CandidateTiming& chosen = t.plans[choice.index];
  c.samples = static_cast<int>(chosen.samples_ns.size());
  c.spread = Spread(chosen, options);
  c.unstable = !(c.spread <= options.max_spread);
  if (unfused >= 0 && static_cast<size_t>(unfused) < t.plans.size()) {
    c.unfused_spread = Spread(t.plans[unfused], options);
    c.speedup = RatioInterval(t, static_cast<size_t>(unfused), choice.index, options);
    c.unstable = c.unstable || !(c.unfused_spread <= options.max_spread);
  }
  return c;
}

}  // namespace fusor
