#include "costmodel/loop_evaluation.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "graph/op_registry.h"
#include "graph/threading.h"

namespace fusor {
namespace {

// Elements per tile of our loops and per chunk of their row reductions (runtime/fused_loop.h).
constexpr double kLoopTile = kLoopTileElements;
// Elements per run, at least, for a computed value read through a map to be evaluated run by run
// (runtime/fused_loop.cc: kMinEvaluatedRun).
constexpr double kMinEvaluatedRun = 64;

// Elements a value is asked for: as the loop's own contiguous ranges (requests share one
// evaluation) and as index lists (each request evaluates again).
// Lists come in runs of consecutive indices (a transpose that keeps the innermost dim, a slice, a
// concat: re-indexed with one step per element) or scattered (a broadcast: a divide and a modulo
// per dimension for every element). A value read through a map that keeps long runs in order is
// asked for those runs as ranges of their own (pieces, one evaluation call each): they add up.
struct Requests {
  double range = 0;
  double runs = 0;
  double scattered = 0;
  double pieces = 0;
  double piece_calls = 0;
  double list() const { return runs + scattered; }
  double total() const { return range + runs + scattered + pieces; }
};

bool IsView(const Node& n) {
  return n.op_type == "Reshape" || n.op_type == "Flatten" || n.op_type == "Squeeze" ||
         n.op_type == "Unsqueeze";
}

double Elements(const Graph& g, TensorId t) {
  return static_cast<double>(g.tensor(t).num_elements());
}

// Elements per run when a leaf of dims `in` is read through its broadcast into `out` from a range:
// the trailing dims of `out` that the map walks as one (all broadcast, or all read in order), as
// the runtime's ForEachRun merges them. `broadcast_run`, when given, is set to whether `in` is
// broadcast along those dims (true when `out` has none longer than 1).
double RunLength(const Shape& in, const Shape& out, bool* broadcast_run = nullptr) {
  double run = 1;
  bool broadcast = false, started = false;
  for (size_t k = 0; k < out.size(); ++k) {
    size_t d = out.size() - 1 - k;
    if (out[d] == 1) continue;
    bool b = k >= in.size() || in[in.size() - 1 - k] == 1;
    if (started && b != broadcast) break;
    broadcast = b;
    started = true;
    run *= static_cast<double>(out[d]);
  }
  if (broadcast_run != nullptr) *broadcast_run = broadcast || !started;
  return run;
}

// Whether node n is a step the runtime's single-pass chains take (runtime/fused_loop.cc,
// Chains): float unary and binary arithmetic but Log, integer casts, truncating division and a Pow
// whose exponent is not a constant 2, 0.5 or 1 (those the runtime compiles as unary ops).
bool ChainsNode(const Graph& g, const Node& n) {
  static const char* kOps[] = {"Relu", "LeakyRelu", "Sigmoid",     "Tanh",      "Exp",
                               "Sqrt", "Erf",       "HardSigmoid", "HardSwish", "Clip",
                               "Cast", "Add",       "Sub",         "Mul",       "Div"};
  if (!IsFloatingPoint(g.tensor(n.outputs[0]).dtype)) return false;
  if (n.op_type == "Pow") {
    const TensorId e = n.input(1);
    if (e == kNoId || !g.tensor(e).is_constant_data() || g.tensor(e).float_data.size() != 1) {
      return false;
    }
    const double x = g.tensor(e).float_data[0];
    return x == 2.0 || x == 0.5 || x == 1.0;
  }
  return std::any_of(std::begin(kOps), std::end(kOps),
                     [&](const char* o) { return n.op_type == o; });
}

// The input of a chain's first node the chain walks (runtime: ChainSource): its one input, or
// the binary operand read at the node's own elements (the second when the first is a scalar or
// a broadcast and the second is not).
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

// The runtime's single-pass chains (runtime/fused_loop.cc, MarkChains): each chainable node
// links to the first of its value inputs that is computed by a chainable node of the loop, read
// once by the loop and not an output, at the same elements; that input is computed inside the
// node's chain, in registers. Chains are cut every kMaxChain values. Returns each value of a chain
// of two or more with the chain's last value (its head, which maps to itself). A chain's source
// that only the chain reads joins it.
std::unordered_map<TensorId, TensorId> Chains(const Graph& g, const std::vector<NodeId>& nodes,
                                              const std::unordered_set<TensorId>& outputs) {
  constexpr int kMaxChain = 16;
  std::unordered_map<TensorId, int> uses;
  std::unordered_map<TensorId, const Node*> producer;
  for (NodeId id : nodes) {
    const Node& n = g.node(id);
    producer[n.outputs[0]] = &n;
    for (TensorId t : n.inputs) {
      if (t != kNoId) ++uses[t];
    }
  }
  std::unordered_map<TensorId, TensorId> link;  // Value -> the input its chain continues through.
  std::unordered_set<TensorId> linked;
  for (NodeId id : nodes) {
    const Node& n = g.node(id);
    if (!ChainsNode(g, n)) continue;
    const bool binary =
        n.op_type == "Add" || n.op_type == "Sub" || n.op_type == "Mul" || n.op_type == "Div";
    for (size_t j = 0; j < (binary ? n.inputs.size() : 1); ++j) {
      const TensorId u = n.inputs[j];
      auto p = producer.find(u);
      if (p == producer.end() || !ChainsNode(g, *p->second) || uses[u] != 1 || outputs.count(u) ||
          g.tensor(u).num_elements() != g.tensor(n.outputs[0]).num_elements()) {
        continue;
      }
      link[n.outputs[0]] = u;
      linked.insert(u);
      break;
    }
  }
  std::unordered_map<TensorId, TensorId> head_of;
  for (const auto& [top, first] : link) {
    if (linked.count(top)) continue;
    TensorId head = top;
    int length = 1;
    for (TensorId w = top;; ++length) {
      if (length > kMaxChain) {  // w heads a chain of its own.
        head = w;
        length = 1;
      }
      head_of[w] = head;
      auto next = link.find(w);
      if (next == link.end()) break;
      w = next->second;
    }
  }
  // A cut can leave a chain of one value: not a chain.
  std::unordered_map<TensorId, int> size;
  for (const auto& [t, head] : head_of) ++size[head];
  std::erase_if(head_of, [&](const auto& entry) { return size[entry.second] < 2; });
  // A chain's source read only by the chain's own nodes, at the same elements, joins it as its
  // first value (kept in registers for the later reads), when it is in no chain and the chain has
  // room.
  std::unordered_map<TensorId, std::vector<TensorId>> members;
  for (const auto& [t, head] : head_of) members[head].push_back(t);
  auto elements = [&](TensorId t) { return g.tensor(t).num_elements(); };
  for (const auto& [head, values] : members) {
    if (values.size() >= kMaxChain) continue;
    TensorId first = kNoId;  // The value whose link leaves the chain, or that has none.
    for (TensorId v : values) {
      auto l = link.find(v);
      auto lh = l == link.end() ? head_of.end() : head_of.find(l->second);
      if (lh == head_of.end() || lh->second != head) first = v;
    }
    const TensorId u = producer.at(first)->inputs[ChainSource(g, *producer.at(first))];
    auto p = producer.find(u);
    if (p == producer.end() || !ChainsNode(g, *p->second) || outputs.count(u) || head_of.count(u) ||
        link.count(u)) {
      continue;
    }
    int reads = 0;
    bool same_elements = true;
    for (TensorId v : values) {
      for (TensorId in : producer.at(v)->inputs) {
        if (in != u) continue;
        ++reads;
        same_elements = same_elements && elements(u) == elements(v);
      }
    }
    if (reads == uses[u] && same_elements) head_of[u] = head;
  }
  return head_of;
}

// How a unary or binary node of the loop reads input j over a contiguous range of its elements
// (runtime/fused_loop.cc, OperandOf): a float leaf (or views of one) at the same elements in
// place, a scalar, a broadcast streamed run by run (a leaf, or a computed value of at most a tile,
// hoisted), or through a tile.
enum class Operand : uint8_t { kInPlace, kScalar, kStreamed, kTile };

// The loop's values the runtime compiles as unary or binary arithmetic (IsUnaryOp, CompileBinary;
// a Pow by a constant 2, 0.5 or 1 is unary) and as views; 0 for anything else.
enum class ValueKind : uint8_t { kOther, kView, kUnary, kBinary };
// A Transpose that only moves dims of size 1 reads its input in order: the loop hands it on as
// a view (runtime: a pass value).
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

ValueKind KindOf(const Graph& g, const Node& n) {
  static const char* kUnaryOps[] = {"Relu",        "LeakyRelu", "Sigmoid", "Tanh",
                                    "Exp",         "Log",       "Sqrt",    "Erf",
                                    "HardSigmoid", "HardSwish", "Clip",    "Cast"};
  const std::string& op = n.op_type;
  if (IsView(n) || MovesOnlyUnitDims(g, n)) return ValueKind::kView;
  if (std::any_of(std::begin(kUnaryOps), std::end(kUnaryOps),
                  [&](const char* o) { return op == o; }))
    return ValueKind::kUnary;
  if (op == "Pow" && ChainsNode(g, n)) return ValueKind::kUnary;
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow")
    return ValueKind::kBinary;
  return ValueKind::kOther;
}

// The runtime's rule for a loop whose tiles take no buffers (runtime/fused_loop.cc, StreamsInPlace
// and EvaluatedOnce; keep the two in step): then it walks longer tiles.
class StreamRule {
 public:
  StreamRule(const Graph& g, const std::vector<NodeId>& nodes,
             const std::unordered_set<TensorId>& outputs,
             const std::unordered_map<TensorId, TensorId>& head_of)
      : g_(g), outputs_(outputs), head_of_(head_of) {
    for (NodeId id : nodes) {
      const Node& n = g.node(id);
      producer_[n.outputs[0]] = &n;
      kind_[n.outputs[0]] = KindOf(g, n);
    }
    for (const auto& [t, n] : producer_) {
      for (size_t j = 0; j < Inputs(*n); ++j) readers_[n->inputs[j]].push_back({n, j});
    }
  }

