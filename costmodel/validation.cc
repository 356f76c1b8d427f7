#include "costmodel/validation.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <random>
#include <set>

#include "graph/canonical.h"
#include "lowering/plan_legality.h"

namespace fusor {
namespace {

std::string OpsOf(const Graph& g) {
  std::string s;
  for (const Node& n : g.nodes()) s += (s.empty() ? "" : "+") + n.op_type;
  return s;
}

// "/layer4/layer4.1/Add -> 1x512x1x1": the first node's name in the model, the last one's output.
std::string WhereOf(const Graph& r) {
  if (r.num_nodes() == 0) return "";
  const Node& last = r.node(static_cast<NodeId>(r.num_nodes() - 1));
  std::string out = last.outputs.empty() ? "" : ShapeString(r.tensor(last.outputs[0]).dims);
  return r.node(0).name + " -> " + out;
}

// The alternatives of a region whose nodes form one legal group.
std::vector<std::pair<std::string, FusionPlan>> Alternatives(const Graph& r) {
  std::vector<std::pair<std::string, FusionPlan>> out;
  std::vector<NodeId> all;
  for (NodeId id = 0; id < static_cast<NodeId>(r.num_nodes()); ++id) all.push_back(id);
  auto kind = InferGroupKind(r, all);
  if (!kind.ok()) return out;
  // A prefix of a group may leave a value its group read inside (a conv's output that the Mul of
  // its x * Sigmoid(x) reads): one primitive cannot write it, so the prefix is no region.
  FusionPlan fused{{FusionGroup{*kind, all, {}}}};
  if (!CheckPlan(r, fused).ok()) return out;
  out.emplace_back("fused", std::move(fused));
  out.emplace_back("unfused", UnfusedPlan(r));
  // Two-op regions have no split other than "unfused".
  for (size_t cut = 1; all.size() > 2 && cut < all.size(); ++cut) {
    std::vector<NodeId> head(all.begin(), all.begin() + cut), tail(all.begin() + cut, all.end());
    auto hk = InferGroupKind(r, head), tk = InferGroupKind(r, tail);
    if (!hk.ok() || !tk.ok()) continue;
    FusionPlan split{{FusionGroup{*hk, head, {}}, FusionGroup{*tk, tail, {}}}};
    if (CheckPlan(r, split).ok()) out.emplace_back("split@" + std::to_string(cut), split);
  }
  return out;
}

// Candidate node sets: the groups of structural plans, and their prefixes down to two ops.
std::vector<std::vector<NodeId>> CandidateSets(const Graph& g, int max_ops, uint64_t seed) {
  std::vector<FusionPlan> plans = {MaxFusionPlan(g)};
  for (uint64_t s = 0; s < 3; ++s) plans.push_back(RandomLegalPlan(g, seed + s, 0.7, 0.0));
  std::vector<std::vector<NodeId>> sets;
  for (const FusionPlan& p : plans) {
    for (const FusionGroup& group : p.groups) {
      for (size_t len = std::min<size_t>(group.nodes.size(), max_ops); len >= 2; --len) {
        sets.emplace_back(group.nodes.begin(), group.nodes.begin() + len);
      }
    }
  }
  std::mt19937_64 rng(seed);
  std::shuffle(sets.begin(), sets.end(), rng);
  return sets;
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(q * (v.size() - 1))];
}

}  // namespace

std::vector<HeldOutRegion> HeldOutRegions(const Graph& g, int max_ops, int max_regions,
                                          uint64_t seed) {
  std::vector<HeldOutRegion> out;
  std::set<std::string> seen;
  for (const auto& nodes : CandidateSets(g, max_ops, seed)) {
    if (static_cast<int>(out.size()) >= max_regions) break;
    Graph r = g.ExtractRegion(nodes);
    if (!seen.insert(CanonicalHash(r)).second) continue;
    auto alternatives = Alternatives(r);
    if (alternatives.size() < 2) continue;
    out.push_back({g.model_name, OpsOf(r), WhereOf(r), std::move(r), std::move(alternatives)});
  }
  return out;
}

