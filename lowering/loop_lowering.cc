#include "lowering/loop_lowering.h"

#include <algorithm>
#include <unordered_set>

#include "graph/dtype.h"
#include "graph/node_attrs.h"
#include "graph/op_registry.h"
#include "lowering/threading.h"

namespace fusor {
namespace {

// Whether node n is a step the single-pass chains take: float unary and binary arithmetic but
// Log, integer casts, truncating division and a Pow whose exponent is not a constant 2, 0.5 or 1
// (those the loop compiles as unary ops).
bool ChainsNode(const Graph& g, const Node& n) {
  if (!IsFloatingPoint(g.tensor(n.outputs[0]).dtype)) return false;
  if (n.op_type == "Pow") return UnaryPowExponent(g, n).has_value();
  if (n.op_type == "Log") return false;
  return IsUnaryElementwise(n.op_type) || IsBinaryArithmetic(n.op_type);
}

// The input of a chain's first node the chain walks: its one input, or the binary operand read at
// the node's own elements (the second when the first is a scalar or a broadcast and the second is
// not).
int ChainSource(const Graph& g, const Node& n) {
  if (n.inputs.size() < 2) return 0;
  const Shape& out = g.tensor(n.outputs[0]).dims;
  auto same = [&](size_t j) {
    const Tensor& t = g.tensor(n.inputs[j]);
    return t.dims == out || t.num_elements() == g.tensor(n.outputs[0]).num_elements();
  };
  const Tensor& a = g.tensor(n.inputs[0]);
  const bool scalar = a.dims != out && a.num_elements() == 1;
  return scalar || (!same(0) && same(1)) ? 1 : 0;
}

// The loop's single-pass chains (see the header): sets chain_input, saved_input, chained,
// chain_head and chain_source of `values`.
class ChainMarker {
 public:
  ChainMarker(const Graph& g, const std::vector<NodeId>& nodes,
              const std::unordered_set<TensorId>& outputs,
              std::unordered_map<TensorId, LoopValue>* values)
      : g_(g), nodes_(nodes), outputs_(outputs), values_(*values) {
    for (NodeId id : nodes) {
      const Node& n = g.node(id);
      producer_[n.outputs[0]] = &n;
      for (TensorId t : n.inputs) {
        if (t != kNoId) ++uses_[t];
      }
    }
  }

  void Mark() {
    Link();
    Cut();
    JoinSources();
    for (const auto& [t, head] : head_of_) {
      LoopValue& v = values_.at(t);
      v.chain_head = head;
      v.chained = t != head;
      auto l = link_.find(t);
      if (l != link_.end() && head_of_.count(l->second.first) &&
          head_of_.at(l->second.first) == head) {
        v.chain_input = l->second.second;
      }
    }
    for (const auto& [t, head] : head_of_) {
      if (values_.at(t).chain_input < 0) {
        values_.at(head).chain_source = ChainSource(g_, *producer_.at(t));
      }
    }
  }

 private:
  // Each chainable node links to the first of its value inputs that is computed by a chainable
  // node of the loop, read once by the loop and not an output, at the same elements.
  void Link() {
    for (NodeId id : nodes_) {
      const Node& n = g_.node(id);
      if (!ChainsNode(g_, n)) continue;
      const bool binary = values_.at(n.outputs[0]).kind == LoopValueKind::kBinary;
      for (size_t j = 0; j < (binary ? n.inputs.size() : 1); ++j) {
        const TensorId u = n.inputs[j];
        auto p = producer_.find(u);
        if (p == producer_.end() || !ChainsNode(g_, *p->second) || uses_[u] != 1 ||
            outputs_.count(u) ||
            g_.tensor(u).num_elements() != g_.tensor(n.outputs[0]).num_elements()) {
          continue;
        }
        link_[n.outputs[0]] = {u, static_cast<int>(j)};
        linked_.insert(u);
        break;
      }
    }
  }