  bool Streams() {
    FindEvaluatedOnce();
    for (const auto& [t, n] : producer_) {
      const ValueKind kind = kind_.at(t);
      for (size_t j = 0; j < Inputs(*n); ++j) {
        const TensorId u = n->inputs[j];
        if (!Internal(u) && !IsFloatingPoint(g_.tensor(u).dtype)) return false;
      }
      if (kind == ValueKind::kView || once_.count(t)) continue;
      if (kind == ValueKind::kOther || !IsFloatingPoint(g_.tensor(t).dtype)) return false;
      if (!InChain(t) && !IntoOutput(t)) return false;
      if (!OperandsInPlace(*n, kind)) return false;
    }
    return true;
  }

 private:
  size_t Inputs(const Node& n) const {
    switch (kind_.at(n.outputs[0])) {
      case ValueKind::kBinary:
        return 2;
      case ValueKind::kOther:
        return n.inputs.size();
      default:
        return 1;
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
      return kind_.at(out) == ValueKind::kView && outputs_.count(out) && Readers(out).empty();
    });
  }
  TensorId ViewSource(TensorId u) const {
    while (Internal(u) && kind_.at(u) == ValueKind::kView) u = producer_.at(u)->inputs[0];
    return u;
  }
  // Nodes of the loop that read t, with the input slot.
  const std::vector<std::pair<const Node*, size_t>>& Readers(TensorId t) const {
    static const std::vector<std::pair<const Node*, size_t>> kNone;
    auto it = readers_.find(t);
    return it == readers_.end() ? kNone : it->second;
  }
  // Computed inside its reader's chain (not the chain's head).
  bool InChain(TensorId t) const {
    auto h = head_of_.find(t);
    return h != head_of_.end() && h->second != t;
  }
  // Whether input j of n is a value of n's own chain: the one the chain continues through, or
  // the chain's first value read again (kept in registers).
  bool InSameChain(const Node& n, size_t j) const {
    auto h = head_of_.find(n.outputs[0]);
    auto u = head_of_.find(n.inputs[j]);
    return h != head_of_.end() && u != head_of_.end() && u->second == h->second &&
           Internal(n.inputs[j]);
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
    return !Internal(src) || Elements(g_, src) <= kLoopTile ? Operand::kStreamed : Operand::kTile;
  }
  bool OperandsInPlace(const Node& n, ValueKind kind) const {
    const bool unary = kind == ValueKind::kUnary;
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
  void FindEvaluatedOnce() {
    for (bool grew = true; grew;) {
      grew = false;
      for (const auto& [t, n] : producer_) {
        if (outputs_.count(t) || once_.count(t)) continue;
        const auto& readers = Readers(t);
        bool only = g_.tensor(t).num_elements() == 1 || !readers.empty();
        for (const auto& [r, j] : readers) {
          only = only &&
                 (once_.count(r->outputs[0]) || (kind_.at(r->outputs[0]) == ValueKind::kBinary &&
                                                 OperandOf(*r, j) == Operand::kStreamed));
        }
        if (only) grew = once_.insert(t).second;
      }
    }
  }

  const Graph& g_;
  const std::unordered_set<TensorId>& outputs_;
  const std::unordered_map<TensorId, TensorId>& head_of_;
  std::unordered_map<TensorId, const Node*> producer_;
  std::unordered_map<TensorId, ValueKind> kind_;
  std::unordered_map<TensorId, std::vector<std::pair<const Node*, size_t>>> readers_;
  std::unordered_set<TensorId> once_;
};

class Walk {
 public:
  Walk(const Graph& g, const FusionGroup& group, int threads, int64_t l1d_bytes)
      : g_(g), group_(group), threads_(threads), l1d_bytes_(l1d_bytes) {}

