// Greedy priority fusion (after XLA's priority fusion): every candidate action (merge a producer
// group into a consumer group; duplicate a cheap producer into all its consumer groups) has a
// priority, its predicted benefit. The best one is applied while it helps; priorities of the groups
// it touched are recomputed and pushed. Entries are validated lazily when popped: an action whose
// groups are gone is dropped, and one whose benefit changed is pushed back with the new value.
#include <algorithm>
#include <cmath>
#include <queue>
#include <unordered_set>

#include "graph/op_registry.h"
#include "lowering/plan_legality.h"
#include "search/plan_search.h"
#include "search/plan_state.h"

namespace fusor {
namespace {

using GroupId = PlanState::GroupId;

struct Action {
  double benefit = 0;
  bool recompute = false;
  GroupId producer = -1;
  GroupId consumer = -1;           // Merges only.
  std::vector<GroupId> consumers;  // Recomputes: the consumer groups it was evaluated against.
  bool operator<(const Action& o) const {
    if (benefit != o.benefit) return benefit < o.benefit;
    return std::tie(o.producer, o.consumer) < std::tie(producer, consumer);  // Deterministic.
  }
};

bool Recomputable(const Graph& g, const FusionGroup& group) {
  return std::all_of(group.nodes.begin(), group.nodes.end(), [&](NodeId n) {
    OpClass c = ClassifyNode(g, g.node(n));
    return c == OpClass::kElementwise || c == OpClass::kBroadcast || c == OpClass::kInjective;
  });
}

class Greedy {
 public:
  Greedy(const Graph& g, const CostModel& model, const SearchOptions& options)
      : g_(g), model_(model), options_(options), state_(g), footprint_(LeafFootprint(g)) {}

  StatusOr<FusionPlan> Run(SearchStats* stats, const SearchStop& stop) {
    for (GroupId id : state_.LiveGroups()) cost_.push_back(Cost(state_.group(id), {}));
    for (GroupId id : state_.LiveGroups()) {
      if (stop.Cancelled()) return Status::Cancelled("the search was cancelled");
      PushActionsOf(id);
    }
    while (!queue_.empty()) {
      if (stop.Cancelled()) return Status::Cancelled("the search was cancelled");
      if (stop.Expired()) {
        stats->stopped_early = true;
        break;
      }
      Action a = queue_.top();
      queue_.pop();
      std::optional<Action> fresh = Reevaluate(a);
      if (!fresh) continue;
      if (std::fabs(fresh->benefit - a.benefit) > 1e-6 * std::max(1.0, std::fabs(a.benefit))) {
        queue_.push(*fresh);
        continue;
      }
      if (fresh->benefit <= 0) break;
      Apply(*fresh, stats);
    }
    return state_.ToPlan();
  }

 private:
  double Cost(const FusionGroup& group, const std::vector<GroupId>& replaced) const {
    return model_
        .GroupCost(g_, group, state_.Inputs(group), state_.Materialized(group, replaced),
                   footprint_)
        .total_ns;
  }

  static std::string Signature(const FusionGroup& g) {
    std::string s;
    for (NodeId n : g.nodes) s += std::to_string(n) + ",";
    s += "|";
    for (NodeId n : g.recomputed) s += std::to_string(n) + ",";
    return s;
  }

  std::optional<Action> EvaluateMerge(GroupId p, GroupId c, FusionGroup* merged) const {
    *merged = MergeGroups(state_.group(p), state_.group(c));
    if (rejected_.count(Signature(*merged))) return std::nullopt;
    if (static_cast<int>(merged->nodes.size()) > options_.max_group_nodes) return std::nullopt;
    auto materialized = state_.Materialized(*merged, {p, c});
    if (!IsLegalGroup(g_, merged, materialized)) return std::nullopt;
    double after =
        model_.GroupCost(g_, *merged, state_.Inputs(*merged), materialized, footprint_).total_ns;
    return Action{cost_[p] + cost_[c] - after, false, p, c, {}};
  }

  std::optional<Action> EvaluateRecompute(GroupId p, std::vector<FusionGroup>* copies) const {
    const FusionGroup& producer = state_.group(p);
    if (!options_.allow_recompute ||
        static_cast<int>(producer.nodes.size()) > options_.max_recompute_nodes ||
        !Recomputable(g_, producer)) {
      return std::nullopt;
    }
    for (NodeId n : producer.nodes) {
      for (TensorId t : g_.node(n).outputs) {
        if (g_.IsGraphOutput(t)) return std::nullopt;
      }
    }
    std::vector<GroupId> consumers = state_.Consumers(p);
    if (consumers.size() < 2) return std::nullopt;  // One consumer: a merge does the same.
    if (rejected_.count("recompute:" + Signature(producer))) return std::nullopt;
    FusionGroup copy = producer;
    copy.recomputed = copy.nodes;
    std::vector<GroupId> replaced = consumers;
    replaced.push_back(p);
    double before = cost_[p], after = 0;
    copies->clear();
    for (GroupId c : consumers) {
      FusionGroup merged = MergeGroups(state_.group(c), copy);
      if (static_cast<int>(merged.nodes.size()) > options_.max_group_nodes) return std::nullopt;
      auto materialized = state_.Materialized(merged, replaced);
      if (!IsLegalGroup(g_, &merged, materialized)) return std::nullopt;
      before += cost_[c];
      after +=
          model_.GroupCost(g_, merged, state_.Inputs(merged), materialized, footprint_).total_ns;
      copies->push_back(std::move(merged));
    }
    return Action{before - after, true, p, -1, consumers};
  }

