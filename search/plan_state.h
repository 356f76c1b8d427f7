// PlanState: a plan under construction by the search. Groups have stable integer ids (a removed
// group's id is never reused), every node knows which groups compute it, and a group's cost inputs
// (what it reads, what it must write to memory) can be derived for the group as it stands or for a
// hypothetical group that would replace some existing ones. ToPlan() orders the live groups so that
// each one runs after the groups it reads from. Not thread-safe; one search owns one PlanState.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/plan.h"

namespace fusor {

class PlanState {
 public:
  using GroupId = int32_t;

  // One group per node: the unfused plan.
  explicit PlanState(const Graph& g);
  // The groups of an existing legal plan.
  PlanState(const Graph& g, const FusionPlan& plan);

  GroupId Add(FusionGroup group);
  void Remove(GroupId id);
  bool alive(GroupId id) const { return alive_[id]; }
  const FusionGroup& group(GroupId id) const { return groups_[id]; }
  size_t num_ids() const { return groups_.size(); }
  std::vector<GroupId> LiveGroups() const;

  // Groups computing node `n` (its owner and any recomputing copies).
  const std::vector<GroupId>& GroupsOf(NodeId n) const { return groups_of_[n]; }
  // The group that owns node `n` (computes it without the recomputed mark).
  GroupId OwnerOf(NodeId n) const;

  // What `group` reads from memory (tensors produced outside it).
  std::vector<TensorId> Inputs(const FusionGroup& group) const;
  // What `group` must write: outputs of nodes it owns that are graph outputs, or read by a node
  // outside it in some live group (other than those in `replaced`) that does not compute the node
  // itself.
  std::vector<TensorId> Materialized(const FusionGroup& group,
                                     const std::vector<GroupId>& replaced = {}) const;

  // Live groups reading what `id` writes, and live groups `id` reads from.
  std::vector<GroupId> Consumers(GroupId id) const;
  std::vector<GroupId> Producers(GroupId id) const;

  // Live groups in an execution order; FailedPrecondition if they depend on each other cyclically.
  StatusOr<FusionPlan> ToPlan() const;

  const Graph& graph() const { return g_; }

 private:
  const Graph& g_;
  std::vector<FusionGroup> groups_;
  std::vector<bool> alive_;
  std::vector<std::vector<GroupId>> groups_of_;
};

// Legal as a group on its own: kind rules, convexity, and for one-primitive kinds (anchor,
// reduction) nothing but the last node's outputs in `materialized`.
bool IsLegalGroup(const Graph& g, FusionGroup* group, const std::vector<TensorId>& materialized);

// The union of two groups: nodes merged, a node recomputed in the union only if it is recomputed
// wherever it appears in it.
FusionGroup MergeGroups(const FusionGroup& a, const FusionGroup& b);

}  // namespace fusor
