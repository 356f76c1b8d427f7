#include "graph/onnx_import.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "base/input_file.h"
#include "graph/canonical.h"
#include "graph/constant_folding.h"
#include "graph/onnx_attribute_check.h"
#include "graph/op_registry.h"
#include "graph/opset_conversion.h"
#include "graph/shape_rules.h"
#include "graph/tensor_file.h"
#include "graph/variadic_ops.h"

namespace fusor {
namespace {

Status ParseModel(std::string_view bytes, onnx::ModelProto* model) {
  google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int>(bytes.size()));
  stream.SetTotalBytesLimit(INT_MAX);
  if (!model->ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage()) {
    return Status::InvalidArgument(
        "not a valid ONNX model: the file does not parse as an ONNX ModelProto (truncated, "
        "corrupt, or another format)");
  }
  if (model->ir_version() <= 0 || !model->has_graph() || model->opset_import_size() == 0) {
    return Status::InvalidArgument(
        "not an ONNX model: ir_version, graph or opset_import is missing");
  }
  if (model->graph().node_size() == 0)
    return Status::InvalidArgument("the ONNX graph has no nodes");
  return Status::Ok();
}

StatusOr<int64_t> DefaultOpset(const onnx::ModelProto& model) {
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") {
      if (op.version() < kMinOpset || op.version() > kMaxOpset) {
        return Status::InvalidArgument("model uses opset " + std::to_string(op.version()) +
                                       "; Fusor supports opsets " + std::to_string(kMinOpset) +
                                       " to " + std::to_string(kMaxOpset) +
                                       " (re-export with opset_version in that range)");
      }
      return op.version();
    }
  }
  return Status::InvalidArgument("model imports no opset for the default ONNX domain");
}

std::unordered_set<std::string> InitializerNames(const onnx::GraphProto& g) {
  std::unordered_set<std::string> names;
  for (const auto& init : g.initializer()) names.insert(init.name());
  return names;
}

// Sets every dim of one graph input from the caller's bindings, or fails naming what is unbound.
Status BindInput(onnx::ValueInfoProto* input, const ImportOptions& options,
                 std::unordered_set<std::string>* used_dims) {
  auto* tensor_type = input->mutable_type()->mutable_tensor_type();
  auto shape_it = options.input_shapes.find(input->name());
  if (shape_it != options.input_shapes.end()) {
    tensor_type->mutable_shape()->clear_dim();
    for (int64_t d : shape_it->second) tensor_type->mutable_shape()->add_dim()->set_dim_value(d);
    return Status::Ok();
  }
  if (!tensor_type->has_shape()) {
    return Status::InvalidArgument("graph input '" + input->name() +
                                   "' has no shape; give one with --shape " + input->name() +
                                   "=DxDx...");
  }
  for (int i = 0; i < tensor_type->shape().dim_size(); ++i) {
    auto* dim = tensor_type->mutable_shape()->mutable_dim(i);
    if (dim->has_dim_value() && dim->dim_value() > 0) continue;
    if (dim->has_dim_param() && options.dims.count(dim->dim_param())) {
      used_dims->insert(dim->dim_param());
      dim->set_dim_value(options.dims.at(dim->dim_param()));
      continue;
    }
    std::string what =
        dim->has_dim_param() ? "is symbolic ('" + dim->dim_param() + "')" : "is unknown";
    std::string fix = dim->has_dim_param() ? "--dim " + dim->dim_param() + "=N or " : "";
    return Status::InvalidArgument("graph input '" + input->name() + "' dim " + std::to_string(i) +
                                   " " + what + "; bind it with " + fix + "--shape " +
                                   input->name() + "=DxDx...");
  }
  return Status::Ok();
}

// Turns each graph input named in options.constant_inputs into an initializer holding its value.
Status FixConstantInputs(onnx::GraphProto* g, const ImportOptions& options) {
  for (const auto& [name, value] : options.constant_inputs) {
    auto* inputs = g->mutable_input();
    // An init-capture: clang 14 (the fuzzing build's) cannot capture a structured binding.
    auto it = std::find_if(
        inputs->begin(), inputs->end(),
        [&wanted = name](const onnx::ValueInfoProto& v) { return v.name() == wanted; });
    if (it == inputs->end()) {
      return Status::InvalidArgument("--const-input names '" + name +
                                     "', which is not a graph input of the model");
    }
    TensorData named = value;
    named.name = name;
    FUSOR_ASSIGN_OR_RETURN(std::string bytes, TensorProtoBytes(named));
    if (!g->add_initializer()->ParseFromString(bytes)) {
      return Status::Internal("--const-input " + name + ": the value does not serialize");
    }
    inputs->erase(it);
  }
  return Status::Ok();
}