  std::optional<Action> Reevaluate(const Action& a) const {
    if (!state_.alive(a.producer)) return std::nullopt;
    if (!a.recompute) {
      if (!state_.alive(a.consumer)) return std::nullopt;
      FusionGroup merged;
      return EvaluateMerge(a.producer, a.consumer, &merged);
    }
    std::vector<FusionGroup> copies;
    auto fresh = EvaluateRecompute(a.producer, &copies);
    if (fresh && fresh->consumers != a.consumers) return std::nullopt;  // Pushed anew elsewhere.
    return fresh;
  }

  // Applies an action; if the groups it made would depend on each other in a cycle (convex groups
  // can, once recomputed copies add edges) or would force a neighbour to write a value it cannot,
  // undoes it and never tries that result again.
  void Apply(const Action& a, SearchStats* stats) {
    std::vector<GroupId> old = {a.producer};
    if (a.recompute) {
      old.insert(old.end(), a.consumers.begin(), a.consumers.end());
    } else {
      old.push_back(a.consumer);
    }
    std::vector<FusionGroup> saved;
    for (GroupId id : old) saved.push_back(state_.group(id));
    std::vector<FusionGroup> made;
    std::string signature;
    if (!a.recompute) {
      FusionGroup merged;
      EvaluateMerge(a.producer, a.consumer, &merged);
      signature = Signature(merged);
      made.push_back(std::move(merged));
    } else {
      EvaluateRecompute(a.producer, &made);
      signature = "recompute:" + Signature(state_.group(a.producer));
    }
    for (GroupId id : old) state_.Remove(id);
    std::vector<GroupId> touched;
    for (auto& group : made) touched.push_back(AddGroup(std::move(group)));
    bool cyclic =
        std::any_of(touched.begin(), touched.end(), [&](GroupId id) { return OnCycle(id); });
    if (cyclic || MakesNeighbourIllegal(touched)) {
      for (GroupId id : touched) state_.Remove(id);
      touched.clear();
      for (auto& group : saved) touched.push_back(AddGroup(std::move(group)));
      rejected_.insert(signature);
    } else {
      ++(a.recompute ? stats->recomputes : stats->merges);
    }
    for (GroupId id : touched) PushActionsOf(id);
  }

  // Whether the groups feeding `touched` stay legal: a recomputed copy reads its inputs from
  // memory, so their producer may now have to write a value that an anchor or reduction group
  // cannot let out (only its last node's output may leave it).
  bool MakesNeighbourIllegal(const std::vector<GroupId>& touched) const {
    for (GroupId id : touched) {
      for (GroupId p : state_.Producers(id)) {
        FusionGroup copy = state_.group(p);
        if (!IsLegalGroup(g_, &copy, state_.Materialized(copy, {}))) return true;
      }
    }
    return false;
  }

  // Whether following what `id` writes leads back to it. Node ids are topological, so a group
  // whose nodes all come after `id`'s last node cannot lead back.
  bool OnCycle(GroupId id) const {
    NodeId last = state_.group(id).nodes.back();
    std::vector<GroupId> stack = state_.Consumers(id);
    std::unordered_set<GroupId> seen(stack.begin(), stack.end());
    while (!stack.empty()) {
      GroupId k = stack.back();
      stack.pop_back();
      if (k == id) return true;
      if (state_.group(k).nodes.front() > last) continue;
      for (GroupId c : state_.Consumers(k)) {
        if (c == id) return true;
        if (seen.insert(c).second) stack.push_back(c);
      }
    }
    return false;
  }

  GroupId AddGroup(FusionGroup group) {
    GroupId id = state_.Add(std::move(group));
    cost_.resize(state_.num_ids());
    cost_[id] = Cost(state_.group(id), {});
    return id;
  }

  void Push(std::optional<Action> a) {
    if (a && a->benefit > 0) queue_.push(std::move(*a));
  }

  void PushActionsOf(GroupId id) {
    FusionGroup scratch;
    std::vector<FusionGroup> copies;
    for (GroupId p : state_.Producers(id)) {
      Push(EvaluateMerge(p, id, &scratch));
      Push(EvaluateRecompute(p, &copies));
    }
    for (GroupId c : state_.Consumers(id)) Push(EvaluateMerge(id, c, &scratch));
    Push(EvaluateRecompute(id, &copies));
  }

  const Graph& g_;
  const CostModel& model_;
  const SearchOptions& options_;
  PlanState state_;
  double footprint_;
  std::vector<double> cost_;  // By group id; valid for live groups.
  std::priority_queue<Action> queue_;
  std::unordered_set<std::string> rejected_;  // Results that made a cycle.
};

}  // namespace

StatusOr<FusionPlan> GreedyPlan(const Graph& g, const CostModel& model,
                                const SearchOptions& options, SearchStats* stats,
                                const SearchStop& stop) {
  Greedy greedy(g, model, options);
  FUSOR_ASSIGN_OR_RETURN(FusionPlan plan, greedy.Run(stats, stop));
  FUSOR_RETURN_IF_ERROR(CheckPlan(g, plan).WithContext("greedy produced an illegal plan"));
  return plan;
}

}  // namespace fusor
