#include "costmodel/loop_evaluation.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "graph/node_attrs.h"
#include "graph/op_registry.h"
#include "lowering/affine_map.h"
#include "lowering/loop_lowering.h"
#include "lowering/threading.h"

namespace fusor {
namespace {

// Elements per tile of our loops (runtime/fused_loop.h).
constexpr double kLoopTile = kLoopTileElements;
// Elements per run, at least, for a value to be read in runs (lowering/loop_lowering.h).
constexpr double kMinRun = static_cast<double>(kMinEvaluatedRun);

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

double Elements(const Graph& g, TensorId t) {
  return static_cast<double>(g.tensor(t).num_elements());
}

// Elements per run when a leaf of dims `in` is read through its broadcast into `out` from a range,
// as the runtime's ForEachRun walks it (lowering/affine_map.h). `broadcast_run`, when given, is set
// to whether the runs repeat one element of `in` (true when `out` has no dim longer than 1).
double RunLength(const Shape& in, const Shape& out, bool* broadcast_run = nullptr) {
  const RunShape run = RunShapeOf(BroadcastMap(in, out), out);
  if (broadcast_run != nullptr) *broadcast_run = run.step == 0;
  return static_cast<double>(run.length);
}

// Each value of the lowering's chains -> its chain's head.
std::unordered_map<TensorId, TensorId> ChainHeads(const LoopLowering& lowered) {
  std::unordered_map<TensorId, TensorId> head_of;
  for (const auto& [t, v] : lowered.values) {
    if (v.chain_head != kNoId) head_of[t] = v.chain_head;
  }
  return head_of;
}

class Walk {
 public:
  Walk(const Graph& g, const FusionGroup& group, int threads, int64_t l1d_bytes)
      : g_(g), group_(group), threads_(threads), l1d_bytes_(l1d_bytes) {}

  void SetEvaluatedOnce(std::unordered_set<TensorId> once) { evaluated_once_ = std::move(once); }

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
    // A value evaluated once per thread (hoisted), and what only it reads, is not pulled per tile:
    // the lowering says which (LoopLowering::evaluated_once); constants are never evaluated.
    double once = 0;
    // Neither is a broadcast leaf read only in place, run by run (no evaluation call).
    double per_tile = 0;
    for (TensorId t : values) {
      if (out_.chained.count(t)) continue;  // Computed in registers inside its reader's chain.
      bool in_place_only = streamed_.count(t) && !read_.count(t) && asked_[t].total() == 0;
      if (evaluated_once_.count(t)) {
        ++once;
      } else if (!in_place_only) {
        ++per_tile;
      }
    }
    out_.eval_calls += pulls * per_tile + once;
    for (const auto& [head, calls] : chain_calls_) out_.run_calls += calls;
    for (const auto& [t, head] : chain_head_) out_.chain_steps += asked_[t].total();
    out_.hoisted = hoisted_;
    out_.pulls = pulls;
    return out_;
  }

 private:
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
    while (Internal(u) && IsViewOp(g_.node(g_.tensor(u).producer).op_type)) {
      u = g_.node(g_.tensor(u).producer).inputs[0];
    }
    return u;
  }
  // Marks u and the values it views, down to its ViewSource.
  void MarkThroughViews(TensorId u, std::unordered_set<TensorId>* marked) const {
    for (;; u = g_.node(g_.tensor(u).producer).inputs[0]) {
      marked->insert(u);
      if (!Internal(u) || !IsViewOp(g_.node(g_.tensor(u).producer).op_type)) return;
    }
  }

  // Input `u` of `n` read through a non-identity map walking `runs` from requests `r` over `rank`
  // dims. A leaf
  // (or views of one) read from a range is copied run by run; a computed value read from a range
  // in runs of at least kMinEvaluatedRun is asked for each run as a piece; anything else becomes
  // an index list for `u`.
  void Mapped(const Node& n, TensorId u, Requests r, size_t rank, RunShape runs) {
    const bool inner_step_one = runs.step == 1;
    if (double run = inner_step_one ? static_cast<double>(runs.length) : 0;
        r.range > 0 && run >= kMinRun && Internal(ViewSource(u))) {
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
  void Listed(TensorId u, Requests r, double share, bool in_runs) {
    Requests l = ListFrom(r, in_runs);
    l.runs *= share;
    l.scattered *= share;
    if (Internal(u)) return Ask(u, l);
    read_.insert(u);
    out_.gathered_elements += l.list();
  }

  // The runs the map from `n`'s output to its input `u` walks over a range, as the runtime's
  // ForEachRun walks them (lowering/affine_map.h): a mapped value (Transpose, Slice, Split, Expand,
  // a one-index Gather) reads through the map the runtime compiles (MappedReadOf), with its real
  // steps; any other operand through its broadcast. A map that cannot be built reads no runs.
  RunShape ReadRuns(const Node& n, TensorId u) const {
    const Shape& out = g_.tensor(n.outputs[0]).dims;
    if (out.empty()) return {};
    if (LoopValueKindOf(g_, n) != LoopValueKind::kMapped || u != n.inputs[0]) {
      return RunShapeOf(BroadcastMap(g_.tensor(u).dims, out), out);
    }
    StatusOr<Affine> m = MappedReadOf(g_, n, 0);
    return m.ok() ? RunShapeOf(*m, out) : RunShape{};
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
    if (LoopValueKindOf(g_, n) == LoopValueKind::kView) out_.passed_through.insert(out);
    if (IsViewOp(op)) return Identity(n.inputs[0], r);
    if (op == "Concat" || op == "Pad") return VisitSelect(n, r, rank);
    if (op == "Resize") return VisitResize(n, r, rank);
    if (op == "Gather" && GatherSliceIndex(g_, n) < 0) {
      if (r.range > 0 && GatherCopiesBlocks(g_, n)) {
        // A range is copied block by block (runtime: GatherRuns): one index read and one run of
        // the data per block, the data asked for as pieces when computed.
        double runs = std::max(r.range / static_cast<double>(GatherBlock(g_, n)), 1.0);
        out_.run_calls += runs;
        Identity(n.inputs[1], {runs, 0, 0});
        if (Internal(ViewSource(n.inputs[0]))) {
          Ask(n.inputs[0], {0, 0, 0, r.range, runs});
        } else {
          MarkThroughViews(n.inputs[0], &read_);
          out_.indexed_elements += r.range;
        }
        r.range = 0;
        if (r.list() == 0) return;
      }
      // Both inputs are read through index lists (runtime: EvalGather): the indices at a list
      // that steps along the output's innermost dim only when the axis is the data's last, the
      // data in runs of its blocks.
      const bool blocks = GatherBlock(g_, n) > 1;
      MapWork(r, rank);
      MapWork(r, rank);
      Listed(n.inputs[1], r, 1.0, /*in_runs=*/!blocks);
      return Listed(n.inputs[0], r, 1.0, /*in_runs=*/blocks);
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
           LoopValueKindOf(g_, n) == LoopValueKind::kView);
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
        // A per-channel operand is read through a list made element by element: no runs.
        Mapped(n, u, r, rank, per_channel ? RunShape{} : ReadRuns(n, u));
      }
    }
  }