Status BindSymbolicDims(onnx::ModelProto* model, const ImportOptions& options) {
  auto* g = model->mutable_graph();
  auto initializers = InitializerNames(*g);
  std::unordered_set<std::string> used_dims, inputs;
  for (const auto& input : g->input()) {
    if (!initializers.count(input.name())) inputs.insert(input.name());
  }
  for (const auto& [name, shape] : options.input_shapes) {
    if (inputs.count(name)) continue;
    std::string known;
    for (const auto& n : inputs) known += (known.empty() ? "'" : ", '") + n + "'";
    return Status::InvalidArgument("--shape names input '" + name +
                                   "', which the model does not have (its inputs: " + known + ")");
  }
  for (auto& input : *g->mutable_input()) {
    if (initializers.count(input.name())) continue;
    inputs.insert(input.name());
    FUSOR_RETURN_IF_ERROR(BindInput(&input, options, &used_dims));
  }
  for (const auto& [name, value] : options.dims) {
    if (!used_dims.count(name)) {
      return Status::InvalidArgument("--dim names '" + name +
                                     "', which is not a symbolic dim of any graph input");
    }
  }
  // Intermediate and output shapes are re-inferred from the bound inputs.
  g->clear_value_info();
  for (auto& out : *g->mutable_output()) {
    out.mutable_type()->mutable_tensor_type()->clear_shape();
  }
  return Status::Ok();
}

// ONNX requires nodes in topological order, but not every tool honours it, and shape inference
// walks nodes in file order; sorting first makes both work and names a node on any cycle.
Status SortNodesTopologically(onnx::GraphProto* g) {
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < g->node_size(); ++i) {
    for (const auto& out : g->node(i).output()) {
      if (!out.empty()) producer.emplace(out, i);
    }
  }
  std::vector<int> pending(g->node_size(), 0);
  std::vector<std::vector<int>> consumers(g->node_size());
  for (int i = 0; i < g->node_size(); ++i) {
    for (const auto& in : g->node(i).input()) {
      auto it = producer.find(in);
      if (it == producer.end()) continue;
      ++pending[i];
      consumers[it->second].push_back(i);
    }
  }
  std::vector<int> order, ready;
  for (int i = g->node_size() - 1; i >= 0; --i) {
    if (pending[i] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    int i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (auto it = consumers[i].rbegin(); it != consumers[i].rend(); ++it) {
      if (--pending[*it] == 0) ready.push_back(*it);
    }
  }
  if (order.size() != static_cast<size_t>(g->node_size())) {
    for (int i = 0; i < g->node_size(); ++i) {
      if (pending[i] > 0) {
        const auto& n = g->node(i);
        return Status::InvalidArgument("node '" + n.name() + "' (" + n.op_type() +
                                       ") is on a cycle: the graph must be acyclic");
      }
    }
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> sorted;
  for (int i : order) *sorted.Add() = g->node(i);
  g->mutable_node()->Swap(&sorted);
  return Status::Ok();
}

Status InferShapes(onnx::ModelProto* model) {
  GuardShapeInference();
  try {
    onnx::ShapeInferenceOptions opts(/*check_type=*/false, /*strict_mode=*/0,
                                     /*data_prop=*/true);
    onnx::shape_inference::InferShapes(*model, onnx::OpSchemaRegistry::Instance(), opts);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("ONNX shape inference failed: ") + e.what());
  }
  return Status::Ok();
}

// Names each omitted optional output that comes before a present one ("" in an LSTM's or GRU's
// [Y, Y_h] when only Y_h is read): a node's outputs are positional, so Y_h must stay the second.
// The name is unique in the graph; nothing reads the tensor.
void NameOmittedOutputs(onnx::GraphProto* g) {
  std::unordered_set<std::string> names;
  for (const auto& in : g->input()) names.insert(in.name());
  for (const auto& init : g->initializer()) names.insert(init.name());
  for (const auto& node : g->node()) names.insert(node.output().begin(), node.output().end());
  for (int k = 0; k < g->node_size(); ++k) {
    onnx::NodeProto* node = g->mutable_node(k);
    int last = node->output_size() - 1;
    while (last >= 0 && node->output(last).empty()) --last;
    for (int i = 0; i < last; ++i) {
      if (!node->output(i).empty()) continue;
      std::string base =
          (node->name().empty() ? node->op_type() + "_" + std::to_string(k) : node->name()) +
          ":omitted_output_" + std::to_string(i);
      std::string name = base;
      for (int n = 1; names.count(name) > 0; ++n) name = base + "_" + std::to_string(n);
      names.insert(name);
      node->set_output(i, name);
    }
  }
}

// Replaces every use of tensor `from` by `to` in node inputs and graph outputs.
void RenameUses(onnx::GraphProto* g, const std::string& from, const std::string& to) {
  for (auto& node : *g->mutable_node()) {
    for (auto& in : *node.mutable_input()) {
      if (in == from) in = to;
    }
  }
  for (auto& out : *g->mutable_output()) {
    if (out.name() == from) out.set_name(to);
  }
}

bool IsGraphOutput(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& out : g.output()) {
    if (out.name() == name) return true;
  }
  return false;
}

bool IsConsumed(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& node : g.node()) {
    for (const auto& in : node.input()) {
      if (in == name) return true;
    }
  }
  return IsGraphOutput(g, name);
}

// The element type and shape (after shape inference) of each named value.
struct TypeInfo {
  int32_t elem_type = 0;
  const onnx::TensorShapeProto* shape = nullptr;
};

using TypeMap = std::unordered_map<std::string, TypeInfo>;