StatusOr<MachineCheck> CheckMachine(const std::vector<CalibrationBenchmark>& suite,
                                    const HardwareProfile& profile, const MeasureFn& measure,
                                    const ProgressFn& progress) {
  std::vector<double> ratios;
  for (size_t i = 0; i < suite.size(); ++i) {
    const CalibrationBenchmark& b = suite[i];
    if (progress) progress(i, suite.size(), b.name);
    auto m = measure(b.graph, b.plan);
    if (!m.ok()) return m.status().WithContext("machine check '" + b.name + "'");
    if (m->unstable) continue;
    GroupFeatures f = PlanFeatures(b.graph, b.plan, profile.target).at(0);
    ratios.push_back(m->median_ns / EvaluateFeatures(f, profile).total_ns);
  }
  if (ratios.empty()) return Status::FailedPrecondition("machine check: every benchmark unstable");
  return MachineCheck{static_cast<int>(ratios.size()), Percentile(ratios, 0.5),
                      Percentile(ratios, 0.1), Percentile(ratios, 0.9)};
}

bool MachineDrifted(const MachineCheck& c) {
  return c.benchmarks > 0 &&
         std::fabs(std::log(c.median_ratio)) > std::log1p(kMachineDriftTolerance);
}

double KendallTau(const std::vector<double>& a, const std::vector<double>& b, int* pairs,
                  double min_gap) {
  int concordant = 0, discordant = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = i + 1; j < a.size(); ++j) {
      if (std::fabs(b[i] - b[j]) < min_gap * std::min(b[i], b[j])) continue;
      double x = (a[i] - a[j]) * (b[i] - b[j]);
      if (x > 0) ++concordant;
      if (x < 0) ++discordant;
    }
  }
  *pairs = concordant + discordant;
  return *pairs ? static_cast<double>(concordant - discordant) / *pairs : 0.0;
}

// Empty buckets of measured gap: < 1%, 1-2%, 2-5%, 5-10%, >= 10%.
std::vector<GapBucket> GapBuckets() {
  const double edges[] = {0, 0.01, 0.02, 0.05, 0.10, std::numeric_limits<double>::infinity()};
  std::vector<GapBucket> out;
  for (size_t i = 0; i + 1 < std::size(edges); ++i) out.push_back({edges[i], edges[i + 1]});
  return out;
}

// Adds one pair's sign of agreement `x` (ordered the same way > 0, the other way < 0, a tie 0).
void Tally(double x, int* pairs, double* sum) {
  if (x == 0) return;
  ++*pairs;
  *sum += x > 0 ? 1 : -1;
}

// Tallies a region's pairs by their measured gap: `pred` against `meas`, and (when given) `even`
// against `odd`; each bucket's tau fields hold concordant minus discordant pairs until
// FinishGapBuckets divides them by the pairs.
void TallyByGap(const std::vector<double>& pred, const std::vector<double>& meas,
                const std::vector<double>& even, const std::vector<double>& odd,
                std::vector<GapBucket>* buckets) {
  for (size_t i = 0; i < meas.size(); ++i) {
    for (size_t j = i + 1; j < meas.size(); ++j) {
      double gap = std::fabs(meas[i] - meas[j]) / std::min(meas[i], meas[j]);
      GapBucket* b = &buckets->front();
      while (gap >= b->max_gap) ++b;
      Tally((pred[i] - pred[j]) * (meas[i] - meas[j]), &b->pairs, &b->tau);
      if (!even.empty()) {
        Tally((even[i] - even[j]) * (odd[i] - odd[j]), &b->repeat_pairs, &b->repeat_tau);
      }
    }
  }
}

void FinishGapBuckets(std::vector<GapBucket>* buckets) {
  for (GapBucket& b : *buckets) {
    b.tau = b.pairs ? b.tau / b.pairs : 0;
    b.repeat_tau = b.repeat_pairs ? b.repeat_tau / b.repeat_pairs : 0;
  }
}

MeasureAlternativesFn OneAfterAnother(MeasureFn measure) {
  return [measure =
              std::move(measure)](const HeldOutRegion& r) -> StatusOr<std::vector<MeasuredTime>> {
    std::vector<MeasuredTime> out;
    for (const auto& [name, plan] : r.alternatives) {
      auto m = measure(r.graph, plan);
      if (!m.ok()) return m.status().WithContext(name);
      out.push_back(*m);
    }
    return out;
  };
}

