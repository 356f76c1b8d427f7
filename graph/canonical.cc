#include "graph/canonical.h"

#include <algorithm>
#include <array>
#include <queue>
#include <unordered_map>

#include "base/sha256.h"

namespace fusor {
namespace {

using Digest = std::array<uint8_t, 32>;

void HashAttrValue(const AttrValue& v, Sha256* h) {
  h->UpdateU64(v.index());
  std::visit(
      [h](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          h->UpdateI64(x);
        } else if constexpr (std::is_same_v<T, double>) {
          h->UpdateDouble(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          h->UpdateString(x);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          h->UpdateU64(x.size());
          for (int64_t i : x) h->UpdateI64(i);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          h->UpdateU64(x.size());
          for (double d : x) h->UpdateDouble(d);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          h->UpdateU64(x.size());
          for (const auto& s : x) h->UpdateString(s);
        } else {
          h->UpdateU64(static_cast<uint64_t>(x.dtype));
          h->UpdateU64(x.dims.size());
          for (int64_t d : x.dims) h->UpdateI64(d);
          for (int64_t i : x.int_data) h->UpdateI64(i);
          for (double d : x.float_data) h->UpdateDouble(d);
        }
      },
      v);
}

void HashTypeAndDims(const Tensor& t, Sha256* h) {
  h->UpdateU64(static_cast<uint64_t>(t.dtype));
  h->UpdateU64(t.dims.size());
  for (int64_t d : t.dims) h->UpdateI64(d);
}

// What a node computes, apart from its inputs: op, version, attributes, output types.
void HashNodeSelf(const Graph& g, const Node& n, Sha256* h) {
  h->UpdateString(n.op_type);
  h->UpdateString(n.domain);
  h->UpdateI64(n.op_version);
  h->UpdateU64(n.attributes.size());
  for (const Attribute& a : n.attributes) {
    h->UpdateString(a.name);
    HashAttrValue(a.value, h);
  }
  h->UpdateU64(n.outputs.size());
  for (TensorId out : n.outputs) HashTypeAndDims(g.tensor(out), h);
}

// A leaf tensor (not produced by a node), identified by structure only.
void HashLeaf(const Graph& g, TensorId id, const std::unordered_map<TensorId, size_t>& input_pos,
              Sha256* h) {
  const Tensor& t = g.tensor(id);
  h->UpdateU64(static_cast<uint64_t>(t.kind));
  HashTypeAndDims(t, h);
  if (t.kind == TensorKind::kGraphInput) {
    auto it = input_pos.find(id);
    h->UpdateU64(it == input_pos.end() ? ~0ull : it->second);
  } else if (t.kind == TensorKind::kConstant) {
    for (int64_t v : t.int_data) h->UpdateI64(v);
    for (double v : t.float_data) h->UpdateDouble(v);
  }
}

int OutputIndex(const Node& producer, TensorId t) {
  for (size_t i = 0; i < producer.outputs.size(); ++i) {
    if (producer.outputs[i] == t) return static_cast<int>(i);
  }
  return -1;
}

struct Digests {
  std::vector<Digest> forward, backward;
};

// Forward digests in a topological order, backward digests in the reverse order.
Digests ComputeDigests(const Graph& g, const std::vector<NodeId>& topo) {
  std::unordered_map<TensorId, size_t> input_pos;
  for (size_t i = 0; i < g.inputs().size(); ++i) input_pos.emplace(g.inputs()[i], i);
  Digests d{std::vector<Digest>(g.num_nodes()), std::vector<Digest>(g.num_nodes())};
  for (NodeId id : topo) {
    const Node& n = g.node(id);
    Sha256 h;
    HashNodeSelf(g, n, &h);
    for (TensorId in : n.inputs) {
      if (in == kNoId) {
        h.UpdateU64(0);
      } else if (NodeId p = g.tensor(in).producer; p != kNoId) {
        h.UpdateU64(1);
        h.Update(d.forward[p].data(), 32);
        h.UpdateI64(OutputIndex(g.node(p), in));
      } else {
        h.UpdateU64(2);
        HashLeaf(g, in, input_pos, &h);
      }
    }
    d.forward[id] = h.Finish();
  }
  std::unordered_map<TensorId, std::vector<size_t>> output_pos;
  for (size_t i = 0; i < g.outputs().size(); ++i) output_pos[g.outputs()[i]].push_back(i);
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const Node& n = g.node(*it);
    Sha256 h;
    h.Update(d.forward[*it].data(), 32);
    for (TensorId out : n.outputs) {
      std::vector<std::pair<Digest, int64_t>> uses;
      for (NodeId c : g.tensor(out).consumers) {
        const Node& cn = g.node(c);
        for (size_t slot = 0; slot < cn.inputs.size(); ++slot) {
          if (cn.inputs[slot] == out) uses.emplace_back(d.backward[c], slot);
        }
      }
      std::sort(uses.begin(), uses.end());
      h.UpdateU64(uses.size());
      for (const auto& [digest, slot] : uses) {
        h.Update(digest.data(), 32);
        h.UpdateI64(slot);
      }
      auto pos = output_pos.find(out);
      h.UpdateU64(pos == output_pos.end() ? 0 : pos->second.size());
      if (pos != output_pos.end()) {
        for (size_t p : pos->second) h.UpdateU64(p);
      }
    }
    d.backward[*it] = h.Finish();
  }
  return d;
}

}  // namespace