TypeMap CollectTypes(const onnx::GraphProto& g) {
  TypeMap types;
  auto add = [&](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type()) return;
    const auto& tt = v.type().tensor_type();
    types[v.name()] = TypeInfo{tt.elem_type(), tt.has_shape() ? &tt.shape() : nullptr};
  };
  for (const auto& v : g.input()) add(v);
  for (const auto& v : g.value_info()) add(v);
  for (const auto& v : g.output()) add(v);
  return types;
}

StatusOr<Shape> StaticShape(const TypeInfo& info, const std::string& tensor,
                            const std::string& who) {
  if (info.shape == nullptr) {
    return Status::InvalidArgument(who + ": the shape of '" + tensor +
                                   "' could not be inferred; Fusor needs static shapes");
  }
  Shape dims;
  for (int i = 0; i < info.shape->dim_size(); ++i) {
    const auto& d = info.shape->dim(i);
    if (!d.has_dim_value()) {
      std::string sym = d.has_dim_param() ? " ('" + d.dim_param() + "')" : "";
      return Status::InvalidArgument(who + ": dim " + std::to_string(i) + " of '" + tensor +
                                     "' is not static" + sym +
                                     "; ONNX shape inference could not compute it from the "
                                     "bound graph inputs");
    }
    dims.push_back(d.dim_value());
  }
  return dims;
}

// Whether `name` is an initializer of at least one value, each `value`.
bool IsConstantFilledWith(const onnx::GraphProto& g, const std::string& name, double value) {
  for (const auto& init : g.initializer()) {
    if (init.name() != name) continue;
    std::optional<ConstValue> v = ReadConstValue(init);
    if (!v || v->size() == 0) return false;
    for (int64_t i = 0; i < v->size(); ++i) {
      if (v->AsDouble(i) != value) return false;
    }
    return true;
  }
  return false;
}

// A Pad whose pads are all zero (an input from opset 11, an attribute before) copies its input
// whatever its mode: torchvision's Swin pads every window partition to a multiple of the window,
// which at 224 pixels is zero in every stage.
bool IsZeroPad(const onnx::GraphProto& g, const onnx::NodeProto& n) {
  if (n.input_size() >= 2) return IsConstantFilledWith(g, n.input(1), 0);
  for (const auto& a : n.attribute()) {
    if (a.name() != "pads") continue;
    for (int64_t p : a.ints()) {
      if (p != 0) return false;
    }
    return true;
  }
  return false;
}

// A Slice with unit steps whose output keeps its input's shape takes every element: the crop back
// to the unpadded size after a zero Pad (Swin's `x[:, :H, :W, :]`).
bool IsFullSlice(const onnx::GraphProto& g, const onnx::NodeProto& n, const TypeMap& types) {
  if (n.input_size() >= 5 && !n.input(4).empty() && !IsConstantFilledWith(g, n.input(4), 1)) {
    return false;
  }
  auto dims = [&](const std::string& name) -> std::optional<Shape> {
    auto it = types.find(name);
    if (it == types.end()) return std::nullopt;
    StatusOr<Shape> shape = StaticShape(it->second, name, "Slice");
    return shape.ok() ? std::optional<Shape>(*shape) : std::nullopt;
  };
  std::optional<Shape> in = dims(n.input(0));
  return in && in == dims(n.output(0));
}

// Identity always; Dropout when it drops nothing (its training_mode input absent or constant
// false, or its ratio constant 0: torch exports F.dropout(p=0.0), Swin's attention, as training
// mode true with a constant ratio 0) and its mask is unused; a Pad or Slice that copies its input.
bool IsPassThrough(const onnx::GraphProto& g, const onnx::NodeProto& n, const TypeMap& types) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") return false;
  // Removal reads input 0 and output 0, which a malformed node may lack.
  if (n.input_size() < 1 || n.input(0).empty() || n.output_size() < 1) return false;
  if (n.op_type() == "Identity") return n.input_size() == 1 && n.output_size() == 1;
  if (n.op_type() == "Pad") return n.output_size() == 1 && IsZeroPad(g, n);
  if (n.op_type() == "Slice") return n.output_size() == 1 && IsFullSlice(g, n, types);
  if (n.op_type() != "Dropout" || n.input_size() < 1) return false;
  const bool training =
      n.input_size() >= 3 && !n.input(2).empty() && !IsConstantFilledWith(g, n.input(2), 0);
  if (training && !(n.input_size() >= 2 && IsConstantFilledWith(g, n.input(1), 0))) return false;
  return n.output_size() < 2 || n.output(1).empty() || !IsConsumed(g, n.output(1));
}

void RemovePassThrough(onnx::GraphProto* g) {
  // Removing a node renames uses (and graph outputs), never a shape: `types` stays valid.
  const TypeMap types = CollectTypes(*g);
  for (int i = 0; i < g->node_size();) {
    const onnx::NodeProto& n = g->node(i);
    if (!IsPassThrough(*g, n, types)) {
      ++i;
      continue;
    }
    std::string in = n.input(0), out = n.output(0);
    g->mutable_node()->DeleteSubrange(i, 1);
    bool keep_output_name = IsGraphOutput(*g, out) && !IsGraphOutput(*g, in);
    bool in_is_produced = false;
    for (const auto& node : g->node()) {
      for (const auto& o : node.output()) in_is_produced |= (o == in);
    }
    if (keep_output_name && in_is_produced) {
      // Keep the user-visible output name: the producer writes `out` directly.
      for (auto& node : *g->mutable_node()) {
        for (auto& o : *node.mutable_output()) {
          if (o == in) o = out;
        }
        for (auto& x : *node.mutable_input()) {
          if (x == in) x = out;
        }
      }
    } else {
      RenameUses(g, out, in);
    }
  }
}