  // Chains of links, cut every kMaxChain values; a cut can leave a chain of one value: not a chain.
  void Cut() {
    for (const auto& [top, first] : link_) {
      if (linked_.count(top)) continue;
      TensorId head = top;
      int length = 1;
      for (TensorId w = top;; ++length) {
        if (length > kMaxChain) {  // w heads a chain of its own.
          head = w;
          length = 1;
        }
        head_of_[w] = head;
        auto next = link_.find(w);
        if (next == link_.end()) break;
        w = next->second.first;
      }
    }
    std::unordered_map<TensorId, int> size;
    for (const auto& [t, head] : head_of_) ++size[head];
    std::erase_if(head_of_, [&](const auto& entry) { return size[entry.second] < 2; });
  }

  // A chain's source read only by the chain's own nodes, at the same elements, joins it as its
  // first value (kept in registers for the later reads), when it is in no chain and the chain has
  // room. GELU's x, read by the Div that starts the Erf chain and by the Mul that ends it, would
  // otherwise be a memory-bound pass of its own before the chain: BERT's GELU with its bias Add
  // took 299 us a run on one thread against 227 for the same loop without the second read.
  void JoinSources() {
    std::unordered_map<TensorId, std::vector<TensorId>> members;
    for (const auto& [t, head] : head_of_) members[head].push_back(t);
    auto elements = [&](TensorId t) { return g_.tensor(t).num_elements(); };
    for (const auto& [head, chain] : members) {
      if (chain.size() >= kMaxChain) continue;
      TensorId first = kNoId;  // The value whose link leaves the chain, or that has none.
      for (TensorId v : chain) {
        auto l = link_.find(v);
        auto lh = l == link_.end() ? head_of_.end() : head_of_.find(l->second.first);
        if (lh == head_of_.end() || lh->second != head) first = v;
      }
      const int src = ChainSource(g_, *producer_.at(first));
      const TensorId u = producer_.at(first)->inputs[src];
      auto p = producer_.find(u);
      if (p == producer_.end() || !ChainsNode(g_, *p->second) || outputs_.count(u) ||
          head_of_.count(u) || link_.count(u)) {
        continue;
      }
      int reads = 0;
      bool same_elements = true;
      for (TensorId v : chain) {
        for (TensorId in : producer_.at(v)->inputs) {
          if (in != u) continue;
          ++reads;
          same_elements = same_elements && elements(u) == elements(v);
        }
      }
      if (reads != uses_[u] || !same_elements) continue;
      head_of_[u] = head;
      link_[first] = {u, src};
      for (TensorId v : chain) {
        const Node& n = *producer_.at(v);
        const bool binary = values_.at(v).kind == LoopValueKind::kBinary;
        for (size_t j = 0; j < (binary ? n.inputs.size() : 1); ++j) {
          if (n.inputs[j] == u && !(v == first && static_cast<int>(j) == src)) {
            values_.at(v).saved_input = static_cast<int>(j);
          }
        }
      }
    }
  }

