#include "costmodel/calibration.h"

#include <chrono>
#include <cmath>
#include <optional>

#include "costmodel/in_plan.h"
#include "graph/graph_builder.h"
#include "lowering/plan_legality.h"

namespace fusor {
namespace {

// One benchmark graph, built node by node, that runs as one group.
class SuiteGraph : public GraphBuilder {
 public:
  explicit SuiteGraph(std::string name) : name_(std::move(name)) {}

  TensorId Input(Shape dims) { return GraphBuilder::Input(std::move(dims)); }

  // The whole graph as one group.
  StatusOr<CalibrationBenchmark> Finish(TensorId output) {
    Output(output);
    Graph& g = Linked();
    g.model_name = name_;
    std::vector<NodeId> all;
    for (NodeId id = 0; id < static_cast<NodeId>(g.num_nodes()); ++id) all.push_back(id);
    FUSOR_ASSIGN_OR_RETURN(GroupKind kind, InferGroupKind(g, all));
    FusionPlan plan{{FusionGroup{kind, all, {}}}};
    FUSOR_RETURN_IF_ERROR(CheckPlan(g, plan));
    return CalibrationBenchmark{name_, g, plan};
  }

  // Every node a group of its own, run one after another.
  StatusOr<CalibrationBenchmark> FinishApart(TensorId output) {
    Output(output);
    Graph& g = Linked();
    g.model_name = name_;
    FusionPlan plan;
    for (NodeId id = 0; id < static_cast<NodeId>(g.num_nodes()); ++id) {
      FUSOR_ASSIGN_OR_RETURN(GroupKind kind, InferGroupKind(g, {id}));
      plan.groups.push_back(FusionGroup{kind, {id}, {}});
    }
    FUSOR_RETURN_IF_ERROR(CheckPlan(g, plan));
    return CalibrationBenchmark{name_, g, plan};
  }