// Folding and shape inference alternate until nothing folds. Most exports settle in 2-3 rounds;
// a model whose every block computes its shapes from the previous block's (swin_t: 17 rounds)
// takes one round per block. A round that changes something removes at least one node, so the
// loop ends within the node count.
Status FoldToFixpoint(onnx::ModelProto* model, const std::unordered_set<std::string>& weights) {
  for (bool changed = true; changed;) {
    FUSOR_RETURN_IF_ERROR(InferShapes(model));
    if (AddShapesFromConstantOperands(model->mutable_graph())) {
      FUSOR_RETURN_IF_ERROR(InferShapes(model));
    }
    FUSOR_ASSIGN_OR_RETURN(changed, FoldConstants(model->mutable_graph(), weights));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Explaining a dim that stays unknown

bool IsStatic(const onnx::ValueInfoProto& v) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return false;
  for (const auto& d : v.type().tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return false;
  }
  return true;
}

// The inputs whose values (not only shapes) decide an op's output shape.
std::vector<int> ShapeOperands(const std::string& op) {
  static const std::unordered_map<std::string, std::vector<int>> kOperands = {
      {"Reshape", {1}},      {"Expand", {1}},        {"Slice", {1, 2, 3, 4}},
      {"Range", {0, 1, 2}},  {"Tile", {1}},          {"ConstantOfShape", {0}},
      {"Resize", {1, 2, 3}}, {"Upsample", {1}},      {"Pad", {1, 3}},
      {"Squeeze", {1}},      {"Unsqueeze", {1}},     {"Split", {1}},
      {"TopK", {1}},         {"OneHot", {1}},        {"ReduceMean", {1}},
      {"ReduceSum", {1}},    {"ReduceMax", {1}},     {"CenterCropPad", {1}},
      {"HannWindow", {0}},   {"HammingWindow", {0}}, {"BlackmanWindow", {0}},
      {"Compress", {1}},     {"MaxUnpool", {2}},     {"MelWeightMatrix", {0, 1}}};
  auto it = kOperands.find(op);
  return it == kOperands.end() ? std::vector<int>{} : it->second;
}

// The first graph input (not an initializer) the value `name` is computed from, or "".
std::string GraphInputFeeding(const onnx::GraphProto& g, const std::string& name) {
  const std::unordered_set<std::string> initializers = InitializerNames(g);
  std::unordered_set<std::string> inputs, seen{name};
  for (const auto& v : g.input()) {
    if (!initializers.count(v.name())) inputs.insert(v.name());
  }
  for (std::vector<std::string> todo{name}; !todo.empty();) {
    const std::string value = todo.back();
    todo.pop_back();
    if (inputs.count(value)) return value;
    for (const auto& p : g.node()) {
      if (std::find(p.output().begin(), p.output().end(), value) == p.output().end()) continue;
      for (const auto& in : p.input()) {
        if (!in.empty() && seen.insert(in).second) todo.push_back(in);
      }
    }
  }
  return "";
}

// Why `n`, whose inputs all have static shapes, gives an output of unknown dims: the shape operand
// that has no constant value and the node computing it, or the op's nature.
std::string LostDimReason(const onnx::GraphProto& g, const onnx::NodeProto& n,
                          const std::unordered_set<std::string>& constants) {
  if (n.op_type() == "NonMaxSuppression") {
    return "its output size depends on the input values, which Fusor never reads";
  }
  if (n.op_type() == "NonZero" || n.op_type() == "Unique") {
    const std::string input = GraphInputFeeding(g, n.input(0));
    return "its output size depends on the values of its input '" + n.input(0) + "'" +
           (input.empty() ? std::string(", which Fusor does not have")
                          : ", computed from graph input '" + input +
                                "' (if it is fixed, give it at import with --const-input " + input +
                                "=FILE)");
  }
  for (int i : ShapeOperands(n.op_type())) {
    if (i >= n.input_size() || n.input(i).empty() || constants.count(n.input(i))) continue;
    std::string from;
    for (const auto& p : g.node()) {
      for (const auto& o : p.output()) {
        if (o == n.input(i)) from = "node '" + p.name() + "' (" + p.op_type() + ")";
      }
    }
    if (from.empty()) {
      return "its input '" + n.input(i) +
             "' decides the output shape but is a graph input, whose value Fusor does not have "
             "(give it at import with --const-input " +
             n.input(i) + "=FILE)";
    }
    if (std::string input = GraphInputFeeding(g, n.input(i)); !input.empty()) {
      return "its input '" + n.input(i) + "' decides the output shape and " + from +
             " computes it from graph input '" + input +
             "', whose value Fusor does not have (give it at import with --const-input " + input +
             "=FILE)";
    }
    return "its input '" + n.input(i) + "' decides the output shape but has no constant value (" +
           from + " computes it from values Fusor does not have or cannot fold)";
  }
  return "ONNX shape inference has no rule giving it from the input shapes for this op";
}

// Fails naming the first node (in topological order) whose inputs all have static shapes but
// whose output does not: the node that lost the dim. Graph inputs are bound by now, so a dim
// unknown here cannot be fixed with --dim; the message says why it was lost instead.
Status CheckEveryDimResolved(const onnx::GraphProto& g) {
  std::unordered_map<std::string, bool> is_static;
  std::unordered_set<std::string> constants;
  for (const auto& v : g.input()) is_static[v.name()] = IsStatic(v);
  for (const auto& v : g.value_info()) is_static[v.name()] = IsStatic(v);
  for (const auto& v : g.output()) is_static[v.name()] = IsStatic(v);
  for (const auto& t : g.initializer()) {
    is_static[t.name()] = true;
    constants.insert(t.name());
  }
  for (const auto& n : g.node()) {
    bool inputs_static = true;
    for (const auto& in : n.input()) inputs_static &= in.empty() || is_static[in];
    for (const auto& out : n.output()) {
      if (out.empty() || is_static[out] || !inputs_static) continue;
      std::string name = n.name().empty() ? n.op_type() : n.name();
      return Status::InvalidArgument(
          "node '" + name + "' (" + n.op_type() + ") loses a dim: its inputs have static shapes, " +
          "its output '" + out + "' does not, because " + LostDimReason(g, n, constants) +
          ". Every graph input is bound, so --dim cannot help; re-export the model with static "
          "shapes (for example torch.onnx.export without dynamic_axes, or onnxsim with "
          "--overwrite-input-shape), or report the op and this message");
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Conversion to the IR

StatusOr<DType> ConvertDType(int32_t onnx_type, const std::string& tensor) {
  DType t = DTypeFromOnnx(onnx_type);
  if (t == DType::kUnspecified) {
    return Status::InvalidArgument("tensor '" + tensor + "' has ONNX element type " +
                                   std::to_string(onnx_type) + ", which Fusor does not support");
  }
  return t;
}

// Small integer constants and float scalars parameterise ops; their values are kept, and so are
// those of small float tensors that parameterise an op (`float_parameter`: Resize's scales and
// roi), and every value that comes from a Constant node or was folded from constants
// (`structural`: masks, fill values) up to kMaxConstantElements. Everything else from an
// initializer of the file is a weight: dims only.
constexpr int64_t kMaxFloatParameterElements = 64;

Tensor InitializerTensor(const onnx::TensorProto& init, DType dtype, bool float_parameter,
                         bool structural) {
  Tensor t;
  t.name = init.name();
  t.dtype = dtype;
  t.dims.assign(init.dims().begin(), init.dims().end());
  t.kind = TensorKind::kWeight;
  std::optional<ConstValue> value = ReadConstValue(init);
  if (!value) return t;
  int64_t elements = value->size();
  bool small_float = value->is_float && float_parameter && elements <= kMaxFloatParameterElements;
  if (CarriedAsConstant(*value) || small_float ||
      (structural && elements <= kMaxConstantElements)) {
    t.kind = TensorKind::kConstant;
    t.int_data = value->ints;
    t.float_data = value->floats;
  }
  return t;
}

StatusOr<AttrValue> ConvertAttribute(const onnx::AttributeProto& a, const std::string& who) {
  using A = onnx::AttributeProto;
  switch (a.type()) {
    case A::INT:
      return AttrValue(static_cast<int64_t>(a.i()));
    case A::FLOAT:
      return AttrValue(static_cast<double>(a.f()));
    case A::STRING:
      return AttrValue(a.s());
    case A::INTS:
      return AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case A::FLOATS:
      return AttrValue(std::vector<double>(a.floats().begin(), a.floats().end()));
    case A::STRINGS:
      return AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case A::TENSOR: {
      AttrTensor t;
      FUSOR_ASSIGN_OR_RETURN(t.dtype,
                             ConvertDType(a.t().data_type(), who + " attribute " + a.name()));
      t.dims.assign(a.t().dims().begin(), a.t().dims().end());
      if (auto v = ReadConstValue(a.t()); v && v->ints.size() + v->floats.size() <= 64) {
        t.int_data = v->ints;
        t.float_data = v->floats;
      }
      return AttrValue(std::move(t));
    }
    default:
      return Status::Unimplemented(who + ": attribute '" + a.name() +
                                   "' has a type Fusor does not carry");
  }
}

class IrBuilder {
 public:
  // `weights`: the initializers of the file (as opposed to those folded from constants).
  IrBuilder(const onnx::ModelProto& model, int64_t opset,
            const std::unordered_set<std::string>& weights)
      : model_(model), opset_(opset), weights_(weights) {
    types_ = CollectTypes(model.graph());
    for (const auto& init : model.graph().initializer()) initializers_[init.name()] = &init;
    for (const auto& node : model.graph().node()) {
      bool resize =
          node.op_type() == "Resize" && (node.domain().empty() || node.domain() == "ai.onnx");
      for (int i = 1; resize && i < std::min(node.input_size(), 3); ++i) {
        float_parameters_.insert(node.input(i));  // roi, scales: their values decide the result.
      }
    }
  }

  StatusOr<Graph> Build(const std::string& model_name) {
    const auto& g = model_.graph();
    graph_.model_name = model_name;
    graph_.opset = opset_;
    if (!model_.producer_name().empty()) graph_.metadata["producer"] = model_.producer_name();
    for (const auto& kv : model_.metadata_props()) graph_.metadata[kv.key()] = kv.value();
    for (const auto& in : g.input()) {
      if (initializers_.count(in.name())) continue;
      FUSOR_ASSIGN_OR_RETURN(TensorId id,
                             Declare(in.name(), TensorKind::kGraphInput, "graph input"));
      graph_.AddInput(id);
    }
    for (int i = 0; i < g.node_size(); ++i) FUSOR_RETURN_IF_ERROR(AddNode(g.node(i), i));
    for (const auto& out : g.output()) {
      FUSOR_ASSIGN_OR_RETURN(TensorId id, Lookup(out.name(), "graph output"));
      graph_.AddOutput(id);
    }
    graph_.Link();
    return std::move(graph_);
  }

 private:
  StatusOr<TensorId> Declare(const std::string& name, TensorKind kind, const std::string& who) {
    auto it = types_.find(name);
    if (it == types_.end()) {
      return Status::InvalidArgument(who + ": the type of '" + name + "' could not be inferred");
    }
    Tensor t;
    t.name = name;
    t.kind = kind;
    FUSOR_ASSIGN_OR_RETURN(t.dtype, ConvertDType(it->second.elem_type, name));
    FUSOR_ASSIGN_OR_RETURN(t.dims, StaticShape(it->second, name, who));
    TensorId id = graph_.AddTensor(std::move(t));
    ids_[name] = id;
    return id;
  }

  // A tensor read by a node or listed as a graph output: declared already, or an initializer.
  StatusOr<TensorId> Lookup(const std::string& name, const std::string& who) {
    if (auto it = ids_.find(name); it != ids_.end()) return it->second;
    auto init = initializers_.find(name);
    if (init == initializers_.end()) {
      return Status::InvalidArgument(who + " reads '" + name +
                                     "', which is not a graph input, an initializer or the "
                                     "output of an earlier node");
    }
    FUSOR_ASSIGN_OR_RETURN(DType dtype, ConvertDType(init->second->data_type(), name));
    TensorId id = graph_.AddTensor(InitializerTensor(
        *init->second, dtype, float_parameters_.count(name) > 0, weights_.count(name) == 0));
    ids_[name] = id;
    return id;
  }

  Status AddNode(const onnx::NodeProto& p, int index) {
    Node n;
    n.name = p.name().empty() ? p.op_type() + "_" + std::to_string(index) : p.name();
    n.op_type = p.op_type();
    n.domain = p.domain() == "ai.onnx" ? "" : p.domain();
    std::string who = "node '" + n.name + "' (" + n.op_type + ")";
    if (const auto* schema =
            onnx::OpSchemaRegistry::Schema(p.op_type(), OpsetOf(p.domain()), p.domain())) {
      n.op_version = schema->since_version();
    }
    // CastLike(x, like) is Cast(x) to like's type, which shape inference gave its output: one op
    // for the runtime, the fusion and the hash. `like` is read for its type only.
    const bool cast_like = n.domain.empty() && n.op_type == "CastLike" && p.output_size() == 1;
    for (const auto& in : p.input()) {
      if (cast_like && !n.inputs.empty()) break;
      if (in.empty()) {
        n.inputs.push_back(kNoId);
        continue;
      }
      FUSOR_ASSIGN_OR_RETURN(TensorId id, Lookup(in, who));
      n.inputs.push_back(id);
    }
    for (const auto& out : p.output()) {
      if (out.empty()) continue;  // An omitted optional output.
      if (ids_.count(out)) {
        return Status::InvalidArgument(who + " writes '" + out + "', which already exists");
      }
      FUSOR_ASSIGN_OR_RETURN(TensorId id, Declare(out, TensorKind::kActivation, who));
      n.outputs.push_back(id);
    }
    std::vector<Attribute> attributes;
    for (const auto& a : p.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS) {
        continue;  // Sub-graphs are not carried; such nodes are opaque.
      }
      FUSOR_ASSIGN_OR_RETURN(AttrValue v, ConvertAttribute(a, who));
      attributes.push_back(Attribute{a.name(), std::move(v)});
    }
    if (cast_like) {
      auto type = types_.find(p.output(0));
      if (type == types_.end() || type->second.elem_type == 0) {
        return Status::InvalidArgument(who + ": the type of its output '" + p.output(0) +
                                       "' could not be inferred");
      }
      n.op_type = "Cast";
      const auto* cast = onnx::OpSchemaRegistry::Schema("Cast", OpsetOf(p.domain()), p.domain());
      n.op_version = cast != nullptr ? cast->since_version() : 0;
      attributes.push_back(Attribute{"to", static_cast<int64_t>(type->second.elem_type)});
    }
    FUSOR_ASSIGN_OR_RETURN(n.attributes, SortedAttributes(std::move(attributes), who));
    graph_.AddNode(std::move(n));
    return Status::Ok();
  }

  int OpsetOf(const std::string& domain) const {
    for (const auto& op : model_.opset_import()) {
      bool same = op.domain() == domain || (domain.empty() && op.domain() == "ai.onnx") ||
                  (domain == "ai.onnx" && op.domain().empty());
      if (same) return static_cast<int>(op.version());
    }
    return static_cast<int>(opset_);
  }

  const onnx::ModelProto& model_;
  int64_t opset_;
  Graph graph_;
  TypeMap types_;
  std::unordered_map<std::string, const onnx::TensorProto*> initializers_;
  const std::unordered_set<std::string>& weights_;
  std::unordered_set<std::string> float_parameters_;  // Float initializers whose values to keep.
  std::unordered_map<std::string, TensorId> ids_;
};

// Nodes that read only weights and constants (slicing a fused QKV weight, transposing a weight) are
// work a deployed engine does once at load time, not per inference: their outputs become weights
// (dims only) and the nodes leave the graph, as ONNX Runtime's constant folding would remove them.
// With `folded`, the removed nodes are also returned as a graph of their own (their outputs read by
// the kept nodes are its outputs), so a caller with the weights' data can compute those values.
Graph FoldWeightOnlyNodes(Graph g, Graph* folded = nullptr) {
  std::vector<NodeId> keep, removed;
  Graph original = folded != nullptr ? g : Graph();
  for (NodeId id = 0; id < static_cast<NodeId>(g.num_nodes()); ++id) {
    const Node& n = g.node(id);
    bool reads_weight = false, weights_only = IsKnownOp(n.domain, n.op_type);
    for (TensorId in : n.inputs) {
      if (in == kNoId) continue;
      TensorKind k = g.tensor(in).kind;
      reads_weight |= k == TensorKind::kWeight;
      weights_only &= k == TensorKind::kWeight || k == TensorKind::kConstant;
    }
    if (!(weights_only && reads_weight)) {
      keep.push_back(id);
      continue;
    }
    removed.push_back(id);
    for (TensorId out : n.outputs) g.mutable_tensor(out).kind = TensorKind::kWeight;
  }
  if (folded != nullptr) *folded = original.ExtractRegion(removed);
  if (keep.size() == g.num_nodes()) return g;
  return g.Compacted(keep);
}

StatusOr<int64_t> ParseDim(std::string_view text, std::string_view what) {
  int64_t v = 0;
  if (text.empty()) return Status::InvalidArgument(std::string(what) + ": empty dim");
  for (char c : text) {
    if (c < '0' || c > '9' || v > (INT64_MAX - 9) / 10) {
      return Status::InvalidArgument(std::string(what) + ": '" + std::string(text) +
                                     "' is not a positive integer");
    }
    v = v * 10 + (c - '0');
  }
  if (v < 1) return Status::InvalidArgument(std::string(what) + ": dims must be 1 or more");
  return v;
}

}  // namespace

Status ParseShapeBinding(std::string_view text, ImportOptions* options) {
  std::string what = "--shape " + std::string(text);
  size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0) {
    return Status::InvalidArgument(what + ": expected NAME=DxDx..., for example input=1x3x224x224");
  }
  Shape dims;
  std::string_view rest = text.substr(eq + 1);
  while (true) {
    size_t x = rest.find('x');
    FUSOR_ASSIGN_OR_RETURN(int64_t d, ParseDim(rest.substr(0, x), what));
    dims.push_back(d);
    if (x == std::string_view::npos) break;
    rest = rest.substr(x + 1);
  }
  options->input_shapes[std::string(text.substr(0, eq))] = dims;
  return Status::Ok();
}

Status ParseDimBinding(std::string_view text, ImportOptions* options) {
  std::string what = "--dim " + std::string(text);
  size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0) {
    return Status::InvalidArgument(what + ": expected NAME=N, for example batch=8");
  }
  FUSOR_ASSIGN_OR_RETURN(int64_t d, ParseDim(text.substr(eq + 1), what));
  options->dims[std::string(text.substr(0, eq))] = d;
  return Status::Ok();
}