  void SetChains(std::unordered_map<TensorId, TensorId> head_of) {
    for (const auto& [t, head] : head_of) {
      if (t != head) out_.chained.insert(t);
    }
    chain_head_ = std::move(head_of);
  }

  void Ask(TensorId t, Requests r) {
    if (piece_calls_ > 0) {  // Visiting a value asked for pieces: its inputs are asked likewise.
      r.pieces += r.range;
      r.piece_calls += r.range > 0 ? piece_calls_ : 0;
      r.range = 0;
    }
    Requests& have = asked_[t];
    have.range = std::max(have.range, r.range);
    have.runs += r.runs;
    have.scattered += r.scattered;
    have.pieces += r.pieces;
    have.piece_calls += r.piece_calls;
  }

  // Evaluates the group's nodes from the last to the first, pushing requests to their inputs.
  // `pulls`: how many times the expression is pulled (tiles, or rows times chunks).
  LoopEvaluation Run(const std::vector<NodeId>& nodes, double pulls) {
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) Visit(g_.node(*it));
    std::unordered_set<TensorId> values;
    for (NodeId id : nodes) {
      for (TensorId t : g_.node(id).outputs) {
        out_.evaluated[t] = asked_[t].total();
        values.insert(t);
      }
      for (TensorId t : g_.node(id).inputs) {
        if (t != kNoId && g_.tensor(t).kind != TensorKind::kConstant) values.insert(t);
      }
    }
    // A value evaluated whole once (hoisted), and what only it reads, is not pulled per tile.
    std::unordered_set<TensorId> once;
    for (TensorId h : hoisted_) OnlyFor(h, &once);
    // Neither is a broadcast leaf read only in place, run by run (no evaluation call).
    double per_tile = 0;
    for (TensorId t : values) {
      if (out_.chained.count(t)) continue;  // Computed in registers inside its reader's chain.
      bool in_place_only = streamed_.count(t) && !read_.count(t) && asked_[t].total() == 0;
      per_tile += once.count(t) || in_place_only ? 0 : 1;
    }
    out_.eval_calls += pulls * per_tile + static_cast<double>(once.size());
    for (const auto& [head, calls] : chain_calls_) out_.run_calls += calls;
    for (const auto& [t, head] : chain_head_) out_.chain_steps += asked_[t].total();
    return out_;
  }

