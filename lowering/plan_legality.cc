#include "lowering/plan_legality.h"

#include <algorithm>
#include <random>
#include <unordered_set>

#include "graph/node_attrs.h"
#include "graph/op_registry.h"

namespace fusor {
namespace {

std::string NodeRef(const Graph& g, NodeId id) {
  return "node '" + g.node(id).name + "' (" + g.node(id).op_type + ", #" + std::to_string(id) + ")";
}

bool Contains(const std::vector<NodeId>& sorted, NodeId id) {
  return std::binary_search(sorted.begin(), sorted.end(), id);
}

bool IsPointwise(OpClass c) { return c == OpClass::kElementwise || c == OpClass::kBroadcast; }
bool IsRecomputable(OpClass c) { return IsPointwise(c) || c == OpClass::kInjective; }

bool IsScalarConstant(const Graph& g, TensorId t) {
  return t != kNoId && g.tensor(t).kind == TensorKind::kConstant && g.tensor(t).num_elements() == 1;
}

}  // namespace

bool IsPostOp(const Graph& g, const Node& n) {
  static const std::unordered_set<std::string_view> kEltwise = {
      "Relu", "LeakyRelu", "Tanh", "Sigmoid", "Exp", "Log", "Sqrt", "HardSwish", "HardSigmoid"};
  static const std::unordered_set<std::string_view> kBinary = {"Add", "Sub", "Mul", "Div"};
  if (!n.domain.empty()) return false;
  if (kEltwise.count(n.op_type) || kBinary.count(n.op_type)) return true;
  if (n.op_type == "BatchNormalization") return !OnlyReferenceComputes(g, n);
  if (n.op_type == "Clip") {
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      if (n.inputs[i] != kNoId && !IsScalarConstant(g, n.inputs[i])) return false;
    }
    return true;
  }
  if (n.op_type == "Pow") return IsScalarConstant(g, n.input(1));
  return false;
}

GatedPair GatedPairOf(const Graph& g, const Node& gate, const Node& mul) {
  if (!gate.domain.empty() || !mul.domain.empty() || mul.op_type != "Mul" ||
      mul.inputs.size() != 2 || gate.inputs.size() != 1 || gate.outputs.size() != 1) {
    return GatedPair::kNone;
  }
  GatedPair kind = gate.op_type == "Sigmoid"       ? GatedPair::kSwish
                   : gate.op_type == "HardSigmoid" ? GatedPair::kHardSwish
                                                   : GatedPair::kNone;
  TensorId x = gate.inputs[0], s = gate.outputs[0];
  bool reads =
      (mul.inputs[0] == x && mul.inputs[1] == s) || (mul.inputs[0] == s && mul.inputs[1] == x);
  if (!reads || g.tensor(s).consumers.size() != 1 || g.IsGraphOutput(s)) return GatedPair::kNone;
  return kind;
}

