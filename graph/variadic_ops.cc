#include "graph/variadic_ops.h"

#include <onnx/onnx_pb.h>

#include <string>
#include <unordered_set>

namespace fusor {
namespace {

// The binary op a variadic op folds its inputs with; empty for other ops.
std::string BinaryOf(const onnx::NodeProto& n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") return "";
  if (n.op_type() == "Max" || n.op_type() == "Min") return n.op_type();
  if (n.op_type() == "Sum" || n.op_type() == "Mean") return "Add";
  return "";
}

bool NeedsSplit(const onnx::NodeProto& n) {
  const std::string binary = BinaryOf(n);
  if (binary.empty() || n.output_size() != 1) return false;
  return n.input_size() != 2 || binary != n.op_type();
}

class Splitter {
 public:
  explicit Splitter(const onnx::GraphProto& g) {
    for (const auto& v : g.input()) names_.insert(v.name());
    for (const auto& t : g.initializer()) names_.insert(t.name());
    for (const auto& n : g.node()) names_.insert(n.output().begin(), n.output().end());
  }

  // Appends the nodes that compute `n` to `out`.
  void Split(const onnx::NodeProto& n, int index,
             google::protobuf::RepeatedPtrField<onnx::NodeProto>* out) {
    const std::string base =
        (n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name()) + ":" +
        n.op_type();
    const bool mean = n.op_type() == "Mean";
    if (n.input_size() == 1) {
      Add(out, "Identity", base, {n.input(0)}, n.output(0));
      return;
    }
    std::string acc = n.input(0);
    for (int k = 1; k < n.input_size(); ++k) {
      const bool last = k + 1 == n.input_size() && !mean;
      const std::string value = last ? n.output(0) : Fresh(base + "_" + std::to_string(k));
      Add(out, BinaryOf(n), base + "_" + std::to_string(k), {acc, n.input(k)}, value);
      acc = value;
    }
    if (!mean) return;
    const std::string count = Fresh(base + "_count");
    onnx::NodeProto* c = Add(out, "Constant", base + "_count", {}, count);
    onnx::AttributeProto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_float_data(static_cast<float>(n.input_size()));
    Add(out, "Div", base + "_mean", {acc, count}, n.output(0));
  }

 private:
  std::string Fresh(const std::string& base) {
    std::string name = base;
    for (int k = 1; names_.count(name) > 0; ++k) name = base + "_" + std::to_string(k);
    names_.insert(name);
    return name;
  }

  static onnx::NodeProto* Add(google::protobuf::RepeatedPtrField<onnx::NodeProto>* out,
                              const std::string& op, const std::string& name,
                              std::initializer_list<std::string> inputs,
                              const std::string& output) {
    onnx::NodeProto* node = out->Add();
    node->set_op_type(op);
    node->set_name(name);
    for (const auto& in : inputs) node->add_input(in);
    node->add_output(output);
    return node;
  }

  std::unordered_set<std::string> names_;
};

}  // namespace

void SplitVariadicOps(onnx::GraphProto* g) {
  bool any = false;
  for (const auto& n : g->node()) any |= NeedsSplit(n);
  if (!any) return;
  Splitter splitter(*g);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < g->node_size(); ++i) {
    if (NeedsSplit(g->node(i))) {
      splitter.Split(g->node(i), i, &nodes);
    } else {
      *nodes.Add() = g->node(i);
    }
  }
  g->mutable_node()->Swap(&nodes);
}

}  // namespace fusor