  const Graph& g_;
  const std::vector<NodeId>& nodes_;
  const std::unordered_set<TensorId>& outputs_;
  std::unordered_map<TensorId, LoopValue>& values_;
  std::unordered_map<TensorId, int> uses_;
  std::unordered_map<TensorId, const Node*> producer_;
  // Value -> the input its chain continues through, and that input's slot.
  std::unordered_map<TensorId, std::pair<TensorId, int>> link_;
  std::unordered_set<TensorId> linked_;
  std::unordered_map<TensorId, TensorId> head_of_;  // Values of chains -> their head.
};

// How a unary or binary node of the loop reads input j over a contiguous range of its elements:
// a float leaf (or views of one) at the same elements in place, a scalar, a broadcast streamed
// run by run (a leaf, or a computed value of at most a tile, hoisted), or through a tile.
enum class Operand : uint8_t { kInPlace, kScalar, kStreamed, kTile };

// A Transpose that only moves dims of size 1 reads its input in order: the loop hands it on as
// a view.
bool MovesOnlyUnitDims(const Graph& g, const Node& n) {
  if (n.op_type != "Transpose") return false;
  const Shape& in = g.tensor(n.inputs[0]).dims;
  std::vector<int64_t> perm = n.GetInts("perm");
  if (perm.empty()) {
    for (size_t d = in.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  }
  int64_t last = -1;
  for (int64_t d : perm) {
    if (d < 0 || d >= static_cast<int64_t>(in.size())) return false;
    if (in[d] == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

// Whether the loop's tiles take no buffers (see the header).
class StreamRule {
 public:
  StreamRule(const Graph& g, const std::vector<NodeId>& nodes,
             const std::unordered_set<TensorId>& outputs,
             const std::unordered_map<TensorId, LoopValue>& values)
      : g_(g), outputs_(outputs), values_(values) {
    for (NodeId id : nodes) {
      const Node& n = g.node(id);
      producer_[n.outputs[0]] = &n;
    }
    for (const auto& [t, n] : producer_) {
      for (size_t j = 0; j < Inputs(*n); ++j) readers_[n->inputs[j]].push_back({n, j});
    }
  }

  bool Streams() {
    FindEvaluatedOnce();
    for (const auto& [t, n] : producer_) {
      const LoopValueKind kind = Kind(t);
      for (size_t j = 0; j < Inputs(*n); ++j) {
        const TensorId u = n->inputs[j];
        if (!Internal(u) && !IsFloatingPoint(g_.tensor(u).dtype)) return false;
      }
      if (kind == LoopValueKind::kView || once_.count(t)) continue;
      const bool arithmetic = kind == LoopValueKind::kUnary || kind == LoopValueKind::kBinary;
      if (!arithmetic || !IsFloatingPoint(g_.tensor(t).dtype)) return false;
      if (!values_.at(t).chained && !IntoOutput(t)) return false;
      if (!OperandsInPlace(*n, kind)) return false;
    }
    return true;
  }
  // Found by Streams.
  const std::unordered_set<TensorId>& evaluated_once() const { return once_; }

 private:
  LoopValueKind Kind(TensorId t) const { return values_.at(t).kind; }
  size_t Inputs(const Node& n) const {
    switch (Kind(n.outputs[0])) {
      case LoopValueKind::kBinary:
        return 2;
      case LoopValueKind::kView:
      case LoopValueKind::kUnary:
        return 1;
      default:
        return n.inputs.size();
    }
  }
  bool Internal(TensorId t) const { return producer_.count(t) > 0; }
  // Computed straight into an output: t is one that nothing in the loop reads, or its readers are
  // all views that are such outputs (it is computed into one, copied to the others).
  bool IntoOutput(TensorId t) const {
    const auto& readers = Readers(t);
    if (readers.empty()) return outputs_.count(t) > 0;
    return std::all_of(readers.begin(), readers.end(), [&](const auto& r) {
      TensorId out = r.first->outputs[0];
      return Kind(out) == LoopValueKind::kView && outputs_.count(out) && Readers(out).empty();
    });
  }
  TensorId ViewSource(TensorId u) const {
    while (Internal(u) && Kind(u) == LoopValueKind::kView) u = producer_.at(u)->inputs[0];
    return u;
  }
  // Nodes of the loop that read t, with the input slot.
  const std::vector<std::pair<const Node*, size_t>>& Readers(TensorId t) const {
    static const std::vector<std::pair<const Node*, size_t>> kNone;
    auto it = readers_.find(t);
    return it == readers_.end() ? kNone : it->second;
  }
  // Whether input j of n is a value of n's own chain: the one the chain continues through, or
  // the chain's first value read again (kept in registers).
  bool InSameChain(const Node& n, size_t j) const {
    const TensorId head = values_.at(n.outputs[0]).chain_head;
    auto u = values_.find(n.inputs[j]);
    return head != kNoId && u != values_.end() && u->second.chain_head == head;
  }
  // Whether n continues a chain through one of its inputs.
  int ChainLink(const Node& n) const {
    for (size_t j = 0; j < Inputs(n); ++j) {
      if (InSameChain(n, j)) return static_cast<int>(j);
    }
    return -1;
  }
  Operand OperandOf(const Node& n, size_t j) const {
    const TensorId u = n.inputs[j];
    const TensorId src = ViewSource(u);
    if (!IsFloatingPoint(g_.tensor(src).dtype)) return Operand::kTile;
    const Shape& in = g_.tensor(u).dims;
    const Shape& out = g_.tensor(n.outputs[0]).dims;
    if (in != out && g_.tensor(u).num_elements() == 1) return Operand::kScalar;
    if (in == out || g_.tensor(u).num_elements() == g_.tensor(n.outputs[0]).num_elements()) {
      return Internal(src) ? Operand::kTile : Operand::kInPlace;
    }
    // Evaluated over a span, a computed operand takes a buffer for it: a tile.
    const double whole = static_cast<double>(g_.tensor(src).num_elements());
    const BroadcastRead read = BroadcastReadOf(Internal(src), whole, whole, kLoopTileElements);
    return read == BroadcastRead::kInPlace || read == BroadcastRead::kWholeOnce ? Operand::kStreamed
                                                                                : Operand::kTile;
  }
  bool OperandsInPlace(const Node& n, LoopValueKind kind) const {
    const bool unary = kind == LoopValueKind::kUnary;
    const int link = ChainLink(n);
    const Operand a = OperandOf(n, 0), b = unary ? a : OperandOf(n, 1);
    const size_t source =
        a == Operand::kScalar || (a == Operand::kStreamed && b == Operand::kInPlace);
    for (size_t j = 0; j < Inputs(n); ++j) {
      if (InSameChain(n, j)) continue;  // The link, or the chain's first value in registers.
      const Operand o = j == 0 ? a : b;
      const bool side = !unary && (link >= 0 || j != source);
      if (side ? o == Operand::kTile : o != Operand::kInPlace) return false;
    }
    return true;
  }
  // Values evaluated once per thread and run, not per tile (see the header), and the leaves only
  // those read (read only while those are evaluated).
  void FindEvaluatedOnce() {
    for (bool grew = true; grew;) {
      grew = false;
      for (const auto& [t, readers] : readers_) {
        if (!Internal(t) && !once_.count(t) && ReadOnlyOnce(t)) grew = once_.insert(t).second;
      }
      for (const auto& [t, n] : producer_) {
        if (outputs_.count(t) || once_.count(t)) continue;
        if (ReadOnlyOnce(t) && (g_.tensor(t).num_elements() == 1 || !Readers(t).empty())) {
          grew = once_.insert(t).second;
        }
      }
    }
  }
  // Whether every reader of t in the loop is evaluated once, or, for a computed t, is a binary
  // value reading t as a streamed operand (evaluated whole once per thread).
  bool ReadOnlyOnce(TensorId t) const {
    const auto& readers = Readers(t);
    return std::all_of(readers.begin(), readers.end(), [&](const auto& r) {
      const TensorId out = r.first->outputs[0];
      return once_.count(out) || (Internal(t) && Kind(out) == LoopValueKind::kBinary &&
                                  OperandOf(*r.first, r.second) == Operand::kStreamed);
    });
  }

  const Graph& g_;
  const std::unordered_set<TensorId>& outputs_;
  const std::unordered_map<TensorId, LoopValue>& values_;
  std::unordered_map<TensorId, const Node*> producer_;
  std::unordered_map<TensorId, std::vector<std::pair<const Node*, size_t>>> readers_;
  std::unordered_set<TensorId> once_;
};

// DepthToSpace and SpaceToDepth over [N, C, H, W] with blocksize b, as affine maps over the
// output's dims with the block coordinates split out (Affine::split). DepthToSpace's output
// [N, C / b^2, H b, W b] is taken as [N, c, H, i, W, j], reading input channel (i b + j) c' + c
// (DCR, c' = C / b^2) or c b^2 + i b + j (CRD) at row h and column w. SpaceToDepth's output
// [N, C b^2, H / b, W / b] is taken as [N, i, j, C, h, w], reading input row h b + i and column
// w b + j of channel c (the inverse of DCR).
StatusOr<Affine> SpaceDepthMap(const Graph& g, const Node& n) {
  const Shape& in = g.tensor(n.inputs[0]).dims;
  const Shape& out = g.tensor(n.outputs[0]).dims;
  const int64_t b = n.GetInt("blocksize", 0);
  const bool to_space = n.op_type == "DepthToSpace";
  const Shape& deep = to_space ? in : out;  // [N, C b^2, h, w]: the side with the blocks.
  const Shape& wide = to_space ? out : in;  // [N, C, h b, w b].
  if (b < 1 || in.size() != 4 || out.size() != 4 || deep[1] != wide[1] * b * b ||
      wide[2] != deep[2] * b || wide[3] != deep[3] * b || in[0] != out[0]) {
    return Status::InvalidArgument(NodeLabel(n) + ": blocksize " + std::to_string(b) + " maps " +
                                   ShapeString(in) + " to " + ShapeString(out) +
                                   ", not [N, C, H, W] and its blocks");
  }
  const std::vector<int64_t> s = RowMajorStrides(in);
  const int64_t c = wide[1], h = deep[2], w = deep[3];
  if (!to_space) {
    return SplitMap({s[0], s[2], 1, s[1], b * s[2], b}, 0, in, {out[0], b, b, c, h, w});
  }
  const bool crd = n.GetString("mode", "DCR") == "CRD";
  const int64_t ci = crd ? b * s[1] : b * c * s[1], cj = crd ? s[1] : c * s[1];
  const int64_t cc = crd ? b * b * s[1] : s[1];
  return SplitMap({s[0], cc, s[2], ci, 1, cj}, 0, in, {out[0], c, h, b, w, b});
}

// Tile: each output dim of r d elements taken as [r, d], the repeat coordinate reading nothing.
StatusOr<Affine> TileMap(const Shape& in, const Shape& out) {
  if (in.size() != out.size()) {
    return Status::InvalidArgument("Tile of " + ShapeString(in) + " to " + ShapeString(out) +
                                   ": the ranks differ");
  }
  const std::vector<int64_t> s = RowMajorStrides(in);
  std::vector<int64_t> coef;
  Shape split;
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == 0 ? out[d] != 0 : out[d] % in[d] != 0) {
      return Status::InvalidArgument("Tile of " + ShapeString(in) + " to " + ShapeString(out) +
                                     ": dim " + std::to_string(d) + " is no whole repeat");
    }
    split.insert(split.end(), {in[d] == 0 ? 1 : out[d] / in[d], in[d]});
    coef.insert(coef.end(), {0, s[d]});
  }
  return SplitMap(coef, 0, in, split);
}

}  // namespace

bool GatherCopiesBlocks(const Graph& g, const Node& n) {
  if (n.op_type != "Gather" || n.inputs.size() != 2 || GatherSliceIndex(g, n) >= 0) return false;
  return IsFloatingPoint(g.tensor(n.outputs[0]).dtype) && GatherBlock(g, n) >= kMinEvaluatedRun;
}

LoopValueKind LoopValueKindOf(const Graph& g, const Node& n) {
  const std::string& op = n.op_type;
  if (IsViewOp(op) || MovesOnlyUnitDims(g, n)) return LoopValueKind::kView;
  if (IsUnaryElementwise(op) || UnaryPowExponent(g, n)) return LoopValueKind::kUnary;
  if (IsBinaryArithmetic(op)) return LoopValueKind::kBinary;
  if (op == "Where") return LoopValueKind::kWhere;
  if (op == "BatchNormalization") return LoopValueKind::kBatchNorm;
  if (op == "Transpose" || op == "Slice" || op == "Split" || op == "Expand" ||
      op == "DepthToSpace" || op == "SpaceToDepth" || op == "Tile" || GatherSliceIndex(g, n) >= 0) {
    return LoopValueKind::kMapped;
  }
  if (op == "Concat") return LoopValueKind::kConcat;
  if (op == "Gather") return LoopValueKind::kGather;
  if (op == "Pad") return LoopValueKind::kPad;
  if (op == "Trilu") return LoopValueKind::kTrilu;
  if (op == "Resize") return LoopValueKind::kResize;
  return LoopValueKind::kOther;
}

StatusOr<Affine> MappedReadOf(const Graph& g, const Node& n, size_t output) {
  const Shape& in = g.tensor(n.inputs[0]).dims;
  const Shape& out = g.tensor(n.outputs[output]).dims;
  if (n.op_type == "Expand") {
    // A one-element input repeats: a map of zero coefficients, read as a map like any other.
    Affine m = BroadcastMap(in, out);
    if (m.scalar) m = StridedMap(std::vector<int64_t>(out.size(), 0), 0, {}, out);
    return m;
  }
  const std::vector<int64_t> strides = RowMajorStrides(in);
  if (const int64_t index = GatherSliceIndex(g, n); index >= 0) {
    // One slice along the axis: the index dims are all 1, the others step as in the data.
    const int64_t axis = NormalizeAxis(n.GetInt("axis", 0), in.size());
    const int64_t ri = static_cast<int64_t>(g.tensor(n.inputs[1]).dims.size());
    std::vector<int64_t> coef(out.size(), 0);
    for (int64_t d = 0; d < static_cast<int64_t>(out.size()); ++d) {
      if (d < axis) coef[d] = strides[d];
      if (d >= axis + ri) coef[d] = strides[d - ri + 1];
    }
    return StridedMap(coef, index * strides[axis], in, out);
  }
  if (n.op_type == "DepthToSpace" || n.op_type == "SpaceToDepth") return SpaceDepthMap(g, n);
  if (n.op_type == "Tile") return TileMap(in, out);
  std::vector<int64_t> coef(in.size());
  int64_t base = 0;
  if (n.op_type == "Transpose") {
    const std::vector<int64_t> perm = TransposePerm(g, n);
    for (size_t d = 0; d < perm.size(); ++d) coef[d] = strides[perm[d]];
  } else if (n.op_type == "Slice") {
    FUSOR_ASSIGN_OR_RETURN(SliceParams p, SliceOf(g, n));
    for (size_t d = 0; d < in.size(); ++d) {
      base += p.start[d] * strides[d];
      coef[d] = p.step[d] * strides[d];
    }
  } else if (n.op_type == "Split") {
    const int64_t axis = NormalizeAxis(n.GetInt("axis", 0), in.size());
    for (size_t j = 0; j < output; ++j) base += g.tensor(n.outputs[j]).dims[axis] * strides[axis];
    coef = strides;
  } else {
    return Status::InvalidArgument(NodeLabel(n) + ": not a value the loop reads through one map");
  }
  return StridedMap(coef, base, in, out);
}

BroadcastRead BroadcastReadOf(bool computed, double whole, double span, double range) {
  if (!computed) return BroadcastRead::kInPlace;
  if (whole <= range) return BroadcastRead::kWholeOnce;
  return span > 0 && 4 * span <= range ? BroadcastRead::kSpan : BroadcastRead::kNotStreamed;
}

bool FillsOwnBuffer(LoopValueKind kind) {
  switch (kind) {
    case LoopValueKind::kOther:
    case LoopValueKind::kGather:
    case LoopValueKind::kPad:
    case LoopValueKind::kTrilu:
    case LoopValueKind::kResize:
      return true;
    default:
      return false;
  }
}

int LoopLowering::chained_values() const {
  int n = 0;
  for (const auto& [t, v] : values) n += v.chained ? 1 : 0;
  return n;
}

LoopLowering LowerLoop(const Graph& g, const std::vector<NodeId>& nodes,
                       const std::vector<TensorId>& outputs) {
  LoopLowering out;
  for (NodeId id : nodes) {
    const Node& n = g.node(id);
    for (TensorId t : n.outputs) out.values[t].kind = LoopValueKindOf(g, n);
  }
  const std::unordered_set<TensorId> leaving(outputs.begin(), outputs.end());
  ChainMarker(g, nodes, leaving, &out.values).Mark();
  StreamRule rule(g, nodes, leaving, out.values);
  out.streams = rule.Streams();
  out.evaluated_once = rule.evaluated_once();
  return out;
}

}  // namespace fusor