namespace {

// Inputs of a node that no node of the group produces.
bool ProducedInside(const Graph& g, const std::vector<NodeId>& group, TensorId t) {
  return t != kNoId && g.tensor(t).producer != kNoId && Contains(group, g.tensor(t).producer);
}

// The chain after `head`: each next node reads the running value (in slot 0, or either slot of a
// commutative op), its other inputs come from outside the group and broadcast to the running value.
Status CheckChain(const Graph& g, const std::vector<NodeId>& group, NodeId head,
                  const std::vector<NodeId>& chain, bool post_ops_only) {
  NodeId cur = head;
  for (NodeId id : chain) {
    const Node& n = g.node(id);
    if (!IsPointwise(ClassifyNode(g, n))) {
      return Status::InvalidArgument(NodeRef(g, id) + " is not elementwise or broadcast");
    }
    if (post_ops_only && !IsPostOp(g, n)) {
      return Status::InvalidArgument(NodeRef(g, id) + " has no oneDNN post-op form");
    }
    if (g.node(cur).outputs.size() != 1 || n.outputs.size() != 1) {
      return Status::InvalidArgument(NodeRef(g, id) + ": a post-op chain has one value");
    }
    TensorId running = g.node(cur).outputs[0];
    bool commutative = n.op_type == "Add" || n.op_type == "Mul";
    // The Mul of a gated pair also reads the value before its gate: the pair is one post-op.
    TensorId gated =
        GatedPairOf(g, g.node(cur), n) != GatedPair::kNone ? g.node(cur).inputs[0] : kNoId;
    int slots = 0;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      TensorId in = n.inputs[i];
      if (in == running) {
        ++slots;
        if (i != 0 && !commutative) {
          return Status::InvalidArgument(NodeRef(g, id) + " reads the chain value as operand " +
                                         std::to_string(i) + " of a non-commutative op");
        }
      } else if (in == gated) {
        continue;
      } else if (ProducedInside(g, group, in)) {
        return Status::InvalidArgument(NodeRef(g, id) +
                                       " reads a second value computed inside the group");
      }
    }
    if (slots != 1) {
      return Status::InvalidArgument(NodeRef(g, id) + " does not continue the chain of " +
                                     NodeRef(g, cur));
    }
    if (g.tensor(n.outputs[0]).dims != g.tensor(running).dims) {
      return Status::InvalidArgument(NodeRef(g, id) + " changes the chain value's shape");
    }
    cur = id;
  }
  return Status::Ok();
}

}  // namespace

Status CheckPostOpChain(const Graph& g, const std::vector<NodeId>& group, NodeId head,
                        const std::vector<NodeId>& chain) {
  return CheckChain(g, group, head, chain, /*post_ops_only=*/true);
}

