#include "lowering/concat_in_place.h"

#include <algorithm>
#include <unordered_map>

namespace fusor {
namespace {

// The Concat of node order reading `t` first, which alone may hold it in place.
NodeId FirstConcatReading(const Graph& g, TensorId t) {
  NodeId first = kNoId;
  for (NodeId c : g.tensor(t).consumers) {
    if (g.node(c).op_type == "Concat" && (first == kNoId || c < first)) first = c;
  }
  return first;
}

// Whether every dimension of `dims` before `axis` is 1: each slice along `axis` is contiguous.
bool ContiguousSlices(const Shape& dims, int64_t axis) {
  return std::all_of(dims.begin(), dims.begin() + axis, [](int64_t d) { return d == 1; });
}

bool PartFits(const Graph& g, NodeId concat, const std::vector<TensorId>& inputs, size_t i) {
  const TensorId t = inputs[i];
  if (t == kNoId) return false;
  const Tensor& x = g.tensor(t);
  if (x.kind != TensorKind::kActivation || x.producer == kNoId || NumElements(x.dims) == 0) {
    return false;
  }
  if (std::count(inputs.begin(), inputs.end(), t) != 1) return false;
  return FirstConcatReading(g, t) == concat;
}

}  // namespace

bool ConcatFitsInPlace(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.op_type != "Concat" || n.outputs.size() != 1 || n.inputs.empty()) return false;
  const TensorId out = n.outputs[0];
  const Tensor& y = g.tensor(out);
  if (y.consumers.empty() && !g.IsGraphOutput(out)) return false;
  const int64_t rank = static_cast<int64_t>(y.dims.size());
  int64_t axis = n.GetInt("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || !ContiguousSlices(y.dims, axis)) return false;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (!PartFits(g, id, n.inputs, i)) return false;
  }
  return true;
}

bool ConcatRunsInPlace(const Graph& g, const FusionGroup& group) {
  return group.nodes.size() == 1 && group.recomputed.empty() &&
         ConcatFitsInPlace(g, group.nodes[0]);
}

std::vector<ConcatSlice> InPlaceConcatSlices(const Graph& g, const FusionPlan& plan) {
  std::vector<ConcatSlice> slices;
  for (const FusionGroup& group : plan.groups) {
    if (!ConcatRunsInPlace(g, group)) continue;
    const Node& n = g.node(group.nodes[0]);
    int64_t offset = 0;
    for (TensorId t : n.inputs) {
      slices.push_back({t, n.outputs[0], offset});
      offset += NumElements(g.tensor(t).dims);
    }
  }
  // A nested Concat's output is itself a part: its parts move into the outer whole.
  std::unordered_map<TensorId, size_t> slice_of;
  for (size_t i = 0; i < slices.size(); ++i) slice_of[slices[i].part] = i;
  for (ConcatSlice& s : slices) {
    for (auto it = slice_of.find(s.whole); it != slice_of.end(); it = slice_of.find(s.whole)) {
      s.offset += slices[it->second].offset;
      s.whole = slices[it->second].whole;
    }
  }
  return slices;
}

}  // namespace fusor
