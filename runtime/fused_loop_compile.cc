// Compiling a fused loop (runtime/fused_loop.h): each node of the group becomes a value of its
// kind (fused_loop_internal.h), with the affine maps through which it reads its inputs, and the
// lowering's single-pass chains are taken into the values.
#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <variant>

#include "graph/node_attrs.h"
#include "graph/op_registry.h"
#include "lowering/loop_lowering.h"
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
Status TakeChains(const Graph& g, const LoopLowering& lowered, LoopValues* values) {
  for (const auto& [t, lv] : lowered.values) {
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
  for (const auto& [t, lv] : lowered.values) {
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
                                                         {"Clip", UnaryOp::kClip}};
  v->inputs = {n.inputs[0]};
  v->maps = {BroadcastMap(g.tensor(n.inputs[0]).dims, v->dims)};
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
  u.a = static_cast<float>(FloatAttrOrDefault(n, "alpha"));
  u.b = static_cast<float>(FloatAttrOrDefault(n, "beta"));
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
    v->inputs = {n.inputs[0]};
    v->maps = {BroadcastMap(g.tensor(n.inputs[0]).dims, v->dims)};
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
  for (TensorId in : n.inputs) {
    v->inputs.push_back(in);
    v->maps.push_back(BroadcastMap(g.tensor(in).dims, v->dims));
  }
  return Status::Ok();
}

Status CompileBatchNorm(const Graph& g, const Node& n, Value* v) {
  v->kind = Value::BatchNorm{static_cast<float>(FloatAttrOrDefault(n, "epsilon"))};
  v->inputs = {n.inputs.begin(), n.inputs.begin() + 5};
  v->maps = {BroadcastMap(g.tensor(n.inputs[0]).dims, v->dims)};
  for (size_t j = 1; j < 5; ++j) v->maps.push_back(CoordMap(v->dims.size(), 1));
  return Status::Ok();
}

// Transpose, Slice, Split, Expand and a Gather of one index: one input read through the map the
// lowering gives (MappedReadOf).
Status CompileMapped(const Graph& g, const Node& n, size_t output, Value* v) {
  FUSOR_ASSIGN_OR_RETURN(Affine m, MappedReadOf(g, n, output));
  v->kind = Value::Mapped{};
  v->inputs = {n.inputs[0]};
  v->maps = {std::move(m)};
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
    Affine m;
    m.coef = RowMajorStrides(d);
    m.base = -offset * m.coef[axis];
    v->inputs.push_back(in);
    v->maps.push_back(m);
    c.offsets.push_back(offset);
    c.lens.push_back(d[axis]);
    offset += d[axis];
  }
  v->kind = std::move(c);
  return Status::Ok();
}

