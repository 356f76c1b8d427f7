#include "graph/graph_proto.h"

#include <unordered_map>

namespace fusor {
namespace {

void TensorToProto(const Tensor& t, v1::Tensor* p) {
  p->set_name(t.name);
  p->set_dtype(static_cast<v1::DataType>(t.dtype));
  for (int64_t d : t.dims) p->add_dims(d);
  p->set_kind(static_cast<v1::TensorKind>(t.kind));
  for (int64_t v : t.int_data) p->add_int_data(v);
  for (double v : t.float_data) p->add_float_data(v);
}

void AttrTensorToProto(const AttrTensor& t, v1::Tensor* p) {
  p->set_dtype(static_cast<v1::DataType>(t.dtype));
  for (int64_t d : t.dims) p->add_dims(d);
  p->set_kind(v1::CONSTANT);
  for (int64_t v : t.int_data) p->add_int_data(v);
  for (double v : t.float_data) p->add_float_data(v);
}

void AttributeToProto(const Attribute& a, v1::Attribute* p) {
  p->set_name(a.name);
  std::visit(
      [p](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          p->set_i(x);
        } else if constexpr (std::is_same_v<T, double>) {
          p->set_f(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          p->set_s(x);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          // mutable_*() before the loop: an empty list is a value too, and must set the oneof.
          auto* list = p->mutable_ints();
          for (int64_t v : x) list->add_values(v);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          auto* list = p->mutable_floats();
          for (double v : x) list->add_values(v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          auto* list = p->mutable_strings();
          for (const auto& v : x) list->add_values(v);
        } else {
          AttrTensorToProto(x, p->mutable_t());
        }
      },
      a.value);
}

StatusOr<DType> DTypeFromProto(int value, const std::string& where) {
  if (value <= 0 || value > kMaxDType) {
    return Status::InvalidArgument(where + " has invalid dtype " + std::to_string(value));
  }
  return static_cast<DType>(value);
}

StatusOr<Tensor> TensorFromProto(const v1::Tensor& p) {
  Tensor t;
  t.name = p.name();
  FUSOR_ASSIGN_OR_RETURN(t.dtype, DTypeFromProto(p.dtype(), "tensor '" + p.name() + "'"));
  t.dims.assign(p.dims().begin(), p.dims().end());
  if (p.kind() < v1::ACTIVATION || p.kind() > v1::CONSTANT) {
    return Status::InvalidArgument("tensor '" + p.name() + "' has invalid kind " +
                                   std::to_string(p.kind()));
  }
  t.kind = static_cast<TensorKind>(p.kind());
  t.int_data.assign(p.int_data().begin(), p.int_data().end());
  t.float_data.assign(p.float_data().begin(), p.float_data().end());
  return t;
}

StatusOr<Attribute> AttributeFromProto(const v1::Attribute& p, const std::string& node) {
  Attribute a{p.name(), int64_t{0}};
  switch (p.value_case()) {
    case v1::Attribute::kI:
      a.value = p.i();
      break;
    case v1::Attribute::kF:
      a.value = p.f();
      break;
    case v1::Attribute::kS:
      a.value = p.s();
      break;
    case v1::Attribute::kInts:
      a.value = std::vector<int64_t>(p.ints().values().begin(), p.ints().values().end());
      break;
    case v1::Attribute::kFloats:
      a.value = std::vector<double>(p.floats().values().begin(), p.floats().values().end());
      break;
    case v1::Attribute::kStrings:
      a.value = std::vector<std::string>(p.strings().values().begin(), p.strings().values().end());
      break;
    case v1::Attribute::kT: {
      AttrTensor t;
      FUSOR_ASSIGN_OR_RETURN(t.dtype,
                             DTypeFromProto(p.t().dtype(), "attribute '" + p.name() + "'"));
      t.dims.assign(p.t().dims().begin(), p.t().dims().end());
      t.int_data.assign(p.t().int_data().begin(), p.t().int_data().end());
      t.float_data.assign(p.t().float_data().begin(), p.t().float_data().end());
      a.value = std::move(t);
      break;
    }
    case v1::Attribute::VALUE_NOT_SET:
      return Status::InvalidArgument("node '" + node + "': attribute '" + p.name() +
                                     "' has no value");
  }
  return a;
}

StatusOr<TensorId> Resolve(const Graph& g, const std::string& name, const std::string& context) {
  auto id = g.FindTensor(name);
  if (!id)
    return Status::InvalidArgument(context + " names tensor '" + name + "', which is not declared");
  return *id;
}

StatusOr<Node> NodeFromProto(const Graph& g, const v1::Node& p, const ValidationLimits& limits) {
  Node n;
  n.name = p.name();
  n.op_type = p.op_type();
  n.domain = p.domain();
  n.op_version = p.op_version();
  std::string context = "node '" + p.name() + "' (" + p.op_type() + ")";
  for (const std::string& in : p.inputs()) {
    if (in.empty()) {
      n.inputs.push_back(kNoId);
      continue;
    }
    FUSOR_ASSIGN_OR_RETURN(TensorId id, Resolve(g, in, context));
    n.inputs.push_back(id);
  }
  for (const std::string& out : p.outputs()) {
    FUSOR_ASSIGN_OR_RETURN(TensorId id, Resolve(g, out, context));
    n.outputs.push_back(id);
  }
  if (p.attributes_size() > limits.max_node_attributes) {
    return Status::InvalidArgument(context + " has " + std::to_string(p.attributes_size()) +
                                   " attributes, the limit is " +
                                   std::to_string(limits.max_node_attributes));
  }
  std::vector<Attribute> attributes;
  attributes.reserve(static_cast<size_t>(p.attributes_size()));
  for (const v1::Attribute& a : p.attributes()) {
    FUSOR_ASSIGN_OR_RETURN(Attribute attr, AttributeFromProto(a, p.name()));
    attributes.push_back(std::move(attr));
  }
  FUSOR_ASSIGN_OR_RETURN(n.attributes, SortedAttributes(std::move(attributes), context));
  return n;
}

}  // namespace

v1::Graph ToProto(const Graph& g) {
  v1::Graph p;
  p.set_model_name(g.model_name);
  p.set_opset(g.opset);
  for (const auto& [k, v] : g.metadata) (*p.mutable_metadata())[k] = v;
  for (const Tensor& t : g.tensors()) TensorToProto(t, p.add_tensors());
  for (const Node& n : g.nodes()) {
    v1::Node* pn = p.add_nodes();
    pn->set_name(n.name);
    pn->set_op_type(n.op_type);
    pn->set_domain(n.domain);
    pn->set_op_version(n.op_version);
    for (TensorId in : n.inputs) pn->add_inputs(in == kNoId ? "" : g.tensor(in).name);
    for (TensorId out : n.outputs) pn->add_outputs(g.tensor(out).name);
    for (const Attribute& a : n.attributes) AttributeToProto(a, pn->add_attributes());
  }
  for (TensorId in : g.inputs()) p.add_inputs(g.tensor(in).name);
  for (TensorId out : g.outputs()) p.add_outputs(g.tensor(out).name);
  return p;
}

StatusOr<Graph> FromProto(const v1::Graph& p, const ValidationLimits& limits) {
  if (p.nodes_size() > limits.max_nodes) {
    return Status::ResourceExhausted("graph has " + std::to_string(p.nodes_size()) +
                                     " nodes, the limit is " + std::to_string(limits.max_nodes));
  }
  Graph g;
  g.model_name = p.model_name();
  g.opset = p.opset();
  for (const auto& [k, v] : p.metadata()) g.metadata[k] = v;
  for (const v1::Tensor& pt : p.tensors()) {
    if (g.FindTensor(pt.name())) {
      return Status::InvalidArgument("tensor name '" + pt.name() + "' is declared twice");
    }
    FUSOR_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(pt));
    g.AddTensor(std::move(t));
  }
  for (const v1::Node& pn : p.nodes()) {
    FUSOR_ASSIGN_OR_RETURN(Node n, NodeFromProto(g, pn, limits));
    g.AddNode(std::move(n));
  }
  for (const std::string& name : p.inputs()) {
    FUSOR_ASSIGN_OR_RETURN(TensorId id, Resolve(g, name, "graph input list"));
    g.AddInput(id);
  }
  for (const std::string& name : p.outputs()) {
    FUSOR_ASSIGN_OR_RETURN(TensorId id, Resolve(g, name, "graph output list"));
    g.AddOutput(id);
  }
  g.Link();
  FUSOR_RETURN_IF_ERROR(Validate(g, limits));
  return g;
}

}  // namespace fusor
