// Fusion plans in memory: a list of groups, each run as one kernel, in execution order, and the
// structural rules that make a plan legal for the oneDNN backend. These rules live in graph/
// because the cost model, the runtime and the search must all agree on them. Node ids are canonical
// indices (graph/canonical.h), so nodes are numbered in a topological order. Pure functions;
// thread-safe.
//
// Legal groups (docs/decisions.md, "Plans and their legality"):
//   kSingle    one node of any class (the unfused reference); kOpaque is the same for opaque ops.
//   kAnchor    one anchor (Conv, ConvTranspose, Gemm, MatMul) followed by a chain of elementwise /
//              broadcast nodes: oneDNN post-ops. Each chain node reads the previous chain value and
//              at most one other tensor from outside the group (a binary / sum post-op operand that
//              broadcasts to the chain value, never the reverse); the chain value keeps its shape.
//              Only the last node's output may leave the group.
//   kReduction one reduction node (Softmax, LayerNormalization, Reduce*, pooling) with an
//   elementwise
//              prologue (nodes whose outputs all feed the group, ending at the reduction's data
//              input) and an elementwise / broadcast epilogue chain as for anchors. Only the last
//              node's output may leave the group.
//   kLoop      elementwise, broadcast and injective nodes only, weakly connected, any number of
//              outputs: our fused loop.
// Every group is convex: no path leaves it and comes back. Groups are listed in an order where each
// group's inputs come from earlier groups, graph inputs, weights or constants.
//
// Recompute: a node may appear in several groups. In all but at most one of them it is listed in
// the group's `recomputed` set: that copy is computed inside the group and never written to memory.
// Only elementwise, broadcast and injective nodes may be recomputed.
#pragma once

#include <cstdint>
#include <string>
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
  GroupKind kind = GroupKind::kSingle;
  std::vector<NodeId> nodes;  // Every node the group computes, in ascending (topological) order.
  std::vector<NodeId> recomputed;  // Subset of nodes: copies whose owner (if any) is another group.
  bool operator==(const FusionGroup&) const = default;
};

struct FusionPlan {
  std::vector<FusionGroup> groups;  // Execution order.
  bool operator==(const FusionPlan&) const = default;
};

// The kind a set of nodes would run as, or InvalidArgument naming the rule they break. A single
// node is kSingle (kOpaque for opaque ops); several nodes are tried as kAnchor, kReduction, kLoop.
StatusOr<GroupKind> InferGroupKind(const Graph& g, const std::vector<NodeId>& nodes);

// Checks one group: sorted unique valid ids, recomputed subset of nodes, its kind's rules,
// convexity.
Status CheckGroup(const Graph& g, const FusionGroup& group);

// Ops that oneDNN 2.6 expresses as eltwise / binary post-ops on a primitive's destination: the
// chain nodes an anchor group may take.
bool IsPostOp(const Graph& g, const Node& n);

// Whether `chain` (nodes of `group` after `head`) is a post-op chain as anchor groups take: each
// node a post-op reading the running value, its other inputs from outside the group, the value's
// shape kept. InvalidArgument names the node that breaks it.
Status CheckPostOpChain(const Graph& g, const std::vector<NodeId>& group, NodeId head,
                        const std::vector<NodeId>& chain);

// Checks the whole plan: every group legal, every node computed, a node in several groups is
// recomputed everywhere but at most once and recomputable, execution order respects dependencies,
// and only the last node of an anchor / reduction group writes a tensor that leaves it.
Status CheckPlan(const Graph& g, const FusionPlan& plan);

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

// Structural maximum fusion: walking nodes in topological order, each new group greedily absorbs
// consumers while the group stays legal. No cost model, no recompute: "every legal fusion applied".
FusionPlan MaxFusionPlan(const Graph& g);

// A random legal plan for tests: like MaxFusionPlan but each absorption happens with probability
// `fuse_probability`, and afterwards each single-node recomputable producer whose consumers all lie
// in kLoop groups is recomputed into them with probability `recompute_probability`.
FusionPlan RandomLegalPlan(const Graph& g, uint64_t seed, double fuse_probability = 0.5,
                           double recompute_probability = 0.3);

// Wire conversion (the other fields of fusor.v1.Plan are filled by whoever scores/measures it).
void PlanToProto(const FusionPlan& plan, fusor::v1::Plan* out);
StatusOr<FusionPlan> PlanFromProto(const Graph& g, const fusor::v1::Plan& p);

}  // namespace fusor
