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

}  // namespace

StatusOr<KernelChoice> ChooseKernels(const Graph& g, const FusionPlan& plan, const CostModel& model,
                                     Measurer* measurer, const KernelChoiceOptions& options,
                                     const std::function<bool(int)>& may_measure) {
  KernelChoice out;
  out.plan = plan;
  FUSOR_ASSIGN_OR_RETURN(std::vector<KernelImplementations> in_plan,
                         measurer->Implementations(g, plan));
  std::map<std::string, std::string> chosen;  // Region hash -> kernel ("" when none was timed).
  for (size_t i : GroupsToTime(plan, model.Cost(g, plan), in_plan)) {
    Graph region = g.ExtractRegion(plan.groups[i].nodes);
    const std::string key = CanonicalHash(region);
    if (auto it = chosen.find(key); it != chosen.end()) {
      out.plan.groups[i].kernel = it->second;
      continue;
    }
    if (out.regions_timed >= options.max_regions) continue;
    const FusionGroup local = RegionGroup(plan.groups[i]);
    FUSOR_ASSIGN_OR_RETURN(std::vector<KernelImplementations> alone,
                           measurer->Implementations(region, FusionPlan{{local}}));
    std::vector<std::string> candidates = Candidates(in_plan[i], alone[0]);
    if (candidates.size() < 2) {
      chosen[key] = "";
      continue;
    }
    if (!may_measure(static_cast<int>(candidates.size()))) break;
    std::vector<FusionPlan> plans;
    for (const std::string& name : candidates) {
      plans.push_back(FusionPlan{{local}});
      plans.back().groups[0].kernel = name;
    }
    FUSOR_ASSIGN_OR_RETURN(std::vector<Measurement> ms, measurer->MeasurePlans(region, plans));
    ++out.regions_timed;
    out.measurements += static_cast<int>(plans.size());
    const size_t winner = Winner(ms, options.noise_margin);
    for (size_t c = 0; c < candidates.size(); ++c) {
      out.trials.push_back({OpsOf(region), candidates[c],
                            ms[c].unstable ? 0 : static_cast<double>(ms[c].median_ns),
                            c == winner});
    }
    chosen[key] = candidates[winner];
    out.plan.groups[i].kernel = candidates[winner];
  }
  return out;
}

}  // namespace fusor
