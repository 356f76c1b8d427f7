#include "graph/onnx_attribute_check.h"

#include <algorithm>

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <climits>
#include <functional>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>

namespace fusor {
namespace {

// The checks read an attribute's ints (or i) whatever its declared type, as libonnx's
// getRepeatedAttribute and getAttribute do.
//
// Window attributes above this are no real model's and would overflow libonnx's int64 arithmetic
// ((kernel - 1) * dilation + 1, dim * blocksize^2).
constexpr int64_t kMaxWindowValue = INT32_MAX;

// Ops whose shape inference reads the window attributes (onnx/defs/nn/defs.cc
// convPoolShapeInference and convTransposeShapeInference).
const std::unordered_set<std::string_view>& WindowOps() {
  static const std::unordered_set<std::string_view> ops = {
      "Conv",        "ConvInteger", "QLinearConv", "ConvTranspose", "MaxPool",
      "AveragePool", "LpPool",      "MaxUnpool",   "MaxRoiPool",    "Col2Im"};
  return ops;
}

struct IntsRule {
  const char* name;
  int64_t min;
};
constexpr IntsRule kWindowRules[] = {{"strides", 1},     {"dilations", 1},      {"kernel_shape", 1},
                                     {"pads", 0},        {"output_padding", 0}, {"output_shape", 0},
                                     {"pooled_shape", 1}};
// Integer attributes that libonnx divides by or multiplies into a dim.
constexpr IntsRule kScalarRules[] = {{"group", 1}, {"blocksize", 1}};

std::string Who(const onnx::NodeProto& n) {
  return "node '" + n.name() + "' (" + n.op_type() + ")";
}

Status OutOfRange(const onnx::NodeProto& n, const std::string& attr, int64_t v, int64_t min) {
  return Status::InvalidArgument(Who(n) + ": attribute " + attr + " is " + std::to_string(v) +
                                 "; it must be between " + std::to_string(min) + " and " +
                                 std::to_string(kMaxWindowValue));
}

Status CheckWindowLengths(const onnx::NodeProto& n) {
  int spatial = -1;
  const char* first = nullptr;
  for (const auto& a : n.attribute()) {
    std::string_view name = a.name();
    if (name == "pooled_shape") continue;
    if (name == "pads" && a.ints_size() % 2 != 0) {
      return Status::InvalidArgument(Who(n) + ": attribute pads has " +
                                     std::to_string(a.ints_size()) +
                                     " values; it needs two per spatial axis (begins, then ends)");
    }
    bool window = name == "strides" || name == "dilations" || name == "kernel_shape" ||
                  name == "pads" || name == "output_padding" || name == "output_shape";
    if (!window) continue;
    int axes = name == "pads" ? a.ints_size() / 2 : a.ints_size();
    if (spatial < 0) {
      spatial = axes, first = a.name().c_str();
    } else if (axes != spatial) {
      return Status::InvalidArgument(Who(n) + ": attribute " + a.name() + " covers " +
                                     std::to_string(axes) + " spatial axes, " + first + " " +
                                     std::to_string(spatial) + "; they must agree");
    }
  }
  return Status::Ok();
}

Status CheckNode(const onnx::NodeProto& n) {
  bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
  bool window_op = default_domain && WindowOps().count(n.op_type()) > 0;
  // Other domains' ops may use these names for anything.
  std::span<const IntsRule> scalar_rules;
  if (default_domain) scalar_rules = kScalarRules;
  for (const auto& a : n.attribute()) {
    for (const IntsRule& r : scalar_rules) {
      if (a.name() == r.name && (a.i() < r.min || a.i() > kMaxWindowValue)) {
        return OutOfRange(n, a.name(), a.i(), r.min);
      }
    }
    if (!window_op) continue;
    for (const IntsRule& r : kWindowRules) {
      if (a.name() != r.name) continue;
      for (int i = 0; i < a.ints_size(); ++i) {
        if (a.ints(i) < r.min || a.ints(i) > kMaxWindowValue) {
          return OutOfRange(n, a.name() + "[" + std::to_string(i) + "]", a.ints(i), r.min);
        }
      }
    }
  }
  return window_op ? CheckWindowLengths(n) : Status::Ok();
}

// Conv-like ops: which inputs are X and W. The kernel shape comes from W's dims when the node has
// no kernel_shape, and libonnx indexes X's dims and the stride list with it.
struct ConvInputs {
  const char* op;
  int x;
  int w;
};
constexpr ConvInputs kConvInputs[] = {
    {"Conv", 0, 1}, {"ConvInteger", 0, 1}, {"QLinearConv", 0, 3}, {"ConvTranspose", 0, 1}};

// Thrown by a guard. Not an onnx::InferenceError, which libonnx would drop and carry on past: the
// import stops with this message.
[[noreturn]] void Refuse(const std::string& what) { throw std::invalid_argument(what); }

void CheckConvRanks(onnx::InferenceContext& ctx, const ConvInputs& c) {
  if (!onnx::hasInputShape(ctx, c.x) || !onnx::hasInputShape(ctx, c.w)) return;
  int x_rank = onnx::getInputShape(ctx, c.x).dim_size();
  int w_rank = onnx::getInputShape(ctx, c.w).dim_size();
  if (x_rank != w_rank || x_rank < 2) {
    Refuse(std::string(c.op) + ": input X has rank " + std::to_string(x_rank) +
           " and the weights W rank " + std::to_string(w_rank) +
           "; they must be equal and at least 2");
  }
}

// LayerNormalization's inference sets the dims from `axis` on without checking its range (the
// default -1 included, which a rank-0 input puts before its first dim).
void CheckLayerNormAxis(onnx::InferenceContext& ctx) {
  if (!onnx::hasInputShape(ctx, 0)) return;
  const onnx::AttributeProto* attr = ctx.getAttribute("axis");
  const int64_t axis = attr != nullptr ? attr->i() : -1;
  const int64_t rank = onnx::getInputShape(ctx, 0).dim_size();
  if (axis < -rank || axis > rank) {
    Refuse("LayerNormalization: attribute axis is " + std::to_string(axis) +
           "; for an input of rank " + std::to_string(rank) + " it must be between " +
           std::to_string(-rank) + " and " + std::to_string(rank));
  }
}

// MaxUnpool without output_shape reads the channels from dim 1 of its indices I unchecked.
void CheckMaxUnpoolIndices(onnx::InferenceContext& ctx) {
  if (ctx.getNumInputs() != 2 || !onnx::hasInputShape(ctx, 0)) return;
  if (!onnx::hasInputShape(ctx, 1) || onnx::getInputShape(ctx, 1).dim_size() < 2) {
    Refuse("MaxUnpool: input I (the indices) needs a known shape of rank at least 2");
  }
}

// Gemm-6's inference reads dims 0 and 1 of A and B whatever their ranks.
void CheckGemmRanks(onnx::InferenceContext& ctx) {
  for (size_t i = 0; i < 2 && i < ctx.getNumInputs(); ++i) {
    if (!onnx::hasInputShape(ctx, i)) continue;
    const int rank = onnx::getInputShape(ctx, i).dim_size();
    if (rank != 2) {
      Refuse(std::string("Gemm: input ") + (i == 0 ? "A" : "B") + " has rank " +
             std::to_string(rank) + "; Gemm needs rank 2");
    }
  }
}

// Scan's inference takes the last num_scan_inputs inputs as the scanned ones (after Scan-8's
// sequence_lens) and indexes its axis and direction lists by them unchecked.
void CheckScan(onnx::InferenceContext& ctx, int since_version) {
  const onnx::AttributeProto* count = ctx.getAttribute("num_scan_inputs");
  const int64_t inputs = static_cast<int64_t>(ctx.getNumInputs()) - (since_version < 9 ? 1 : 0);
  if (count == nullptr || count->i() < 1 || count->i() > inputs) {
    Refuse("Scan: attribute num_scan_inputs is " +
           (count == nullptr ? std::string("missing") : std::to_string(count->i())) +
           "; it must be between 1 and the " + std::to_string(inputs) +
           " inputs after sequence_lens");
  }
  for (const char* list : {"scan_input_axes", "scan_input_directions"}) {
    const onnx::AttributeProto* a = ctx.getAttribute(list);
    if (a != nullptr && a->ints_size() != count->i()) {
      Refuse(std::string("Scan: attribute ") + list + " has " + std::to_string(a->ints_size()) +
             " values; it needs one per scanned input (" + std::to_string(count->i()) + ")");
    }
  }
  const onnx::AttributeProto* axes = ctx.getAttribute("scan_input_axes");
  if (axes == nullptr) return;
  const size_t first = ctx.getNumInputs() - static_cast<size_t>(count->i());
  for (int i = 0; i < axes->ints_size(); ++i) {
    if (!onnx::hasInputShape(ctx, first + i)) continue;
    const int64_t rank = onnx::getInputShape(ctx, first + i).dim_size();
    if (axes->ints(i) < -rank || axes->ints(i) >= rank) {
      Refuse("Scan: scan_input_axes[" + std::to_string(i) + "] is " +
             std::to_string(axes->ints(i)) + "; for an input of rank " + std::to_string(rank) +
             " it must be between " + std::to_string(-rank) + " and " + std::to_string(rank - 1));
    }
  }
}

// Runs `check` (given the schema's since-version) before every version's inference function of
// the default-domain op.
void Guard(const char* op, const std::function<void(onnx::InferenceContext&, int)>& check) {
  const onnx::OpSchema* last = nullptr;
  for (int version = 1; version <= 17; ++version) {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(op, version, "");
    if (schema == nullptr || schema == last || !schema->has_type_and_shape_inference_function())
      continue;
    last = schema;
    // The registry hands out const schemas; they live in its map for the process's lifetime, and
    // this is the one write, made before this process's first inference reads them.
    auto* writable = const_cast<onnx::OpSchema*>(schema);
    onnx::InferenceFunction inner = writable->GetTypeAndShapeInferenceFunction();
    const int since = schema->SinceVersion();
    writable->TypeAndShapeInferenceFunction([inner, check, since](onnx::InferenceContext& ctx) {
      check(ctx, since);
      inner(ctx);
    });
  }
}

void Guard(const char* op, const std::function<void(onnx::InferenceContext&)>& check) {
  Guard(op, [check](onnx::InferenceContext& ctx, int) { check(ctx); });
}

// Shape's data propagation reads its input's type unchecked, and an input has none when the
// inference of the node that makes it failed (libonnx drops that error and goes on): then it
// propagates nothing, as when the input has no shape.
void GuardShapeDataPropagation() {
  const onnx::OpSchema* last = nullptr;
  for (int version = 1; version <= 17; ++version) {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema("Shape", version, "");
    if (schema == nullptr || schema == last || !schema->has_data_propagation_function()) continue;
    last = schema;
    auto* writable = const_cast<onnx::OpSchema*>(schema);  // As in Guard.
    onnx::DataPropagationFunction inner = writable->GetDataPropagationFunction();
    writable->PartialDataPropagationFunction([inner](onnx::DataPropagationContext& ctx) {
      if (ctx.getNumInputs() > 0 && ctx.getInputType(0) != nullptr) inner(ctx);
    });
  }
}

void InstallGuards() {
  for (const ConvInputs& c : kConvInputs) {
    Guard(c.op, [c](onnx::InferenceContext& ctx) { CheckConvRanks(ctx, c); });
  }
  Guard("Gemm", CheckGemmRanks);
  Guard("LayerNormalization", CheckLayerNormAxis);
  Guard("MaxUnpool", CheckMaxUnpoolIndices);
  Guard("Scan", CheckScan);
  GuardShapeDataPropagation();
}

}  // namespace

Status CheckAttributesForShapeInference(const onnx::GraphProto& g) {
  for (const auto& n : g.node()) {
    FUSOR_RETURN_IF_ERROR(CheckNode(n));
    for (const auto& a : n.attribute()) {
      if (a.has_g()) FUSOR_RETURN_IF_ERROR(CheckAttributesForShapeInference(a.g()));
      for (const auto& sub : a.graphs())
        FUSOR_RETURN_IF_ERROR(CheckAttributesForShapeInference(sub));
    }
  }
  return Status::Ok();
}

namespace {

// `count` of the node's inputs or outputs (`what`) within the schema's [min, max].
Status CheckArity(const onnx::NodeProto& n, const std::string& op, int64_t opset, const char* what,
                  const char* verb, int count, int min, int max) {
  if (count >= min && count <= max) return Status::Ok();
  return Status::InvalidArgument(Who(n) + " has " + std::to_string(count) + " " + what + "; " + op +
                                 " (opset " + std::to_string(opset) + ") " + verb + " " +
                                 std::to_string(min) + " to " + std::to_string(max));
}

Status CheckCounts(const onnx::NodeProto& n, const onnx::OpSchema& schema, int64_t opset) {
  const std::string op = n.op_type() + "-" + std::to_string(schema.SinceVersion());
  const int inputs = n.input_size();
  FUSOR_RETURN_IF_ERROR(
      CheckArity(n, op, opset, "inputs", "takes", inputs, schema.min_input(), schema.max_input()));
  FUSOR_RETURN_IF_ERROR(CheckArity(n, op, opset, "outputs", "has", n.output_size(),
                                   schema.min_output(), schema.max_output()));
  const auto& formal = schema.inputs();
  for (int i = 0; i < inputs && !formal.empty(); ++i) {
    const auto& f = formal[std::min<size_t>(i, formal.size() - 1)];
    if (n.input(i).empty() && f.GetOption() == onnx::OpSchema::Single) {
      return Status::InvalidArgument(Who(n) + ": input " + std::to_string(i) + " (" + f.GetName() +
                                     ") of " + op + " is required but empty");
    }
  }
  return Status::Ok();
}

Status CheckGraphCounts(const onnx::GraphProto& g, int64_t opset) {
  for (const auto& n : g.node()) {
    bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
    const onnx::OpSchema* schema =
        default_domain ? onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset), "")
                       : nullptr;
    if (schema != nullptr) FUSOR_RETURN_IF_ERROR(CheckCounts(n, *schema, opset));
    for (const auto& a : n.attribute()) {
      if (a.has_g()) FUSOR_RETURN_IF_ERROR(CheckGraphCounts(a.g(), opset));
      for (const auto& sub : a.graphs()) FUSOR_RETURN_IF_ERROR(CheckGraphCounts(sub, opset));
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckInputCounts(const onnx::ModelProto& model) {
  for (const auto& op : model.opset_import()) {
    if (!op.domain().empty() && op.domain() != "ai.onnx") continue;
    return CheckGraphCounts(model.graph(), op.version());
  }
  return Status::Ok();
}

void GuardShapeInference() {
  static std::once_flag once;
  std::call_once(once, InstallGuards);
}

}  // namespace fusor