// The names of the initializers whose data computes every weight of `g`: its weights that the
// folded nodes do not produce, and the weights those nodes read.
std::vector<std::string> InitializerNamesToRead(const Graph& g, const Graph& load_time) {
  std::unordered_set<std::string> computed, names;
  for (TensorId t : load_time.outputs()) computed.insert(load_time.tensor(t).name);
  for (const Graph* graph : {&g, &load_time}) {
    for (const Tensor& t : graph->tensors()) {
      bool leaf = graph == &g || t.producer == kNoId;
      if (t.kind == TensorKind::kWeight && leaf && !computed.count(t.name)) names.insert(t.name);
    }
  }
  return {names.begin(), names.end()};
}

// The import pipeline, in order; each step's failure names what is wrong. With `weights`, the data
// of the weights is read too (from `model_dir` for external data); the graph is the same.
StatusOr<Graph> ImportModel(std::string_view bytes, const ImportOptions& options,
                            const std::string& model_dir, ModelWeights* weights) {
  if (static_cast<int64_t>(bytes.size()) > options.max_file_bytes) {
    return Status::ResourceExhausted("model is " + std::to_string(bytes.size()) +
                                     " bytes, the limit is " +
                                     std::to_string(options.max_file_bytes));
  }
  onnx::ModelProto model;
  FUSOR_RETURN_IF_ERROR(ParseModel(bytes, &model));
  if (model.graph().node_size() > options.limits.max_nodes) {
    return Status::ResourceExhausted("model has " + std::to_string(model.graph().node_size()) +
                                     " nodes, the limit is " +
                                     std::to_string(options.limits.max_nodes));
  }
  // The conversion checks an old model before the inference it runs; what it wrote, or a model
  // of a supported opset, is checked here, before the import's own inference.
  FUSOR_RETURN_IF_ERROR(ConvertToSupportedOpset(&model));
  FUSOR_RETURN_IF_ERROR(CheckInputCounts(model));
  FUSOR_RETURN_IF_ERROR(CheckAttributesForShapeInference(model.graph()));
  FUSOR_ASSIGN_OR_RETURN(int64_t opset, DefaultOpset(model));
  FUSOR_RETURN_IF_ERROR(SortNodesTopologically(model.mutable_graph()));
  NameOmittedOutputs(model.mutable_graph());
  SplitVariadicOps(model.mutable_graph());
  FUSOR_RETURN_IF_ERROR(FixConstantInputs(model.mutable_graph(), options));
  FUSOR_RETURN_IF_ERROR(BindSymbolicDims(&model, options));
  std::unordered_set<std::string> file_initializers;
  for (const auto& init : model.graph().initializer()) file_initializers.insert(init.name());
  FUSOR_RETURN_IF_ERROR(FoldToFixpoint(&model, file_initializers));
  RemovePassThrough(model.mutable_graph());
  FUSOR_RETURN_IF_ERROR(CheckEveryDimResolved(model.graph()));
  std::string name = !options.model_name.empty()     ? options.model_name
                     : !model.graph().name().empty() ? model.graph().name()
                                                     : "model";
  FUSOR_ASSIGN_OR_RETURN(Graph g, IrBuilder(model, opset, file_initializers).Build(name));
  FUSOR_RETURN_IF_ERROR(Validate(g, options.limits));
  if (options.evaluate_constants) {
    FUSOR_RETURN_IF_ERROR(FoldConstantNodes(&g, options.evaluate_constants).status());
  } else if (NodeId n = FirstFoldableNode(g); n != kNoId && !options.keep_constant_nodes) {
    return Status::FailedPrecondition(
        "node '" + g.node(n).name + "' (" + g.node(n).op_type +
        ") reads only constants, which every Fusor tool folds before hashing; this import has no "
        "constant evaluator (import through runtime/constant_evaluator.h WithConstantFolding, or "
        "set ImportOptions::keep_constant_nodes to keep such nodes)");
  }
  if (weights == nullptr) return Canonicalize(FoldWeightOnlyNodes(std::move(g)));
  g = FoldWeightOnlyNodes(std::move(g), &weights->load_time);
  FUSOR_ASSIGN_OR_RETURN(
      weights->initializers,
      ReadInitializers(model.graph(), InitializerNamesToRead(g, weights->load_time), model_dir));
  return Canonicalize(g);
}