 private:
  std::string name_;
};

using Suite = std::vector<CalibrationBenchmark>;

void Keep(StatusOr<CalibrationBenchmark> b, Suite* suite) {
  // The builders above only make legal single groups; a failure here is a bug in this file.
  if (b.ok()) suite->push_back(std::move(b).value());
}

std::string KiB(int64_t bytes) { return std::to_string(bytes >> 10) + "KiB"; }

// Element counts whose float32 working set (input + output, 8 bytes an element) sits in L1, at a
// quarter and a half of L2, just past L2, at a quarter and a half of L3, and far past it (DRAM):
// two points per level, so that bandwidth is told apart from the fixed costs of a launch.
std::vector<int64_t> StreamSizes(const TargetFingerprint& t) {
  int64_t l1 = t.l1d_bytes * t.cores, l2 = t.l2_bytes * t.cores, l3 = std::max(t.l3_bytes, l2 * 2);
  return {l1 / 2 / 8, l2 / 4 / 8, l2 / 2 / 8, l2 * 2 / 8, l3 / 4 / 8, l3 / 2 / 8, l3 * 4 / 8};
}

void StreamFamily(const TargetFingerprint& t, Suite* s) {
  for (int64_t n : StreamSizes(t)) {
    SuiteGraph relu("stream_relu_" + KiB(n * 4));
    Keep(relu.Finish(relu.Op("Relu", {relu.Input({n})}, {n})), s);
    int64_t rows = std::max<int64_t>(1, n / 1024);
    SuiteGraph reduce("stream_reduce_sum_" + KiB(rows * 1024 * 4));
    TensorId x = reduce.Input({rows, 1024});
    Keep(reduce.Finish(
             reduce.Op("ReduceSum", {x, reduce.Ints({1})}, {rows, 1}, {{"keepdims", int64_t{1}}})),
         s);
    SuiteGraph expand("stream_expand_" + KiB(rows * 1024 * 4));
    TensorId row = expand.Input({1, 1024});
    Keep(expand.Finish(expand.Op("Expand", {row, expand.Ints({rows, 1024})}, {rows, 1024})), s);
  }
}

void ChainFamily(const TargetFingerprint& t, Suite* s, const std::vector<int>& lengths) {
  int64_t n = t.l2_bytes * t.cores / 4 / 4;
  for (int k : lengths) {
    SuiteGraph cheap("elementwise_chain_" + std::to_string(k));
    TensorId x = cheap.Input({n});
    for (int i = 0; i < k; ++i)
      x = cheap.Op(i % 2 ? "Add" : "Mul", {x, cheap.Scalar(i % 2 ? 0.25 : 0.5)}, {n});
    Keep(cheap.Finish(x), s);
    SuiteGraph trans("transcendental_chain_" + std::to_string(k));
    TensorId y = trans.Input({n});
    for (int i = 0; i < k; ++i) y = trans.Op(i % 2 ? "Sigmoid" : "Tanh", {y}, {n});
    Keep(trans.Finish(y), s);
  }
}

void MatMulFamily(Suite* s, const std::vector<int64_t>& sizes) {
  for (int64_t m : sizes) {
    for (int64_t k : {m, int64_t{4} * m}) {
      SuiteGraph mm("matmul_" + std::to_string(m) + "x" + std::to_string(k) + "x" +
                    std::to_string(m));
      TensorId a = mm.Input({m, k});
      Keep(mm.Finish(mm.Op("MatMul", {a, mm.Weight({k, m})}, {m, m})), s);
    }
  }
  // Skinny (memory-bound) products: one row against a large weight.
  for (int64_t n : {int64_t{768}, int64_t{3072}}) {
    SuiteGraph mv("matvec_1x" + std::to_string(n));
    TensorId a = mv.Input({1, n});
    Keep(mv.Finish(mv.Op("MatMul", {a, mv.Weight({n, n})}, {1, n})), s);
  }
}

std::vector<Attribute> ConvAttrs(int64_t kernel, int64_t group) {
  int64_t pad = kernel / 2;
  return {{"kernel_shape", std::vector<int64_t>{kernel, kernel}},
          {"pads", std::vector<int64_t>{pad, pad, pad, pad}},
          {"group", group}};
}

void ConvFamily(Suite* s, bool full) {
  std::vector<std::pair<int64_t, int64_t>> shapes = {
      {16, 56}, {64, 56}, {128, 28}, {256, 14}, {512, 7}};
  if (!full) shapes = {{64, 28}, {256, 14}};
  for (auto [c, hw] : shapes) {
    for (int64_t kernel : {int64_t{3}, int64_t{1}}) {
      SuiteGraph conv("conv" + std::to_string(kernel) + "x" + std::to_string(kernel) + "_c" +
                      std::to_string(c) + "_" + std::to_string(hw));
      TensorId x = conv.Input({1, c, hw, hw});
      Keep(conv.Finish(conv.Op("Conv", {x, conv.Weight({c, c, kernel, kernel})}, {1, c, hw, hw},
                               ConvAttrs(kernel, 1))),
           s);
    }
    SuiteGraph dw("depthwise_c" + std::to_string(c * 2) + "_" + std::to_string(hw));
    TensorId x = dw.Input({1, c * 2, hw, hw});
    Keep(dw.Finish(dw.Op("Conv", {x, dw.Weight({c * 2, 1, 3, 3})}, {1, c * 2, hw, hw},
                         ConvAttrs(3, c * 2))),
         s);
  }
  // Convs whose channel counts share no block (MobileNetV2's 24 against 144): where oneDNN has
  // brgemm convs they run channels-last, and their plain input and output are transposed in and
  // out (lowering/layout.h), which pins transpose_gbps. A 3-channel stem reads its input plain.
  struct Mixed {
    int64_t in, out, kernel, hw;
  };
  std::vector<Mixed> mixed = {{24, 144, 1, 56}, {144, 24, 1, 56}, {3, 32, 3, 56}};
  if (full) mixed.push_back({40, 240, 1, 28});
  for (const Mixed& m : mixed) {
    SuiteGraph conv("conv" + std::to_string(m.kernel) + "x" + std::to_string(m.kernel) + "_c" +
                    std::to_string(m.in) + "to" + std::to_string(m.out) + "_" +
                    std::to_string(m.hw));
    TensorId x = conv.Input({1, m.in, m.hw, m.hw});
    Keep(conv.Finish(conv.Op("Conv", {x, conv.Weight({m.out, m.in, m.kernel, m.kernel})},
                             {1, m.out, m.hw, m.hw}, ConvAttrs(m.kernel, 1))),
         s);
  }
}

void ReductionFamily(Suite* s) {
  for (int64_t cols : {int64_t{128}, int64_t{1024}, int64_t{4096}}) {
    SuiteGraph sm("softmax_64x" + std::to_string(cols));
    TensorId x = sm.Input({64, cols});
    Keep(sm.Finish(sm.Op("Softmax", {x}, {64, cols}, {{"axis", int64_t{-1}}})), s);
  }
  for (auto [c, hw] : std::vector<std::pair<int64_t, int64_t>>{{256, 14}, {1280, 7}}) {
    SuiteGraph gap("global_average_pool_c" + std::to_string(c) + "_" + std::to_string(hw));
    Keep(gap.Finish(gap.Op("GlobalAveragePool", {gap.Input({1, c, hw, hw})}, {1, c, 1, 1})), s);
  }
  SuiteGraph mean("reduce_mean_128x768");
  TensorId rows = mean.Input({1, 128, 768});
  Keep(mean.Finish(
           mean.Op("ReduceMean", {rows, mean.Ints({-1})}, {1, 128, 1}, {{"keepdims", int64_t{1}}})),
       s);
  SuiteGraph mp("max_pool_3x3_c64_112");
  TensorId x = mp.Input({1, 64, 112, 112});
  Keep(mp.Finish(mp.Op("MaxPool", {x}, {1, 64, 56, 56},
                       {{"kernel_shape", std::vector<int64_t>{3, 3}},
                        {"strides", std::vector<int64_t>{2, 2}},
                        {"pads", std::vector<int64_t>{1, 1, 1, 1}}})),
       s);
}

// Launch costs: loops of one tile (run on the calling thread) and of two (waking the thread
// team), matmuls on either side of the size where oneDNN starts to parallelise, tiny convs.
void DispatchFamily(Suite* s) {
  for (int64_t n : {int64_t{8}, int64_t{64}, int64_t{4096}, int64_t{8192}}) {
    SuiteGraph relu("tiny_relu_" + std::to_string(n));
    Keep(relu.Finish(relu.Op("Relu", {relu.Input({n})}, {n})), s);
  }
  for (int64_t m : {int64_t{4}, int64_t{16}, int64_t{32}}) {
    SuiteGraph mm("tiny_matmul_" + std::to_string(m));
    TensorId a = mm.Input({m, m});
    Keep(mm.Finish(mm.Op("MatMul", {a, mm.Weight({m, m})}, {m, m})), s);
  }
  for (int64_t c : {int64_t{4}, int64_t{64}}) {
    SuiteGraph conv("tiny_conv_c" + std::to_string(c) + "_4");
    TensorId x = conv.Input({1, c, 4, 4});
    Keep(
        conv.Finish(conv.Op("Conv", {x, conv.Weight({c, c, 1, 1})}, {1, c, 4, 4}, ConvAttrs(1, 1))),
        s);
  }
  SuiteGraph se("tiny_conv_c256_1");
  TensorId x = se.Input({1, 256, 1, 1});
  Keep(se.Finish(se.Op("Conv", {x, se.Weight({64, 256, 1, 1})}, {1, 64, 1, 1}, ConvAttrs(1, 1))),
       s);
}

// Recurrences of growing length on the recurrent kernel the lowering picks (lowering/rnn_form.h):
// a hidden size of 32 (R 12-16 KiB, in L1, on one thread: the fixed cost of a step shows), 64 and
// 256 (R 0.75-1 MiB, on the thread team: each core reads its half of R from its own L2 at every
// step, then waits at the step's barrier), as GRU (linear_before_reset 1, as torch exports it)
// and LSTM, batch 1; and at batch 8, whose steps are small GEMMs, an LSTM on our loop and a GRU
// on oneDNN's primitive (the rule sends it there), so both kernels' steps enter rnn_step_ns.
void RecurrentFamily(Suite* s, bool full) {
  struct Point {
    const char* op;
    int64_t hidden, seq, batch = 1;
  };
  std::vector<Point> points = {{"GRU", 32, 16},
                               {"GRU", 32, 128},
                               {"LSTM", 256, 32},
                               {"LSTM", 128, 32, 8},
                               {"GRU", 128, 32, 8}};
  if (full) {
    points.insert(
        points.end(),
        {{"LSTM", 32, 16}, {"LSTM", 32, 128}, {"GRU", 256, 32}, {"GRU", 256, 8}, {"LSTM", 64, 64}});
  }
  for (const Point& p : points) {
    const bool lstm = std::string(p.op) == "LSTM";
    const int64_t gates = lstm ? 4 : 3, h = p.hidden;
    SuiteGraph g(std::string(lstm ? "lstm" : "gru") + "_h" + std::to_string(h) + "_seq" +
                 std::to_string(p.seq) + (p.batch > 1 ? "_batch" + std::to_string(p.batch) : ""));
    TensorId x = g.Input({p.seq, p.batch, h});
    std::vector<Attribute> attrs = {{"hidden_size", h}};
    if (gates == 3) attrs.push_back({"linear_before_reset", int64_t{1}});
    Keep(g.Finish(g.Op(p.op,
                       {x, g.Weight({1, gates * h, h}), g.Weight({1, gates * h, h}),
                        g.Weight({1, 2 * gates * h})},
                       {p.seq, 1, p.batch, h}, attrs)),
         s);
  }
}

void PostOpFamily(Suite* s, const std::vector<int>& counts) {
  // A small conv, so that a post-op's fixed cost is a visible share of the time.
  const Shape dims = {1, 16, 8, 8};
  for (int k : counts) {
    SuiteGraph g("conv_post_ops_" + std::to_string(k));
    TensorId x = g.Input(dims);
    TensorId y = g.Op("Conv", {x, g.Weight({16, 16, 1, 1})}, dims, ConvAttrs(1, 1));
    for (int i = 0; i < k; ++i) {
      if (i % 3 == 0) y = g.Op("Relu", {y}, dims);
      if (i % 3 == 1) y = g.Op("Add", {y, g.Weight({16, 1, 1})}, dims);
      if (i % 3 == 2) y = g.Op("Mul", {y, g.Scalar(0.5)}, dims);
    }
    Keep(g.Finish(y), s);
  }
}

// A conv, then an elementwise group reading its output: the handoff of a just-computed tensor
// between kernels that split their work across cores differently (see cost_model.h), from a
// tensor of 43 KiB to one of 800 KiB, after a Relu and after a residual Add.
void HandoffFamily(Suite* s, bool full) {
  std::vector<std::pair<int64_t, int64_t>> shapes = {{64, 13}, {64, 28}, {64, 56}};
  if (!full) shapes = {{64, 13}, {64, 56}};
  for (auto [c, hw] : shapes) {
    const Shape dims = {1, c, hw, hw};
    for (const char* op : {"Relu", "Add"}) {
      SuiteGraph g(std::string("handoff_conv_") + op + "_c" + std::to_string(c) + "_" +
                   std::to_string(hw));
      TensorId y = g.Op("Conv", {g.Input(dims), g.Weight({c, c, 1, 1})}, dims, ConvAttrs(1, 1));
      y = op == std::string("Relu") ? g.Op(op, {y}, dims) : g.Op(op, {y, g.Input(dims)}, dims);
      Keep(g.FinishApart(y), s);
    }
  }
}

// x feeds `width` branches that a chain of adds combines: `width` values live at once.
void RegisterPressureFamily(const TargetFingerprint& t, Suite* s, const std::vector<int>& widths) {
  int64_t n = t.l2_bytes * t.cores / 4 / 4;
  const char* ops[] = {"Relu", "Tanh", "Sigmoid", "Exp"};
  for (int width : widths) {
    SuiteGraph g("wide_loop_" + std::to_string(width));
    TensorId x = g.Input({n});
    std::vector<TensorId> branches;
    for (int i = 0; i < width; ++i) branches.push_back(g.Op(ops[i % 4], {x}, {n}));
    TensorId acc = branches[0];
    for (int i = 1; i < width; ++i) acc = g.Op("Add", {acc, branches[i]}, {n});
    Keep(g.Finish(acc), s);
  }
}

// Index maps in fused loops: transposes, slices, concats and broadcasts of leaves (run by run) and
// of computed values (index lists, in runs or scattered), at sizes from real models.
void IndexingFamily(Suite* s) {
  const Shape heads = {1, 128, 12, 64}, moved = {1, 12, 128, 64};
  const std::vector<int64_t> perm = {0, 2, 1, 3};
  SuiteGraph t1("transpose_leaf_inner_kept");
  Keep(t1.Finish(t1.Op("Transpose", {t1.Input(heads)}, moved, {{"perm", perm}})), s);
  SuiteGraph t2("transpose_computed_inner_kept");
  TensorId r = t2.Op("Relu", {t2.Input(heads)}, heads);
  Keep(t2.Finish(t2.Op("Transpose", {r}, moved, {{"perm", perm}})), s);
  SuiteGraph t3("transpose_leaf_inner_moved");
  const std::vector<int64_t> swap = {1, 0};
  Keep(t3.Finish(t3.Op("Transpose", {t3.Input({768, 512})}, {512, 768}, {{"perm", swap}})), s);
  // Rows of 128 (BERT's K^T): a row's cache lines stay in L1 for the next rows.
  SuiteGraph t5("transpose_leaf_inner_moved_short_rows");
  Keep(t5.Finish(t5.Op("Transpose", {t5.Input(heads)}, {1, 12, 64, 128},
                       {{"perm", std::vector<int64_t>{0, 2, 3, 1}}})),
       s);
  SuiteGraph t4("transpose_computed_inner_moved");
  TensorId r4 = t4.Op("Relu", {t4.Input({768, 512})}, {768, 512});
  Keep(t4.Finish(t4.Op("Transpose", {r4}, {512, 768}, {{"perm", swap}})), s);
  SuiteGraph sl("slice_leaf_half");
  TensorId x = sl.Input({1, 128, 2304});
  Keep(sl.Finish(sl.Op("Slice", {x, sl.Ints({768}), sl.Ints({1536}), sl.Ints({2})}, {1, 128, 768})),
       s);
  SuiteGraph cat("concat_computed_c64_56");
  TensorId a = cat.Op("Relu", {cat.Input({1, 64, 56, 56})}, {1, 64, 56, 56});
  TensorId b = cat.Input({1, 64, 56, 56});
  Keep(cat.Finish(cat.Op("Concat", {a, b}, {1, 128, 56, 56}, {{"axis", int64_t{1}}})), s);
  SuiteGraph se("broadcast_computed_c256_28");
  TensorId gate = se.Op("Sigmoid", {se.Input({1, 256, 1, 1})}, {1, 256, 1, 1});
  Keep(se.Finish(se.Op("Mul", {se.Input({1, 256, 28, 28}), gate}, {1, 256, 28, 28})), s);
  // Normalisation-style: a per-row statistic, computed in the loop, broadcast along the rows; and
  // a per-column scale and shift read from weights.
  SuiteGraph nrm("broadcast_computed_rows_256x512");
  TensorId var = nrm.Op("Add", {nrm.Input({1, 256, 1}), nrm.Scalar(1e-5)}, {1, 256, 1});
  TensorId sd = nrm.Op("Sqrt", {var}, {1, 256, 1});
  Keep(nrm.Finish(nrm.Op("Div", {nrm.Input({1, 256, 512}), sd}, {1, 256, 512})), s);
  SuiteGraph aff("broadcast_columns_256x512");
  TensorId scaled = aff.Op("Mul", {aff.Input({1, 256, 512}), aff.Weight({512})}, {1, 256, 512});
  Keep(aff.Finish(aff.Op("Add", {scaled, aff.Weight({512})}, {1, 256, 512})), s);
  SuiteGraph bl("broadcast_leaf_c256_28");
  Keep(bl.Finish(
           bl.Op("Mul", {bl.Input({1, 256, 28, 28}), bl.Input({1, 256, 1, 1})}, {1, 256, 28, 28})),
       s);
  // Squeeze-and-excite scales over small planes: runs of 49 elements, so per-run calls dominate
  // (pins run_call_ns apart from loop_call_ns).
  for (int64_t c : {int64_t{480}, int64_t{1152}}) {
    SuiteGraph sl7("broadcast_leaf_c" + std::to_string(c) + "_7");
    Keep(
        sl7.Finish(sl7.Op("Mul", {sl7.Input({1, c, 7, 7}), sl7.Input({1, c, 1, 1})}, {1, c, 7, 7})),
        s);
    SuiteGraph sc7("broadcast_computed_c" + std::to_string(c) + "_7");
    TensorId g7 = sc7.Op("Sigmoid", {sc7.Input({1, c, 1, 1})}, {1, c, 1, 1});
    Keep(sc7.Finish(sc7.Op("Mul", {sc7.Input({1, c, 7, 7}), g7}, {1, c, 7, 7})), s);
  }
}

// Reductions with a fused prologue, from long rows to short ones (per-row overhead).
void RowReductionFamily(Suite* s) {
  for (auto [rows, len] : std::vector<std::pair<int64_t, int64_t>>{{128, 768}, {512, 49}}) {
    SuiteGraph g("relu_reduce_mean_" + std::to_string(rows) + "x" + std::to_string(len));
    TensorId x = g.Op("Relu", {g.Input({rows, len})}, {rows, len});
    Keep(g.Finish(g.Op("ReduceMean", {x, g.Ints({1})}, {rows, 1}, {{"keepdims", int64_t{1}}})), s);
  }
  SuiteGraph gap("relu_global_average_pool_c1024_7");
  TensorId x = gap.Op("Relu", {gap.Input({1, 1024, 7, 7})}, {1, 1024, 7, 7});
  Keep(gap.Finish(gap.Op("GlobalAveragePool", {x}, {1, 1024, 1, 1})), s);
}

// Transcendentals one at a time: Erf has no oneDNN eltwise form and runs in our loop; Exp and
// Sigmoid run as oneDNN eltwise primitives or our loop, and x * Sigmoid(x) as one eltwise_swish
// or our loop, whichever the runtime times faster. Each of those is timed again held to oneDNN
// (`onednn_chain`): with AVX-512 clones our loop won them all on the AVX-512 host, which left the
// jit rates without a sample (they sat at their bound and priced conv post-ops and the runtime's
// other choice as free).
// Two sizes each (a quarter of L2 and four times that), so that a rate is told apart from the
// launch costs.
void TranscendentalFamily(const TargetFingerprint& t, Suite* s) {
  for (int64_t n : {t.l2_bytes * t.cores / 4 / 4, t.l2_bytes * t.cores / 4}) {
    std::string size = "_" + KiB(n * 4);
    for (bool onednn : {false, true}) {
      std::string prefix = onednn ? "transcendental_onednn_" : "transcendental_";
      for (const char* op : {"Erf", "Exp", "Sigmoid", "swish"}) {
        if (onednn && op == std::string("Erf")) continue;
        SuiteGraph g(prefix + op + size);
        TensorId x = g.Input({n});
        TensorId y = op == std::string("swish") ? g.Op("Mul", {x, g.Op("Sigmoid", {x}, {n})}, {n})
                                                : g.Op(op, {x}, {n});
        Keep(g.Finish(y), s);
        s->back().onednn_chain = onednn;
      }
    }
  }
}

// One value read by many nodes of a loop: each reads it back from the tile buffer in L1, and the
// adds between them are cheap arithmetic (pins L1 reads and elementwise throughput).
void FanOutFamily(const TargetFingerprint& t, Suite* s, const std::vector<int>& readers) {
  int64_t n = t.l2_bytes * t.cores / 4 / 4;
  for (int k : readers) {
    SuiteGraph g("fan_out_loop_" + std::to_string(k));
    TensorId r = g.Op("Relu", {g.Input({n})}, {n});
    TensorId acc = r;
    for (int i = 0; i < k; ++i) acc = g.Op(i % 2 ? "Add" : "Mul", {acc, r}, {n});
    Keep(g.Finish(acc), s);
  }
}

// The features of a benchmark's groups, each as the way it ran: the runtime times a group it can
// run either way and keeps the faster, and with the least over both a sample could pay for a
// wrong constant by switching sides (seen: the loop's transcendental rate absorbing oneDNN's
// Sigmoid samples, 40% fit error). Later groups go in `then`.
GroupFeatures FeaturesOf(const CalibrationBenchmark& b, const TargetFingerprint& t,
                         const std::vector<bool>& primitive_chain) {
  std::vector<GroupFeatures> groups = PlanFeatures(b.graph, b.plan, t);
  if (primitive_chain.size() == groups.size()) {
    for (size_t i = 0; i < groups.size(); ++i) {
      if (groups[i].or_else.empty()) continue;
      if (primitive_chain[i]) groups[i] = GroupFeatures(groups[i].or_else[0]);
      groups[i].or_else.clear();
    }
  }
  GroupFeatures f = groups.at(0);
  f.then.assign(groups.begin() + 1, groups.end());
  return f;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::vector<CalibrationBenchmark> CalibrationSuite(const TargetFingerprint& target, double scale) {
  bool full = scale >= 1.0;
  Suite s;
  StreamFamily(target, &s);
  ChainFamily(target, &s, full ? std::vector<int>{1, 2, 4, 8, 16} : std::vector<int>{1, 8});
  MatMulFamily(&s, full ? std::vector<int64_t>{64, 128, 256, 512} : std::vector<int64_t>{64, 256});
  ConvFamily(&s, full);
  ReductionFamily(&s);
  IndexingFamily(&s);
  TranscendentalFamily(target, &s);
  FanOutFamily(target, &s, full ? std::vector<int>{4, 16} : std::vector<int>{8});
  RowReductionFamily(&s);
  DispatchFamily(&s);
  HandoffFamily(&s, full);
  PostOpFamily(&s, full ? std::vector<int>{0, 1, 2, 4, 6} : std::vector<int>{0, 4});
  RecurrentFamily(&s, full);
  RegisterPressureFamily(target, &s,
                         full ? std::vector<int>{4, 8, 12, 16, 24, 32} : std::vector<int>{4, 24});
  return s;
}

std::vector<CalibrationBenchmark> InPlanSuite(const TargetFingerprint& target) {
  const int64_t capacity[kColdSteps] = {target.l1d_bytes * target.cores,
                                        target.l2_bytes * target.cores, target.l3_bytes};
  constexpr const char* kStep[kColdSteps] = {"l1_to_l2", "l2_to_l3", "l3_to_dram"};
  // Six groups: the five other weights between two reads of one are 1.25x the level.
  constexpr int kGroups = 6;
  Suite s;
  for (int step = 0; step < kColdSteps; ++step) {
    const auto d = static_cast<int64_t>(std::sqrt(static_cast<double>(capacity[step]) / 4 / 4));
    SuiteGraph chain("inplan_" + std::string(kStep[step]) + "_matvec_" + std::to_string(d));
    TensorId x = chain.Input({1, d});
    for (int i = 0; i < kGroups; ++i) x = chain.Op("MatMul", {x, chain.Weight({d, d})}, {1, d});
    Keep(chain.FinishApart(x), &s);
  }
  return s;
}

StatusOr<InPlanConstants> CalibrateInPlan(const std::vector<CalibrationBenchmark>& suite,
                                          const TargetFingerprint& target,
                                          const InPlanMeasureFn& measure) {
  std::vector<InPlanSample> samples;
  for (const CalibrationBenchmark& b : suite) {
    FUSOR_ASSIGN_OR_RETURN(InPlanTimes t, measure(b.graph, b.plan));
    const std::vector<InPlanGroupReads> reads = InPlanReadsOf(b.graph, b.plan, target);
    if (t.alone_ns.size() != reads.size() || t.in_plan_ns.size() != reads.size()) {
      return Status::Internal("in-plan benchmark '" + b.name +
                              "': " + std::to_string(t.alone_ns.size()) +
                              " groups timed, the plan has " + std::to_string(reads.size()));
    }
    for (size_t i = 0; i < reads.size(); ++i) {
      samples.push_back({reads[i].cold_bytes, t.in_plan_ns[i], t.alone_ns[i]});
    }
  }
  return FitInPlanConstants(samples);
}

namespace {

using Timings = std::vector<std::optional<MeasuredTime>>;

// The suite's measurer, with the measure of each benchmark: oneDNN's primitive chain for the
// benchmarks held to it, the plain one for the rest.
struct SuiteMeasure {
  const std::vector<CalibrationBenchmark>& suite;
  const MeasureFn& measure;
  const MeasureFn& measure_onednn_chain;
  const ProgressFn& progress;

  const MeasureFn& Of(const CalibrationBenchmark& b) const {
    return b.onednn_chain ? measure_onednn_chain : measure;
  }
};

// Each benchmark timed once, in suite order; a benchmark without a measure is left untimed.
StatusOr<Timings> TimeSuite(const SuiteMeasure& m) {
  Timings times(m.suite.size());
  for (size_t i = 0; i < m.suite.size(); ++i) {
    const CalibrationBenchmark& b = m.suite[i];
    if (!m.Of(b)) continue;
    if (m.progress) m.progress(i, m.suite.size(), b.name);
    auto t = m.Of(b)(b.graph, b.plan);
    if (!t.ok()) return t.status().WithContext("calibration benchmark '" + b.name + "'");
    times[i] = *t;
  }
  return times;
}

// A slow state of the host can outlast the measurer's wait for a quiet one; the benchmarks that
// move data between cores (handoffs) then fit constants several times too slow, and a stretch
// that covers most of the suite fitted the loops' transcendental rate at 3.6 G/s instead of 6.
// Time those again, in up to kRetimePasses passes after the suite (slow states last seconds),
// keeping the quickest timing; one taken in a quiet state settles the benchmark. A failure (the
// time limit) ends the retiming and keeps what was timed. Names the benchmarks still disturbed.
void RetimeDisturbed(const SuiteMeasure& m, Timings& times, CalibrationResult& result) {
  constexpr int kRetimePasses = 3;
  const size_t n = m.suite.size();
  bool out_of_time = false;
  for (int pass = 0; pass < kRetimePasses && !out_of_time; ++pass) {
    for (size_t i = 0; i < n && !out_of_time; ++i) {
      if (!times[i] || !times[i]->disturbed || times[i]->unstable) continue;
      const CalibrationBenchmark& b = m.suite[i];
      if (m.progress) m.progress(n, n, "again: " + b.name);
      ++result.retimed_disturbed;
      auto again = m.Of(b)(b.graph, b.plan);
      out_of_time = !again.ok();
      if (out_of_time || again->unstable) continue;
      const bool quiet = !again->disturbed;
      if (again->median_ns < times[i]->median_ns) times[i] = *again;
      if (quiet) times[i]->disturbed = false;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (times[i] && times[i]->disturbed) result.disturbed.push_back(m.suite[i].name);
  }
}

// `previous` and a sample of each stable timing, with the features of the kernels that ran; an
// unstable timing is named and left out.
void KeepStableSamples(const std::vector<CalibrationBenchmark>& suite, const Timings& times,
                       const TargetFingerprint& target,
                       const std::vector<CalibrationSample>& previous, CalibrationResult& result) {
  result.samples = previous;
  for (size_t i = 0; i < suite.size(); ++i) {
    const CalibrationBenchmark& b = suite[i];
    if (!times[i]) continue;
    const MeasuredTime& m = *times[i];
    if (m.unstable) {
      ++result.skipped_unstable;
      result.unstable.push_back(b.name + " (cv " + std::to_string(m.cv) + ")");
      continue;
    }
    result.samples.push_back({b.name, FeaturesOf(b, target, m.primitive_chain), m.median_ns});
  }
}

// The profile fitted from `start` over the samples, stamped now and with this cost model, and
// checked to be plausible.
Status FitProfileOverSamples(const HardwareProfile& start, CalibrationResult& result) {
  result.profile = start;
  FUSOR_ASSIGN_OR_RETURN(result.report, FitProfile(result.samples, &result.profile));
  result.profile.calibrated_unix_ms = NowMs();
  result.profile.cost_model_version = kCostModelVersion;
  return CheckPlausible(result.profile).WithContext("fitted profile");
}

}  // namespace

// The calibration, one stage a function, in the order they run.
StatusOr<CalibrationResult> Calibrate(const std::vector<CalibrationBenchmark>& suite,
                                      const HardwareProfile& start, const MeasureFn& measure,
                                      const ProgressFn& progress,
                                      const std::vector<CalibrationSample>& previous,
                                      const MeasureFn& measure_onednn_chain) {
  const SuiteMeasure m{suite, measure, measure_onednn_chain, progress};
  CalibrationResult result;
  FUSOR_ASSIGN_OR_RETURN(Timings times, TimeSuite(m));
  RetimeDisturbed(m, times, result);
  KeepStableSamples(suite, times, start.target, previous, result);
  if (progress) progress(suite.size(), suite.size(), "fit");
  FUSOR_RETURN_IF_ERROR(FitProfileOverSamples(start, result));
  return result;
}

namespace {

nlohmann::json FeaturesToJson(const GroupFeatures& f) {
  nlohmann::json or_else = nlohmann::json::array();
  for (const GroupFeatures& o : f.or_else) or_else.push_back(FeaturesToJson(o));
  nlohmann::json then = nlohmann::json::array();
  for (const GroupFeatures& o : f.then) then.push_back(FeaturesToJson(o));
  return {{"flops", f.flops},
          {"read_bytes", f.read_bytes},
          {"write_bytes", f.write_bytes},
          {"tile_read_bytes", f.tile_read_bytes},
          {"tile_write_bytes", f.tile_write_bytes},
          {"chain_steps", f.chain_steps},
          {"kernels", f.kernels},
          {"loop_kernels", f.loop_kernels},
          {"indexed_elements", f.indexed_elements},
          {"remapped_elements", f.remapped_elements},
          {"strided_elements", f.strided_elements},
          {"gathered_elements", f.gathered_elements},
          {"eval_calls", f.eval_calls},
          {"run_calls", f.run_calls},
          {"forks", f.forks},
          {"rnn_steps", f.rnn_steps},
          {"threads", f.threads},
          {"post_ops", f.post_ops},
          {"spilled_value_vectors", f.spilled_value_vectors},
          {"reorder_bytes", f.reorder_bytes},
          {"transposed_bytes", f.transposed_bytes},
          {"handoffs", f.handoffs},
          {"handoff_bytes", f.handoff_bytes},
          {"or_else", or_else},
          {"then", then}};
}

// Throws nlohmann::json::exception on a missing key or a wrong type.
GroupFeatures FeaturesFromJson(const nlohmann::json& j) {
  GroupFeatures f;
  f.flops = j.at("flops").get<std::array<double, kNumComputeClasses>>();
  f.read_bytes = j.at("read_bytes").get<std::array<double, kNumMemoryLevels>>();
  f.write_bytes = j.at("write_bytes").get<std::array<double, kNumMemoryLevels>>();
  f.tile_read_bytes = j.at("tile_read_bytes").get<double>();
  f.tile_write_bytes = j.at("tile_write_bytes").get<double>();
  f.chain_steps = j.at("chain_steps").get<double>();
  f.kernels = j.at("kernels").get<double>();
  f.loop_kernels = j.at("loop_kernels").get<double>();
  f.indexed_elements = j.at("indexed_elements").get<double>();
  f.remapped_elements = j.at("remapped_elements").get<double>();
  f.strided_elements = j.at("strided_elements").get<double>();
  f.gathered_elements = j.at("gathered_elements").get<double>();
  f.eval_calls = j.at("eval_calls").get<double>();
  f.run_calls = j.at("run_calls").get<double>();
  f.forks = j.at("forks").get<double>();
  f.rnn_steps = j.at("rnn_steps").get<double>();
  f.threads = j.at("threads").get<double>();
  f.post_ops = j.at("post_ops").get<double>();
  f.spilled_value_vectors = j.at("spilled_value_vectors").get<double>();
  f.reorder_bytes = j.at("reorder_bytes").get<double>();
  f.transposed_bytes = j.at("transposed_bytes").get<double>();
  f.handoffs = j.at("handoffs").get<double>();
  f.handoff_bytes = j.at("handoff_bytes").get<double>();
  for (const auto& o : j.at("or_else")) f.or_else.push_back(FeaturesFromJson(o));
  for (const auto& o : j.at("then")) f.then.push_back(FeaturesFromJson(o));
  return f;
}

}  // namespace

nlohmann::json SampleToJson(const CalibrationSample& s) {
  nlohmann::json j = FeaturesToJson(s.features);
  j["benchmark"] = s.benchmark;
  j["measured_ns"] = s.measured_ns;
  return j;
}

StatusOr<CalibrationSample> SampleFromJson(const nlohmann::json& j) {
  try {
    CalibrationSample s;
    s.benchmark = j.at("benchmark").get<std::string>();
    s.measured_ns = j.at("measured_ns").get<double>();
    s.features = FeaturesFromJson(j);
    return s;
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("calibration sample: ") + e.what());
  }
}

}  // namespace fusor