 private:
  // Marks t, and recursively each input of its producer in the group that is read by nothing
  // but marked values' producers.
  void OnlyFor(TensorId t, std::unordered_set<TensorId>* once) const {
    if (!once->insert(t).second || !Internal(t)) return;
    for (TensorId in : g_.node(g_.tensor(t).producer).inputs) {
      if (in == kNoId || g_.tensor(in).kind == TensorKind::kConstant) continue;
      bool only = true;
      for (NodeId c : g_.tensor(in).consumers) {
        bool marked = std::binary_search(group_.nodes.begin(), group_.nodes.end(), c) &&
                      std::all_of(g_.node(c).outputs.begin(), g_.node(c).outputs.end(),
                                  [&](TensorId o) { return once->count(o) > 0; });
        only = only && marked;
      }
      if (only) OnlyFor(in, once);
    }
  }

  bool Internal(TensorId t) const {
    NodeId p = g_.tensor(t).producer;
    return p != kNoId && std::binary_search(group_.nodes.begin(), group_.nodes.end(), p);
  }

  // Index work of one affine map over the consumer's requests, in a space of `rank` dims. From a
  // range the map walks runs, and a list of consecutive runs is stepped along (cheap); a
  // scattered list is divided back into coordinates, a divide and a modulo per dimension.
  void MapWork(Requests r, size_t rank) {
    out_.indexed_elements += r.range;
    out_.gathered_elements += r.runs;
    out_.remapped_elements += r.scattered * static_cast<double>(std::max<size_t>(rank, 1));
  }

  // The list a map makes from requests `r`: in runs when the map keeps the innermost dim in
  // order and the requests were not scattered already.
  static Requests ListFrom(Requests r, bool inner_step_one) {
    if (inner_step_one) return {0, r.range + r.runs, r.scattered};
    return {0, 0, r.total()};
  }

  // Input `u` read through an identity map: the consumer's requests pass through.
  void Identity(TensorId u, Requests r) {
    if (Internal(u)) return Ask(u, r);
    read_.insert(u);
    out_.gathered_elements += r.list();  // A leaf at an index list is a gather.
  }

  // What `u` reads its elements from: through views inside the group (a view reads its input at
  // the same flat indices) to the first value that is not one.
  TensorId ViewSource(TensorId u) const {
    while (Internal(u) && IsView(g_.node(g_.tensor(u).producer))) {
      u = g_.node(g_.tensor(u).producer).inputs[0];
    }
    return u;
  }
  // Marks u and the values it views, down to its ViewSource.
  void MarkThroughViews(TensorId u, std::unordered_set<TensorId>* marked) const {
    for (;; u = g_.node(g_.tensor(u).producer).inputs[0]) {
      marked->insert(u);
      if (!Internal(u) || !IsView(g_.node(g_.tensor(u).producer))) return;
    }
  }

