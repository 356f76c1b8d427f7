// Fusion plans in memory: a list of groups, each run as one kernel, in execution order, and what
// a plan says about memory (which tensors each group reads and writes). Node ids are canonical
// indices (graph/canonical.h), so nodes are numbered in a topological order. Which plans are legal
// is backend policy and lives with the lowering: lowering/plan_legality.h (CheckPlan, and the group
// kinds' rules). Pure functions; thread-safe.
//
// Group kinds: kSingle (one node; kOpaque for an opaque op), kAnchor (a contraction and its
// post-op chain), kReduction (a reduction with a prologue and an epilogue chain), kLoop (our fused
// loop). A node may appear in several groups: in all but at most one of them it is listed in the
// group's `recomputed` set, a copy computed inside the group and never written to memory.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "proto/plan.pb.h"

namespace fusor {

enum class GroupKind : uint8_t {
  kSingle = 1,
  kAnchor = 2,
  kReduction = 3,
  kLoop = 4,
  kOpaque = 5,
};
std::string_view GroupKindName(GroupKind k);

struct FusionGroup {
  FusionGroup() = default;
  // Brace-initialised as {kind, nodes, recomputed} through most of the code, a kernel rarely.
  FusionGroup(GroupKind kind, std::vector<NodeId> nodes, std::vector<NodeId> recomputed = {},
              std::string kernel = {})
      : kind(kind),
        nodes(std::move(nodes)),
        recomputed(std::move(recomputed)),
        kernel(std::move(kernel)) {}
  GroupKind kind = GroupKind::kSingle;
  std::vector<NodeId> nodes;  // Every node the group computes, in ascending (topological) order.
  std::vector<NodeId> recomputed;  // Subset of nodes: copies whose owner (if any) is another group.
  // The implementation the group's primitive runs as, by oneDNN's name for it
  // ("brg_matmul:avx2", runtime/kernel_choice.h), as the tuner chose it by measurement; empty:
  // oneDNN's first choice (plans not tuned, groups with no primitive to choose for).
  std::string kernel;
  bool operator==(const FusionGroup&) const = default;
};

struct FusionPlan {
  std::vector<FusionGroup> groups;  // Execution order.
  bool operator==(const FusionPlan&) const = default;
};

// Node -> indices of the groups that compute it (ids outside the graph are skipped).
std::vector<std::vector<int32_t>> GroupsOfNodes(const Graph& g, const FusionPlan& plan);

// Tensors group `index` writes to memory: outputs of nodes it owns (not recomputed) that a node
// outside the group reads without computing it itself, or that are graph outputs. Sorted.
std::vector<TensorId> MaterializedOutputs(const Graph& g, const FusionPlan& plan, size_t index);

// Tensors group `index` reads from memory: inputs of its nodes produced outside the group (by
// another group, or graph inputs, weights, constants). Sorted, unique.
std::vector<TensorId> GroupInputs(const Graph& g, const FusionPlan& plan, size_t index);

// The same for every group at once, in time linear in the plan (use these in loops over groups).
std::vector<std::vector<TensorId>> AllMaterializedOutputs(const Graph& g, const FusionPlan& plan);
std::vector<std::vector<TensorId>> AllGroupInputs(const Graph& g, const FusionPlan& plan);

// Every node alone.
FusionPlan UnfusedPlan(const Graph& g);

// Wire conversion (the other fields of fusor.v1.Plan are filled by whoever scores/measures it).
// Reading one back checks its legality: PlanFromProto, lowering/plan_legality.h.
void PlanToProto(const FusionPlan& plan, fusor::v1::Plan* out);

}  // namespace fusor