namespace {

Status CheckAnchorGroup(const Graph& g, const std::vector<NodeId>& nodes, NodeId anchor) {
  if (nodes.front() != anchor) {
    return Status::InvalidArgument("the anchor " + NodeRef(g, anchor) + " must come first");
  }
  std::vector<NodeId> chain(nodes.begin() + 1, nodes.end());
  return CheckChain(g, nodes, anchor, chain, /*post_ops_only=*/true);
}

Status CheckReductionGroup(const Graph& g, const std::vector<NodeId>& nodes, NodeId reduction) {
  std::vector<NodeId> prologue, epilogue;
  for (NodeId id : nodes) {
    if (id < reduction) prologue.push_back(id);
    if (id > reduction) epilogue.push_back(id);
  }
  for (NodeId id : prologue) {
    if (!IsPointwise(ClassifyNode(g, g.node(id)))) {
      return Status::InvalidArgument("prologue " + NodeRef(g, id) +
                                     " is not elementwise or broadcast");
    }
  }
  // Every prologue value must flow into the reduction's data input.
  TensorId data = g.node(reduction).input(0);
  for (size_t i = 1; i < g.node(reduction).inputs.size(); ++i) {
    if (ProducedInside(g, nodes, g.node(reduction).inputs[i])) {
      return Status::InvalidArgument(NodeRef(g, reduction) +
                                     " may take only its data input from the prologue");
    }
  }
  if (!prologue.empty() && !ProducedInside(g, nodes, data)) {
    return Status::InvalidArgument("the prologue does not feed " + NodeRef(g, reduction));
  }
  return CheckChain(g, nodes, reduction, epilogue, /*post_ops_only=*/false);
}

bool WeaklyConnected(const Graph& g, const std::vector<NodeId>& nodes) {
  std::unordered_set<NodeId> seen = {nodes.front()};
  std::vector<NodeId> stack = {nodes.front()};
  while (!stack.empty()) {
    NodeId id = stack.back();
    stack.pop_back();
    auto visit = [&](NodeId other) {
      if (other != kNoId && Contains(nodes, other) && seen.insert(other).second) {
        stack.push_back(other);
      }
    };
    for (TensorId in : g.node(id).inputs) {
      if (in != kNoId) visit(g.tensor(in).producer);
    }
    for (TensorId out : g.node(id).outputs) {
      for (NodeId c : g.tensor(out).consumers) visit(c);
    }
  }
  return seen.size() == nodes.size();
}

// No path leaves the group and re-enters it. Ids are topological, so only nodes below the group's
// last id can lie on such a path. A recomputed copy feeds only the group it is in (consumers
// elsewhere read their own copy or the owner's output), so paths never start from one.
bool IsConvex(const Graph& g, const std::vector<NodeId>& nodes,
              const std::vector<NodeId>& recomputed = {}) {
  NodeId last = nodes.back();
  std::vector<NodeId> stack;
  std::unordered_set<NodeId> seen;
  for (NodeId id : nodes) {
    if (Contains(recomputed, id)) continue;
    for (TensorId out : g.node(id).outputs) {
      for (NodeId c : g.tensor(out).consumers) {
        if (!Contains(nodes, c) && c < last && seen.insert(c).second) stack.push_back(c);
      }
    }
  }
  while (!stack.empty()) {
    NodeId id = stack.back();
    stack.pop_back();
    for (TensorId out : g.node(id).outputs) {
      for (NodeId c : g.tensor(out).consumers) {
        if (Contains(nodes, c)) return false;
        if (c < last && seen.insert(c).second) stack.push_back(c);
      }
    }
  }
  return true;
}

bool OwnedBy(const FusionGroup& group, NodeId id) {
  return Contains(group.nodes, id) && !Contains(group.recomputed, id);
}

Status CheckCoverage(const Graph& g, const FusionPlan& plan,
                     const std::vector<std::vector<int32_t>>& groups_of) {
  for (NodeId id = 0; id < static_cast<NodeId>(g.num_nodes()); ++id) {
    if (groups_of[id].empty()) return Status::InvalidArgument(NodeRef(g, id) + " is in no group");
    int owners = 0;
    for (int32_t gi : groups_of[id]) owners += OwnedBy(plan.groups[gi], id) ? 1 : 0;
    if (owners > 1) {
      return Status::InvalidArgument(NodeRef(g, id) + " is owned by " + std::to_string(owners) +
                                     " groups; all copies but one must be marked recomputed");
    }
    if (groups_of[id].size() > 1 && !IsRecomputable(ClassifyNode(g, g.node(id)))) {
      return Status::InvalidArgument(NodeRef(g, id) +
                                     " is computed in several groups, but only "
                                     "elementwise, broadcast and injective ops may be recomputed");
    }
  }
  return Status::Ok();
}

// Each group reads only what earlier groups wrote, or what it computes itself.
Status CheckOrder(const Graph& g, const FusionPlan& plan,
                  const std::vector<std::vector<int32_t>>& groups_of) {
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    for (NodeId id : plan.groups[i].nodes) {
      for (TensorId in : g.node(id).inputs) {
        if (in == kNoId || g.tensor(in).producer == kNoId) continue;
        NodeId p = g.tensor(in).producer;
        if (Contains(plan.groups[i].nodes, p)) continue;
        bool written_before = false;
        for (int32_t gi : groups_of[p]) {
          written_before |= gi < static_cast<int32_t>(i) && OwnedBy(plan.groups[gi], p);
        }
        if (!written_before) {
          return Status::InvalidArgument("group " + std::to_string(i) + ": " + NodeRef(g, id) +
                                         " reads '" + g.tensor(in).name +
                                         "', which no earlier group writes to memory");
        }
      }
    }
  }
  for (TensorId out : g.outputs()) {
    NodeId p = g.tensor(out).producer;
    if (p == kNoId) continue;
    bool owned = false;
    for (int32_t gi : groups_of[p]) owned |= OwnedBy(plan.groups[gi], p);
    if (!owned) {
      return Status::InvalidArgument("graph output '" + g.tensor(out).name +
                                     "' is only recomputed, never written to memory");
    }
  }
  return Status::Ok();
}

