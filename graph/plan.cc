#include "graph/plan.h"

#include <algorithm>
#include <unordered_map>

#include "graph/op_registry.h"

namespace fusor {
namespace {

bool Contains(const std::vector<NodeId>& sorted, NodeId id) {
  return std::binary_search(sorted.begin(), sorted.end(), id);
}

// Inputs of a node that no node of the group produces.
bool ProducedInside(const Graph& g, const std::vector<NodeId>& group, TensorId t) {
  return t != kNoId && g.tensor(t).producer != kNoId && Contains(group, g.tensor(t).producer);
}

}  // namespace

std::string_view GroupKindName(GroupKind k) {
  switch (k) {
    case GroupKind::kSingle:
      return "single";
    case GroupKind::kAnchor:
      return "anchor";
    case GroupKind::kReduction:
      return "reduction";
    case GroupKind::kLoop:
      return "loop";
    case GroupKind::kOpaque:
      return "opaque";
  }
  return "unknown";
}

std::vector<std::vector<int32_t>> GroupsOfNodes(const Graph& g, const FusionPlan& plan) {
  std::vector<std::vector<int32_t>> groups_of(g.num_nodes());
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    for (NodeId id : plan.groups[i].nodes) {
      if (id >= 0 && id < static_cast<NodeId>(g.num_nodes())) {
        groups_of[id].push_back(static_cast<int32_t>(i));
      }
    }
  }
  return groups_of;
}

namespace {

std::vector<TensorId> MaterializedWithIndex(const Graph& g, const FusionPlan& plan, size_t index,
                                            const std::vector<std::vector<int32_t>>& groups_of) {
  const FusionGroup& group = plan.groups[index];
  std::vector<TensorId> out;
  for (NodeId id : group.nodes) {
    if (Contains(group.recomputed, id)) continue;
    for (TensorId t : g.node(id).outputs) {
      bool leaves = g.IsGraphOutput(t);
      for (NodeId c : g.tensor(t).consumers) {
        for (int32_t k : groups_of[c]) {
          leaves |= k != static_cast<int32_t>(index) && !Contains(plan.groups[k].nodes, id);
        }
      }
      if (leaves) out.push_back(t);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<TensorId> MaterializedOutputs(const Graph& g, const FusionPlan& plan, size_t index) {
  return MaterializedWithIndex(g, plan, index, GroupsOfNodes(g, plan));
}

std::vector<std::vector<TensorId>> AllMaterializedOutputs(const Graph& g, const FusionPlan& plan) {
  auto groups_of = GroupsOfNodes(g, plan);
  std::vector<std::vector<TensorId>> out;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    out.push_back(MaterializedWithIndex(g, plan, i, groups_of));
  }
  return out;
}

std::vector<std::vector<TensorId>> AllGroupInputs(const Graph& g, const FusionPlan& plan) {
  std::vector<std::vector<TensorId>> out;
  for (size_t i = 0; i < plan.groups.size(); ++i) out.push_back(GroupInputs(g, plan, i));
  return out;
}

std::vector<TensorId> GroupInputs(const Graph& g, const FusionPlan& plan, size_t index) {
  const FusionGroup& group = plan.groups[index];
  std::vector<TensorId> in;
  for (NodeId id : group.nodes) {
    for (TensorId t : g.node(id).inputs) {
      if (t != kNoId && !ProducedInside(g, group.nodes, t)) in.push_back(t);
    }
  }
  std::sort(in.begin(), in.end());
  in.erase(std::unique(in.begin(), in.end()), in.end());
  return in;
}

FusionPlan UnfusedPlan(const Graph& g) {
  FusionPlan plan;
  for (NodeId id = 0; id < static_cast<NodeId>(g.num_nodes()); ++id) {
    bool opaque = ClassifyNode(g, g.node(id)) == OpClass::kOpaque;
    plan.groups.push_back(FusionGroup{opaque ? GroupKind::kOpaque : GroupKind::kSingle, {id}, {}});
  }
  return plan;
}

void PlanToProto(const FusionPlan& plan, v1::Plan* out) {
  out->clear_groups();
  out->clear_shared_producers();
  std::unordered_map<NodeId, int> copies;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const FusionGroup& group = plan.groups[i];
    v1::FusionGroup* pg = out->add_groups();
    pg->set_id(static_cast<int32_t>(i));
    pg->set_kind(static_cast<v1::GroupKind>(group.kind));
    for (NodeId id : group.nodes) {
      pg->add_nodes(id);
      ++copies[id];
    }
    for (NodeId id : group.recomputed) pg->add_recomputed(id);
    pg->set_kernel(group.kernel);
  }
  std::vector<NodeId> shared;
  for (const auto& [id, n] : copies) {
    if (n > 1) shared.push_back(id);
  }
  std::sort(shared.begin(), shared.end());
  for (NodeId id : shared) {
    auto* sp = out->add_shared_producers();
    sp->set_node(id);
    sp->set_recompute(true);
  }
}

}  // namespace fusor
