// Which fusion plans the oneDNN backend can run: the group kinds' rules, oneDNN 2.6's post-op list,
// and the whole-plan checks. The cost model, the runtime and the search must agree exactly on what
// a legal group is, so the rules are one piece of code below all three; they are backend policy,
// so they live with the lowering rather than in the IR (graph/plan.h holds plans as data). Pure
// functions; thread-safe.
//
// Legal groups (docs/decisions.md, "Plans and their legality"):
//   kSingle    one node of any class (the unfused reference); kOpaque is the same for opaque ops.
//   kAnchor    one anchor (Conv, ConvTranspose, Gemm, MatMul) followed by a chain of elementwise /
//              broadcast nodes: oneDNN post-ops. Each chain node reads the previous chain value and
//              at most one other tensor from outside the group (a binary / sum post-op operand that
//              broadcasts to the chain value, never the reverse); the chain value keeps its shape.
//              Only the last node's output may leave the group.
//   kReduction one reduction node (Softmax, LayerNormalization, Reduce*, pooling) with an
//              elementwise prologue (nodes whose outputs all feed the group, ending at the
//              reduction's data input) and an elementwise / broadcast epilogue chain as for
//              anchors. Only the last node's output may leave the group.
//   kLoop      elementwise, broadcast and injective nodes only, weakly connected, any number of
//              outputs: our fused loop.
// Every group is convex: no path leaves it and comes back. Groups are listed in an order where each
// group's inputs come from earlier groups, graph inputs, weights or constants. Only elementwise,
// broadcast and injective nodes may be recomputed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/plan.h"
#include "graph/plan_json.h"
#include "proto/plan.pb.h"

namespace fusor {

// Ops that oneDNN expresses as eltwise / binary post-ops on a primitive's destination: the chain
// nodes an anchor group may take.
bool IsPostOp(const Graph& g, const Node& n);

// A gate and the Mul after it computing x * Gate(x), the gate's output read by nothing else:
// x * Sigmoid(x) (SiLU, swish: EfficientNet's activation) and x * HardSigmoid(x) (hard swish
// written out: MobileNetV3's activation as torch exports it). oneDNN runs the pair as one eltwise
// (eltwise_swish; eltwise_hardswish with the HardSigmoid's alpha and beta), which reads x once,
// and a post-op chain takes it as one post-op, so the Mul may read x besides the chain value.
enum class GatedPair { kNone, kSwish, kHardSwish };
GatedPair GatedPairOf(const Graph& g, const Node& gate, const Node& mul);

// Whether `chain` (nodes of `group` after `head`) is a post-op chain as anchor groups take: each
// node a post-op reading the running value, its other inputs from outside the group (or, for the
// Mul of a gated pair, the gate's input), the value's shape kept. InvalidArgument names the node
// that breaks it.
Status CheckPostOpChain(const Graph& g, const std::vector<NodeId>& group, NodeId head,
                        const std::vector<NodeId>& chain);

// The kind a set of nodes would run as, or InvalidArgument naming the rule they break. A single
// node is kSingle (kOpaque for opaque ops); several nodes are tried as kAnchor, kReduction, kLoop.
StatusOr<GroupKind> InferGroupKind(const Graph& g, const std::vector<NodeId>& nodes);

// Checks one group: sorted unique valid ids, recomputed subset of nodes, its kind's rules,
// convexity.
Status CheckGroup(const Graph& g, const FusionGroup& group);

// Checks the whole plan: every group legal, every node computed, a node in several groups is
// recomputed everywhere but at most once and recomputable, execution order respects dependencies,
// and only the last node of an anchor / reduction group writes a tensor that leaves it.
Status CheckPlan(const Graph& g, const FusionPlan& plan);

// Structural maximum fusion: walking nodes in topological order, each new group greedily absorbs
// consumers while the group stays legal. No cost model, no recompute: "every legal fusion applied".
FusionPlan MaxFusionPlan(const Graph& g);

// A random legal plan for tests: like MaxFusionPlan but each absorption happens with probability
// `fuse_probability`, and afterwards each single-node recomputable producer whose consumers all lie
// in kLoop groups is recomputed into them with probability `recompute_probability`.
FusionPlan RandomLegalPlan(const Graph& g, uint64_t seed, double fuse_probability = 0.5,
                           double recompute_probability = 0.3);

// A plan read from the wire, checked against `g` (CheckPlan).
StatusOr<FusionPlan> PlanFromProto(const Graph& g, const fusor::v1::Plan& p);

// A plan read from its JSON form (graph/plan_json.h DecodePlanJson: its graph and target checked
// first), then checked against `g` (CheckPlan).
StatusOr<FusionPlan> PlanFromJson(const Graph& g, const nlohmann::json& j,
                                  std::string_view target_id = "", std::string* warning = nullptr);

}  // namespace fusor
