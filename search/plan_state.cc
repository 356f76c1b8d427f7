#include "search/plan_state.h"
#include "lowering/plan_legality.h"

#include <algorithm>
#include <queue>
#include <unordered_set>

namespace fusor {
namespace {

bool Contains(const std::vector<NodeId>& sorted, NodeId id) {
  return std::binary_search(sorted.begin(), sorted.end(), id);
}

bool Owns(const FusionGroup& group, NodeId n) {
  return Contains(group.nodes, n) && !Contains(group.recomputed, n);
}

}  // namespace

PlanState::PlanState(const Graph& g) : g_(g), groups_of_(g.num_nodes()) {
  for (const FusionGroup& group : UnfusedPlan(g).groups) Add(group);
}

PlanState::PlanState(const Graph& g, const FusionPlan& plan) : g_(g), groups_of_(g.num_nodes()) {
  for (const FusionGroup& group : plan.groups) Add(group);
}

PlanState::GroupId PlanState::Add(FusionGroup group) {
  GroupId id = static_cast<GroupId>(groups_.size());
  for (NodeId n : group.nodes) groups_of_[n].push_back(id);
  groups_.push_back(std::move(group));
  alive_.push_back(true);
  return id;
}

void PlanState::Remove(GroupId id) {
  alive_[id] = false;
  for (NodeId n : groups_[id].nodes) {
    auto& v = groups_of_[n];
    v.erase(std::remove(v.begin(), v.end(), id), v.end());
  }
}

std::vector<PlanState::GroupId> PlanState::LiveGroups() const {
  std::vector<GroupId> out;
  for (GroupId id = 0; id < static_cast<GroupId>(groups_.size()); ++id) {
    if (alive_[id]) out.push_back(id);
  }
  return out;
}

PlanState::GroupId PlanState::OwnerOf(NodeId n) const {
  for (GroupId id : groups_of_[n]) {
    if (Owns(groups_[id], n)) return id;
  }
  return -1;
}

std::vector<TensorId> PlanState::Inputs(const FusionGroup& group) const {
  std::vector<TensorId> in;
  for (NodeId id : group.nodes) {
    for (TensorId t : g_.node(id).inputs) {
      if (t == kNoId) continue;
      NodeId p = g_.tensor(t).producer;
      if (p == kNoId || !Contains(group.nodes, p)) in.push_back(t);
    }
  }
  std::sort(in.begin(), in.end());
  in.erase(std::unique(in.begin(), in.end()), in.end());
  return in;
}

std::vector<TensorId> PlanState::Materialized(const FusionGroup& group,
                                              const std::vector<GroupId>& replaced) const {
  std::vector<TensorId> out;
  for (NodeId n : group.nodes) {
    if (!Owns(group, n)) continue;
    for (TensorId t : g_.node(n).outputs) {
      bool leaves = g_.IsGraphOutput(t);
      for (NodeId c : g_.tensor(t).consumers) {
        if (leaves) break;
        // Even when `group` computes the consumer too, another group may hold a recomputed copy
        // of it that reads `t` from memory.
        for (GroupId k : groups_of_[c]) {
          bool gone = std::find(replaced.begin(), replaced.end(), k) != replaced.end();
          if (!gone && !Contains(groups_[k].nodes, n)) leaves = true;
        }
      }
      if (leaves) out.push_back(t);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<PlanState::GroupId> PlanState::Consumers(GroupId id) const {
  std::vector<GroupId> out;
  const FusionGroup& group = groups_[id];
  for (NodeId n : group.nodes) {
    if (!Owns(group, n)) continue;
    for (TensorId t : g_.node(n).outputs) {
      for (NodeId c : g_.tensor(t).consumers) {
        for (GroupId k : groups_of_[c]) {
          if (k != id && !Contains(groups_[k].nodes, n)) out.push_back(k);
        }
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<PlanState::GroupId> PlanState::Producers(GroupId id) const {
  std::vector<GroupId> out;
  for (TensorId t : Inputs(groups_[id])) {
    NodeId p = g_.tensor(t).producer;
    if (p == kNoId) continue;
    GroupId owner = OwnerOf(p);
    if (owner >= 0 && owner != id) out.push_back(owner);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Kahn's algorithm over live groups, ready groups taken by their smallest node id.
StatusOr<FusionPlan> PlanState::ToPlan() const {
  std::vector<GroupId> live = LiveGroups();
  std::vector<int> pending(groups_.size(), 0);
  std::vector<std::vector<GroupId>> consumers(groups_.size());
  for (GroupId id : live) {
    for (GroupId p : Producers(id)) {
      ++pending[id];
      consumers[p].push_back(id);
    }
  }
  using Entry = std::pair<NodeId, GroupId>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (GroupId id : live) {
    if (pending[id] == 0) ready.emplace(groups_[id].nodes.front(), id);
  }
  FusionPlan plan;
  while (!ready.empty()) {
    GroupId id = ready.top().second;
    ready.pop();
    plan.groups.push_back(groups_[id]);
    for (GroupId c : consumers[id]) {
      if (--pending[c] == 0) ready.emplace(groups_[c].nodes.front(), c);
    }
  }
  if (plan.groups.size() != live.size()) {
    return Status::FailedPrecondition("the plan's groups depend on each other in a cycle");
  }
  return plan;
}

bool IsLegalGroup(const Graph& g, FusionGroup* group, const std::vector<TensorId>& materialized) {
  auto kind = InferGroupKind(g, group->nodes);
  if (!kind.ok()) return false;
  group->kind = *kind;
  bool one_primitive = *kind == GroupKind::kAnchor || *kind == GroupKind::kReduction;
  if (one_primitive) {
    for (TensorId t : materialized) {
      if (g.tensor(t).producer != group->nodes.back()) return false;
    }
  }
  return CheckGroup(g, *group).ok();
}

FusionGroup MergeGroups(const FusionGroup& a, const FusionGroup& b) {
  FusionGroup m;
  std::set_union(a.nodes.begin(), a.nodes.end(), b.nodes.begin(), b.nodes.end(),
                 std::back_inserter(m.nodes));
  for (NodeId n : m.nodes) {
    bool owned = (Contains(a.nodes, n) && !Contains(a.recomputed, n)) ||
                 (Contains(b.nodes, n) && !Contains(b.recomputed, n));
    if (!owned) m.recomputed.push_back(n);
  }
  return m;
}

}  // namespace fusor
