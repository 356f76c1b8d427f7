#include "graph/graph.h"

#include <algorithm>
#include <queue>
#include <unordered_set>

namespace fusor {

int64_t NumElements(const Shape& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string ShapeString(const Shape& dims) {
  if (dims.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(dims[i]);
  }
  return s;
}

std::string_view TensorKindName(TensorKind k) {
  switch (k) {
    case TensorKind::kActivation:
      return "activation";
    case TensorKind::kGraphInput:
      return "input";
    case TensorKind::kWeight:
      return "weight";
    case TensorKind::kConstant:
      return "constant";
  }
  return "unknown";
}

const Attribute* Node::FindAttr(std::string_view attr_name) const {
  auto it = std::lower_bound(attributes.begin(), attributes.end(), attr_name,
                             [](const Attribute& a, std::string_view n) { return a.name < n; });
  return it != attributes.end() && it->name == attr_name ? &*it : nullptr;
}

StatusOr<std::vector<Attribute>> SortedAttributes(std::vector<Attribute> attributes,
                                                  std::string_view node) {
  std::stable_sort(attributes.begin(), attributes.end(),
                   [](const Attribute& a, const Attribute& b) { return a.name < b.name; });
  auto twice =
      std::adjacent_find(attributes.begin(), attributes.end(),
                         [](const Attribute& a, const Attribute& b) { return a.name == b.name; });
  if (twice != attributes.end()) {
    return Status::InvalidArgument(std::string(node) + " has attribute '" + twice->name +
                                   "' twice");
  }
  return attributes;
}

int64_t Node::GetInt(std::string_view attr_name, int64_t fallback) const {
  const Attribute* a = FindAttr(attr_name);
  if (a == nullptr) return fallback;
  if (auto* v = std::get_if<int64_t>(&a->value)) return *v;
  return fallback;
}

double Node::GetFloat(std::string_view attr_name, double fallback) const {
  const Attribute* a = FindAttr(attr_name);
  if (a == nullptr) return fallback;
  if (auto* v = std::get_if<double>(&a->value)) return *v;
  if (auto* v = std::get_if<int64_t>(&a->value)) return static_cast<double>(*v);
  return fallback;
}

std::string Node::GetString(std::string_view attr_name, std::string fallback) const {
  const Attribute* a = FindAttr(attr_name);
  if (a == nullptr) return fallback;
  if (auto* v = std::get_if<std::string>(&a->value)) return *v;
  return fallback;
}

std::vector<int64_t> Node::GetInts(std::string_view attr_name) const {
  const Attribute* a = FindAttr(attr_name);
  if (a == nullptr) return {};
  if (auto* v = std::get_if<std::vector<int64_t>>(&a->value)) return *v;
  return {};
}

void Node::SetAttr(std::string attr_name, AttrValue value) {
  auto it = std::lower_bound(attributes.begin(), attributes.end(), attr_name,
                             [](const Attribute& a, const std::string& n) { return a.name < n; });
  if (it != attributes.end() && it->name == attr_name) {
    it->value = std::move(value);
    return;
  }
  attributes.insert(it, Attribute{std::move(attr_name), std::move(value)});
}

TensorId Graph::AddTensor(Tensor t) {
  TensorId id = static_cast<TensorId>(tensors_.size());
  tensor_by_name_.emplace(t.name, id);  // Keeps the first on duplicates.
  tensors_.push_back(std::move(t));
  return id;
}

NodeId Graph::AddNode(Node n) {
  nodes_.push_back(std::move(n));
  return static_cast<NodeId>(nodes_.size() - 1);
}

bool Graph::IsGraphOutput(TensorId t) const {
  return std::find(outputs_.begin(), outputs_.end(), t) != outputs_.end();
}

std::optional<TensorId> Graph::FindTensor(std::string_view name) const {
  auto it = tensor_by_name_.find(std::string(name));
  if (it == tensor_by_name_.end()) return std::nullopt;
  return it->second;
}

void Graph::Link() {
  for (Tensor& t : tensors_) {
    t.producer = kNoId;
    t.consumers.clear();
  }
  for (NodeId n = 0; n < static_cast<NodeId>(nodes_.size()); ++n) {
    for (TensorId out : nodes_[n].outputs) {
      if (out >= 0 && tensors_[out].producer == kNoId) tensors_[out].producer = n;
    }
    for (TensorId in : nodes_[n].inputs) {
      if (in < 0) continue;
      auto& consumers = tensors_[in].consumers;
      if (consumers.empty() || consumers.back() != n) consumers.push_back(n);
    }
  }
}

StatusOr<std::vector<NodeId>> Graph::TopologicalOrder() const {
  const size_t n = nodes_.size();
  std::vector<int32_t> pending(n, 0);
  for (size_t i = 0; i < n; ++i) {
    std::unordered_set<NodeId> preds;
    for (TensorId in : nodes_[i].inputs) {
      if (in >= 0 && tensors_[in].producer != kNoId) preds.insert(tensors_[in].producer);
    }
    pending[i] = static_cast<int32_t>(preds.size());
  }
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(static_cast<NodeId>(i));
  }
  std::vector<NodeId> order;
  order.reserve(n);
  while (!ready.empty()) {
    NodeId id = ready.top();
    ready.pop();
    order.push_back(id);
    std::unordered_set<NodeId> succs;
    for (TensorId out : nodes_[id].outputs) {
      if (out < 0 || tensors_[out].producer != id) continue;
      for (NodeId c : tensors_[out].consumers) succs.insert(c);
    }
    for (NodeId c : succs) {
      if (--pending[c] == 0) ready.push(c);
    }
  }
  if (order.size() == n) return order;
  for (size_t i = 0; i < n; ++i) {
    if (pending[i] > 0) {
      return Status::InvalidArgument("node '" + nodes_[i].name + "' (" + nodes_[i].op_type +
                                     ") is on a cycle: the graph must be acyclic");
    }
  }
  return Status::Internal("topological sort lost nodes without a cycle");
}

Graph Graph::Reordered(std::span<const NodeId> order) const {
  Graph g;
  g.model_name = model_name;
  g.metadata = metadata;
  g.opset = opset;
  g.tensors_ = tensors_;
  g.tensor_by_name_ = tensor_by_name_;
  g.inputs_ = inputs_;
  g.outputs_ = outputs_;
  g.nodes_.reserve(order.size());
  for (NodeId id : order) g.nodes_.push_back(nodes_[id]);
  g.Link();
  return g;
}

Graph Graph::Compacted(std::span<const NodeId> keep) const {
  Graph g;
  g.model_name = model_name;
  g.metadata = metadata;
  g.opset = opset;
  std::vector<TensorId> remap(tensors_.size(), kNoId);
  auto map_tensor = [&](TensorId t) {
    if (t == kNoId) return kNoId;
    if (remap[t] == kNoId) remap[t] = g.AddTensor(tensors_[t]);
    return remap[t];
  };
  for (TensorId t : inputs_) g.inputs_.push_back(map_tensor(t));
  for (NodeId id : keep) {
    Node n = nodes_[id];
    for (TensorId& in : n.inputs) in = map_tensor(in);
    for (TensorId& out : n.outputs) out = map_tensor(out);
    g.nodes_.push_back(std::move(n));
  }
  for (TensorId t : outputs_) g.outputs_.push_back(map_tensor(t));
  g.Link();
  return g;
}

Graph Graph::ExtractRegion(std::span<const NodeId> region) const {
  Graph g;
  g.model_name = model_name;
  g.opset = opset;
  std::unordered_map<TensorId, TensorId> remap;
  std::unordered_set<NodeId> inside(region.begin(), region.end());
  auto map_tensor = [&](TensorId t) -> TensorId {
    if (t < 0) return kNoId;
    auto [it, fresh] = remap.try_emplace(t, kNoId);
    if (!fresh) return it->second;
    Tensor copy = tensors_[t];
    copy.producer = kNoId;
    copy.consumers.clear();
    bool produced_inside = tensors_[t].producer != kNoId && inside.count(tensors_[t].producer) > 0;
    if (!produced_inside && copy.kind == TensorKind::kActivation)
      copy.kind = TensorKind::kGraphInput;
    it->second = g.AddTensor(std::move(copy));
    if (g.tensors_[it->second].kind == TensorKind::kGraphInput) g.inputs_.push_back(it->second);
    return it->second;
  };
  for (NodeId id : region) {
    Node n = nodes_[id];
    for (TensorId& in : n.inputs) in = map_tensor(in);
    for (TensorId& out : n.outputs) out = map_tensor(out);
    g.nodes_.push_back(std::move(n));
  }
  for (auto [old_id, new_id] : remap) {
    const Tensor& t = tensors_[old_id];
    if (t.producer == kNoId || !inside.count(t.producer)) continue;
    bool read_outside =
        IsGraphOutput(old_id) || std::any_of(t.consumers.begin(), t.consumers.end(),
                                             [&](NodeId c) { return !inside.count(c); });
    if (read_outside) g.outputs_.push_back(new_id);
  }
  std::sort(g.outputs_.begin(), g.outputs_.end());
  g.Link();
  return g;
}

}  // namespace fusor
