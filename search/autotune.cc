#include "search/autotune.h"
#include "lowering/plan_legality.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

namespace fusor {
namespace {

bool HasChosenKernels(const FusionPlan& plan) {
  return std::any_of(plan.groups.begin(), plan.groups.end(),
                     [](const FusionGroup& group) { return !group.kernel.empty(); });
}

using Clock = std::chrono::steady_clock;

// Whole plans measured at the end (one round): the refined plan, the rules baseline and every
// op alone.
constexpr int kWholePlans = 3;
struct Alternative {
  std::string name;
  FusionPlan plan;  // In region node ids.
  double predicted_ns = 0;
};

std::string OpsOf(const Graph& r) {
  std::string s;
  for (const Node& n : r.nodes()) s += (s.empty() ? "" : "+") + n.op_type;
  return s;
}

std::vector<Alternative> RegionAlternatives(const Graph& r, const FusionGroup& fused,
                                            const CostModel& model) {
  std::vector<std::pair<std::string, FusionPlan>> plans = {
      {"fused", FusionPlan{{fused}}}, {"rules", RulesPlan(r, 64)}, {"unfused", UnfusedPlan(r)}};
  SearchOptions exact;
  exact.algorithm = SearchAlgorithm::kOptimal;
  exact.allow_recompute = false;
  if (auto best = SearchPlan(r, model, exact); best.ok()) plans.emplace_back("optimal", best->plan);
  std::vector<Alternative> out;
  for (auto& [name, plan] : plans) {
    bool duplicate =
        std::any_of(out.begin(), out.end(), [&](const Alternative& a) { return a.plan == plan; });
    if (duplicate || !CheckPlan(r, plan).ok()) continue;
    out.push_back({name, plan, model.Cost(r, plan).total.total_ns});
  }
  std::stable_sort(out.begin(), out.end(), [](const Alternative& a, const Alternative& b) {
    return a.predicted_ns < b.predicted_ns;
  });
  return out;
}

// The region's groups in global node ids.
std::vector<FusionGroup> ToGlobal(const FusionPlan& local, const std::vector<NodeId>& nodes) {
  std::vector<FusionGroup> out;
  for (const FusionGroup& group : local.groups) {
    FusionGroup global{group.kind, {}, {}};
    for (NodeId n : group.nodes) global.nodes.push_back(nodes[n]);
    out.push_back(std::move(global));
  }
  return out;
}

// Fused groups worth checking, largest predicted time first (the ones that matter most).
std::vector<size_t> RegionOrder(const FusionPlan& plan, const PlanCost& cost) {
  std::vector<size_t> order;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    if (plan.groups[i].nodes.size() >= 2 && plan.groups[i].recomputed.empty()) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return cost.groups[a].total_ns > cost.groups[b].total_ns;
  });
  return order;
}