// Anchor and reduction groups are one primitive: only their final value reaches memory.
Status CheckSingleExit(const Graph& g, const FusionPlan& plan) {
  auto materialized = AllMaterializedOutputs(g, plan);
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const FusionGroup& group = plan.groups[i];
    if (group.kind != GroupKind::kAnchor && group.kind != GroupKind::kReduction) continue;
    for (TensorId t : materialized[i]) {
      if (g.tensor(t).producer != group.nodes.back()) {
        return Status::InvalidArgument("group " + std::to_string(i) + " (" +
                                       std::string(GroupKindName(group.kind)) + ") must write '" +
                                       g.tensor(t).name +
                                       "' to memory, but only its last node's output can leave it");
      }
    }
  }
  return Status::Ok();
}

bool IsReady(const Graph& g, NodeId n, const std::vector<NodeId>& group,
             const std::vector<bool>& assigned, const std::vector<NodeId>& extra) {
  for (TensorId in : g.node(n).inputs) {
    if (in == kNoId || g.tensor(in).producer == kNoId) continue;
    NodeId p = g.tensor(in).producer;
    bool in_extra = std::find(extra.begin(), extra.end(), p) != extra.end();
    if (!assigned[p] && !Contains(group, p) && !in_extra) return false;
  }
  return true;
}

// Growth candidates: each unassigned consumer of the group, bundled with those of its unassigned
// producers that are themselves ready, so siblings meeting at a consumer can join together.
std::vector<std::vector<NodeId>> Candidates(const Graph& g, const std::vector<NodeId>& group,
                                            const std::vector<bool>& assigned) {
  std::vector<NodeId> consumers;
  for (NodeId id : group) {
    for (TensorId t : g.node(id).outputs) {
      for (NodeId c : g.tensor(t).consumers) {
        if (!assigned[c] && !Contains(group, c)) consumers.push_back(c);
      }
    }
  }
  std::sort(consumers.begin(), consumers.end());
  consumers.erase(std::unique(consumers.begin(), consumers.end()), consumers.end());
  std::vector<std::vector<NodeId>> out;
  for (NodeId c : consumers) {
    std::vector<NodeId> bundle;
    for (TensorId in : g.node(c).inputs) {
      NodeId p = in == kNoId ? kNoId : g.tensor(in).producer;
      if (p == kNoId || assigned[p] || Contains(group, p)) continue;
      if (std::find(bundle.begin(), bundle.end(), p) != bundle.end()) continue;
      if (IsReady(g, p, group, assigned, {})) bundle.push_back(p);
    }
    if (!IsReady(g, c, group, assigned, bundle)) continue;
    bundle.push_back(c);
    out.push_back(std::move(bundle));
  }
  return out;
}

// For a one-primitive group built without recompute: no value but the last may be read outside.
bool IntermediatesStayInside(const Graph& g, const std::vector<NodeId>& nodes) {
  for (size_t i = 0; i + 1 < nodes.size(); ++i) {
    for (TensorId t : g.node(nodes[i]).outputs) {
      if (g.IsGraphOutput(t)) return false;
      for (NodeId c : g.tensor(t).consumers) {
        if (!Contains(nodes, c)) return false;
      }
    }
  }
  return true;
}

bool LegalGroupNodes(const Graph& g, const std::vector<NodeId>& nodes) {
  auto kind = InferGroupKind(g, nodes);
  if (!kind.ok() || !IsConvex(g, nodes)) return false;
  bool one_primitive = *kind == GroupKind::kAnchor || *kind == GroupKind::kReduction;
  return !one_primitive || IntermediatesStayInside(g, nodes);
}

// Greedy growth shared by MaxFusionPlan and RandomLegalPlan; `accept` decides each legal
// absorption.
template <typename Accept>
FusionPlan GrowGroups(const Graph& g, Accept accept) {
  FusionPlan plan;
  std::vector<bool> assigned(g.num_nodes(), false);
  for (NodeId seed = 0; seed < static_cast<NodeId>(g.num_nodes()); ++seed) {
    if (assigned[seed]) continue;
    std::vector<NodeId> nodes = {seed};
    std::unordered_set<NodeId> rejected;
    for (bool grew = true; grew;) {
      grew = false;
      for (const std::vector<NodeId>& bundle : Candidates(g, nodes, assigned)) {
        NodeId c = bundle.back();
        if (rejected.count(c)) continue;
        std::vector<NodeId> bigger = nodes;
        for (NodeId id : bundle)
          bigger.insert(std::upper_bound(bigger.begin(), bigger.end(), id), id);
        if (!LegalGroupNodes(g, bigger) || !accept()) {
          rejected.insert(c);
          continue;
        }
        nodes = std::move(bigger);
        grew = true;
        break;
      }
    }
    for (NodeId id : nodes) assigned[id] = true;
    plan.groups.push_back(FusionGroup{*InferGroupKind(g, nodes), nodes, {}});
  }
  return plan;
}

