#include "lowering/loop_program.h"

#include <algorithm>

#include "graph/dtype.h"
#include "graph/node_attrs.h"
#include "graph/op_registry.h"

namespace fusor {
namespace {

LoopOperand OperandThrough(TensorId t, Affine map, OperandRead read) {
  LoopOperand o;
  o.tensor = t;
  o.map = std::move(map);
  o.read = read;
  return o;
}

// The operands of an arithmetic, mapped, batch-norm, Trilu or view step, each with the map the
// compiled value reads it through; their reads are set by SetReads.
std::vector<LoopOperand> MappedOperands(const Graph& g, const Node& n, size_t output,
                                        LoopValueKind kind, Status* unbuildable) {
  const Shape& out = g.tensor(n.outputs[output]).dims;
  auto broadcast = [&](TensorId t) {
    return OperandThrough(t, BroadcastMap(g.tensor(t).dims, out), OperandRead::kMapped);
  };
  std::vector<LoopOperand> ops;
  switch (kind) {
    case LoopValueKind::kView: {
      Affine same;
      same.identity = true;
      ops.push_back(OperandThrough(n.inputs[0], same, OperandRead::kSame));
      break;
    }
    case LoopValueKind::kUnary:
    case LoopValueKind::kTrilu:
      ops.push_back(broadcast(n.inputs[0]));
      break;
    case LoopValueKind::kBinary:
    case LoopValueKind::kWhere:
      for (TensorId t : n.inputs) ops.push_back(broadcast(t));
      break;
    case LoopValueKind::kBatchNorm:
      // x, then scale, bias, mean and var per channel (dim 1).
      ops.push_back(broadcast(n.inputs[0]));
      for (size_t j = 1; j < 5; ++j) {
        ops.push_back(OperandThrough(n.inputs[j], CoordMap(out.size(), 1), OperandRead::kMapped));
      }
      break;
    case LoopValueKind::kMapped: {
      StatusOr<Affine> m = MappedReadOf(g, n, output);
      if (!m.ok()) *unbuildable = m.status();
      ops.push_back(OperandThrough(n.inputs[0], m.ok() ? *m : Affine{}, OperandRead::kMapped));
      break;
    }
    default:
      break;
  }
  return ops;
}

// Concat's inputs: each read in place through its part of the axis.
std::vector<LoopOperand> ConcatOperands(const Graph& g, const Node& n) {
  const Shape& out = g.tensor(n.outputs[0]).dims;
  const int64_t axis = NormalizeAxis(n.GetInt("axis", 0), out.size());
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out[d];
  std::vector<LoopOperand> ops;
  int64_t offset = 0;
  for (TensorId in : n.inputs) {
    const Shape& d = g.tensor(in).dims;
    Affine m;
    m.coef = RowMajorStrides(d);
    m.base = -offset * m.coef[axis];
    LoopOperand o = OperandThrough(in, std::move(m), OperandRead::kConcatPart);
    o.runs = {std::max<int64_t>(g.tensor(in).num_elements() / std::max<int64_t>(outer, 1), 1), 1};
    ops.push_back(std::move(o));
    offset += d[axis];
  }
  return ops;
}

// Gather's data (read at base + index * its axis stride) and indices (at their position).
std::vector<LoopOperand> GatherOperands(const Graph& g, const Node& n) {
  const Shape& data = g.tensor(n.inputs[0]).dims;
  const Shape& ind = g.tensor(n.inputs[1]).dims;
  const Shape& out = g.tensor(n.outputs[0]).dims;
  const int64_t axis = NormalizeAxis(n.GetInt("axis", 0), data.size());
  const std::vector<int64_t> ds = RowMajorStrides(data), is = RowMajorStrides(ind);
  const int64_t ri = static_cast<int64_t>(ind.size());
  Affine base, pos;
  base.coef.assign(out.size(), 0);
  pos.coef.assign(out.size(), 0);
  for (int64_t d = 0; d < static_cast<int64_t>(out.size()); ++d) {
    if (d < axis) base.coef[d] = ds[d];
    if (d >= axis && d < axis + ri) pos.coef[d] = is[d - axis];
    if (d >= axis + ri) base.coef[d] = ds[d - ri + 1];
  }
  return {OperandThrough(n.inputs[0], std::move(base), OperandRead::kGatherData),
          OperandThrough(n.inputs[1], std::move(pos), OperandRead::kGatherIndices)};
}

// The corners a Resize blends per element: 2 per dim that changes size when linear.
double ResizeCorners(const Graph& g, const Node& n) {
  const Shape& in = g.tensor(n.inputs[0]).dims;
  const Shape& out = g.tensor(n.outputs[0]).dims;
  double corners = 1;
  if (n.GetString("mode", "nearest") != "linear") return corners;
  for (size_t d = 0; d < in.size() && d < out.size(); ++d) corners *= in[d] != out[d] ? 2 : 1;
  return corners;
}

// The step of output `output` of `n`, its operands and their maps; reads of mapped operands are
// set afterwards (SetReads), once every step is known.
LoopStep StepOf(const Graph& g, NodeId id, size_t output, const LoopValue& value) {
  const Node& n = g.node(id);
  LoopStep s;
  s.tensor = n.outputs[output];
  s.node = id;
  s.output = output;
  s.value = value;
  s.owns_buffer = FillsOwnBuffer(value.kind);
  switch (value.kind) {
    case LoopValueKind::kConcat:
      s.operands = ConcatOperands(g, n);
      break;
    case LoopValueKind::kGather:
      s.operands = GatherOperands(g, n);
      s.copies_blocks = GatherCopiesBlocks(g, n);
      s.block = GatherBlock(g, n);
      break;
    case LoopValueKind::kPad:
      s.operands = {OperandThrough(n.inputs[0], Affine{}, OperandRead::kPadded)};
      break;
    case LoopValueKind::kResize:
      s.operands = {OperandThrough(n.inputs[0], Affine{}, OperandRead::kResized)};
      s.corners = ResizeCorners(g, n);
      break;
    default:
      s.operands = MappedOperands(g, n, output, value.kind, &s.unbuildable);
      break;
  }
  return s;
}

// How step s reads each operand it reads through a map: one element; at its own indices; a
// binary step's broadcast operand streamed (the runtime's StreamedOperand); else through the map.
void SetReads(const Graph& g, const LoopProgram& p, LoopStep* s) {
  const Shape& out = g.tensor(s->tensor).dims;
  auto one = [&](const LoopOperand& o) { return g.tensor(o.tensor).num_elements() == 1; };
  const bool binary = s->value.kind == LoopValueKind::kBinary && s->operands.size() == 2 &&
                      !out.empty() && std::none_of(s->operands.begin(), s->operands.end(), one);
  for (LoopOperand& o : s->operands) {
    const TensorId src = p.ViewSource(o.tensor);
    o.computed = p.Find(src) != nullptr;
    if (o.read != OperandRead::kMapped && o.read != OperandRead::kConcatPart) continue;
    if (o.read == OperandRead::kMapped) {
      o.runs = out.empty() || !s->unbuildable.ok() ? RunShape{} : RunShapeOf(o.map, out);
      if (one(o)) {
        o.read = OperandRead::kScalar;
      } else if (o.map.identity) {
        o.read = OperandRead::kSame;
      } else if (binary && IsFloatingPoint(g.tensor(src).dtype)) {
        o.read = OperandRead::kStreamed;
      }
    }
  }
}

}  // namespace

const LoopStep* LoopProgram::Find(TensorId t) const {
  auto it = index.find(t);
  return it == index.end() ? nullptr : &steps[it->second];
}

TensorId LoopProgram::ViewSource(TensorId t) const {
  for (const LoopStep* s = Find(t); s != nullptr && s->value.kind == LoopValueKind::kView;
       s = Find(t)) {
    t = s->operands[0].tensor;
  }
  return t;
}

LoopProgram LowerLoopProgram(const Graph& g, const std::vector<NodeId>& nodes,
                             const std::vector<TensorId>& outputs) {
  const LoopLowering lowered = LowerLoop(g, nodes, outputs);
  LoopProgram p;
  p.outputs = outputs;
  p.streams = lowered.streams;
  p.evaluated_once = lowered.evaluated_once;
  for (NodeId id : nodes) {
    const Node& n = g.node(id);
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      p.index[n.outputs[o]] = p.steps.size();
      p.steps.push_back(StepOf(g, id, o, lowered.values.at(n.outputs[o])));
      p.steps.back().evaluated_once = lowered.evaluated_once.count(n.outputs[o]) > 0;
    }
  }
  for (LoopStep& s : p.steps) SetReads(g, p, &s);
  return p;
}

}  // namespace fusor
