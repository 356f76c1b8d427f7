#include "graph/opset_conversion.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph/constant_folding.h"
#include "graph/onnx_attribute_check.h"

namespace fusor {
namespace {

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

onnx::OperatorSetIdProto* DefaultOpsetImport(onnx::ModelProto* model) {
  for (auto& op : *model->mutable_opset_import()) {
    if (IsDefaultDomain(op.domain())) return &op;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Opsets below kMinOpset: libonnx's version converter

// The op a converter error names ("No Adapter For Upsample", "... for Scan"), or "".
std::string OpInConverterError(const std::string& what) {
  std::smatch m;
  if (std::regex_search(what, m, std::regex("[Ff]or ([A-Za-z0-9_]+)"))) return m[1].str();
  return "";
}

// libonnx's converter reads the model into its in-memory IR, which assumes a well-formed graph (a
// graph output no node writes crashes it); ONNX's checker is stricter than the import (it wants
// every graph output's shape), so the graph's values are checked here: "" when each value read
// is written exactly once, else what is wrong.
std::string IllFormedValue(const onnx::GraphProto& g) {
  std::unordered_set<std::string> defined;
  auto define = [&](const std::string& name) {
    return name.empty() || defined.insert(name).second;
  };
  for (const auto& v : g.input()) define(v.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node()) {
    for (const auto& out : n.output()) {
      if (!define(out)) return "value '" + out + "' is written twice";
    }
  }
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) {
      if (!in.empty() && !defined.count(in)) {
        return "node '" + n.name() + "' (" + n.op_type() + ") reads '" + in +
               "', which nothing writes";
      }
    }
  }
  for (const auto& v : g.output()) {
    if (!defined.count(v.name()))
      return "graph output '" + v.name() + "' is not computed by any node";
  }
  return "";
}

Status CheckConvertible(const onnx::ModelProto& model, int64_t from) {
  const std::string why = IllFormedValue(model.graph());
  if (why.empty()) return Status::Ok();
  return Status::InvalidArgument("model uses opset " + std::to_string(from) +
                                 ", which Fusor converts to opset " + std::to_string(kMinOpset) +
                                 " with libonnx's version converter, but it is not a valid ONNX "
                                 "model: " +
                                 why);
}

// The converter's adapters for the old broadcasting rules (opset 7) read the ranks of the values
// they rewrite, so the model's shapes are inferred first (the import infers them again later,
// from the bound inputs).
Status ConvertOldOpset(onnx::ModelProto* model, int64_t from) {
  FUSOR_RETURN_IF_ERROR(CheckConvertible(*model, from));
  // What the import checks before its own inference, checked before this one (the converted
  // model is checked again by the import), with the same guards: a bad model throws.
  FUSOR_RETURN_IF_ERROR(CheckInputCounts(*model));
  FUSOR_RETURN_IF_ERROR(CheckAttributesForShapeInference(model->graph()));
  GuardShapeInference();
  try {
    onnx::shape_inference::InferShapes(*model, onnx::OpSchemaRegistry::Instance());
    *model = onnx::version_conversion::ConvertVersion(*model, kMinOpset);
  } catch (const std::exception& e) {
    const std::string op = OpInConverterError(e.what());
    return Status::InvalidArgument("model uses opset " + std::to_string(from) +
                                   (op.empty() ? ", which" : " and its op " + op) +
                                   " cannot be converted to opset " + std::to_string(kMinOpset) +
                                   ", the oldest Fusor reads (libonnx's version converter: " +
                                   e.what() + "); re-export the model at opset " +
                                   std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Opsets above kMaxOpset: op by op

// What converts one node from opset `from` (above kMaxOpset) to kMaxOpset's form.
class NodeDowngrade {
 public:
  NodeDowngrade(onnx::GraphProto* g, onnx::NodeProto* n, int index, int64_t from)
      : g_(g), n_(n), from_(from) {
    label_ = n->name().empty() ? n->op_type() + "_" + std::to_string(index) : n->name();
  }

  Status Run() {
    if (onnx::OpSchemaRegistry::Schema(n_->op_type(), kMaxOpset, "") == nullptr) {
      return Refuse("the op is not in opset " + std::to_string(kMaxOpset) +
                    ", the newest Fusor's ONNX library (1.12) knows");
    }
    static const auto* kRewrites = new std::unordered_map<std::string, Status (NodeDowngrade::*)()>{
        {"ReduceL1", &NodeDowngrade::ReduceAxesToAttribute},
        {"ReduceL2", &NodeDowngrade::ReduceAxesToAttribute},
        {"ReduceLogSum", &NodeDowngrade::ReduceAxesToAttribute},
        {"ReduceLogSumExp", &NodeDowngrade::ReduceAxesToAttribute},
        {"ReduceMax", &NodeDowngrade::ReduceAxesToAttribute},
        {"ReduceMean", &NodeDowngrade::ReduceAxesToAttribute},
        {"ReduceMin", &NodeDowngrade::ReduceAxesToAttribute},
        {"ReduceProd", &NodeDowngrade::ReduceAxesToAttribute},
        {"ReduceSumSquare", &NodeDowngrade::ReduceAxesToAttribute},
        {"Split", &NodeDowngrade::Split},
        {"Pad", &NodeDowngrade::Pad},
        {"Resize", &NodeDowngrade::Resize},
        {"ScatterElements", &NodeDowngrade::Scatter},
        {"ScatterND", &NodeDowngrade::Scatter},
        {"LpPool", &NodeDowngrade::LpPool},
        {"AveragePool", &NodeDowngrade::AveragePool},
        {"Cast", &NodeDowngrade::Cast},
        {"CastLike", &NodeDowngrade::Cast},
        {"QuantizeLinear", &NodeDowngrade::Quantize},
        {"DequantizeLinear", &NodeDowngrade::Quantize},
        {"GridSample", &NodeDowngrade::GridSample},
        {"DFT", &NodeDowngrade::Unconvertible},
        {"GroupNormalization", &NodeDowngrade::Unconvertible},
    };
    auto it = kRewrites->find(n_->op_type());
    return it == kRewrites->end() ? Status::Ok() : (this->*it->second)();
  }

 private:
  Status Refuse(const std::string& why) const {
    return Status::InvalidArgument(
        "model uses opset " + std::to_string(from_) + " and its node '" + label_ + "' (" +
        n_->op_type() + ") cannot be converted to opset " + std::to_string(kMaxOpset) + ": " + why +
        "; re-export the model at opset " + std::to_string(kMaxOpset) + " or below");
  }

  const onnx::AttributeProto* Attr(const std::string& name) const {
    for (const auto& a : n_->attribute()) {
      if (a.name() == name) return &a;
    }
    return nullptr;
  }
  int64_t IntAttr(const std::string& name, int64_t fallback) const {
    const onnx::AttributeProto* a = Attr(name);
    return a ? a->i() : fallback;
  }
  std::string StringAttr(const std::string& name, const std::string& fallback) const {
    const onnx::AttributeProto* a = Attr(name);
    return a ? a->s() : fallback;
  }
  void RemoveAttr(const std::string& name) {
    auto* attrs = n_->mutable_attribute();
    for (int i = 0; i < attrs->size(); ++i) {
      if (attrs->Get(i).name() == name) attrs->DeleteSubrange(i--, 1);
    }
  }
  bool HasInput(int i) const { return n_->input_size() > i && !n_->input(i).empty(); }
  void DropInputsFrom(int i) {
    while (n_->input_size() > i) n_->mutable_input()->RemoveLast();
  }

  // The integer values of `name`: an initializer or a Constant node's output.
  std::optional<std::vector<int64_t>> ConstantInts(const std::string& name) const {
    for (const auto& t : g_->initializer()) {
      if (t.name() != name) continue;
      std::optional<ConstValue> v = ReadConstValue(t);
      if (v && !v->is_float) return v->ints;
    }
    for (const auto& node : g_->node()) {
      if (node.op_type() != "Constant" || node.output_size() != 1 || node.output(0) != name) {
        continue;
      }
      for (const auto& a : node.attribute()) {
        if (a.name() == "value") {
          std::optional<ConstValue> v = ReadConstValue(a.t());
          if (v && !v->is_float) return v->ints;
        }
        if (a.name() == "value_ints") return std::vector<int64_t>(a.ints().begin(), a.ints().end());
      }
    }
    return std::nullopt;
  }

  // Opset 18 moved the axes of every Reduce* but ReduceSum (moved at 13) to an input, with
  // noop_with_empty_axes: no axes and noop 1 is an Identity.
  Status ReduceAxesToAttribute() {
    const bool noop = IntAttr("noop_with_empty_axes", 0) != 0;
    RemoveAttr("noop_with_empty_axes");
    std::vector<int64_t> axes;
    if (HasInput(1)) {
      std::optional<std::vector<int64_t>> values = ConstantInts(n_->input(1));
      if (!values) return Refuse("its axes input '" + n_->input(1) + "' is not a constant");
      axes = *values;
    }
    DropInputsFrom(1);
    if (axes.empty() && noop) {
      n_->set_op_type("Identity");
      n_->clear_attribute();
      return Status::Ok();
    }
    if (axes.empty()) return Status::Ok();
    onnx::AttributeProto* a = n_->add_attribute();
    a->set_name("axes");
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t axis : axes) a->add_ints(axis);
    return Status::Ok();
  }

  // Opset 18's num_outputs splits into that many parts, the last smaller when the axis does not
  // divide; kMaxOpset splits into as many equal parts as outputs, which shape inference checks.
  Status Split() {
    RemoveAttr("num_outputs");
    return Status::Ok();
  }

  Status Pad() {
    if (HasInput(3)) return Refuse("it pads only some axes (its axes input, opset 18)");
    if (StringAttr("mode", "constant") == "wrap") return Refuse("mode 'wrap' (opset 19)");
    DropInputsFrom(3);
    return Status::Ok();
  }

  Status Resize() {
    if (IntAttr("antialias", 0) != 0) return Refuse("antialias 1 (opset 18)");
    if (Attr("axes") != nullptr) return Refuse("it resizes only some axes (its axes, opset 18)");
    if (StringAttr("keep_aspect_ratio_policy", "stretch") != "stretch") {
      return Refuse("keep_aspect_ratio_policy '" + StringAttr("keep_aspect_ratio_policy", "") +
                    "' (opset 18)");
    }
    if (StringAttr("coordinate_transformation_mode", "") == "half_pixel_symmetric") {
      return Refuse("coordinate_transformation_mode 'half_pixel_symmetric' (opset 19)");
    }
    RemoveAttr("antialias");
    RemoveAttr("keep_aspect_ratio_policy");
    return Status::Ok();
  }

  Status Scatter() {
    const std::string reduction = StringAttr("reduction", "none");
    if (reduction == "max" || reduction == "min") {
      return Refuse("reduction '" + reduction + "' (opset 18)");
    }
    return Status::Ok();
  }

  // Dilations other than 1 (opset 18 for LpPool, 19 for AveragePool) and LpPool's ceil_mode.
  Status RefuseDilations(const std::string& since) {
    if (const onnx::AttributeProto* d = Attr("dilations")) {
      for (int64_t v : d->ints()) {
        if (v != 1) return Refuse("dilations other than 1 (opset " + since + ")");
      }
    }
    RemoveAttr("dilations");
    return Status::Ok();
  }
  Status LpPool() {
    if (IntAttr("ceil_mode", 0) != 0) return Refuse("ceil_mode 1 (opset 18)");
    RemoveAttr("ceil_mode");
    return RefuseDilations("18");
  }
  Status AveragePool() { return RefuseDilations("19"); }

  // `saturate` (opset 19) only changes casts to float8 types, which Fusor refuses by dtype.
  Status Cast() {
    RemoveAttr("saturate");
    return Status::Ok();
  }

  Status Quantize() {
    if (IntAttr("block_size", 0) != 0) return Refuse("blocked quantization (opset 21)");
    if (Attr("output_dtype") != nullptr) return Refuse("output_dtype (opset 21)");
    RemoveAttr("saturate");
    return Status::Ok();
  }

  // Opset 20 renamed the modes.
  Status GridSample() {
    static const std::unordered_map<std::string, std::string> kOldNames = {{"linear", "bilinear"},
                                                                           {"cubic", "bicubic"}};
    for (auto& a : *n_->mutable_attribute()) {
      auto it = kOldNames.find(a.s());
      if (a.name() == "mode" && it != kOldNames.end()) a.set_s(it->second);
    }
    return Status::Ok();
  }

  Status Unconvertible() {
    return Refuse("its inputs or semantics changed after opset " + std::to_string(kMaxOpset));
  }

  onnx::GraphProto* g_;
  onnx::NodeProto* n_;
  int64_t from_;
  std::string label_;
};

Status ConvertNewOpset(onnx::ModelProto* model, int64_t from) {
  if (from > kNewestKnownOpset) {
    return Status::InvalidArgument(
        "model uses opset " + std::to_string(from) + ", newer than Fusor knows (opsets up to " +
        std::to_string(kNewestKnownOpset) + " are converted to " + std::to_string(kMaxOpset) +
        "); re-export the model at opset " + std::to_string(kMaxOpset) + " or below");
  }
  onnx::GraphProto* g = model->mutable_graph();
  for (int i = 0; i < g->node_size(); ++i) {
    onnx::NodeProto* n = g->mutable_node(i);
    if (!IsDefaultDomain(n->domain())) continue;
    FUSOR_RETURN_IF_ERROR(NodeDowngrade(g, n, i, from).Run());
  }
  DefaultOpsetImport(model)->set_version(kMaxOpset);
  return Status::Ok();
}

}  // namespace

Status ConvertToSupportedOpset(onnx::ModelProto* model) {
  const onnx::OperatorSetIdProto* op = DefaultOpsetImport(model);
  if (op == nullptr) return Status::Ok();
  const int64_t from = op->version();
  if (from < kMinOpset) return ConvertOldOpset(model, from);
  if (from > kMaxOpset) return ConvertNewOpset(model, from);
  return Status::Ok();
}

}  // namespace fusor