// Tries to dissolve single-node group `gi` into the kLoop groups of its consumers as a recomputed
// copy.
bool TryRecompute(const Graph& g, FusionPlan* plan, size_t gi) {
  const FusionGroup& single = plan->groups[gi];
  NodeId p = single.nodes.front();
  if (single.nodes.size() != 1 || !IsRecomputable(ClassifyNode(g, g.node(p)))) return false;
  if (std::any_of(g.node(p).outputs.begin(), g.node(p).outputs.end(),
                  [&](TensorId t) { return g.IsGraphOutput(t); })) {
    return false;
  }
  FusionPlan candidate = *plan;
  std::vector<NodeId> consumers;
  for (TensorId t : g.node(p).outputs) {
    consumers.insert(consumers.end(), g.tensor(t).consumers.begin(), g.tensor(t).consumers.end());
  }
  if (consumers.empty()) return false;
  for (size_t k = 0; k < candidate.groups.size(); ++k) {
    FusionGroup& group = candidate.groups[k];
    bool reads_p = std::any_of(consumers.begin(), consumers.end(),
                               [&](NodeId c) { return Contains(group.nodes, c); });
    if (k == gi || !reads_p) continue;
    if (group.kind != GroupKind::kLoop) return false;
    group.nodes.insert(std::upper_bound(group.nodes.begin(), group.nodes.end(), p), p);
    group.recomputed.insert(std::upper_bound(group.recomputed.begin(), group.recomputed.end(), p),
                            p);
  }
  candidate.groups.erase(candidate.groups.begin() + static_cast<std::ptrdiff_t>(gi));
  if (!CheckPlan(g, candidate).ok()) return false;
  *plan = std::move(candidate);
  return true;
}

GroupKind GroupKindFromProto(v1::GroupKind k) { return static_cast<GroupKind>(k); }

}  // namespace

StatusOr<GroupKind> InferGroupKind(const Graph& g, const std::vector<NodeId>& nodes) {
  if (nodes.empty()) return Status::InvalidArgument("a group needs at least one node");
  if (nodes.size() == 1) {
    bool opaque = ClassifyNode(g, g.node(nodes[0])) == OpClass::kOpaque;
    return opaque ? GroupKind::kOpaque : GroupKind::kSingle;
  }
  std::vector<NodeId> anchors, reductions;
  for (NodeId id : nodes) {
    OpClass c = ClassifyNode(g, g.node(id));
    if (c == OpClass::kOpaque) {
      return Status::InvalidArgument(NodeRef(g, id) + " is opaque and must run alone");
    }
    if (c == OpClass::kAnchor) anchors.push_back(id);
    if (c == OpClass::kReduction) reductions.push_back(id);
  }
  if (anchors.size() + reductions.size() > 1) {
    return Status::InvalidArgument("a group may hold at most one anchor or reduction");
  }
  if (anchors.size() == 1) {
    FUSOR_RETURN_IF_ERROR(CheckAnchorGroup(g, nodes, anchors[0]));
    return GroupKind::kAnchor;
  }
  if (reductions.size() == 1) {
    FUSOR_RETURN_IF_ERROR(CheckReductionGroup(g, nodes, reductions[0]));
    return GroupKind::kReduction;
  }
  if (!WeaklyConnected(g, nodes)) {
    return Status::InvalidArgument("the nodes of a fused loop must be connected");
  }
  return GroupKind::kLoop;
}

