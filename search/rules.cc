#include "search/plan_search.h"

#include <algorithm>

#include "graph/op_registry.h"
#include "lowering/plan_legality.h"

namespace fusor {
namespace {

// The single consumer of a group's last node that could continue a chain, or kNoId.
NodeId ChainSuccessor(const Graph& g, NodeId last, const std::vector<bool>& assigned) {
  const Node& n = g.node(last);
  if (n.outputs.size() != 1 || g.IsGraphOutput(n.outputs[0])) return kNoId;
  const auto& consumers = g.tensor(n.outputs[0]).consumers;
  if (consumers.size() != 1 || assigned[consumers[0]]) return kNoId;
  NodeId c = consumers[0];
  for (TensorId in : g.node(c).inputs) {
    NodeId p = in == kNoId ? kNoId : g.tensor(in).producer;
    if (p != kNoId && p != last && !assigned[p]) return kNoId;  // Not ready after this group.
  }
  return c;
}

}  // namespace

// TVM FuseOps in spirit: chains only, never a reduction fused behind something, no cost model.
FusionPlan RulesPlan(const Graph& g, int max_group_nodes) {
  FusionPlan plan;
  std::vector<bool> assigned(g.num_nodes(), false);
  for (NodeId seed = 0; seed < static_cast<NodeId>(g.num_nodes()); ++seed) {
    if (assigned[seed]) continue;
    std::vector<NodeId> nodes = {seed};
    assigned[seed] = true;
    while (static_cast<int>(nodes.size()) < max_group_nodes) {
      NodeId c = ChainSuccessor(g, nodes.back(), assigned);
      if (c == kNoId || ClassifyNode(g, g.node(c)) == OpClass::kReduction) break;
      std::vector<NodeId> bigger = nodes;
      bigger.insert(std::upper_bound(bigger.begin(), bigger.end(), c), c);
      if (!InferGroupKind(g, bigger).ok() ||
          !CheckGroup(g, {*InferGroupKind(g, bigger), bigger, {}}).ok()) {
        break;
      }
      nodes = std::move(bigger);
      assigned[c] = true;
    }
    plan.groups.push_back(FusionGroup{*InferGroupKind(g, nodes), nodes, {}});
  }
  return plan;
}

}  // namespace fusor