StatusOr<Graph> ImportOnnxBytes(std::string_view bytes, const ImportOptions& options) {
  return ImportModel(bytes, options, "", nullptr);
}

namespace {

StatusOr<std::string> ReadModelFile(const std::string& path, const ImportOptions& options) {
  return ReadInputFile(path, "model file", options.max_file_bytes);
}

ImportOptions NamedAfterFile(const std::string& path, ImportOptions options) {
  if (options.model_name.empty()) options.model_name = std::filesystem::path(path).stem().string();
  return options;
}

}  // namespace

StatusOr<Graph> ImportOnnxFileWithDimsItHas(const std::string& path, ImportOptions options) {
  StatusOr<Graph> g = ImportOnnxFile(path, options);
  const std::string unused = "--dim names '";
  for (size_t at; !g.ok() && (at = g.status().message().find(unused)) != std::string::npos;) {
    const std::string& m = g.status().message();
    const size_t begin = at + unused.size();
    if (options.dims.erase(m.substr(begin, m.find('\'', begin) - begin)) == 0) break;
    g = ImportOnnxFile(path, options);
  }
  return g;
}

StatusOr<Graph> ImportOnnxFile(const std::string& path, const ImportOptions& options) {
  FUSOR_ASSIGN_OR_RETURN(std::string bytes, ReadModelFile(path, options));
  auto g = ImportOnnxBytes(bytes, NamedAfterFile(path, options));
  if (!g.ok()) return g.status().WithContext(path);
  return g;
}

StatusOr<ImportedModel> ImportOnnxFileWithWeights(const std::string& path,
                                                  const ImportOptions& options) {
  FUSOR_ASSIGN_OR_RETURN(std::string bytes, ReadModelFile(path, options));
  ImportedModel m;
  std::string dir = std::filesystem::path(path).parent_path().string();
  auto g = ImportModel(bytes, NamedAfterFile(path, options), dir.empty() ? "." : dir, &m.weights);
  if (!g.ok()) return g.status().WithContext(path);
  m.graph = std::move(g).value();
  return m;
}

StatusOr<ImportedModel> ImportOnnxBytesWithWeights(std::string_view bytes,
                                                   const ImportOptions& options) {
  ImportedModel m;
  FUSOR_ASSIGN_OR_RETURN(m.graph, ImportModel(bytes, options, "", &m.weights));
  return m;
}

}  // namespace fusor