Status CompileGather(const Graph& g, const Node& n, Value* v) {
  const Shape& data = g.tensor(n.inputs[0]).dims;
  const Shape& ind = g.tensor(n.inputs[1]).dims;
  int64_t axis = NormalizeAxis(n.GetInt("axis", 0), data.size());
  if (data[axis] > (int64_t{1} << 24)) {
    return Status::Unimplemented(NodeLabel(n) + ": gathered axis longer than 2^24");
  }
  std::vector<int64_t> ds = RowMajorStrides(data), is = RowMajorStrides(ind);
  int64_t ri = static_cast<int64_t>(ind.size());
  Affine base, pos;
  base.coef.assign(v->dims.size(), 0);
  pos.coef.assign(v->dims.size(), 0);
  for (int64_t d = 0; d < static_cast<int64_t>(v->dims.size()); ++d) {
    if (d < axis) base.coef[d] = ds[d];
    if (d >= axis && d < axis + ri) pos.coef[d] = is[d - axis];
    if (d >= axis + ri) base.coef[d] = ds[d - ri + 1];
  }
  v->kind = Value::Gather{data[axis], ds[axis], GatherCopiesBlocks(g, n)};
  v->inputs = {n.inputs[0], n.inputs[1]};
  v->maps = {base, pos};
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
  v->inputs = {n.inputs[0]};
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
  v->inputs = {n.inputs[0]};
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
  v->inputs = {n.inputs[0]};
  v->maps = {BroadcastMap(v->dims, v->dims)};
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

// Compiles n's value as the kind the lowering names (LoopValueKindOf, lowering/loop_lowering.h).
Status CompileValue(const Graph& g, const Node& n, size_t output, const FusedLoop::Lookup& known,
                    Value* v) {
  switch (LoopValueKindOf(g, n)) {
    case LoopValueKind::kUnary:
      // A Pow by a constant 2, 0.5 or 1 (UnaryPowExponent) compiles as a binary value that
      // CompileBinary turns unary.
      if (n.op_type != "Pow") return CompileUnary(g, n, known, v);
      return CompileBinary(g, n, v);
    case LoopValueKind::kBinary:
    case LoopValueKind::kWhere:
      return CompileBinary(g, n, v);
    case LoopValueKind::kBatchNorm:
      return CompileBatchNorm(g, n, v);
    case LoopValueKind::kView:
      v->kind = Value::View{};
      v->inputs = {n.inputs[0]};
      return Status::Ok();
    case LoopValueKind::kMapped:
      return CompileMapped(g, n, output, v);
    case LoopValueKind::kConcat:
      return CompileConcat(g, n, v);
    case LoopValueKind::kGather:
      return CompileGather(g, n, v);
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

Status FusedLoop::AddNode(const Graph& g, const Node& n, const Lookup& known) {
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    const Tensor& t = g.tensor(n.outputs[o]);
    if (!IsSupportedDType(t.dtype)) {
      return Status::Unimplemented(NodeLabel(n) + ": output dtype " +
                                   std::string(DTypeName(t.dtype)) + " is not supported");
    }
    auto v = std::make_unique<Value>();
    v->dims = t.dims;
    v->is_int = !IsFloatingPoint(t.dtype);
    FUSOR_RETURN_IF_ERROR(CompileValue(g, n, o, known, v.get()));
    values_[n.outputs[o]] = std::move(v);
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<FusedLoop>> FusedLoop::Build(const Graph& g,
                                                      const std::vector<NodeId>& nodes,
                                                      const std::vector<TensorId>& outputs,
                                                      const Lookup& known, Tiles tiles) {
  std::unique_ptr<FusedLoop> loop(new FusedLoop());
  loop->outputs_ = outputs;
  for (NodeId id : nodes) FUSOR_RETURN_IF_ERROR(loop->AddNode(g, g.node(id), known));
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
    v->dims = t.dims;
    v->is_int = !IsFloatingPoint(t.dtype);
    loop->values_[in] = std::move(v);
    loop->leaves_.push_back(in);
  }
  for (TensorId t : outputs) {
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
  const LoopLowering lowered = LowerLoop(g, nodes, outputs);
  FUSOR_RETURN_IF_ERROR(TakeChains(g, lowered, &loop->values_));
  loop->streams_ = tiles == Tiles::kLongerWhenStreaming && lowered.streams;
  return loop;
}

int FusedLoop::chained_values() const {
  int n = 0;
  for (const auto& [t, v] : values_) n += v->in_chain ? 1 : 0;
  return n;
}

LoopValue FusedLoop::Lowered(TensorId t) const {
  LoopValue out;
  const Value& v = *values_.at(t);
  static constexpr LoopValueKind kKinds[] = {
      LoopValueKind::kOther,  LoopValueKind::kUnary,     LoopValueKind::kBinary,
      LoopValueKind::kWhere,  LoopValueKind::kBatchNorm, LoopValueKind::kView,
      LoopValueKind::kMapped, LoopValueKind::kConcat,    LoopValueKind::kGather,
      LoopValueKind::kPad,    LoopValueKind::kTrilu,     LoopValueKind::kResize};
  static_assert(std::size(kKinds) == std::variant_size_v<Value::Kind>);
  out.kind = kKinds[v.kind.index()];
  out.chain_input = v.chain_input;
  out.saved_input = v.saved_input;
  out.chained = v.in_chain;
  return out;
}

}  // namespace fusor
