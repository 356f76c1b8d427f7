// Exact re-partitioning of small regions. The start plan's groups are cut, in execution order, into
// regions of consecutive groups holding at most `optimal_region_nodes` nodes (groups with
// recomputed copies, or bigger than a region, stay as they are). For each region:
//   1. candidates: every connected set of the region's nodes, grown one neighbour at a time from
//      each seed node and deduplicated by bitmask, that is a legal group (kind rules, convexity,
//      single exit for one-primitive kinds) — with its predicted cost;
//   2. dynamic programming over the region's down-sets (sets closed under "is produced by"): the
//      cheapest way to cover the remaining nodes, where a candidate may be placed once every
//      producer of its nodes inside the region is already covered or inside it. Every legal
//      partition of the region has such an order, so the minimum is exact; the start plan's own
//      partition is one of them, so the result is never worse.
#include <chrono>
#include <unordered_map>
#include <unordered_set>

#include "lowering/plan_legality.h"
#include "search/plan_search.h"
#include "search/plan_state.h"

namespace fusor {
namespace {

using GroupId = PlanState::GroupId;
using Mask = uint64_t;
constexpr double kNoCover = 1e300;

struct Candidate {
  Mask mask = 0;
  FusionGroup group;
  double cost = 0;
  Mask needs = 0;  // Region nodes outside the candidate that must be covered before it.
};

class Region {
 public:
  Region(const Graph& g, const CostModel& model, const PlanState& state, std::vector<NodeId> nodes,
         double footprint, int max_candidates)
      : g_(g),
        model_(model),
        state_(state),
        nodes_(std::move(nodes)),
        footprint_(footprint),
        max_candidates_(max_candidates) {
    for (size_t i = 0; i < nodes_.size(); ++i) index_[nodes_[i]] = static_cast<int>(i);
  }

  // Fills candidates_; returns how many connected sets were examined.
  int64_t Enumerate() {
    std::unordered_set<Mask> seen;
    std::vector<Mask> stack;
    int64_t examined = 0;
    // Every node alone first, so a cover exists even when the candidate cap is reached.
    for (size_t i = 0; i < nodes_.size(); ++i) {
      Mask m = Mask{1} << i;
      seen.insert(m);
      ++examined;
      Consider(m);
      for (int j : Neighbours(m)) stack.push_back(m | Mask{1} << j);
    }
    while (!stack.empty() && static_cast<int>(candidates_.size()) < max_candidates_) {
      Mask m = stack.back();
      stack.pop_back();
      if (!seen.insert(m).second) continue;
      ++examined;
      Consider(m);
      for (int j : Neighbours(m)) {
        if (!(m >> j & 1)) stack.push_back(m | Mask{1} << j);
      }
    }
    return examined;
  }

  // The cheapest cover of the region by candidates, in a valid execution order; empty if none.
  std::vector<FusionGroup> Solve() {
    Mask full = (Mask{1} << nodes_.size()) - 1;
    if (Best(0, full) >= kNoCover) return {};
    std::vector<FusionGroup> out;
    for (Mask m = 0; m != full;) {
      const Candidate& c = candidates_[memo_[m].second];
      out.push_back(c.group);
      m |= c.mask;
    }
    return out;
  }

 private:
  std::vector<int> Neighbours(Mask m) const {
    std::vector<int> out;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!(m >> i & 1)) continue;
      const Node& n = g_.node(nodes_[i]);
      for (TensorId t : n.inputs) {
        if (t != kNoId && g_.tensor(t).producer != kNoId) Add(g_.tensor(t).producer, &out);
      }
      for (TensorId t : n.outputs) {
        for (NodeId c : g_.tensor(t).consumers) Add(c, &out);
      }
    }
    return out;
  }

  void Add(NodeId n, std::vector<int>* out) const {
    auto it = index_.find(n);
    if (it != index_.end()) out->push_back(it->second);
  }