  // Input `u` of `n` read through a non-identity map from requests `r` over `rank` dims. A leaf
  // (or views of one) read from a range is copied run by run; a computed value read from a range
  // in runs of at least kMinEvaluatedRun is asked for each run as a piece; anything else becomes
  // an index list for `u`.
  void Mapped(const Node& n, TensorId u, Requests r, size_t rank, bool inner_step_one) {
    if (double run = inner_step_one ? MapRun(n, u) : 0;
        r.range > 0 && run >= kMinEvaluatedRun && Internal(ViewSource(u))) {
      // Pieces of pieces: at least one run per piece the consumer was asked for.
      double pieces = std::max(r.range / run, piece_calls_);
      out_.run_calls += pieces;
      double calls = piece_calls_;
      piece_calls_ = 0;  // Asked as pieces of their own, not converted.
      Ask(u, {0, 0, 0, r.range, pieces});
      piece_calls_ = calls;
      r.range = 0;
      if (r.list() == 0) return;
    }
    MapWork(r, rank);
    if (!Internal(ViewSource(u))) {
      MarkThroughViews(u, &read_);
      out_.gathered_elements += r.list();  // Gathered; a range is copied run by run (above)...
      // ...with a stride when the map moves the innermost dim of a tensor it does not broadcast:
      // no two reads of an output row share a cache line. When a row's lines (one per element)
      // fit in half of L1 the next rows read the rest of each line from there (BERT's K^T,
      // 12x64x128 from 128x12x64: 47 us for 98K elements); longer rows miss L1 on every read, as
      // costly as re-indexing each element ([768,512] -> [512,768]: 441 us for 393K).
      bool strided = !inner_step_one && Elements(g_, u) >= Elements(g_, n.outputs[0]);
      if (strided) {
        const bool lines_stay = InnermostExtent(n.outputs[0]) * kLineBytes <= l1d_bytes_ / 2;
        (lines_stay ? out_.strided_elements : out_.remapped_elements) += r.range;
      }
      return;
    }
    Ask(u, ListFrom(r, inner_step_one));
  }

  // `u` asked for `share` of the consumer's requests at an index list built already.
  void Listed(TensorId u, Requests r, double share, bool inner_step_one) {
    Requests l = ListFrom(r, inner_step_one);
    l.runs *= share;
    l.scattered *= share;
    if (Internal(u)) return Ask(u, l);
    read_.insert(u);
    out_.gathered_elements += l.list();
  }

  // Elements per run of the map from `n`'s output to its input `u` when it steps by one along the
  // innermost dim: the trailing output dims (size 1 skipped) it reads as one stretch of `u`, as
  // ForEachRun merges them. A slice keeps whole dims up to the one it cuts; a transpose the dims
  // it keeps in order; a broadcast the dims it does not broadcast.
  double MapRun(const Node& n, TensorId u) const {
    const Shape& in = g_.tensor(u).dims;
    const Shape& out = g_.tensor(n.outputs[0]).dims;
    const std::string& op = n.op_type;
    if (op == "Transpose" || op == "Slice" || op == "Split") {
      if (in.size() != out.size()) return 0;
      std::vector<int64_t> perm = op == "Transpose" ? n.GetInts("perm") : std::vector<int64_t>{};
      if (perm.empty()) {
        for (size_t d = 0; d < in.size(); ++d) {
          perm.push_back(op == "Transpose" ? static_cast<int64_t>(in.size() - 1 - d)
                                           : static_cast<int64_t>(d));
        }
      }
      if (perm.size() != in.size()) return 0;
      for (int64_t d : perm) {
        if (d < 0 || d >= static_cast<int64_t>(in.size())) return 0;
      }
      std::vector<double> stride(in.size(), 1);
      for (size_t d = in.size(); d-- > 1;) stride[d - 1] = stride[d] * static_cast<double>(in[d]);
      double run = 0;
      for (size_t k = out.size(); k-- > 0;) {
        if (out[k] == 1) continue;
        double coef = stride[perm[k]];
        if (run > 0 && coef != run) break;  // The stretch ends where the next dim jumps.
        if (run == 0 && coef != 1) return 0;
        run = run == 0 ? static_cast<double>(out[k]) : run * static_cast<double>(out[k]);
      }
      return run;
    }
    bool broadcast = false;
    double run = RunLength(in, out, &broadcast);
    return broadcast ? 0 : run;
  }

