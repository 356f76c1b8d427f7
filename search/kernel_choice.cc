#include "search/kernel_choice.h"

#include <algorithm>
#include <map>

#include "graph/canonical.h"

namespace fusor {
namespace {

bool IsReferenceImplementation(const std::string& name) { return name.rfind("ref", 0) == 0; }

// oneDNN's implementations of the group's primitive, in its order, that are not reference ones.
std::vector<std::string> Timeable(const KernelImplementations& implementations) {
  std::vector<std::string> out;
  for (const std::string& name : implementations.offered) {
    if (!IsReferenceImplementation(name)) out.push_back(name);
  }
  return out;
}

// Those offered both where the group runs in the plan (its inputs perhaps kept blocked) and
// alone, where it is timed.
std::vector<std::string> Candidates(const KernelImplementations& in_plan,
                                    const KernelImplementations& alone) {
  std::vector<std::string> out;
  for (const std::string& name : Timeable(in_plan)) {
    if (std::count(alone.offered.begin(), alone.offered.end(), name)) out.push_back(name);
  }
  return out;
}

// The group over its region (Graph::ExtractRegion), whose node i is the group's i-th node.
FusionGroup RegionGroup(const FusionGroup& group) {
  FusionGroup local{group.kind, {}, {}, group.kernel};
  for (size_t i = 0; i < group.nodes.size(); ++i) {
    local.nodes.push_back(static_cast<NodeId>(i));
    if (std::count(group.recomputed.begin(), group.recomputed.end(), group.nodes[i])) {
      local.recomputed.push_back(static_cast<NodeId>(i));
    }
  }
  return local;
}

std::string OpsOf(const Graph& region) {
  std::string s;
  for (const Node& n : region.nodes()) s += (s.empty() ? "" : "+") + n.op_type;
  return s;
}

// Groups whose primitive has two or more implementations to time (anchor groups, and a Conv or
// MatMul alone), largest predicted time first.
std::vector<size_t> GroupsToTime(const FusionPlan& plan, const PlanCost& cost,
                                 const std::vector<KernelImplementations>& offered) {
  std::vector<size_t> order;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    if (Timeable(offered[i]).size() >= 2) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return cost.groups[a].total_ns > cost.groups[b].total_ns;
  });
  return order;
}

// The index of the implementation kept: the first (oneDNN's preference) unless another is
// measured faster beyond the margin.
size_t Winner(const std::vector<Measurement>& ms, double noise_margin) {
  auto time = [&](size_t i) {
    return ms[i].unstable || ms[i].median_ns <= 0 ? 1e300 : static_cast<double>(ms[i].median_ns);
  };
  size_t best = 0;
  for (size_t i = 1; i < ms.size(); ++i) {
    if (time(i) < time(best)) best = i;
  }
  return time(best) < time(0) * (1 - noise_margin) ? best : 0;
}

// The choices of one tuning: a kernel per distinct region, timed once.
class KernelChooser {
 public:
  KernelChooser(const Graph& g, const CostModel& model, Measurer* measurer,
                const KernelChoiceOptions& options, const std::function<bool(int)>& may_measure)
      : g_(g), model_(model), measurer_(measurer), options_(options), may_measure_(may_measure) {}

  Status Choose(FusionPlan* plan) {
    FUSOR_ASSIGN_OR_RETURN(std::vector<KernelImplementations> in_plan,
                           measurer_->Implementations(g_, *plan));
    for (size_t i : GroupsToTime(*plan, model_.Cost(g_, *plan), in_plan)) {
      Graph region = g_.ExtractRegion(plan->groups[i].nodes);
      const std::string key = CanonicalHash(region);
      if (!chosen_.count(key)) {
        if (out_.regions_timed >= options_.max_regions) continue;
        FUSOR_ASSIGN_OR_RETURN(bool timed, TimeRegion(region, key, plan->groups[i], in_plan[i]));
        if (!timed) break;
      }
      plan->groups[i].kernel = chosen_[key];
    }
    return Status::Ok();
  }

  KernelChoice& result() { return out_; }

 private:
  // Times the region's implementations and records the winner under `key`; false when
  // `may_measure` refuses.
  StatusOr<bool> TimeRegion(const Graph& region, const std::string& key, const FusionGroup& group,
                            const KernelImplementations& in_plan) {
    const FusionGroup local = RegionGroup(group);
    FUSOR_ASSIGN_OR_RETURN(std::vector<KernelImplementations> alone,
                           measurer_->Implementations(region, FusionPlan{{local}}));
    std::vector<std::string> candidates = Candidates(in_plan, alone[0]);
    if (candidates.size() < 2) {
      chosen_[key] = "";
      return true;
    }
    if (!may_measure_(static_cast<int>(candidates.size()))) return false;
    std::vector<FusionPlan> plans;
    for (const std::string& name : candidates) {
      plans.push_back(FusionPlan{{local}});
      plans.back().groups[0].kernel = name;
    }
    FUSOR_ASSIGN_OR_RETURN(std::vector<Measurement> ms, measurer_->MeasurePlans(region, plans));
    ++out_.regions_timed;
    out_.measurements += static_cast<int>(plans.size());
    const size_t winner = Winner(ms, options_.noise_margin);
    for (size_t c = 0; c < candidates.size(); ++c) {
      out_.trials.push_back({OpsOf(region), candidates[c],
                             ms[c].unstable ? 0 : static_cast<double>(ms[c].median_ns),
                             c == winner});
    }
    chosen_[key] = candidates[winner];
    return true;
  }

  const Graph& g_;
  const CostModel& model_;
  Measurer* measurer_;
  const KernelChoiceOptions& options_;
  const std::function<bool(int)>& may_measure_;
  std::map<std::string, std::string> chosen_;  // Region hash -> kernel ("" when none to time).
  KernelChoice out_;
};

}  // namespace

StatusOr<KernelChoice> ChooseKernels(const Graph& g, const std::vector<FusionPlan>& plans,
                                     const CostModel& model, Measurer* measurer,
                                     const KernelChoiceOptions& options,
                                     const std::function<bool(int)>& may_measure) {
  KernelChooser chooser(g, model, measurer, options, may_measure);
  chooser.result().plans = plans;
  for (FusionPlan& plan : chooser.result().plans) FUSOR_RETURN_IF_ERROR(chooser.Choose(&plan));
  return std::move(chooser.result());
}

}  // namespace fusor