  // Outputs of the candidate read outside it: by other region nodes (another group, whatever the
  // partition), by fixed groups that do not compute the node themselves, or graph outputs.
  std::vector<TensorId> Materialized(const FusionGroup& group) const {
    std::vector<TensorId> out;
    for (NodeId n : group.nodes) {
      for (TensorId t : g_.node(n).outputs) {
        bool leaves = g_.IsGraphOutput(t);
        for (NodeId c : g_.tensor(t).consumers) {
          if (std::binary_search(group.nodes.begin(), group.nodes.end(), c)) continue;
          if (index_.count(c)) {
            leaves = true;
            continue;
          }
          for (GroupId k : state_.GroupsOf(c)) {
            const auto& kn = state_.group(k).nodes;
            leaves |= !std::binary_search(kn.begin(), kn.end(), n);
          }
        }
        if (leaves) out.push_back(t);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  void Consider(Mask m) {
    Candidate c;
    c.mask = m;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (m >> i & 1) c.group.nodes.push_back(nodes_[i]);
    }
    auto materialized = Materialized(c.group);
    if (!IsLegalGroup(g_, &c.group, materialized)) return;
    c.cost =
        model_.GroupCost(g_, c.group, state_.Inputs(c.group), materialized, footprint_).total_ns;
    for (NodeId n : c.group.nodes) {
      for (TensorId t : g_.node(n).inputs) {
        NodeId p = t == kNoId ? kNoId : g_.tensor(t).producer;
        auto it = p == kNoId ? index_.end() : index_.find(p);
        if (it != index_.end() && !(m >> it->second & 1)) c.needs |= Mask{1} << it->second;
      }
    }
    candidates_.push_back(std::move(c));
  }

  // Minimum cost to cover `full` from the down-set `covered` (memoised).
  double Best(Mask covered, Mask full) {
    if (covered == full) return 0;
    if (auto it = memo_.find(covered); it != memo_.end()) return it->second.first;
    std::pair<double, size_t> best = {kNoCover, 0};
    for (size_t i = 0; i < candidates_.size(); ++i) {
      const Candidate& c = candidates_[i];
      if ((c.mask & covered) || (c.needs & ~covered)) continue;
      double cost = c.cost + Best(covered | c.mask, full);
      if (cost < best.first) best = {cost, i};
    }
    memo_[covered] = best;
    return best.first;
  }

  const Graph& g_;
  const CostModel& model_;
  const PlanState& state_;
  std::vector<NodeId> nodes_;
  std::unordered_map<NodeId, int> index_;
  double footprint_;
  int max_candidates_;
  std::vector<Candidate> candidates_;
  std::unordered_map<Mask, std::pair<double, size_t>> memo_;
};

// Consecutive runs of plain groups whose nodes fit in a region.
std::vector<std::vector<size_t>> CutRegions(const FusionPlan& plan, int region_nodes) {
  std::vector<std::vector<size_t>> regions(1);
  size_t held = 0;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const FusionGroup& group = plan.groups[i];
    bool fixed = !group.recomputed.empty() || static_cast<int>(group.nodes.size()) > region_nodes;
    if (fixed || held + group.nodes.size() > static_cast<size_t>(region_nodes)) {
      if (!regions.back().empty()) regions.emplace_back();
      held = 0;
    }
    if (fixed) continue;
    regions.back().push_back(i);
    held += group.nodes.size();
  }
  return regions;
}

double Ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

}  // namespace

StatusOr<FusionPlan> OptimizeRegions(const Graph& g, const CostModel& model,
                                     const FusionPlan& start, const SearchOptions& options,
                                     SearchStats* stats, const SearchStop& stop) {
  const int region_nodes = std::min(options.optimal_region_nodes, 63);
  PlanState state(g, start);
  double footprint = LeafFootprint(g);
  for (const auto& region_groups : CutRegions(start, region_nodes)) {
    if (stop.Cancelled()) return Status::Cancelled("the search was cancelled");
    if (stop.Expired()) {
      stats->stopped_early = true;
      break;
    }
    if (region_groups.size() < 2 &&
        (region_groups.empty() || start.groups[region_groups[0]].nodes.size() < 2)) {
      continue;
    }
    std::vector<NodeId> nodes;
    std::vector<GroupId> ids;
    for (size_t gi : region_groups) {
      ids.push_back(static_cast<GroupId>(gi));  // PlanState ids follow the start plan's order.
      for (NodeId n : start.groups[gi].nodes) nodes.push_back(n);
    }
    std::sort(nodes.begin(), nodes.end());
    auto t0 = std::chrono::steady_clock::now();
    Region region(g, model, state, nodes, footprint, options.max_region_candidates);
    stats->candidates += region.Enumerate();
    stats->candidates_ms += Ms(t0);
    std::vector<FusionGroup> best = region.Solve();
    if (best.empty()) continue;
    for (GroupId id : ids) state.Remove(id);
    for (auto& group : best) state.Add(std::move(group));
    ++stats->regions_optimized;
  }
  FUSOR_ASSIGN_OR_RETURN(FusionPlan plan, state.ToPlan());
  FUSOR_RETURN_IF_ERROR(CheckPlan(g, plan).WithContext("exact search produced an illegal plan"));
  return plan;
}

}  // namespace fusor