  // Whether the map from `n`'s output to its input `u` steps by one along the innermost dim.
  bool InnerStepOne(const Node& n, TensorId u) const {
    const Shape& in = g_.tensor(u).dims;
    const Shape& out = g_.tensor(n.outputs[0]).dims;
    if (in.empty() || out.empty() || in.back() == 1) return false;
    const std::string& op = n.op_type;
    // Slices (as Slice writes them, step 1 almost always), splits and concats keep rows whole.
    if (op == "Slice" || op == "Split" || op == "Concat" || op == "Pad") return true;
    if (op == "Transpose") {
      std::vector<int64_t> perm = n.GetInts("perm");
      return perm.empty() ? in.size() == 1 : perm.back() == static_cast<int64_t>(in.size()) - 1;
    }
    if (op == "Gather") {
      int64_t axis = n.GetInt("axis", 0);
      return u != n.inputs[0] || (axis != -1 && axis + 1 != static_cast<int64_t>(in.size()));
    }
    return in.back() == out.back();  // A broadcast that keeps the innermost dim.
  }

  // A node asked for pieces is visited twice: once for the pieces, whose inputs are asked for
  // pieces too (one more evaluation call per piece), once for the rest.
  void Visit(const Node& n) {
    Requests r = asked_[n.outputs[0]];
    if (r.pieces > 0) {
      piece_calls_ = r.piece_calls;
      out_.eval_calls += r.piece_calls;
      VisitFor(n, {r.pieces, 0, 0, 0, 0});
      piece_calls_ = 0;
    }
    VisitFor(n, {r.range, r.runs, r.scattered, 0, 0});
  }

  void VisitFor(const Node& n, Requests r) {
    TensorId out = n.outputs[0];
    if (r.total() == 0) return;
    size_t rank = g_.tensor(out).dims.size();
    const std::string& op = n.op_type;
    if (IsView(n) || MovesOnlyUnitDims(g_, n)) out_.passed_through.insert(out);
    if (IsView(n)) return Identity(n.inputs[0], r);
    if (op == "Concat" || op == "Pad") return VisitSelect(n, r, rank);
    if (op == "Resize") return VisitResize(n, r, rank);
    if (op == "Gather") {
      MapWork(r, rank);
      Mapped(n, n.inputs[1], r, rank, InnerStepOne(n, n.inputs[1]));
      return Listed(n.inputs[0], r, 1.0, InnerStepOne(n, n.inputs[0]));
    }
    OpClass c = ClassifyNode(g_, n);
    bool may_stream = StreamsOperands(n);
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      TensorId u = n.inputs[j];
      if (u == kNoId || g_.tensor(u).kind == TensorKind::kConstant) continue;
      const Tensor& in = g_.tensor(u);
      bool scalar = in.num_elements() == 1;
      bool per_channel = op == "BatchNormalization" && j > 0;
      bool identity =
          !per_channel &&
          ((in.dims == g_.tensor(out).dims && (c != OpClass::kInjective || op == "Expand")) ||
           MovesOnlyUnitDims(g_, n));
      if (scalar) {
        if (Internal(u)) Ask(u, {1, 0});
      } else if (identity) {
        Identity(u, r);
      } else if (may_stream && !Internal(ViewSource(u))) {
        Streamed(n, u, r, rank);
        may_stream = false;  // The other operand, if broadcast too, is copied.
      } else if (double span = may_stream ? StreamedSpan(n, u, r) : 0; span > 0) {
        StreamedComputed(n, u, r, rank, span);
        may_stream = false;
      } else {
        Mapped(n, u, r, rank, !per_channel && InnerStepOne(n, u));
      }
    }
  }

  // A binary arithmetic node with no scalar operand reads its first broadcast leaf operand straight
  // from the leaf, run by run along the innermost dim (runtime: StreamedOperand): no copy, one
  // kernel call per run. Requests that come as index lists are gathered as for any leaf.
  bool StreamsOperands(const Node& n) const {
    static const char* kOps[] = {"Add", "Sub", "Mul", "Div", "Pow"};
    if (std::none_of(std::begin(kOps), std::end(kOps),
                     [&](const char* op) { return n.op_type == op; })) {
      return false;
    }
    if (n.inputs.size() != 2 || g_.tensor(n.outputs[0]).dims.empty()) return false;
    for (TensorId u : n.inputs) {
      if (u == kNoId || g_.tensor(u).num_elements() == 1) return false;
    }
    return true;
  }
  // Calls per run of `u`: at least one per piece while visiting pieces.
  double StreamCalls(const Node& n, TensorId u, Requests r) const {
    return std::max(r.range / RunLength(g_.tensor(u).dims, g_.tensor(n.outputs[0]).dims),
                    r.range > 0 ? piece_calls_ : 0.0);
  }
  // A chain walks its range in pieces over which all its streamed operands step evenly: one
  // kernel call per piece, about as many as the most runs any one operand has (they line up
  // in the usual case, rows of layer norm's per-row scale and of its weights).
  void AddStreamCalls(const Node& n, double calls) {
    auto head = chain_head_.find(n.outputs[0]);
    if (head == chain_head_.end()) {
      out_.run_calls += calls;
      return;
    }
    double& chain = chain_calls_[head->second];
    chain = std::max(chain, calls);
  }
  void Streamed(const Node& n, TensorId u, Requests r, size_t rank) {
    AddStreamCalls(n, StreamCalls(n, u, r));
    Requests lists{0, r.runs, r.scattered};
    MarkThroughViews(u, &streamed_);                    // Read in place from a range...
    if (lists.list() > 0) MarkThroughViews(u, &read_);  // ...and evaluated at an index list.
    MapWork(lists, rank);
    out_.gathered_elements += lists.list();
  }