class Refinement {
 public:
  Refinement(const Graph& g, const CostModel& model, const TargetFingerprint& target,
             Measurer* measurer, const AutotuneOptions& options, const std::atomic<bool>* cancelled)
      : g_(g),
        model_(model),
        target_(target),
        measurer_(measurer),
        options_(options),
        cancelled_(cancelled),
        deadline_(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(options.time_limit_s))) {}

  bool CanMeasure(int n) const {
    return Running() && result_.measurements + n <= options_.measure_budget;
  }
  bool Running() const { return !(cancelled_ && cancelled_->load()) && Clock::now() < deadline_; }

  // Each candidate's anchor kernels, timed on their regions (search/kernel_choice.h).
  Status ChooseKernelsOf(std::vector<FusionPlan>* plans) {
    FUSOR_ASSIGN_OR_RETURN(KernelChoice choice,
                           ChooseKernels(g_, *plans, model_, measurer_, options_.kernels,
                                         [this](int) { return Running(); }));
    for (const KernelTrial& t : choice.trials) {
      result_.trials.push_back({t.ops, "kernel " + t.kernel, 0, t.measured_ns, t.chosen});
    }
    *plans = std::move(choice.plans);
    return Status::Ok();
  }

  // The plans side by side (Measurer::MeasurePlans): what they are compared on is not the host's
  // speed at the moment each one's turn came.
  StatusOr<std::vector<Measurement>> MeasureSideBySide(const Graph& g,
                                                       const std::vector<FusionPlan>& plans) {
    result_.measurements += static_cast<int>(plans.size());
    return measurer_->MeasurePlans(g, plans);
  }

  // Measures the top alternatives of one fused group; returns its replacement groups.
  StatusOr<std::vector<FusionGroup>> Refine(const FusionGroup& group) {
    Graph r = g_.ExtractRegion(group.nodes);
    FusionGroup fused{group.kind, {}, {}};
    for (size_t i = 0; i < group.nodes.size(); ++i) fused.nodes.push_back(static_cast<NodeId>(i));
    std::vector<Alternative> alternatives = RegionAlternatives(r, fused, model_);
    size_t count = std::min<size_t>(alternatives.size(), options_.per_region);
    if (count < 2) return std::vector<FusionGroup>{group};
    std::vector<FusionPlan> plans;
    while (plans.size() < count && CanMeasure(static_cast<int>(plans.size()) + 1 + kWholePlans))
      plans.push_back(alternatives[plans.size()].plan);
    FUSOR_ASSIGN_OR_RETURN(std::vector<Measurement> ms, MeasureSideBySide(r, plans));
    auto region = std::make_shared<const Graph>(r);
    std::vector<double> measured;
    for (size_t i = 0; i < ms.size(); ++i) {
      const Measurement& m = ms[i];
      measured.push_back(m.unstable ? 1e300 : static_cast<double>(m.median_ns));
      if (!m.unstable && m.median_ns > 0) {
        result_.timed.push_back({region, "region " + OpsOf(r) + ":" + alternatives[i].name,
                                 alternatives[i].plan, static_cast<double>(m.median_ns)});
      }
      if (alternatives[i].plan.groups.size() == 1 && !m.unstable) {
        GroupFeatures f = PlanFeatures(r, alternatives[i].plan, target_)[0];
        result_.samples.push_back(
            {"tune:" + OpsOf(r) + ":" + alternatives[i].name, f, static_cast<double>(m.median_ns)});
      }
    }
    size_t chosen = Choose(alternatives, measured);
    for (size_t i = 0; i < measured.size(); ++i) {
      result_.trials.push_back({OpsOf(r), alternatives[i].name, alternatives[i].predicted_ns,
                                measured[i] >= 1e300 ? 0 : measured[i], i == chosen});
    }
    if (alternatives[chosen].name == "fused") return std::vector<FusionGroup>{group};
    return ToGlobal(alternatives[chosen].plan, group.nodes);
  }

  // The whole-plan candidates by the measurement protocol: its rounds are not refused by the
  // budget (this is the tuner's last word, which one lucky round must not decide); rounds past
  // the protocol's minimum stop at the time limit or cancellation.
  StatusOr<CandidateTimings> TimeWhole(const std::vector<FusionPlan>& plans) {
    FUSOR_ASSIGN_OR_RETURN(CandidateTimings t, TimeCandidates(measurer_, g_, plans, options_.choice,
                                                              [this] { return Running(); }));
    result_.measurements += t.rounds * static_cast<int>(plans.size());
    return t;
  }

  AutotuneResult& result() { return result_; }

 private:
  // The fused group stays unless another alternative is measured faster by the noise margin.
  size_t Choose(const std::vector<Alternative>& alternatives, const std::vector<double>& measured) {
    size_t fused = 0, best = 0;
    for (size_t i = 0; i < measured.size(); ++i) {
      if (alternatives[i].name == "fused") fused = i;
      if (measured[i] < measured[best]) best = i;
    }
    bool fused_measured = fused < measured.size() && alternatives[fused].name == "fused";
    if (!fused_measured) return best;
    return measured[best] < measured[fused] * (1 - options_.noise_margin) ? best : fused;
  }

  const Graph& g_;
  const CostModel& model_;
  const TargetFingerprint& target_;
  Measurer* measurer_;
  const AutotuneOptions& options_;
  const std::atomic<bool>* cancelled_;
  Clock::time_point deadline_;
  AutotuneResult result_;
};

}  // namespace