StatusOr<ValidationReport> ValidateCostModel(const std::vector<HeldOutRegion>& regions,
                                             const CostModel& model,
                                             const MeasureAlternativesFn& measure,
                                             const ProgressFn& progress, int rounds) {
  rounds = std::max(rounds, 1);
  ValidationReport report;
  report.by_gap = GapBuckets();
  double abs_pct = 0, tau_sum = 0, decisive_tau_sum = 0, repeat_tau_sum = 0;
  int tau_pairs = 0, decisive_pairs = 0, agree = 0, decisive_agree = 0, repeat_pairs = 0,
      repeat_agree = 0, repeat_decisions = 0, repeat_items = 0;
  double repeat_pct = 0;
  for (size_t ri = 0; ri < regions.size(); ++ri) {
    const HeldOutRegion& r = regions[ri];
    if (progress) progress(ri, regions.size(), r.ops);
    // Alternatives are measured together in rounds and each keeps the median of its rounds, so
    // one odd round does not reorder them. Rounds taken in one of the host's slow states
    // (MeasuredTime::disturbed) are left out while at least one round was not.
    const size_t n = r.alternatives.size();
    std::vector<std::vector<double>> times(n);
    std::vector<int> unstable_rounds(n, 0);
    std::vector<int> kept;  // Rounds the medians use.
    for (int round = 0; round < rounds; ++round) {
      auto ms = measure(r);
      if (!ms.ok()) return ms.status().WithContext("region " + r.ops);
      if (ms->size() != n) {
        return Status::Internal("region " + r.ops + ": " + std::to_string(ms->size()) +
                                " times measured for " + std::to_string(n) + " alternatives");
      }
      bool disturbed = false;
      for (size_t a = 0; a < n; ++a) {
        unstable_rounds[a] += (*ms)[a].unstable ? 1 : 0;
        times[a].push_back((*ms)[a].median_ns);
        disturbed |= (*ms)[a].disturbed;
      }
      if (!disturbed) kept.push_back(round);
    }
    report.rounds += rounds;
    report.disturbed_rounds += rounds - static_cast<int>(kept.size());
    if (kept.empty()) {
      for (int round = 0; round < rounds; ++round) kept.push_back(round);
    }
    std::vector<double> pred, meas, even, odd;
    bool unstable = false;
    for (size_t a = 0; a < n; ++a) {
      unstable |= 2 * unstable_rounds[a] > rounds;
      pred.push_back(model.WholePlan(r.graph, r.alternatives[a].second).total_ns);
      std::vector<double> used, half[2];
      for (size_t k = 0; k < kept.size(); ++k) {
        used.push_back(times[a][kept[k]]);
        half[k % 2].push_back(times[a][kept[k]]);
      }
      meas.push_back(Percentile(used, 0.5));
      if (kept.size() >= 2) {
        even.push_back(Percentile(half[0], 0.5));
        odd.push_back(Percentile(half[1], 0.5));
      }
    }
    if (unstable) {
      ++report.skipped_unstable;
      continue;
    }
    ++report.regions;
    for (size_t i = 0; i < pred.size(); ++i) {
      report.items.push_back({report.regions - 1, r.model, r.ops, r.where, r.alternatives[i].first,
                              pred[i], meas[i], times[i]});
      abs_pct += 100 * std::fabs(pred[i] - meas[i]) / meas[i];
    }
    TallyByGap(pred, meas, even, odd, &report.by_gap);
    int pairs = 0;
    double tau = KendallTau(pred, meas, &pairs);
    tau_sum += tau * pairs;
    tau_pairs += pairs;
    tau = KendallTau(pred, meas, &pairs, 0.05);
    decisive_tau_sum += tau * pairs;
    decisive_pairs += pairs;
    for (size_t i = 0; i < even.size(); ++i, ++repeat_items) {
      repeat_pct += 100 * std::fabs(even[i] - odd[i]) / std::min(even[i], odd[i]);
    }
    if (!even.empty()) {
      tau = KendallTau(even, odd, &pairs);
      repeat_tau_sum += tau * pairs;
      repeat_pairs += pairs;
      repeat_agree += (even[0] < even[1]) == (odd[0] < odd[1]);
      ++repeat_decisions;
    }
    // Alternatives 0 and 1 are "fused" and "unfused".
    bool right = (pred[0] < pred[1]) == (meas[0] < meas[1]);
    ++report.decisions;
    agree += right;
    if (std::fabs(meas[0] - meas[1]) >= 0.05 * std::min(meas[0], meas[1])) {
      ++report.decisive_decisions;
      decisive_agree += right;
    }
  }
  if (progress) progress(regions.size(), regions.size(), "done");
  if (report.items.empty()) return Status::FailedPrecondition("no region could be measured stably");
  report.mape = abs_pct / report.items.size();
  report.kendall_tau = tau_pairs ? tau_sum / tau_pairs : 0;
  report.decisive_tau = decisive_pairs ? decisive_tau_sum / decisive_pairs : 0;
  report.agreement = report.decisions ? static_cast<double>(agree) / report.decisions : 0;
  report.repeat_tau = repeat_pairs ? repeat_tau_sum / repeat_pairs : 0;
  report.repeat_mape = repeat_items ? repeat_pct / repeat_items : 0;
  FinishGapBuckets(&report.by_gap);
  report.repeat_agreement =
      repeat_decisions ? static_cast<double>(repeat_agree) / repeat_decisions : 0;
  report.decisive_agreement = report.decisive_decisions
                                  ? static_cast<double>(decisive_agree) / report.decisive_decisions
                                  : 0;
  return report;
}