  // A computed broadcast operand is streamed too when all of it is at most a tile, evaluated whole
  // once by each thread that runs a tile, or when the span of its elements a tile reads
  // is at most a quarter of the tile, evaluated once per tile over that span (runtime:
  // StreamedOperand); then read run by run. The span: the tile's share of u, plus one element when
  // u is broadcast along the innermost dim or one run of u's trailing dims otherwise, at most all
  // of u. Returns the span per tile, 0 when u is not streamed.
  double StreamedSpan(const Node& n, TensorId u, Requests r) const {
    if (r.range == 0) return 0;
    const Shape& in = g_.tensor(u).dims;
    const Shape& out = g_.tensor(n.outputs[0]).dims;
    double tile = std::min(kLoopTile, r.range);
    bool inner_broadcast = true;
    double run = RunLength(in, out, &inner_broadcast);
    if (inner_broadcast) run = 1;
    const double whole = Elements(g_, u);
    if (whole <= tile) return whole;
    double span = std::min(whole, tile * whole / Elements(g_, n.outputs[0]) + run);
    return 4 * span <= tile ? span : 0;
  }
  void StreamedComputed(const Node& n, TensorId u, Requests r, size_t rank, double span) {
    AddStreamCalls(n, StreamCalls(n, u, r));
    const double tile = std::min(kLoopTile, r.range), whole = Elements(g_, u);
    if (whole <= tile) hoisted_.insert(u);
    // Every thread that runs a tile hoists its own copy (a loop of one tile runs on one thread).
    const double hoisting = r.range > kLoopTile ? threads_ : 1;
    Ask(u, {whole <= tile ? whole * hoisting : std::ceil(r.range / kLoopTile) * span, 0, 0});
    Requests lists{0, r.runs, r.scattered};
    if (lists.list() > 0) Mapped(n, u, lists, rank, InnerStepOne(n, u));
  }

  // Resize: each output coordinate looked up per element; nearest reads the input once per element,
  // linear blends the 2^k corners around it (k dims that change size), evaluating the input at a
  // scattered list once per corner.
  void VisitResize(const Node& n, Requests r, size_t rank) {
    const Shape& in = g_.tensor(n.inputs[0]).dims;
    const Shape& out = g_.tensor(n.outputs[0]).dims;
    double corners = 1;
    if (n.GetString("mode", "nearest") == "linear") {
      for (size_t d = 0; d < in.size() && d < out.size(); ++d) corners *= in[d] != out[d] ? 2 : 1;
    }
    for (size_t d = 0; d < rank; ++d) MapWork(r, rank);
    out_.gathered_elements += r.total() * corners;  // Positions and weights, corner by corner.
    Listed(n.inputs[0], r, corners, /*inner_step_one=*/false);
  }

