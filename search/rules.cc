#include "search/plan_search.h"

#include <algorithm>

#include "graph/op_registry.h"
#include "lowering/plan_legality.h"

namespace fusor {
namespace {

bool Ready(const Graph& g, NodeId c, const std::vector<NodeId>& after,
           const std::vector<bool>& assigned) {
  for (TensorId in : g.node(c).inputs) {
    NodeId p = in == kNoId ? kNoId : g.tensor(in).producer;
    if (p != kNoId && !assigned[p] && std::find(after.begin(), after.end(), p) == after.end()) {
      return false;
    }
  }
  return true;
}

// The nodes that could continue a chain after a group's last node: its single consumer, or the
// gate and Mul of a gated pair (x * Sigmoid(x), lowering/plan_legality.h), which read it both;
// empty when there is none.
std::vector<NodeId> ChainSuccessor(const Graph& g, NodeId last, const std::vector<bool>& assigned) {
  const Node& n = g.node(last);
  if (n.outputs.size() != 1 || g.IsGraphOutput(n.outputs[0])) return {};
  std::vector<NodeId> next = g.tensor(n.outputs[0]).consumers;  // A node reading it twice: twice.
  std::sort(next.begin(), next.end());
  bool pair = next.size() == 2 && next[0] != next[1] &&
              GatedPairOf(g, g.node(next[0]), g.node(next[1])) != GatedPair::kNone;
  if (next.size() != 1 && !pair) return {};
  for (NodeId c : next) {
    if (assigned[c] || !Ready(g, c, {last, next[0]}, assigned)) return {};
  }
  return next;
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
      std::vector<NodeId> next = ChainSuccessor(g, nodes.back(), assigned);
      if (next.empty() || ClassifyNode(g, g.node(next[0])) == OpClass::kReduction) break;
      if (static_cast<int>(nodes.size() + next.size()) > max_group_nodes) break;
      std::vector<NodeId> bigger = nodes;
      bigger.insert(bigger.end(), next.begin(), next.end());
      std::sort(bigger.begin(), bigger.end());
      if (!InferGroupKind(g, bigger).ok() ||
          !CheckGroup(g, {*InferGroupKind(g, bigger), bigger, {}}).ok()) {
        break;
      }
      nodes = std::move(bigger);
      for (NodeId c : next) assigned[c] = true;
    }
    plan.groups.push_back(FusionGroup{*InferGroupKind(g, nodes), nodes, {}});
  }
  return plan;
}

}  // namespace fusor
