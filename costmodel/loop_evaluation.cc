#include "costmodel/loop_evaluation.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "lowering/loop_program.h"
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

// The walk of one loop program (lowering/loop_program.h) from its last step to its first, each
// step pushing the requests it was asked for to its operands as the operand's read says.
class Walk {
 public:
  Walk(const Graph& g, const LoopProgram& program, int threads, int64_t l1d_bytes)
      : g_(g), program_(program), threads_(threads), l1d_bytes_(l1d_bytes) {}

  // Values of `program`'s chains (a reduction's epilogue has its own program).
  void AddChains(const LoopProgram& program) {
    for (const LoopStep& s : program.steps) {
      if (s.value.chain_head == kNoId) continue;
      chain_head_[s.tensor] = s.value.chain_head;
      if (s.value.chained) out_.chained.insert(s.tensor);
    }
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

  // Evaluates the program's steps from the last to the first, pushing requests to their operands.
  // `pulls`: how many times the expression is pulled (tiles, or rows times chunks).
  LoopEvaluation Run(double pulls) {
    for (auto it = program_.steps.rbegin(); it != program_.steps.rend(); ++it) Visit(*it);
    std::unordered_set<TensorId> values;
    for (const LoopStep& s : program_.steps) {
      out_.evaluated[s.tensor] = asked_[s.tensor].total();
      if (s.owns_buffer) out_.own_buffers.insert(s.tensor);
      values.insert(s.tensor);
      for (const LoopOperand& o : s.operands) {
        if (g_.tensor(o.tensor).kind != TensorKind::kConstant) values.insert(o.tensor);
      }
    }
    // A value evaluated once per thread (hoisted), and what only it reads, is not pulled per tile:
    // the lowering says which (LoopProgram::evaluated_once); constants are never evaluated.
    double once = 0;
    // Neither is a broadcast leaf read only in place, run by run (no evaluation call).
    double per_tile = 0;
    for (TensorId t : values) {
      if (out_.chained.count(t)) continue;  // Computed in registers inside its reader's chain.
      bool in_place_only = streamed_.count(t) && !read_.count(t) && asked_[t].total() == 0;
      if (program_.evaluated_once.count(t)) {
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
  bool Internal(TensorId t) const { return program_.Find(t) != nullptr; }

  // Index work of one affine map over the consumer's requests, in a space of `rank` dims (a
  // map's RunShape::rank, the step's own for the index work of Concat, Pad, Gather and Resize).
  // From a range the map walks runs, and a list of consecutive runs is stepped along (cheap); a
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

  // Input `u` read at the consumer's own indices: the consumer's requests pass through.
  void Identity(TensorId u, Requests r) {
    if (Internal(u)) return Ask(u, r);
    read_.insert(u);
    out_.gathered_elements += r.list();  // A leaf at an index list is a gather.
  }

  // Marks u and the values it views, down to its ViewSource.
  void MarkThroughViews(TensorId u, std::unordered_set<TensorId>* marked) const {
    for (const LoopStep* s = nullptr;; u = s->operands[0].tensor) {
      marked->insert(u);
      s = program_.Find(u);
      if (s == nullptr || s->value.kind != LoopValueKind::kView) return;
    }
  }

  // Operand `o` of step `s` read through its map from requests `r`, as the program records the
  // map's runs (o.runs: their length, step, streams and rank). A leaf (or views of one) read from
  // a range is copied run by run; a computed value read from a range in runs of at least
  // kMinEvaluatedRun is asked for each run as a piece; anything else becomes an index list for it.
  void Mapped(const LoopStep& s, const LoopOperand& o, Requests r) {
    const TensorId u = o.tensor;
    const bool inner_step_one = o.runs.step == 1;
    if (double run = inner_step_one ? static_cast<double>(o.runs.length) : 0;
        r.range > 0 && run >= kMinRun && o.computed) {
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
    MapWork(r, MapRank(o));
    if (!o.computed) {
      MarkThroughViews(u, &read_);
      out_.gathered_elements += r.list();  // Gathered; a range is copied run by run (above)...
      // ...with a stride when the map moves the innermost dim of a tensor it does not broadcast:
      // no two consecutive reads share a cache line. When the lines of the streams the walk reads
      // side by side (RunShape::streams, one line each) fit in half of L1, the next reads of each
      // stream find the rest of its line there (BERT's K^T, 12x64x128 from 128x12x64, 128
      // streams: 47 us for 98K elements; a DepthToSpace, its blocksize); more streams miss L1 on
      // every read, as costly as re-indexing each element ([768,512] -> [512,768], 768 streams:
      // 441 us for 393K).
      bool strided = !inner_step_one && Elements(g_, u) >= Elements(g_, s.tensor);
      if (strided) {
        const bool lines_stay = o.runs.streams * kLineBytes <= l1d_bytes_ / 2;
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

  // A step asked for pieces is visited twice: once for the pieces, whose inputs are asked for
  // pieces too (one more evaluation call per piece), once for the rest.
  void Visit(const LoopStep& s) {
    Requests r = asked_[s.tensor];
    if (r.pieces > 0) {
      piece_calls_ = r.piece_calls;
      out_.eval_calls += r.piece_calls;
      VisitFor(s, {r.pieces, 0, 0, 0, 0});
      piece_calls_ = 0;
    }
    VisitFor(s, {r.range, r.runs, r.scattered, 0, 0});
  }

  void VisitFor(const LoopStep& s, Requests r) {
    if (r.total() == 0) return;
    const size_t rank = g_.tensor(s.tensor).dims.size();
    if (s.value.kind == LoopValueKind::kView) out_.passed_through.insert(s.tensor);
    if (s.operands.empty()) return;
    switch (s.operands[0].read) {
      case OperandRead::kConcatPart:
      case OperandRead::kPadded:
        return VisitSelect(s, r, rank);
      case OperandRead::kResized:
        return VisitResize(s, r, rank);
      case OperandRead::kGatherData:
        return VisitGather(s, r, rank);
      default:
        break;
    }
    bool may_stream = true;  // The first streamed operand that streams does; the other is mapped.
    for (size_t j = 0; j < s.operands.size(); ++j) {
      const LoopOperand& o = s.operands[j];
      const TensorId u = o.tensor;
      if (u == kNoId || g_.tensor(u).kind == TensorKind::kConstant) continue;
      // The chain's first value read again from registers (LoopValue::saved_input): no request.
      if (static_cast<int>(j) == s.value.saved_input) continue;
      switch (o.read) {
        case OperandRead::kScalar:
          if (Internal(u)) Ask(u, {1, 0});
          break;
        case OperandRead::kSame:
          Identity(u, r);
          break;
        case OperandRead::kStreamed:
          if (double span = may_stream && o.computed ? StreamedSpan(s, o, r) : 0;
              may_stream && (!o.computed || span > 0)) {
            o.computed ? StreamedComputed(s, o, r, span) : Streamed(s, o, r);
            may_stream = false;
            break;
          }
          Mapped(s, o, r);
          break;
        default:
          Mapped(s, o, r);
          break;
      }
    }
  }

  // Gather: a range copied block by block when it copies blocks (runtime: GatherRuns): one index
  // read and one run of the data per block, the data asked for as pieces when computed. Else (and
  // for index lists) both operands are read through index lists (runtime: EvalGather): the indices
  // at a list that steps along the output's innermost dim only when the axis is the data's last,
  // the data in runs of its blocks.
  void VisitGather(const LoopStep& s, Requests r, size_t rank) {
    const LoopOperand& data = s.operands[0];
    const LoopOperand& indices = s.operands[1];
    if (r.range > 0 && s.copies_blocks) {
      double runs = std::max(r.range / static_cast<double>(s.block), 1.0);
      out_.run_calls += runs;
      Identity(indices.tensor, {runs, 0, 0});
      if (data.computed) {
        Ask(data.tensor, {0, 0, 0, r.range, runs});
      } else {
        MarkThroughViews(data.tensor, &read_);
        out_.indexed_elements += r.range;
      }
      r.range = 0;
      if (r.list() == 0) return;
    }
    const bool blocks = s.block > 1;
    MapWork(r, rank);
    MapWork(r, rank);
    Listed(indices.tensor, r, 1.0, /*in_runs=*/!blocks);
    Listed(data.tensor, r, 1.0, /*in_runs=*/blocks);
  }

  // A binary step reads its first streamed leaf operand straight from the leaf, run by run
  // (runtime: StreamedOperand): no copy, one kernel call per run. Requests that come as index
  // lists are gathered as for any leaf.
  // Calls per run of `o`: at least one per piece while visiting pieces.
  double StreamCalls(const LoopOperand& o, Requests r) const {
    return std::max(r.range / static_cast<double>(o.runs.length), r.range > 0 ? piece_calls_ : 0.0);
  }
  // A chain walks its range in pieces over which all its streamed operands step evenly: one
  // kernel call per piece, about as many as the most runs any one operand has (they line up
  // in the usual case, rows of layer norm's per-row scale and of its weights).
  void AddStreamCalls(const LoopStep& s, double calls) {
    auto head = chain_head_.find(s.tensor);
    if (head == chain_head_.end()) {
      out_.run_calls += calls;
      return;
    }
    double& chain = chain_calls_[head->second];
    chain = std::max(chain, calls);
  }
  void Streamed(const LoopStep& s, const LoopOperand& o, Requests r) {
    AddStreamCalls(s, StreamCalls(o, r));
    Requests lists{0, r.runs, r.scattered};
    MarkThroughViews(o.tensor, &streamed_);                    // Read in place from a range...
    if (lists.list() > 0) MarkThroughViews(o.tensor, &read_);  // ...and at an index list.
    MapWork(lists, MapRank(o));
    out_.gathered_elements += lists.list();
  }

  // A computed broadcast operand is streamed too when all of it is at most a tile, evaluated whole
  // once by each thread that runs a tile, or when the span of its elements a tile reads
  // is at most a quarter of the tile, evaluated once per tile over that span (BroadcastReadOf,
  // lowering/loop_lowering.h, as the runtime reads it); then read run by run. The span: the tile's
  // share of u, plus one element when u is broadcast along the innermost dim or one run of u's
  // trailing dims otherwise, at most all of u. Returns the span per tile, 0 when u is not streamed.
  double StreamedSpan(const LoopStep& s, const LoopOperand& o, Requests r) const {
    if (r.range == 0) return 0;
    const double tile = std::min(kLoopTile, r.range);
    const double run = o.runs.step == 0 ? 1 : static_cast<double>(o.runs.length);
    const double whole = Elements(g_, o.tensor);
    const double span = std::min(whole, tile * whole / Elements(g_, s.tensor) + run);
    switch (BroadcastReadOf(/*computed=*/true, whole, span, tile)) {
      case BroadcastRead::kWholeOnce:
        return whole;
      case BroadcastRead::kSpan:
        return span;
      default:
        return 0;
    }
  }
  void StreamedComputed(const LoopStep& s, const LoopOperand& o, Requests r, double span) {
    AddStreamCalls(s, StreamCalls(o, r));
    const double tile = std::min(kLoopTile, r.range), whole = Elements(g_, o.tensor);
    if (whole <= tile) hoisted_.insert(o.tensor);
    // Every thread that runs a tile hoists its own copy (a loop of one tile runs on one thread).
    const double hoisting = r.range > kLoopTile ? threads_ : 1;
    Ask(o.tensor, {whole <= tile ? whole * hoisting : std::ceil(r.range / kLoopTile) * span, 0, 0});
    Requests lists{0, r.runs, r.scattered};
    if (lists.list() > 0) Mapped(s, o, lists);
  }

  // Resize: each output coordinate looked up per element; nearest reads the input once per
  // element, linear blends the corners around it, evaluating the input at a scattered list once
  // per corner.
  void VisitResize(const LoopStep& s, Requests r, size_t rank) {
    for (size_t d = 0; d < rank; ++d) MapWork(r, rank);
    out_.gathered_elements += r.total() * s.corners;  // Positions and weights, corner by corner.
    Listed(s.operands[0].tensor, r, s.corners, /*in_runs=*/false);
  }

  // A Concat asked for a range walks it in runs, each a range of one input (runtime: ConcatRuns):
  // one run per input per index of the dims before the axis, one evaluation call each; a leaf is
  // copied (indexed), a computed input evaluated in place. Concat and Pad asked at index lists:
  // coordinates tested per element (per dim for a Pad), then each input evaluated at the list of
  // the elements that come from it.
  void VisitSelect(const LoopStep& s, Requests r, size_t rank) {
    const bool pad = s.operands[0].read == OperandRead::kPadded;
    const double out_elements = Elements(g_, s.tensor);
    if (!pad && r.range > 0) {
      for (const LoopOperand& o : s.operands) {
        const double share = Elements(g_, o.tensor) / out_elements;
        if (share == 0) continue;
        const double outer = Elements(g_, o.tensor) / static_cast<double>(o.runs.length);
        out_.run_calls += outer * r.range / out_elements;
        if (Internal(o.tensor)) {
          Ask(o.tensor, {r.range * share, 0, 0});
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
    for (const LoopOperand& o : s.operands) {
      if (!pad) MapWork(r, rank);
      Listed(o.tensor, r, Elements(g_, o.tensor) / out_elements, true);
    }
  }

  // The dims a list read through o's map is divided into (at least one).
  static size_t MapRank(const LoopOperand& o) { return static_cast<size_t>(o.runs.rank); }

  static constexpr int64_t kLineBytes = 64;
  const Graph& g_;
  const LoopProgram& program_;
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

LoopEvaluation EvaluateLoop(const Graph& g, const GroupLowering& lowering, int threads,
                            int64_t l1d_bytes) {
  // A reduction's prologue is pulled over the reduction's whole input, as ranges, row by row in
  // chunks; its epilogue's chains are counted with the prologue's.
  const bool reduction = lowering.form == KernelForm::kRowReduction ||
                         lowering.form == KernelForm::kReductionPrimitive;
  const LoopProgram& program = reduction ? lowering.prologue : lowering.loop;
  Walk walk(g, program, threads, l1d_bytes);
  walk.AddChains(program);
  double pulls = 0;
  if (reduction) {
    const TensorId in = g.node(lowering.center).inputs[0];
    walk.Ask(in, {Elements(g, in), 0, 0});
    pulls = static_cast<double>(lowering.prologue_pulls);
    walk.AddChains(lowering.loop);
  } else {
    // Outputs with as many elements share one pass over the same tiles (FusedLoop::Run), of
    // longer tiles when the loop streams.
    std::unordered_set<double> passes;
    for (TensorId t : program.outputs) {
      if (program.Find(t) == nullptr) continue;
      walk.Ask(t, {Elements(g, t), 0, 0});
      const int64_t elements = g.tensor(t).num_elements();
      const double tile = static_cast<double>(LoopTileElements(program.streams, elements, threads));
      if (passes.insert(Elements(g, t)).second) pulls += std::ceil(Elements(g, t) / tile);
    }
  }
  LoopEvaluation e = walk.Run(pulls);
  e.streams = !reduction && program.streams;
  return e;
}

LoopEvaluation EvaluateLoop(const Graph& g, const FusionGroup& group,
                            const std::vector<TensorId>& leaving, int threads, int64_t l1d_bytes) {
  return EvaluateLoop(g, LowerGroup(g, group, leaving), threads, l1d_bytes);
}

}  // namespace fusor