Status CheckGroup(const Graph& g, const FusionGroup& group) {
  const auto& nodes = group.nodes;
  if (nodes.empty()) return Status::InvalidArgument("a group has no nodes");
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i] < 0 || nodes[i] >= static_cast<NodeId>(g.num_nodes())) {
      return Status::InvalidArgument("node index " + std::to_string(nodes[i]) +
                                     " is out of range (the graph has " +
                                     std::to_string(g.num_nodes()) + " nodes)");
    }
    if (i > 0 && nodes[i] <= nodes[i - 1]) {
      return Status::InvalidArgument("a group's nodes must be sorted and unique");
    }
  }
  for (NodeId id : group.recomputed) {
    if (!Contains(nodes, id)) {
      return Status::InvalidArgument("recomputed node #" + std::to_string(id) +
                                     " is not among the group's nodes");
    }
  }
  FUSOR_ASSIGN_OR_RETURN(GroupKind kind, InferGroupKind(g, nodes));
  if (kind != group.kind) {
    return Status::InvalidArgument("group starting at " + NodeRef(g, nodes[0]) + " is declared " +
                                   std::string(GroupKindName(group.kind)) + " but its nodes form " +
                                   std::string(GroupKindName(kind)));
  }
  if (!IsConvex(g, nodes, group.recomputed)) {
    return Status::InvalidArgument("group starting at " + NodeRef(g, nodes[0]) +
                                   " is not convex: a path leaves it and comes back");
  }
  return Status::Ok();
}

Status CheckPlan(const Graph& g, const FusionPlan& plan) {
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    Status s = CheckGroup(g, plan.groups[i]);
    if (!s.ok()) return s.WithContext("group " + std::to_string(i));
  }
  auto groups_of = GroupsOfNodes(g, plan);
  FUSOR_RETURN_IF_ERROR(CheckCoverage(g, plan, groups_of));
  FUSOR_RETURN_IF_ERROR(CheckOrder(g, plan, groups_of));
  return CheckSingleExit(g, plan);
}

FusionPlan MaxFusionPlan(const Graph& g) {
  return GrowGroups(g, [] { return true; });
}

FusionPlan RandomLegalPlan(const Graph& g, uint64_t seed, double fuse_probability,
                           double recompute_probability) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution fuse(fuse_probability), recompute(recompute_probability);
  FusionPlan plan = GrowGroups(g, [&] { return fuse(rng); });
  for (size_t gi = 0; gi < plan.groups.size(); ++gi) {
    if (plan.groups[gi].nodes.size() == 1 && recompute(rng) && TryRecompute(g, &plan, gi)) --gi;
  }
  return plan;
}

StatusOr<FusionPlan> PlanFromProto(const Graph& g, const v1::Plan& p) {
  FusionPlan plan;
  for (const v1::FusionGroup& pg : p.groups()) {
    if (pg.kind() < v1::SINGLE || pg.kind() > v1::OPAQUE) {
      return Status::InvalidArgument("group " + std::to_string(pg.id()) + " has invalid kind " +
                                     std::to_string(pg.kind()));
    }
    FusionGroup group{GroupKindFromProto(pg.kind()), {}, {}};
    group.nodes.assign(pg.nodes().begin(), pg.nodes().end());
    group.recomputed.assign(pg.recomputed().begin(), pg.recomputed().end());
    std::sort(group.recomputed.begin(), group.recomputed.end());
    group.kernel = pg.kernel();
    plan.groups.push_back(std::move(group));
  }
  FUSOR_RETURN_IF_ERROR(CheckPlan(g, plan));
  return plan;
}

StatusOr<FusionPlan> PlanFromJson(const Graph& g, const nlohmann::json& j,
                                  std::string_view target_id, std::string* warning) {
  FUSOR_ASSIGN_OR_RETURN(FusionPlan plan, DecodePlanJson(g, j, target_id, warning));
  FUSOR_RETURN_IF_ERROR(CheckPlan(g, plan));
  return plan;
}

}  // namespace fusor
