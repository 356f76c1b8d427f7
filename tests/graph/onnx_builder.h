// Builds small ONNX models in memory for tests: inputs, weights (dims only, data external), small
// constants, nodes with attributes. Serialize() gives the bytes a file would hold.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace fusor::testing {

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int opset = 13) {
    model_.set_ir_version(8);
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test_graph");
  }

  // A float graph input; a negative dim becomes the symbolic dim named `sym`.
  OnnxBuilder& Input(const std::string& name, std::vector<int64_t> dims,
                     const std::string& sym = "", int elem_type = onnx::TensorProto::FLOAT) {
    auto* in = model_.mutable_graph()->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d < 0) {
        dim->set_dim_param(sym);
      } else {
        dim->set_dim_value(d);
      }
    }
    return *this;
  }

  OnnxBuilder& Output(const std::string& name, int elem_type = onnx::TensorProto::FLOAT) {
    auto* out = model_.mutable_graph()->add_output();
    out->set_name(name);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
    return *this;
  }

  // A float weight whose data is external (absent), as in the shared models.
  OnnxBuilder& Weight(const std::string& name, std::vector<int64_t> dims) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = t->add_external_data();
    kv->set_key("location");
    kv->set_value("weights.bin");
    return *this;
  }

  OnnxBuilder& Int64Constant(const std::string& name, std::vector<int64_t> values,
                             std::vector<int64_t> dims = {-1}) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    if (dims == std::vector<int64_t>{-1}) dims = {static_cast<int64_t>(values.size())};
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
    return *this;
  }

  // A float initializer with its data (Resize's scales).
  OnnxBuilder& FloatConstant(const std::string& name, std::vector<float> values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (float v : values) t->add_float_data(v);
    return *this;
  }

  OnnxBuilder& FloatScalar(const std::string& name, float value) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(value);
    return *this;
  }

  onnx::NodeProto& Node(const std::string& op, std::vector<std::string> inputs,
                        std::vector<std::string> outputs, const std::string& name = "") {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? outputs.at(0) + "_node" : name);
    for (auto& i : inputs) n->add_input(i);
    for (auto& o : outputs) n->add_output(o);
    return *n;
  }

  static void IntsAttr(onnx::NodeProto& n, const std::string& name, std::vector<int64_t> values) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }
  static void StringAttr(onnx::NodeProto& n, const std::string& name, const std::string& value) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(value);
  }
  static void IntAttr(onnx::NodeProto& n, const std::string& name, int64_t value) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }

  onnx::ModelProto& model() { return model_; }
  std::string Serialize() const { return model_.SerializeAsString(); }

 private:
  onnx::ModelProto model_;
};

}  // namespace fusor::testing