StatusOr<AutotuneResult> Autotune(const Graph& g, const CostModel& model,
                                  const TargetFingerprint& target, const FusionPlan& start,
                                  Measurer* measurer, const AutotuneOptions& options,
                                  const AutotuneProgress& progress,
                                  const std::atomic<bool>* cancelled) {
  Refinement refine(g, model, target, measurer, options, cancelled);
  PlanCost cost = model.Cost(g, start);
  std::vector<size_t> order = RegionOrder(start, cost);
  std::vector<std::vector<FusionGroup>> replacement(start.groups.size());
  for (size_t i = 0; i < start.groups.size(); ++i) replacement[i] = {start.groups[i]};
  size_t done = 0;
  for (size_t gi : order) {
    if (!refine.CanMeasure(1 + kWholePlans)) {
      refine.result().stopped_early = true;
      break;
    }
    FUSOR_ASSIGN_OR_RETURN(replacement[gi], refine.Refine(start.groups[gi]));
    ++done;
    if (progress) {
      progress(static_cast<double>(done) / (order.size() + 1), "region " + std::to_string(done));
    }
  }
  if (cancelled && cancelled->load()) return Status::Cancelled("tuning was cancelled");
  AutotuneResult& result = refine.result();
  for (auto& groups : replacement) {
    for (auto& group : groups) result.plan.groups.push_back(std::move(group));
  }
  FUSOR_RETURN_IF_ERROR(CheckPlan(g, result.plan).WithContext("measured refinement"));
  // The last word is the runtime's, by the one measurement protocol (search/plan_choice.h): the
  // refined plan, the rules baseline's and the unfused plan are timed side by side in alternating
  // rounds, and one replaces another only when it is faster beyond the noise; otherwise the
  // better-predicted one stays. Regions are measured alone, with their inputs plain, so a choice
  // that makes a neighbouring group reorder its input (SqueezeNet: a conv's Relu moved into the
  // Concat's loop) shows only here.
  std::vector<FusionPlan> whole = {result.plan};
  std::vector<std::string> names = {"tuned"};
  int unfused = 0;  // The unfused plan's candidate: the tuned plan itself when they are one.
  for (const auto& [name, baseline] :
       {std::pair<std::string, FusionPlan>{"rules", RulesPlan(g, 64)},
        {"unfused", UnfusedPlan(g)}}) {
    auto same = std::find(whole.begin(), whole.end(), baseline);
    if (name == "unfused") unfused = static_cast<int>(same - whole.begin());
    if (same != whole.end()) continue;
    whole.push_back(baseline);
    names.push_back(name);
  }
  std::optional<size_t> first_kernels;  // The tuned plan on oneDNN's first choices, if timed.
  if (options.choose_kernels) {
    // Every candidate gets its kernels, so whichever the protocol takes carries them; the refined
    // plan on oneDNN's first choices stays a candidate, because a kernel timed faster on its
    // region alone can be slower inside the plan (BERT on AVX-512: 0.75x, docs/benchmarks.md).
    FUSOR_RETURN_IF_ERROR(refine.ChooseKernelsOf(&whole).WithContext("kernel choice"));
    if (cancelled && cancelled->load()) return Status::Cancelled("tuning was cancelled");
    if (whole[0] != result.plan) {
      first_kernels = whole.size();
      whole.push_back(result.plan);
      names.push_back("tuned, oneDNN's first kernels");
    }
  }
  FUSOR_ASSIGN_OR_RETURN(CandidateTimings timings, refine.TimeWhole(whole));
  std::vector<double> predicted;
  for (const FusionPlan& plan : whole) predicted.push_back(model.WholePlan(g, plan).total_ns);
  PlanChoice choice = ChoosePlan(timings, predicted, options.choice);
  // A kernel timed faster on its region alone stands only when the whole-plan timings confirm
  // it: the predictions do not price kernels, so when the timings cannot tell the candidates
  // apart the plan keeps oneDNN's first choices (mobilenet_v3_small tuned at load 2: avx2 and
  // avx512_core kernels between avx512_core_bf16 ones, 3.4x slower than the rules plan).
  bool drop_kernels = false;
  if (!choice.by_measurement && HasChosenKernels(whole[choice.index])) {
    if (choice.index == 0 && first_kernels) {
      choice.index = *first_kernels;
    } else {
      drop_kernels = true;
    }
  }
  for (size_t i = 0; i < whole.size(); ++i) {
    const CandidateTiming& t = timings.plans[i];
    result.trials.push_back({"whole graph", names[i] + " (" + choice.decision + ")", predicted[i],
                             t.MedianNs(), i == choice.index});
    if (Spread(t, options.choice) <= options.choice.max_spread) {
      result.timed.push_back({nullptr, "plan", whole[i], t.MedianNs()});
    }
  }
  result.plan = whole[choice.index];
  if (drop_kernels) {
    for (FusionGroup& group : result.plan.groups) group.kernel.clear();
  }
  result.measured = MeasurementOf(timings.plans[choice.index], options.choice);
  result.unfused_measured = MeasurementOf(timings.plans[unfused], options.choice);
  result.confidence = ConfidenceOf(timings, choice, unfused, options.choice);
  if (progress) progress(1.0, "measured");
  return std::move(result);
}

}  // namespace fusor