  // A binary arithmetic node with no scalar operand reads its first broadcast leaf operand straight
  // from the leaf, run by run along the innermost dim (runtime: StreamedOperand): no copy, one
  // kernel call per run. Requests that come as index lists are gathered as for any leaf.
  bool StreamsOperands(const Node& n) const {
    if (!IsBinaryArithmetic(n.op_type)) return false;
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
  // is at most a quarter of the tile, evaluated once per tile over that span (BroadcastReadOf,
  // lowering/loop_lowering.h, as the runtime reads it); then read run by run. The span: the tile's
  // share of u, plus one element when u is broadcast along the innermost dim or one run of u's
  // trailing dims otherwise, at most all of u. Returns the span per tile, 0 when u is not streamed.
  double StreamedSpan(const Node& n, TensorId u, Requests r) const {
    if (r.range == 0) return 0;
    const Shape& in = g_.tensor(u).dims;
    const Shape& out = g_.tensor(n.outputs[0]).dims;
    double tile = std::min(kLoopTile, r.range);
    bool inner_broadcast = true;
    double run = RunLength(in, out, &inner_broadcast);
    if (inner_broadcast) run = 1;
    const double whole = Elements(g_, u);
    const double span = std::min(whole, tile * whole / Elements(g_, n.outputs[0]) + run);
    switch (BroadcastReadOf(/*computed=*/true, whole, span, tile)) {
      case BroadcastRead::kWholeOnce:
        return whole;
      case BroadcastRead::kSpan:
        return span;
      default:
        return 0;
    }
  }
  void StreamedComputed(const Node& n, TensorId u, Requests r, size_t rank, double span) {
    AddStreamCalls(n, StreamCalls(n, u, r));
    const double tile = std::min(kLoopTile, r.range), whole = Elements(g_, u);
    if (whole <= tile) hoisted_.insert(u);
    // Every thread that runs a tile hoists its own copy (a loop of one tile runs on one thread).
    const double hoisting = r.range > kLoopTile ? threads_ : 1;
    Ask(u, {whole <= tile ? whole * hoisting : std::ceil(r.range / kLoopTile) * span, 0, 0});
    Requests lists{0, r.runs, r.scattered};
    if (lists.list() > 0) Mapped(n, u, lists, rank, ReadRuns(n, u));
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
    Listed(n.inputs[0], r, corners, /*in_runs=*/false);
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
  std::unordered_set<TensorId> evaluated_once_;  // Values and leaves evaluated once per thread.
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
      pulls = static_cast<double>(
          RowReductionPulls(static_cast<int64_t>(rows), static_cast<int64_t>(len)));
      break;
    }
    nodes.push_back(id);
  }
  // Chains form in the loop, or in a reduction's prologue and in its epilogue apart.
  const LoopLowering lowered = LowerLoop(g, nodes, leaving);
  std::unordered_map<TensorId, TensorId> head_of = ChainHeads(lowered);
  if (nodes.size() + 1 < group.nodes.size()) {
    std::vector<NodeId> epilogue(group.nodes.begin() + nodes.size() + 1, group.nodes.end());
    head_of.merge(ChainHeads(LowerLoop(g, epilogue, leaving)));
  }
  // A plain loop (no reduction) whose tiles take no buffers walks longer ones.
  const bool streams = nodes.size() == group.nodes.size() && lowered.streams;
  walk.SetChains(std::move(head_of));
  walk.SetEvaluatedOnce(lowered.evaluated_once);
  // Outputs with as many elements share one pass over the same tiles (FusedLoop::Run).
  std::unordered_set<double> passes;
  for (TensorId t : leaving) {
    if (std::find(nodes.begin(), nodes.end(), g.tensor(t).producer) == nodes.end()) continue;
    walk.Ask(t, {Elements(g, t), 0, 0});
    const int64_t elements = g.tensor(t).num_elements();
    const double tile = static_cast<double>(LoopTileElements(streams, elements, threads));
    if (passes.insert(Elements(g, t)).second) pulls += std::ceil(Elements(g, t) / tile);
  }
  LoopEvaluation e = walk.Run(nodes, pulls);
  e.streams = streams;
  return e;
}

}  // namespace fusor