std::vector<WrongFuseCall> WrongFuseCalls(const ValidationReport& r) {
  std::vector<WrongFuseCall> wrong;
  for (size_t i = 0; i + 1 < r.items.size(); ++i) {
    const ValidationItem &fused = r.items[i], &unfused = r.items[i + 1];
    if (fused.region != unfused.region || fused.alternative != "fused") continue;
    double measured = fused.measured_ns / unfused.measured_ns;
    double predicted = fused.predicted_ns / unfused.predicted_ns;
    if ((measured < 1) == (predicted < 1)) continue;
    bool decisive = std::fabs(fused.measured_ns - unfused.measured_ns) >=
                    0.05 * std::min(fused.measured_ns, unfused.measured_ns);
    wrong.push_back(
        {fused.region, fused.model, fused.ops, fused.where, measured, predicted, decisive});
  }
  auto gap = [](const WrongFuseCall& w) { return std::fabs(std::log(w.measured_ratio)); };
  std::stable_sort(wrong.begin(), wrong.end(), [&](const auto& a, const auto& b) {
    return a.decisive != b.decisive ? a.decisive : gap(a) > gap(b);
  });
  return wrong;
}

nlohmann::json ReportToJson(const ValidationReport& r) {
  nlohmann::json items = nlohmann::json::array();
  std::vector<double> errors;
  for (const auto& i : r.items) {
    items.push_back({{"region", i.region},
                     {"model", i.model},
                     {"ops", i.ops},
                     {"where", i.where},
                     {"alternative", i.alternative},
                     {"predicted_ns", i.predicted_ns},
                     {"measured_ns", i.measured_ns},
                     {"rounds_ns", i.rounds_ns}});
    errors.push_back(std::fabs(i.predicted_ns - i.measured_ns) / i.measured_ns * 100);
  }
  nlohmann::json by_gap = nlohmann::json::array();
  for (const GapBucket& b : r.by_gap) {
    by_gap.push_back(
        {{"min_gap", b.min_gap},
         {"max_gap", std::isinf(b.max_gap) ? nlohmann::json() : nlohmann::json(b.max_gap)},
         {"pairs", b.pairs},
         {"kendall_tau", b.tau},
         {"repeat_pairs", b.repeat_pairs},
         {"repeat_kendall_tau", b.repeat_tau}});
  }
  nlohmann::json wrong = nlohmann::json::array();
  for (const WrongFuseCall& w : WrongFuseCalls(r)) {
    wrong.push_back({{"region", w.region},
                     {"model", w.model},
                     {"ops", w.ops},
                     {"where", w.where},
                     {"measured_fused_over_unfused", w.measured_ratio},
                     {"predicted_fused_over_unfused", w.predicted_ratio},
                     {"decisive", w.decisive}});
  }
  return {{"mape_percent", r.mape},
          {"median_ape_percent", Percentile(errors, 0.5)},
          {"p90_ape_percent", Percentile(errors, 0.9)},
          {"kendall_tau", r.kendall_tau},
          {"decisive_kendall_tau", r.decisive_tau},
          {"fuse_decision_agreement", r.agreement},
          {"decisive_fuse_decision_agreement", r.decisive_agreement},
          {"regions", r.regions},
          {"decisions", r.decisions},
          {"decisive_decisions", r.decisive_decisions},
          {"skipped_unstable", r.skipped_unstable},
          {"rounds", r.rounds},
          {"disturbed_rounds", r.disturbed_rounds},
          {"measurement_repeatability",
           {{"kendall_tau", r.repeat_tau},
            {"fuse_decision_agreement", r.repeat_agreement},
            {"mape_percent", r.repeat_mape}}},
          {"kendall_tau_by_measured_gap", by_gap},
          {"wrong_fuse_calls", wrong},
          {"items", items}};
}

}  // namespace fusor