  // A Concat asked for a range walks it in runs, each a range of one input (runtime: ConcatRuns):
  // one run per input per index of the dims before the axis, one evaluation call each; a leaf is
  // copied (indexed), a computed input evaluated in place. Concat and Pad asked at index lists:
  // coordinates tested per element, then each input evaluated at the list of the elements that
  // come from it.
  void VisitSelect(const Node& n, Requests r, size_t rank) {
    bool pad = n.op_type == "Pad";
    double out_elements = Elements(g_, n.outputs[0]);
    if (!pad && r.range > 0) {
      const Shape& dims = g_.tensor(n.outputs[0]).dims;
      int64_t axis = n.GetInt("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(rank);
      double outer = 1;
      for (int64_t d = 0; d < axis && d < static_cast<int64_t>(rank); ++d) {
        outer *= static_cast<double>(dims[d]);
      }
      for (TensorId u : n.inputs) {
        double share = Elements(g_, u) / out_elements;
        if (share == 0) continue;
        out_.run_calls += outer * r.range / out_elements;
        if (Internal(u)) {
          Ask(u, {r.range * share, 0, 0});
        } else {
          out_.indexed_elements += r.range * share;
        }
      }
      r.range = 0;
      if (r.list() == 0) return;
    }
    double coords = pad ? static_cast<double>(rank) : 1.0;
    for (int i = 0; i < coords; ++i) MapWork(r, rank);
    out_.gathered_elements += r.total();  // The scan that selects each input's elements.
    size_t inputs = pad ? 1 : n.inputs.size();
    for (size_t j = 0; j < inputs; ++j) {
      TensorId u = n.inputs[j];
      if (!pad) MapWork(r, rank);
      Listed(u, r, Elements(g_, u) / out_elements, true);
    }
  }

  // Elements of t's innermost dim of more than one element (1 when there is none).
  int64_t InnermostExtent(TensorId t) const {
    const Shape& dims = g_.tensor(t).dims;
    for (size_t d = dims.size(); d-- > 0;) {
      if (dims[d] != 1) return dims[d];
    }
    return 1;
  }

  static constexpr int64_t kLineBytes = 64;
  const Graph& g_;
  const FusionGroup& group_;
  const int threads_;
  const int64_t l1d_bytes_;
  std::unordered_map<TensorId, Requests> asked_;
  std::unordered_set<TensorId> hoisted_;
  std::unordered_set<TensorId> streamed_;  // Leaves (and views of them) read in place, run by run.
  std::unordered_set<TensorId> read_;      // Leaves (and views of them) read any other way.
  double piece_calls_ = 0;                 // While visiting a value's pieces: how many there are.
  std::unordered_map<TensorId, TensorId> chain_head_;  // Values of chains -> their head.
  std::unordered_map<TensorId, double> chain_calls_;   // Per chain head: its kernel calls.
  LoopEvaluation out_;
};

}  // namespace

LoopEvaluation EvaluateLoop(const Graph& g, const FusionGroup& group,
                            const std::vector<TensorId>& leaving, int threads, int64_t l1d_bytes) {
  Walk walk(g, group, threads, l1d_bytes);
  std::vector<NodeId> nodes;
  double pulls = 0;
  for (NodeId id : group.nodes) {
    const Node& n = g.node(id);
    if (ClassifyNode(g, n) == OpClass::kReduction) {
      // The reduction reads its whole input once, as ranges, row by row in chunks; nodes after
      // it are its epilogue.
      TensorId in = n.inputs[0];
      walk.Ask(in, {Elements(g, in), 0, 0});
      double rows = n.op_type == "Softmax"
                        ? Elements(g, in) / std::max<int64_t>(1, g.tensor(in).dims.back())
                        : Elements(g, n.outputs[0]);
      double len = Elements(g, in) / std::max(rows, 1.0);
      // Rows shorter than a tile are pulled a block of rows at a time, longer ones chunk by chunk.
      pulls = len < kLoopTile ? std::ceil(rows / std::floor(kLoopTile / std::max(len, 1.0)))
                              : rows * std::ceil(len / kLoopTile);
      break;
    }
    nodes.push_back(id);
  }
  // Chains form in the loop, or in a reduction's prologue and in its epilogue apart.
  const std::unordered_set<TensorId> outputs(leaving.begin(), leaving.end());
  std::unordered_map<TensorId, TensorId> head_of = Chains(g, nodes, outputs);
  if (nodes.size() + 1 < group.nodes.size()) {
    std::vector<NodeId> epilogue(group.nodes.begin() + nodes.size() + 1, group.nodes.end());
    head_of.merge(Chains(g, epilogue, outputs));
  }
  // A plain loop (no reduction) whose tiles take no buffers walks longer ones.
  const bool streams =
      nodes.size() == group.nodes.size() && StreamRule(g, nodes, outputs, head_of).Streams();
  walk.SetChains(std::move(head_of));
  // Outputs with as many elements share one pass over the same tiles (FusedLoop::Run).
  std::unordered_set<double> passes;
  for (TensorId t : leaving) {
    if (std::find(nodes.begin(), nodes.end(), g.tensor(t).producer) == nodes.end()) continue;
    walk.Ask(t, {Elements(g, t), 0, 0});
    const int64_t elements = g.tensor(t).num_elements();
    const double tile =
        static_cast<double>(streams ? StreamingTileElements(elements, threads) : kLoopTileElements);
    if (passes.insert(Elements(g, t)).second) pulls += std::ceil(Elements(g, t) / tile);
  }
  LoopEvaluation e = walk.Run(nodes, pulls);
  e.streams = streams;
  return e;
}

}  // namespace fusor