std::vector<NodeId> CanonicalOrder(const Graph& g) {
  auto topo = g.TopologicalOrder();
  if (!topo.ok()) return {};
  Digests d = ComputeDigests(g, *topo);
  // Kahn's algorithm, always taking the ready node with the smallest (forward, backward, id).
  auto later = [&](NodeId a, NodeId b) {
    return std::tie(d.forward[a], d.backward[a], a) > std::tie(d.forward[b], d.backward[b], b);
  };
  std::priority_queue<NodeId, std::vector<NodeId>, decltype(later)> ready(later);
  std::vector<int32_t> pending(g.num_nodes(), 0);
  for (NodeId id = 0; id < static_cast<NodeId>(g.num_nodes()); ++id) {
    for (TensorId in : g.node(id).inputs) {
      if (in != kNoId && g.tensor(in).producer != kNoId) ++pending[id];
    }
    if (pending[id] == 0) ready.push(id);
  }
  std::vector<NodeId> order;
  order.reserve(g.num_nodes());
  while (!ready.empty()) {
    NodeId id = ready.top();
    ready.pop();
    order.push_back(id);
    for (TensorId out : g.node(id).outputs) {
      if (g.tensor(out).producer != id) continue;
      for (NodeId c : g.tensor(out).consumers) {
        for (TensorId in : g.node(c).inputs) {
          if (in == out && --pending[c] == 0) ready.push(c);
        }
      }
    }
  }
  return order;
}

Graph Canonicalize(const Graph& g) {
  std::vector<NodeId> order = CanonicalOrder(g);
  return g.Reordered(order);
}

// Serialises the graph in canonical order with edges named by canonical indices.
std::string CanonicalHash(const Graph& g) {
  std::vector<NodeId> order = CanonicalOrder(g);
  std::vector<int64_t> position(g.num_nodes(), -1);
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = static_cast<int64_t>(i);
  std::unordered_map<TensorId, size_t> input_pos;
  for (size_t i = 0; i < g.inputs().size(); ++i) input_pos.emplace(g.inputs()[i], i);
  std::unordered_map<TensorId, int64_t> leaf_index;  // In order of first use.
  Sha256 h;
  h.UpdateString("fusor.graph.v1");
  auto hash_ref = [&](TensorId t) {
    if (t == kNoId) return h.UpdateU64(0);
    NodeId p = g.tensor(t).producer;
    if (p != kNoId) {
      h.UpdateU64(1);
      h.UpdateI64(position[p]);
      return h.UpdateI64(OutputIndex(g.node(p), t));
    }
    auto [it, fresh] = leaf_index.try_emplace(t, static_cast<int64_t>(leaf_index.size()));
    h.UpdateU64(2);
    h.UpdateI64(it->second);
    if (fresh) HashLeaf(g, t, input_pos, &h);
  };
  h.UpdateU64(g.inputs().size());
  for (TensorId in : g.inputs()) HashTypeAndDims(g.tensor(in), &h);
  h.UpdateU64(order.size());
  for (NodeId id : order) {
    const Node& n = g.node(id);
    HashNodeSelf(g, n, &h);
    h.UpdateU64(n.inputs.size());
    for (TensorId in : n.inputs) hash_ref(in);
  }
  h.UpdateU64(g.outputs().size());
  for (TensorId out : g.outputs()) hash_ref(out);
  return h.FinishHex();
}

}  // namespace fusor
