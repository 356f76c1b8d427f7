// Compiling a fused loop (runtime/fused_loop.h) from its program (lowering/loop_program.h): each
// step becomes a value of its kind (fused_loop_internal.h) reading the step's operands through the
// step's maps, with the kernel parameters of its node (the unary op, clip bounds, a Concat's parts,
// pads, resize tables); the program's single-pass chains are taken into the values.
#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <variant>

#include "graph/node_attrs.h"
#include "graph/op_registry.h"
#include "lowering/loop_program.h"
#include "runtime/affine_map.h"
#include "runtime/fused_loop.h"
#include "runtime/fused_loop_internal.h"
#include "runtime/op_params.h"

namespace fusor {
namespace {

using Value = FusedLoop::Value;

// Whether the compiled value v can be a step of a chain: float arithmetic the chain kernel has
// (Log, integer casts, Pow and truncating division stay tile kernels). The lowering decides which
// values chain; this is what the compiled loop can run, checked against it.
bool Chains(const Value& v) {
  if (v.is_int) return false;
  if (const auto* u = std::get_if<Value::Unary>(&v.kind)) {
    return u->op != UnaryOp::kLog && u->op != UnaryOp::kTrunc && u->op != UnaryOp::kBool;
  }
  const auto* b = std::get_if<Value::Binary>(&v.kind);
  return b != nullptr && b->op != BinaryOp::kPow && b->op != BinaryOp::kDivTrunc;
}

// Whether input `slot` of v is one a chain step reads in registers: an input v has, at v's own
// elements.
bool ReadsInStep(const Value& v, int slot) {
  return slot < 0 || (static_cast<size_t>(slot) < v.inputs.size() && v.maps[slot].identity);
}

// Takes the single-pass chains of the lowering (lowering/loop_lowering.h) into the compiled values:
// each head gets its values from the first to itself. A chain the compiled values cannot run is
// an error naming the value: the lowering and the compiler disagree.
Status TakeChains(const Graph& g, const LoopProgram& program, LoopValues* values) {
  for (const LoopStep& step : program.steps) {
    const TensorId t = step.tensor;
    const LoopValue& lv = step.value;
    if (lv.chain_head == kNoId) continue;
    Value& v = *values->at(t);
    if (!Chains(v) || !ReadsInStep(v, lv.chain_input) || !ReadsInStep(v, lv.saved_input)) {
      return Status::Internal("fused loop: the lowering chains '" + g.tensor(t).name +
                              "', which the compiled loop cannot run as a chain step");
    }
    v.chain_input = lv.chain_input;
    v.saved_input = lv.saved_input;
    v.in_chain = lv.chained;
  }
  for (const LoopStep& step : program.steps) {
    const TensorId t = step.tensor;
    const LoopValue& lv = step.value;
    if (lv.chain_head != t) continue;
    Value& head = *values->at(t);
    for (const Value* w = &head;; w = values->at(w->inputs[w->chain_input]).get()) {
      head.chain.push_back(w);
      if (w->chain_input < 0) break;
    }
    std::reverse(head.chain.begin(), head.chain.end());
    head.chain_source = lv.chain_source;
    if (head.chain.size() > static_cast<size_t>(kMaxChain) ||
        static_cast<size_t>(head.chain_source) >= head.chain[0]->inputs.size()) {
      return Status::Internal("fused loop: the lowering's chain ending at '" + g.tensor(t).name +
                              "' does not fit the chain kernel");
    }
  }
  return Status::Ok();
}

Status CompileUnary(const Graph& g, const Node& n, const FusedLoop::Lookup& known, Value* v) {
  static const std::pair<const char*, UnaryOp> kOps[] = {{"Relu", UnaryOp::kRelu},
                                                         {"LeakyRelu", UnaryOp::kLeakyRelu},
                                                         {"Sigmoid", UnaryOp::kSigmoid},
                                                         {"Tanh", UnaryOp::kTanh},
                                                         {"Exp", UnaryOp::kExp},
                                                         {"Log", UnaryOp::kLog},
                                                         {"Sqrt", UnaryOp::kSqrt},
                                                         {"Erf", UnaryOp::kErf},
                                                         {"HardSigmoid", UnaryOp::kHardSigmoid},
                                                         {"HardSwish", UnaryOp::kHardSwish},
                                                         {"Shrink", UnaryOp::kShrink},
                                                         {"Clip", UnaryOp::kClip}};
  Value::Unary u;
  if (n.op_type == "Cast") {
    const DType to = g.tensor(n.outputs[0]).dtype;
    if (to == DType::kFloat16 || to == DType::kBFloat16) {
      // The loop has no rounding to a narrow float; the reference kernel's Cast rounds.
      return Status::Unimplemented(NodeLabel(n) + ": Cast to " + std::string(DTypeName(to)) +
                                   " rounds, which a fused loop does not");
    }
    bool to_int = !IsFloatingPoint(g.tensor(n.outputs[0]).dtype);
    u.op = g.tensor(n.outputs[0]).dtype == DType::kBool ? UnaryOp::kBool
           : to_int                                     ? UnaryOp::kTrunc
                                                        : UnaryOp::kCopy;
    v->kind = u;
    return Status::Ok();
  }
  const auto* kernel = std::find_if(std::begin(kOps), std::end(kOps),
                                    [&](const auto& k) { return n.op_type == k.first; });
  if (kernel == std::end(kOps)) {
    // graph/op_registry lists the op as unary elementwise, but no loop kernel computes it.
    return Status::Unimplemented(NodeLabel(n) + ": unary op " + n.op_type +
                                 " has no fused-loop kernel");
  }
  u.op = kernel->second;
  const bool shrink = n.op_type == "Shrink";
  u.a = static_cast<float>(FloatAttrOrDefault(n, shrink ? "lambd" : "alpha"));
  u.b = static_cast<float>(FloatAttrOrDefault(n, shrink ? "bias" : "beta"));
  if (n.op_type == "Clip") {
    FUSOR_ASSIGN_OR_RETURN(auto bounds, ClipBounds(g, n, known));
    u.a = bounds.first;
    u.b = bounds.second;
  }
  v->kind = u;
  return Status::Ok();
}

Status CompileBinary(const Graph& g, const Node& n, Value* v) {
  static const std::pair<const char*, BinaryOp> kOps[] = {{"Add", BinaryOp::kAdd},
                                                          {"Sub", BinaryOp::kSub},
                                                          {"Mul", BinaryOp::kMul},
                                                          {"Div", BinaryOp::kDiv},
                                                          {"Pow", BinaryOp::kPow}};
  if (std::optional<double> exponent = UnaryPowExponent(g, n)) {
    // x^2, sqrt and identity are the common exponents; powf does not vectorise.
    v->kind = Value::Unary{*exponent == 2.0   ? UnaryOp::kSquare
                           : *exponent == 0.5 ? UnaryOp::kSqrt
                                              : UnaryOp::kCopy};
    return Status::Ok();
  }
  Value::Binary b;
  for (const auto& [name, op] : kOps) {
    if (n.op_type == name) b.op = op;
  }
  if (b.op == BinaryOp::kDiv && v->is_int) b.op = BinaryOp::kDivTrunc;
  if (n.op_type == "Where") {
    v->kind = Value::Where{};
  } else {
    v->kind = b;
  }
  return Status::Ok();
}

Status CompileConcat(const Graph& g, const Node& n, Value* v) {
  int64_t axis = NormalizeAxis(n.GetInt("axis", 0), v->dims.size());
  Value::Concat c;
  c.axis_coord = CoordMap(v->dims.size(), axis);
  c.axis_len = v->dims[axis];
  c.axis_stride = RowMajorStrides(v->dims)[axis];
  int64_t offset = 0;
  for (TensorId in : n.inputs) {
    const Shape& d = g.tensor(in).dims;
    c.offsets.push_back(offset);
    c.lens.push_back(d[axis]);
    offset += d[axis];
  }
  v->kind = std::move(c);
  return Status::Ok();
}

Status CompileGather(const Graph& g, const LoopStep& step, Value* v) {
  const Node& n = g.node(step.node);
  const Shape& data = g.tensor(n.inputs[0]).dims;
  int64_t axis = NormalizeAxis(n.GetInt("axis", 0), data.size());
  if (data[axis] > (int64_t{1} << 24)) {
    return Status::Unimplemented(NodeLabel(n) + ": gathered axis longer than 2^24");
  }
  v->kind = Value::Gather{data[axis], RowMajorStrides(data)[axis], step.copies_blocks};
  return Status::Ok();
}

// One coordinate extractor per dim of an index space of `rank` dims.
std::vector<Affine> CoordMaps(size_t rank) {
  std::vector<Affine> out;
  for (size_t d = 0; d < rank; ++d) out.push_back(CoordMap(rank, d));
  return out;
}

Status CompilePad(const Graph& g, const Node& n, const FusedLoop::Lookup& known, Value* v) {
  FUSOR_ASSIGN_OR_RETURN(PadParams p, PadOf(g, n, known));
  Value::Pad pad;
  pad.mode = p.mode;
  if (p.pads_input != kNoId) {
    pad.pads_slot = static_cast<int>(v->inputs.size());
    v->inputs.push_back(p.pads_input);
  }
  if (p.value_input != kNoId) {
    pad.value_slot = static_cast<int>(v->inputs.size());
    v->inputs.push_back(p.value_input);
  }
  pad.begin = p.begin;
  pad.in_dims = g.tensor(n.inputs[0]).dims;
  pad.value = p.value;
  pad.coords = CoordMaps(v->dims.size());
  v->kind = std::move(pad);
  return Status::Ok();
}

Status CompileResize(const Graph& g, const Node& n, Value* v) {
  FUSOR_ASSIGN_OR_RETURN(ResizeParams p, ResizeOf(g, n));
  Value::Resize resize;
  resize.in_dims = p.in;
  resize.coords = CoordMaps(v->dims.size());
  for (size_t d = 0; d < p.out.size(); ++d) {
    Value::ResizeTable t;
    for (int64_t x = 0; x < p.out[d]; ++x) {
      ResizeTap tap = ResizeTapOf(p, d, x);
      t.i0.push_back(tap.i0);
      t.i1.push_back(tap.i1);
      t.w.push_back(static_cast<float>(tap.w));
      t.blends = t.blends || tap.w != 0;
    }
    resize.tables.push_back(std::move(t));
  }
  v->kind = std::move(resize);
  return Status::Ok();
}

Status CompileTrilu(const Graph& g, const Node& n, Value* v) {
  size_t r = v->dims.size();
  Value::Trilu trilu;
  trilu.row = CoordMap(r, r - 2);
  trilu.col = CoordMap(r, r - 1);
  trilu.upper = n.GetInt("upper", 1) != 0;
  if (n.input(1) != kNoId) {
    FUSOR_ASSIGN_OR_RETURN(std::vector<int64_t> k, ConstantInts(g, n, 1));
    trilu.k = k.empty() ? 0 : k[0];
  }
  v->kind = std::move(trilu);
  return Status::Ok();
}

// Compiles step's value as the kind the program names: its operands and maps as the program
// gives them, its kernel's parameters from its node.
Status CompileValue(const Graph& g, const LoopStep& step, const FusedLoop::Lookup& known,
                    Value* v) {
  FUSOR_RETURN_IF_ERROR(step.unbuildable);
  for (const LoopOperand& o : step.operands) {
    v->inputs.push_back(o.tensor);
    v->maps.push_back(o.map);
    v->reads.push_back(o.read);
  }
  const Node& n = g.node(step.node);
  switch (step.value.kind) {
    case LoopValueKind::kUnary:
      // A Pow by a constant 2, 0.5 or 1 (UnaryPowExponent) compiles as a binary value that
      // CompileBinary turns unary.
      if (n.op_type != "Pow") return CompileUnary(g, n, known, v);
      return CompileBinary(g, n, v);
    case LoopValueKind::kBinary:
    case LoopValueKind::kWhere:
      return CompileBinary(g, n, v);
    case LoopValueKind::kBatchNorm:
      v->kind = Value::BatchNorm{static_cast<float>(FloatAttrOrDefault(n, "epsilon"))};
      return Status::Ok();
    case LoopValueKind::kView:
      v->kind = Value::View{};
      return Status::Ok();
    case LoopValueKind::kMapped:
      v->kind = Value::Mapped{};
      return Status::Ok();
    case LoopValueKind::kConcat:
      return CompileConcat(g, n, v);
    case LoopValueKind::kGather:
      return CompileGather(g, step, v);
    case LoopValueKind::kPad:
      return CompilePad(g, n, known, v);
    case LoopValueKind::kTrilu:
      return CompileTrilu(g, n, v);
    case LoopValueKind::kResize:
      return CompileResize(g, n, v);
    case LoopValueKind::kOther:
      break;
  }
  return Status::Unimplemented(NodeLabel(n) + ": op cannot run in a fused loop");
}

}  // namespace

FusedLoop::~FusedLoop() = default;

Status FusedLoop::AddStep(const Graph& g, const LoopStep& step, const Lookup& known) {
  const Tensor& t = g.tensor(step.tensor);
  if (!IsSupportedDType(t.dtype)) {
    return Status::Unimplemented(NodeLabel(g.node(step.node)) + ": output dtype " +
                                 std::string(DTypeName(t.dtype)) + " is not supported");
  }
  auto v = std::make_unique<Value>();
  v->tensor = step.tensor;
  v->dims = t.dims;
  v->is_int = !IsFloatingPoint(t.dtype);
  FUSOR_RETURN_IF_ERROR(CompileValue(g, step, known, v.get()));
  values_[step.tensor] = std::move(v);
  return Status::Ok();
}

StatusOr<std::unique_ptr<FusedLoop>> FusedLoop::Build(const Graph& g,
                                                      const std::vector<NodeId>& nodes,
                                                      const std::vector<TensorId>& outputs,
                                                      const Lookup& known, Tiles tiles) {
  return Build(g, LowerLoopProgram(g, nodes, outputs), known, tiles);
}

StatusOr<std::unique_ptr<FusedLoop>> FusedLoop::Build(const Graph& g, const LoopProgram& program,
                                                      const Lookup& known, Tiles tiles) {
  std::unique_ptr<FusedLoop> loop(new FusedLoop());
  loop->outputs_ = program.outputs;
  for (const LoopStep& step : program.steps) {
    FUSOR_RETURN_IF_ERROR(loop->AddStep(g, step, known));
  }
  // Leaves are the tensors the compiled values read, not every node input: parameters decoded at
  // Build (Clip bounds, pads, Resize scales) are not bound or read as the loop runs.
  std::vector<TensorId> read;
  for (const auto& [t, v] : loop->values_)
    read.insert(read.end(), v->inputs.begin(), v->inputs.end());
  std::sort(read.begin(), read.end());
  read.erase(std::unique(read.begin(), read.end()), read.end());
  for (TensorId in : read) {
    if (in == kNoId || loop->values_.count(in)) continue;
    const Tensor& t = g.tensor(in);
    auto v = std::make_unique<Value>();
    v->tensor = in;
    v->dims = t.dims;
    v->is_int = !IsFloatingPoint(t.dtype);
    loop->values_[in] = std::move(v);
    loop->leaves_.push_back(in);
  }
  for (TensorId t : program.outputs) {
    if (!loop->values_.count(t) || loop->values_.at(t)->Is<Value::Leaf>()) {
      return Status::InvalidArgument("fused loop output '" + g.tensor(t).name +
                                     "' is not computed by the loop's nodes");
    }
    loop->values_.at(t)->output = true;
  }
  for (const auto& [t, v] : loop->values_) {
    for (TensorId in : v->inputs) {
      if (in != kNoId) ++loop->values_.at(in)->uses;
    }
  }
  FUSOR_RETURN_IF_ERROR(TakeChains(g, program, &loop->values_));
  loop->streams_ = tiles == Tiles::kLongerWhenStreaming && program.streams;
  return loop;
}

int FusedLoop::chained_values() const {
  int n = 0;
  for (const auto& [t, v] : values_) n += v->in_chain ? 1 : 0;
  return n;
}

}  // namespace fusor
