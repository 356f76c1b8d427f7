#include "costmodel/cost_model.h"

#include <gtest/gtest.h>

#include "graph/graph_builder.h"
#include "graph/onnx_import.h"
#include "graph/op_registry.h"
#include "lowering/kernel_form.h"
#include "lowering/plan_legality.h"
#include "lowering/rnn_form.h"
#include "lowering/threading.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::Int;
using testing::Ints;
using testing::IrBuilder;

HardwareProfile RoundNumbers() {
  HardwareProfile p;
  p.conv_gflops.value = 100;
  p.elementwise_gflops.value = 10;
  p.transcendental_gflops.value = 1;
  p.l2_read_gbps.value = 200;
  p.dram_write_gbps.value = 10;
  p.dispatch_ns.value = 2000;
  p.post_op_ns.value = 100;
  p.overlap_alpha.value = 0.5;
  p.spill_ns_per_value.value = 0.5;
  p.dram_read_gbps.value = 20;
  p.reorder_gbps.value = 10;
  return p;
}

TEST(EvaluateFeatures, EachTermByHand) {
  GroupFeatures f;
  f.flops[static_cast<int>(ComputeClass::kConv)] = 1e6;            // 1e6 / 100 = 1e4 ns
  f.flops[static_cast<int>(ComputeClass::kTranscendental)] = 1e3;  // 1e3 / 1 = 1e3 ns
  f.read_bytes[static_cast<int>(MemoryLevel::kL2)] = 2e5;          // 2e5 / 200 = 1e3 ns
  f.write_bytes[static_cast<int>(MemoryLevel::kDram)] = 1e5;       // 1e5 / 10 = 1e4 ns
  f.kernels = 1;
  f.post_ops = 2;                  // 2000 + 2 * 100
  f.spilled_value_vectors = 1000;  // 1000 * 0.5
  f.reorder_bytes = 200;           // 200 / 10 = 20
  CostTerms t = EvaluateFeatures(f, RoundNumbers());
  EXPECT_DOUBLE_EQ(t.compute_ns, 11000);
  EXPECT_DOUBLE_EQ(t.memory_ns, 11000);
  EXPECT_DOUBLE_EQ(t.launch_ns, 2200);
  EXPECT_DOUBLE_EQ(t.spill_ns, 500);
  EXPECT_DOUBLE_EQ(t.reorder_ns, 20);
  EXPECT_DOUBLE_EQ(t.total_ns, 11000 + 11000 - 0.5 * 11000 + 2200 + 500 + 20);
}

TEST(EvaluateFeatures, HandoffByHandOutsideTheOverlap) {
  GroupFeatures f;
  f.flops[static_cast<int>(ComputeClass::kConv)] = 1e6;    // 1e4 ns
  f.read_bytes[static_cast<int>(MemoryLevel::kL2)] = 2e5;  // 1e3 ns
  f.handoffs = 2;                                          // 2 * 1000 ns
  f.handoff_bytes = 3e4;                                   // 3e4 / 10 = 3000 ns
  HardwareProfile p = RoundNumbers();
  p.handoff_ns.value = 1000;
  p.handoff_gbps.value = 10;
  CostTerms t = EvaluateFeatures(f, p);
  EXPECT_DOUBLE_EQ(t.memory_ns, 1000 + 5000);
  EXPECT_DOUBLE_EQ(t.total_ns, 1e4 + 6000 - 0.5 * 1000);
}

TEST(EvaluateFeatures, TileTrafficAtL1RatesOutsideTheOverlap) {
  // A loop's passes run one after another over a tile: what they hand on through the tile buffers
  // overlaps neither their compute nor the group's boundary traffic.
  GroupFeatures f;
  f.flops[static_cast<int>(ComputeClass::kConv)] = 1e6;    // 1e4 ns
  f.read_bytes[static_cast<int>(MemoryLevel::kL2)] = 2e5;  // 1e3 ns
  f.tile_read_bytes = 2e5;                                 // 2e5 / 400 = 500 ns
  f.tile_write_bytes = 1e5;                                // 1e5 / 200 = 500 ns
  HardwareProfile p = RoundNumbers();
  p.l1_read_gbps.value = 400;
  p.l1_write_gbps.value = 200;
  CostTerms t = EvaluateFeatures(f, p);
  EXPECT_DOUBLE_EQ(t.memory_ns, 1000 + 1000);
  EXPECT_DOUBLE_EQ(t.total_ns, 1e4 + 2000 - 0.5 * 1000);
}

TEST(EvaluateFeatures, ChainStepsAsComputeOutsideTheOverlap) {
  // A chain's steps are dispatch and register arithmetic per block: nothing hides them.
  GroupFeatures f;
  f.flops[static_cast<int>(ComputeClass::kConv)] = 1e6;    // 1e4 ns
  f.read_bytes[static_cast<int>(MemoryLevel::kL2)] = 4e6;  // 2e4 ns
  f.chain_steps = 3e5;                                     // 3e5 / 20 = 1.5e4 ns
  f.threads = 1;                                           // On one of 2 cores: all x2.
  HardwareProfile p = RoundNumbers();
  p.target.cores = 2;
  p.chain_gsteps.value = 20;
  CostTerms t = EvaluateFeatures(f, p);
  EXPECT_DOUBLE_EQ(t.compute_ns, 2e4 + 3e4);
  EXPECT_DOUBLE_EQ(t.memory_ns, 4e4);
  // Overlapped: half the compute without the chain (2e4), not half the memory (4e4).
  EXPECT_DOUBLE_EQ(t.total_ns, 5e4 + 4e4 - 0.5 * 2e4);
}

TEST(EvaluateFeatures, LaterGroupsOfABenchmarkAddTheirTerms) {
  GroupFeatures first, second;
  first.kernels = 1;                                               // 2000 ns launch
  second.write_bytes[static_cast<int>(MemoryLevel::kDram)] = 1e5;  // 1e4 ns memory
  second.reorder_bytes = 200;                                      // 20 ns
  first.then.push_back(second);
  first.then.push_back(second);
  CostTerms t = EvaluateFeatures(first, RoundNumbers());
  EXPECT_DOUBLE_EQ(t.launch_ns, 2000);
  EXPECT_DOUBLE_EQ(t.memory_ns, 2e4);
  EXPECT_DOUBLE_EQ(t.reorder_ns, 40);
  EXPECT_DOUBLE_EQ(t.total_ns, 2000 + 2e4 + 40);
}

// x -> Conv -> c -> Relu -> r -> Exp -> e, n channels of 32x32 (4 KiB a channel).
Graph ConvReluExp(int64_t channels) {
  IrBuilder b;
  Shape d = {1, channels, 32, 32};
  TensorId x = b.Input("x", d), c = b.Act("c", d), r = b.Act("r", d), e = b.Act("e", d);
  b.Op("Conv", {x, b.Weight("w", {channels, channels, 1, 1})}, {c});
  b.Op("Relu", {c}, {r});
  b.Op("Exp", {r}, {e});
  b.Output(e);
  return b.Build();
}

// An LSTM on our recurrence loop is priced as its kernel runs: its gate products at the matmul
// rate, R read once per step, and the input projection written and read back once; one the
// recurrent kernels do not take (clip) keeps the fallback's stated rule, its FLOPs at the
// elementwise rate.
TEST(PlanFeatures, LstmOnTheRecurrenceLoopIsPricedAsGemmsWithRecurrentReads) {
  auto lstm = [](bool clip) {
    IrBuilder b;
    TensorId x = b.Input("x", {16, 1, 32});
    TensorId w = b.Weight("w", {1, 128, 32}), r = b.Weight("r", {1, 128, 32});
    TensorId y = b.Act("y", {16, 1, 1, 32});
    std::vector<Attribute> attrs = {Int("hidden_size", 32)};
    if (clip) attrs.push_back({"clip", 1.0});
    b.Op("LSTM", {x, w, r}, {y}, attrs);
    b.Output(y);
    return b.Build();
  };
  TargetFingerprint one;
  Graph lowered = lstm(false), fallback = lstm(true);
  GroupFeatures on = PlanFeatures(lowered, UnfusedPlan(lowered), one).at(0);
  GroupFeatures off = PlanFeatures(fallback, UnfusedPlan(fallback), one).at(0);
  const double flops = CostOfNode(lowered, lowered.node(0)).flops;
  EXPECT_DOUBLE_EQ(on.flops[static_cast<int>(ComputeClass::kMatMul)], flops);
  EXPECT_DOUBLE_EQ(on.flops[static_cast<int>(ComputeClass::kElementwise)], 0);
  EXPECT_DOUBLE_EQ(off.flops[static_cast<int>(ComputeClass::kElementwise)], flops);
  double on_reads = 0, off_reads = 0;
  for (int l = 0; l < kNumMemoryLevels; ++l) {
    on_reads += on.read_bytes[l];
    off_reads += off.read_bytes[l];
  }
  const double projection = 16 * 128 * 4.0;  // [seq, batch, gates * hidden] floats.
  EXPECT_DOUBLE_EQ(on_reads - off_reads, 15 * 128 * 32 * 4.0 + projection);  // R at 15 more steps.
  EXPECT_EQ(on.rnn_steps, 16);
}

// A recurrent node large enough for the thread team splits every step among it: each core reads
// its half of R per step, and every step ends in a barrier, priced as a team wake-up, as does the
// projection's matmul; both directions of a bidirectional node advance in the same steps.
TEST(PlanFeatures, RecurrenceLoopOnTheTeamPaysABarrierPerStep) {
  IrBuilder b;
  TensorId x = b.Input("x", {32, 1, 256});
  TensorId w = b.Weight("w", {2, 1024, 256}), r = b.Weight("r", {2, 1024, 256});
  TensorId y = b.Act("y", {32, 2, 1, 256});
  b.Op("LSTM", {x, w, r}, {y}, {Int("hidden_size", 256), {"direction", "bidirectional"}});
  b.Output(y);
  Graph g = b.Build();
  ASSERT_EQ(RnnPrimitiveForm(g, g.node(0))->implementation, RnnImplementation::kLoop);
  TargetFingerprint two;
  two.cores = 2;
  ASSERT_FALSE(RunsSerially(g, UnfusedPlan(g).groups[0]));
  GroupFeatures f = PlanFeatures(g, UnfusedPlan(g), two).at(0);
  EXPECT_EQ(f.threads, 2);
  EXPECT_EQ(f.rnn_steps, 32);
  EXPECT_EQ(f.forks, 1 + 1 + 32);  // The loop's team, the projection's, a barrier per step.
}

// A loop reading what a conv just wrote on two cores gets half of it from the other core's cache;
// a loop reading another loop's output (split alike), a graph input, or anything on one core
// does not. A group's features depend on the group alone (the search compares groups apart), so
// the output of an elementwise node that can be a conv's post-op counts as written by the conv,
// as it is in the plans the tuner picks; when it runs as a group of its own that overcharges the
// group after it.
TEST(PlanFeatures, AConvOutputReadByALoopIsHandedOffAcrossCores) {
  Graph g = ConvReluExp(16);  // 64 KiB tensors: parallel groups, in L2.
  TargetFingerprint two;
  two.cores = 2;
  auto f = PlanFeatures(g, UnfusedPlan(g), two);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].handoffs, 0);  // The graph input.
  EXPECT_EQ(f[1].handoffs, 1);
  EXPECT_DOUBLE_EQ(f[1].handoff_bytes, 16 * 32 * 32 * 4 / 2.0);
  EXPECT_EQ(f[2].handoffs, 1);  // Relu -> Exp: the Relu could be the conv's post-op.
  FusionPlan fused{{FusionGroup{GroupKind::kAnchor, {0, 1, 2}, {}}}};
  ASSERT_TRUE(CheckPlan(g, fused).ok());
  EXPECT_EQ(PlanFeatures(g, fused, two).at(0).handoffs, 0);
  FusionPlan tail{
      {FusionGroup{GroupKind::kAnchor, {0, 1}, {}}, FusionGroup{GroupKind::kSingle, {2}, {}}}};
  ASSERT_TRUE(CheckPlan(g, tail).ok());
  EXPECT_EQ(PlanFeatures(g, tail, two).at(1).handoffs, 1);
  // Exp -> Relu after a loop of two: the Relu's operand is read by two nodes, so no post-op chain.
  IrBuilder b;
  Shape d = {1, 16, 32, 32};
  TensorId x = b.Input("x", d), e = b.Act("e", d), r = b.Act("r", d), s2 = b.Act("s", d);
  b.Op("Exp", {x}, {e});
  b.Op("Relu", {e}, {r});
  b.Op("Add", {r, e}, {s2});
  b.Output(s2);
  Graph loops = b.Build();
  for (const GroupFeatures& each : PlanFeatures(loops, UnfusedPlan(loops), two)) {
    EXPECT_EQ(each.handoffs, 0);
  }
  TargetFingerprint one;
  EXPECT_EQ(PlanFeatures(g, UnfusedPlan(g), one).at(1).handoffs, 0);
  Graph tiny = ConvReluExp(1);  // 4 KiB: both groups serial, on the calling thread's core.
  ASSERT_TRUE(RunsSerially(tiny, UnfusedPlan(tiny).groups[1]));
  EXPECT_EQ(PlanFeatures(tiny, UnfusedPlan(tiny), two).at(1).handoffs, 0);
}

// A loop on the whole team and a reduction on the calling thread alone share nothing of the
// split (for a tensor larger than one core's L1): ResNet's last Add (two 98 KiB inputs: parallel)
// then its GlobalAveragePool (98 KiB in, 2 KiB out: serial) reads half the Add's output from the
// other core. A Relu after the Add, on the team too, splits its flat range as the Add did and reads
// its own core's half.
TEST(PlanFeatures, ASerialGroupReadingAParallelLoopsOutputIsHandedOff) {
  IrBuilder b;
  const Shape d = {1, 512, 7, 7};
  TensorId x = b.Input("x", d), z = b.Input("z", d), a = b.Act("a", d), r = b.Act("r", d);
  TensorId p = b.Act("p", {1, 512, 1, 1});
  b.Op("Add", {x, z}, {a});
  b.Op("Relu", {a}, {r});
  b.Op("GlobalAveragePool", {a}, {p});
  b.Output(r);
  b.Output(p);
  Graph g = b.Build();
  FusionPlan plan = UnfusedPlan(g);
  ASSERT_FALSE(RunsSerially(g, plan.groups[0]));
  ASSERT_FALSE(RunsSerially(g, plan.groups[1]));
  ASSERT_TRUE(RunsSerially(g, plan.groups[2]));
  TargetFingerprint two;
  two.cores = 2;
  auto f = PlanFeatures(g, plan, two);
  EXPECT_EQ(f[1].handoffs, 0);
  EXPECT_EQ(f[2].handoffs, 1);
  EXPECT_DOUBLE_EQ(f[2].handoff_bytes, 512 * 49 * 4 / 2.0);
  // Layer norm's 128 per-row means (512 bytes, parallel reduction) read by a serial Add: a few
  // cache lines, within one core's L1, no handoff.
  IrBuilder ln;
  TensorId h = ln.Input("h", {1, 128, 768}), mean = ln.Act("mean", {1, 128, 1});
  TensorId eps = ln.Act("eps", {1, 128, 1});
  ln.Op("ReduceMean", {h, ln.IntConstant("axes", {-1})}, {mean}, {Int("keepdims", 1)});
  ln.Op("Add", {mean, ln.FloatScalar("e", 1e-5)}, {eps});
  ln.Output(eps);
  Graph lg = ln.Build();
  FusionPlan apart = UnfusedPlan(lg);
  ASSERT_FALSE(RunsSerially(lg, apart.groups[0]));
  ASSERT_TRUE(RunsSerially(lg, apart.groups[1]));
  EXPECT_EQ(PlanFeatures(lg, apart, two).at(1).handoffs, 0);
}

// A tensor that fills most of one core's L1 is no few-lines crossing: SqueezeNet's squeeze Conv
// (256 -> 48 channels on 13x13, on the team) then a serial Relu over its 31.7 KiB output; the
// same Relu over an 8-channel output (5.3 KiB) stays free.
TEST(PlanFeatures, AParallelConvOutputFillingL1ReadSeriallyIsHandedOff) {
  TargetFingerprint two;
  two.cores = 2;
  two.l1d_bytes = 32 << 10;
  for (auto [channels, handoffs] : {std::pair<int64_t, int>{48, 1}, {8, 0}}) {
    IrBuilder b;
    const Shape out = {1, channels, 13, 13};
    TensorId x = b.Input("x", {1, 256, 13, 13}), c = b.Act("c", out), r = b.Act("r", out);
    b.Op("Conv", {x, b.Weight("w", {channels, 256, 1, 1})}, {c});
    b.Op("Relu", {c}, {r});
    b.Output(r);
    Graph g = b.Build();
    FusionPlan plan = UnfusedPlan(g);
    ASSERT_FALSE(RunsSerially(g, plan.groups[0])) << channels;
    ASSERT_TRUE(RunsSerially(g, plan.groups[1])) << channels;
    EXPECT_EQ(PlanFeatures(g, plan, two).at(1).handoffs, handoffs) << channels;
  }
}

// x -> Add(bias) -> {Relu -> Exp, Tanh -> Sigmoid}: the shared Add can be recomputed.
struct Diamond {
  Graph g;
  TensorId x, t;
};

Diamond MakeDiamond(int64_t n) {
  IrBuilder b;
  Diamond d;
  d.x = b.Input("x", {n});
  TensorId bias = b.Weight("bias", {n});
  d.t = b.Act("t", {n});
  TensorId u = b.Act("u", {n}), v = b.Act("v", {n}), u2 = b.Act("u2", {n}), v2 = b.Act("v2", {n});
  b.Op("Add", {d.x, bias}, {d.t});
  b.Op("Relu", {d.t}, {u});
  b.Op("Tanh", {d.t}, {v});
  b.Op("Exp", {u}, {u2});
  b.Op("Sigmoid", {v}, {v2});
  b.Output(u2);
  b.Output(v2);
  d.g = b.Build();
  return d;
}

TEST(PlanFeatures, RecomputedProducersCountOncePerCopy) {
  Diamond d = MakeDiamond(1024);
  FusionPlan materialize{{{GroupKind::kSingle, {0}, {}},
                          {GroupKind::kLoop, {1, 3}, {}},
                          {GroupKind::kLoop, {2, 4}, {}}}};
  FusionPlan recompute{{{GroupKind::kLoop, {0, 1, 3}, {0}}, {GroupKind::kLoop, {0, 2, 4}, {0}}}};
  ASSERT_TRUE(CheckPlan(d.g, materialize).ok());
  ASSERT_TRUE(CheckPlan(d.g, recompute).ok());
  TargetFingerprint t;
  auto sum_flops = [&](const FusionPlan& plan) {
    double flops = 0;
    for (const auto& f : PlanFeatures(d.g, plan, t)) {
      flops += f.flops[static_cast<int>(ComputeClass::kElementwise)];
    }
    return flops;
  };
  // Add = 1024 flops; Relu 1024; Sigmoid 2*1024. Recompute adds one more Add.
  EXPECT_DOUBLE_EQ(sum_flops(materialize), 1024 + 1024 + 2048);
  EXPECT_DOUBLE_EQ(sum_flops(recompute), 2 * 1024 + 1024 + 2048);
  // Materializing writes t (4 KiB) and reads it twice; recomputing reads x and bias twice instead.
  auto written = [&](const FusionPlan& plan) {
    double bytes = 0;
    for (const auto& f : PlanFeatures(d.g, plan, t)) {
      for (double b : f.write_bytes) bytes += b;
      bytes += f.tile_write_bytes;
    }
    return bytes;
  };
  // Boundary writes: materializing writes t, u2 and v2 (3 x 4 KiB), recomputing only u2 and v2.
  // No tile buffers: each loop is one single-pass chain (u -> u2, v -> v2; recomputing, its copy
  // of t too, which only that loop's Relu or Tanh reads), carried in registers.
  EXPECT_DOUBLE_EQ(written(materialize), 3 * 4096);
  EXPECT_DOUBLE_EQ(written(recompute), 2 * 4096);
}

// Relu -> Reshape -> Exp in one loop: the Relu's tile is written once and read once, by the Exp
// through the Reshape, which has no tile of its own. (256 KiB tensors: the group's input and
// output are not in L1.)
TEST(PlanFeatures, AViewInALoopHasNoTileBuffer) {
  IrBuilder b;
  TensorId x = b.Input("x", {64, 1024});
  TensorId r = b.Act("r", {64, 1024}), v = b.Act("v", {65536}), y = b.Act("y", {65536});
  b.Op("Relu", {x}, {r});
  b.Op("Reshape", {r, b.IntConstant("shape", {65536})}, {v});
  b.Op("Exp", {v}, {y});
  b.Output(y);
  Graph g = b.Build();
  FusionPlan plan{{FusionGroup{GroupKind::kLoop, {0, 1, 2}, {}}}};
  auto features = PlanFeatures(g, plan, TargetFingerprint{});
  EXPECT_DOUBLE_EQ(features[0].tile_write_bytes, 65536 * 4);
  EXPECT_DOUBLE_EQ(features[0].tile_read_bytes, 65536 * 4);
}

// A value handed to the loop's output through views is computed straight into the output
// (FusedLoop::RunTile hands the output's buffer down through the views): BERT's head split, a
// Slice then a Reshape, has no tile buffer. A Pad fills a buffer of its own and then is copied.
TEST(PlanFeatures, AValueHandedToTheOutputThroughViewsHasNoTileBuffer) {
  for (const char* op : {"Slice", "Pad"}) {
    SCOPED_TRACE(op);
    IrBuilder b;
    const bool slice = std::string(op) == "Slice";
    TensorId x = b.Input("x", {128, 1, 2304});
    TensorId s = b.Act("s", {128, 1, slice ? 768 : 2306}),
             r = b.Act("r", {128, slice ? 12 : 1, slice ? 64 : 2306});
    if (slice) {
      b.Op("Slice",
           {x, b.IntConstant("st", {768}), b.IntConstant("en", {1536}), b.IntConstant("ax", {2})},
           {s});
    } else {
      b.Op("Pad", {x, b.IntConstant("pads", {0, 0, 1, 0, 0, 1})}, {s});
    }
    b.Op("Reshape", {s, b.IntConstant("shape", {128, slice ? 12 : 1, slice ? 64 : 2306})}, {r});
    b.Output(r);
    Graph g = b.Build();
    FusionPlan plan{{FusionGroup{GroupKind::kLoop, {0, 1}, {}}}};
    ASSERT_TRUE(CheckPlan(g, plan).ok());
    auto features = PlanFeatures(g, plan, TargetFingerprint{});
    const double bytes = slice ? 0 : 128 * 2306 * 4;
    EXPECT_DOUBLE_EQ(features[0].tile_write_bytes, bytes);
    EXPECT_DOUBLE_EQ(features[0].tile_read_bytes, bytes);
  }
}

// Two outputs of a loop that hold one value (layer norm's result and its unit-dim transpose, both
// read after the group): the loop computes it into one and copies each tile to the other, reading
// the tile back from L2 when the loop streams in 64 KiB tiles ([1,128,768]), from L1 when its
// tiles fit there ([1,4,768]: 3072 elements, 12 KiB). With the transposed output alone the value
// is computed straight into it: no copy.
TEST(PlanFeatures, OutputsThatHoldOneValueCopyItOnce) {
  for (int64_t rows : {128, 4}) {
    SCOPED_TRACE(rows);
    auto features = [&](bool both) {
      IrBuilder b;
      TensorId a = b.Act("a", {1, rows, 768}), t = b.Act("t", {rows, 1, 768});
      b.Op("Add", {b.Input("x", {1, rows, 768}), b.Weight("bias", {768})}, {a});
      b.Op("Transpose", {a}, {t}, {Ints("perm", {1, 0, 2})});
      if (both) b.Output(a);
      b.Output(t);
      Graph g = b.Build();
      FusionPlan plan{{FusionGroup{GroupKind::kLoop, {0, 1}, {}}}};
      EXPECT_TRUE(CheckPlan(g, plan).ok());
      TargetFingerprint target;
      target.cores = 2;
      return PlanFeatures(g, plan, target)[0];
    };
    auto reads = [](const GroupFeatures& f) {
      double sum = 0;
      for (double r : f.read_bytes) sum += r;
      return sum;
    };
    const GroupFeatures one = features(false), two = features(true);
    const double bytes = rows * 768 * 4;
    EXPECT_DOUBLE_EQ(one.tile_read_bytes, 0);
    if (rows == 128) {
      EXPECT_DOUBLE_EQ(two.tile_read_bytes, 0);
      EXPECT_DOUBLE_EQ(reads(two) - reads(one), bytes);
    } else {
      EXPECT_DOUBLE_EQ(two.tile_read_bytes, bytes);
      EXPECT_DOUBLE_EQ(reads(two), reads(one));
    }
  }
}

// A loop output that a later node of the loop reads is computed straight into the output and
// read back from there: no tile buffer is written for it (layer norm's Sub, squared by the Pow and
// also read by a later Div).
TEST(PlanFeatures, ALoopOutputReadInsideTheLoopHasNoTileWrite) {
  IrBuilder b;
  TensorId x = b.Input("x", {128, 768}), m = b.Input("m", {128, 1});
  TensorId d = b.Act("d", {128, 768}), p = b.Act("p", {128, 768});
  b.Op("Sub", {x, m}, {d});
  b.Op("Pow", {d, b.FloatScalar("two", 2)}, {p});
  b.Output(d);
  b.Output(p);
  Graph g = b.Build();
  FusionPlan plan{{FusionGroup{GroupKind::kLoop, {0, 1}, {}}}};
  ASSERT_TRUE(CheckPlan(g, plan).ok());
  auto features = PlanFeatures(g, plan, TargetFingerprint{});
  EXPECT_DOUBLE_EQ(features[0].tile_write_bytes, 0);
  EXPECT_DOUBLE_EQ(features[0].tile_read_bytes, 128 * 768 * 4);
  double written = 0;
  for (double w : features[0].write_bytes) written += w;
  EXPECT_DOUBLE_EQ(written, 2 * 128 * 768 * 4);
}

TEST(PlanFeatures, CacheLevelFollowsTensorSize) {
  // A small tensor written and read right away stays in L1; one larger than L3 goes to DRAM.
  TargetFingerprint t;
  t.cores = 1;
  for (auto [n, level] : {std::pair<int64_t, MemoryLevel>{1024, MemoryLevel::kL1},
                          {int64_t{16} << 20, MemoryLevel::kDram}}) {
    Diamond d = MakeDiamond(n);
    FusionPlan plan = UnfusedPlan(d.g);
    auto features = PlanFeatures(d.g, plan, t);
    // Group 1 (Relu) reads t, which group 0 just wrote.
    double bytes = static_cast<double>(n) * 4;
    EXPECT_DOUBLE_EQ(features[1].read_bytes[static_cast<int>(level)], bytes) << n;
  }
}

TEST(LiveVectorValues, WideLoopsSpillNarrowOnesDoNot) {
  // 20 functions of x, all computed before a chain of adds combines them: 20 values live at once.
  IrBuilder b;
  TensorId x = b.Input("x", {4096});
  std::vector<TensorId> branches;
  const char* ops[] = {"Relu", "Tanh", "Sigmoid", "Exp"};
  for (int i = 0; i < 20; ++i) {
    branches.push_back(b.Act("f" + std::to_string(i), {4096}));
    b.Op(ops[i % 4], {x}, {branches.back()});
  }
  TensorId acc = branches[0];
  for (int i = 1; i < 20; ++i) {
    TensorId next = b.Act("s" + std::to_string(i), {4096});
    b.Op("Add", {acc, branches[i]}, {next});
    acc = next;
  }
  b.Output(acc);
  Graph g = b.Build();
  FusionPlan plan = MaxFusionPlan(g);
  ASSERT_EQ(plan.groups.size(), 1u);
  // At the last branch: x and 20 branch values live, plus two temporaries.
  EXPECT_EQ(LiveVectorValues(g, plan.groups[0]), 21 + 2);
  TargetFingerprint avx2;  // 16 registers of 8 floats.
  auto f = PlanFeatures(g, plan, avx2);
  EXPECT_DOUBLE_EQ(f[0].spilled_value_vectors, (23 - 16) * 4096 / 8.0);
  // A chain of adds over 20 inputs loads each input just before use: no spill.
  IrBuilder c;
  TensorId cacc = c.Input("x0", {4096});
  for (int i = 1; i < 20; ++i) {
    TensorId in = c.Input("x" + std::to_string(i), {4096});
    TensorId next = c.Act("s" + std::to_string(i), {4096});
    c.Op("Add", {cacc, in}, {next});
    cacc = next;
  }
  c.Output(cacc);
  Graph chain = c.Build();
  FusionPlan chain_plan = MaxFusionPlan(chain);
  EXPECT_EQ(LiveVectorValues(chain, chain_plan.groups[0]), 3 + 2);  // acc, input, sum.
  EXPECT_EQ(PlanFeatures(chain, chain_plan, avx2)[0].spilled_value_vectors, 0);
}

TEST(PeakActivationBytes, ByHand) {
  Diamond d = MakeDiamond(1000);
  // Unfused, 4000 bytes each: t lives in groups 0-2, u 1-3, v 2-4, outputs u2 3-4 and v2 4.
  // Live sets: {t} {t,u} {t,u,v} {u,v,u2} {v,u2,v2}: the peak is three tensors.
  EXPECT_EQ(PeakActivationBytes(d.g, UnfusedPlan(d.g)), 12000);
  // Recomputing t inside both loops never materializes it or u, v: only the two outputs.
  FusionPlan recompute{{{GroupKind::kLoop, {0, 1, 3}, {0}}, {GroupKind::kLoop, {0, 2, 4}, {0}}}};
  EXPECT_EQ(PeakActivationBytes(d.g, recompute), 8000);
}

// Folding an anchor's post-op chain (Conv + BatchNormalization + Relu, MatMul + bias, ...) into one
// oneDNN primitive saves kernels and round trips through memory: predicted faster for every such
// chain of the shared models whose operands are per channel or per tensor. (Not so with a
// per-element operand, a residual Add: unless it is kept blocked, the runtime reorders it into the
// primitive's layout, and measured on this machine that costs more than the separate Add saves;
// kept blocked, fused and apart measure within a few percent either way. Nor is maximal fusion
// always faster: a fused loop may evaluate a broadcast producer once per element of its consumer.
// Telling these apart is what the cost model is for.)
bool HasPerElementOperand(const Graph& g, const FusionGroup& group) {
  const Shape& out = g.tensor(g.node(group.nodes[0]).outputs[0]).dims;
  for (size_t i = 1; i < group.nodes.size(); ++i) {
    for (TensorId t : g.node(group.nodes[i]).inputs) {
      bool chain = g.tensor(t).producer == group.nodes[i - 1];
      if (!chain && g.tensor(t).dims == out) return true;
    }
  }
  return false;
}

TEST(AnalyticalCostModel, AnchorPostOpChainsArePredictedFasterFused) {
  for (const char* name : {"resnet18", "mobilenet_v2", "efficientnet_b0", "bert_base_encoder"}) {
    auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + name + ".onnx");
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    AnalyticalCostModel model{HardwareProfile{}};
    int chains = 0;
    for (const FusionGroup& group : MaxFusionPlan(*g).groups) {
      if (group.kind != GroupKind::kAnchor || group.nodes.size() < 2) continue;
      if (HasPerElementOperand(*g, group)) continue;
      Graph r = g->ExtractRegion(group.nodes);
      std::vector<NodeId> all(group.nodes.size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<NodeId>(i);
      PlanCost fused = model.Cost(r, FusionPlan{{FusionGroup{GroupKind::kAnchor, all, {}}}});
      PlanCost apart = model.Cost(r, UnfusedPlan(r));
      EXPECT_LT(fused.total.total_ns, apart.total.total_ns) << name << " group at " << all[0];
      EXPECT_LT(fused.total.launch_ns, apart.total.launch_ns) << name;
      EXPECT_LE(fused.peak_activation_bytes, apart.peak_activation_bytes) << name;
      ++chains;
    }
    EXPECT_GT(chains, 0) << name;
  }
}

// The runtime times an elementwise group that oneDNN can also run as one eltwise / binary primitive
// with post-ops against our loop and keeps the faster; the model predicts the least of the two.
TEST(AnalyticalCostModel, AnElementwiseChainCostsTheLeastOfLoopAndPrimitive) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 16, 64, 64});
  TensorId s = b.Act("s", {1, 16, 64, 64}), y = b.Act("y", {1, 16, 64, 64});
  b.Op("Sigmoid", {x}, {s});
  b.Op("Mul", {x, s}, {y});  // x * Sigmoid(x): one swish eltwise in oneDNN.
  b.Output(y);
  Graph g = b.Build();
  FusionPlan plan = MaxFusionPlan(g);
  ASSERT_EQ(plan.groups.size(), 1u);
  GroupFeatures f = PlanFeatures(g, plan, TargetFingerprint{}).at(0);
  ASSERT_EQ(f.or_else.size(), 1u);
  EXPECT_EQ(f.or_else[0].kernels, 1);
  EXPECT_EQ(f.or_else[0].loop_kernels, 0);
  HardwareProfile p = RoundNumbers();
  p.jit_swish_gflops.value = 100;  // oneDNN's swish far faster than our loop...
  GroupFeatures loop_only = f;
  loop_only.or_else.clear();
  EXPECT_LT(EvaluateFeatures(f, p).total_ns, EvaluateFeatures(loop_only, p).total_ns);
  p.jit_swish_gflops.value = 0.01;  // ...or far slower: then the loop's time stands.
  EXPECT_DOUBLE_EQ(EvaluateFeatures(f, p).total_ns, EvaluateFeatures(loop_only, p).total_ns);
}

// oneDNN's eltwise_swish runs x * Sigmoid(x) at its own speed (1.5x eltwise_logistic's time on an
// AVX-512 EPYC), so its sigmoids are their own class; a lone Sigmoid primitive is logistic's, and
// our loop's sigmoids stay our loop's whatever the pair.
TEST(AnalyticalCostModel, SwishAndLogisticSigmoidsArePricedApartFromOtherTranscendentals) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 16, 64, 64});
  TensorId s = b.Act("s", {1, 16, 64, 64}), y = b.Act("y", {1, 16, 64, 64});
  b.Op("Sigmoid", {x}, {s});
  b.Op("Mul", {s, x}, {y});
  b.Output(y);
  Graph g = b.Build();
  const double elements = 16 * 64 * 64;
  const double per_sigmoid = CostOfNode(g, g.node(0)).transcendentals / elements;
  ASSERT_GT(per_sigmoid, 0);
  GroupFeatures fused = PlanFeatures(g, MaxFusionPlan(g), TargetFingerprint{}).at(0);
  ASSERT_EQ(fused.or_else.size(), 1u);
  const auto& chain = fused.or_else[0].flops;
  EXPECT_DOUBLE_EQ(chain[static_cast<int>(ComputeClass::kJitSwish)], per_sigmoid * elements);
  EXPECT_EQ(chain[static_cast<int>(ComputeClass::kJitTranscendental)], 0);
  EXPECT_EQ(fused.flops[static_cast<int>(ComputeClass::kJitSwish)], 0);
  EXPECT_DOUBLE_EQ(fused.flops[static_cast<int>(ComputeClass::kTranscendental)],
                   per_sigmoid * elements);
  // Apart, the Sigmoid alone is an eltwise_logistic (or our loop), logistic's own class: on an
  // AVX2 EPYC it took 1.5x the time of oneDNN's Exp.
  GroupFeatures sigmoid = PlanFeatures(g, UnfusedPlan(g), TargetFingerprint{}).at(0);
  ASSERT_EQ(sigmoid.or_else.size(), 1u);
  EXPECT_DOUBLE_EQ(sigmoid.or_else[0].flops[static_cast<int>(ComputeClass::kJitSigmoid)],
                   per_sigmoid * elements);
  EXPECT_EQ(sigmoid.or_else[0].flops[static_cast<int>(ComputeClass::kJitTranscendental)], 0);
  EXPECT_EQ(sigmoid.or_else[0].flops[static_cast<int>(ComputeClass::kJitSwish)], 0);
  // An Exp stays at the rate oneDNN's other transcendentals share.
  IrBuilder e;
  TensorId ex = e.Input("x", {1, 16, 64, 64});
  TensorId ey = e.Act("y", {1, 16, 64, 64});
  e.Op("Exp", {ex}, {ey});
  e.Output(ey);
  Graph eg = e.Build();
  GroupFeatures exp = PlanFeatures(eg, UnfusedPlan(eg), TargetFingerprint{}).at(0);
  ASSERT_EQ(exp.or_else.size(), 1u);
  EXPECT_GT(exp.or_else[0].flops[static_cast<int>(ComputeClass::kJitTranscendental)], 0);
  EXPECT_EQ(exp.or_else[0].flops[static_cast<int>(ComputeClass::kJitSigmoid)], 0);
}

// Small groups run on one thread (lowering/threading.h): priced on one core with no team to wake.
TEST(AnalyticalCostModel, ASmallGroupRunsSeriallyOnOneCore) {
  auto relu = [](int64_t n) {
    IrBuilder b;
    TensorId x = b.Input("x", {n}), y = b.Act("y", {n});
    b.Op("Relu", {x}, {y});
    b.Output(y);
    return b.Build();
  };
  TargetFingerprint two;
  two.cores = 2;
  Graph small = relu(1024), large = relu(1 << 20);
  GroupFeatures fs = PlanFeatures(small, UnfusedPlan(small), two).at(0);
  GroupFeatures fl = PlanFeatures(large, UnfusedPlan(large), two).at(0);
  EXPECT_TRUE(RunsSerially(small, UnfusedPlan(small).groups[0]));
  EXPECT_EQ(fs.threads, 1);
  EXPECT_EQ(fs.forks, 0);
  EXPECT_EQ(fl.threads, 2);
  EXPECT_EQ(fl.forks, 1);
  HardwareProfile p = RoundNumbers();
  p.target = two;
  GroupFeatures on_team = fs;
  on_team.threads = 2;
  // Compute and memory take twice as long on one core of two.
  CostTerms one = EvaluateFeatures(fs, p), both = EvaluateFeatures(on_team, p);
  EXPECT_DOUBLE_EQ(one.compute_ns, 2 * both.compute_ns);
  EXPECT_DOUBLE_EQ(one.memory_ns, 2 * both.memory_ns);
}

}  // namespace
}  // namespace fusor

namespace fusor {
namespace {

// x -> Conv -> Relu -> r1 -> Conv -> Add(r1) -> Relu -> r2 -> Conv -> y, and r2 * per-channel
// weight -> scaled (a broadcast, so r2 cannot stay blocked). Every tensor is 1x16x8x8 (4 KiB).
Graph ResidualBlock() {
  IrBuilder b;
  Shape d = {1, 16, 8, 8};
  TensorId x = b.Input("x", d), a = b.Act("a", d), r1 = b.Act("r1", d), cb = b.Act("cb", d);
  TensorId sum = b.Act("sum", d), r2 = b.Act("r2", d), y = b.Act("y", d), s = b.Act("s", d);
  auto conv = [&](const std::string& w, TensorId in, TensorId out) {
    b.Op("Conv", {in, b.Weight(w, {16, 16, 3, 3})}, {out}, {testing::Ints("pads", {1, 1, 1, 1})});
  };
  conv("wa", x, a);
  b.Op("Relu", {a}, {r1});
  conv("wb", r1, cb);
  b.Op("Add", {cb, r1}, {sum});
  b.Op("Relu", {sum}, {r2});
  conv("wc", r2, y);
  b.Op("Mul", {r2, b.Weight("per_channel_row", {16, 8, 1})}, {s});
  b.Output(y);
  b.Output(s);
  return b.Build();
}

// x[1,24,8,8] -> Conv 24->144 -> c -> Conv 144->144 -> y, unfused. Where oneDNN has brgemm convs
// the first conv runs channels-last (a plain input, channel counts that share no block), so does
// the second (it reads c as stored): the graph input goes in and the graph output comes out
// through transposes, priced at transpose_gbps. On a plain avx512_core they are blocked reorders.
TEST(GroupFeatures, ReordersAroundAChannelsLastConvAreTransposes) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 24, 8, 8});
  TensorId c = b.Act("c", {1, 144, 8, 8}), y = b.Act("y", {1, 144, 8, 8});
  b.Op("Conv", {x, b.Weight("w1", {144, 24, 1, 1})}, {c});
  b.Op("Conv", {c, b.Weight("w2", {144, 144, 1, 1})}, {y});
  b.Output(y);
  Graph g = b.Build();
  const double in = 24 * 64 * 4, out = 144 * 64 * 4;
  TargetFingerprint brgemm, jit;
  brgemm.isa = "avx512_core_bf16";
  jit.isa = "avx";  // No brgemm convs: jit kernels on nChw8c.
  auto f = PlanFeatures(g, UnfusedPlan(g), brgemm);
  EXPECT_DOUBLE_EQ(f[0].transposed_bytes, in);
  EXPECT_DOUBLE_EQ(f[1].transposed_bytes, out);
  EXPECT_DOUBLE_EQ(f[0].reorder_bytes + f[1].reorder_bytes, 0);
  auto j = PlanFeatures(g, UnfusedPlan(g), jit);
  EXPECT_DOUBLE_EQ(j[0].reorder_bytes, in);
  EXPECT_DOUBLE_EQ(j[1].reorder_bytes, out);
  EXPECT_DOUBLE_EQ(j[0].transposed_bytes + j[1].transposed_bytes, 0);
  HardwareProfile p = RoundNumbers();
  p.transpose_gbps.value = 2;
  EXPECT_DOUBLE_EQ(EvaluateFeatures(f[1], p).reorder_ns, out / 2);
  EXPECT_DOUBLE_EQ(EvaluateFeatures(j[1], p).reorder_ns, out / p.reorder_gbps.value);
}

TEST(GroupFeatures, ReordersOnlyWhereATensorChangesLayout) {
  Graph g = ResidualBlock();
  const double tensor = 16 * 8 * 8 * 4;
  TargetFingerprint avx2, none;
  avx2.isa = "avx2";  // Channel block 8: the 16-channel tensors can stay blocked.
  FusionPlan fused{
      {FusionGroup{GroupKind::kAnchor, {0, 1}, {}}, FusionGroup{GroupKind::kAnchor, {2, 3, 4}, {}},
       FusionGroup{GroupKind::kSingle, {5}, {}}, FusionGroup{GroupKind::kSingle, {6}, {}}}};
  ASSERT_TRUE(CheckPlan(g, fused).ok());
  auto f = PlanFeatures(g, fused, avx2);
  EXPECT_DOUBLE_EQ(f[0].reorder_bytes, tensor);  // The graph input x in; r1 stays blocked.
  EXPECT_DOUBLE_EQ(f[1].reorder_bytes, tensor);  // r1 and its residual in place; r2 out (plain).
  EXPECT_DOUBLE_EQ(f[2].reorder_bytes, 2 * tensor);  // r2 in, the graph output y out.
  EXPECT_DOUBLE_EQ(f[3].reorder_bytes, 0);           // A loop on plain tensors.
  // Without a blocked layout every conv reorders in and out, the residual operand too.
  auto p = PlanFeatures(g, fused, none);
  EXPECT_DOUBLE_EQ(p[0].reorder_bytes, 2 * tensor);
  EXPECT_DOUBLE_EQ(p[1].reorder_bytes, 3 * tensor);
  EXPECT_EQ(p[1].kernels, 1 + 3);

  // Unfused: the Relu and the residual Add run flat on blocked tensors; a loop that also holds
  // the Mul per channel and row reads plain copies of its two blocked inputs.
  auto u = PlanFeatures(g, UnfusedPlan(g), avx2);
  EXPECT_DOUBLE_EQ(u[1].reorder_bytes, 0);  // Relu(a).
  EXPECT_DOUBLE_EQ(u[3].reorder_bytes, 0);  // Add(cb, r1).
  FusionPlan mixed{
      {FusionGroup{GroupKind::kSingle, {0}, {}}, FusionGroup{GroupKind::kSingle, {1}, {}},
       FusionGroup{GroupKind::kSingle, {2}, {}}, FusionGroup{GroupKind::kLoop, {3, 4, 6}, {}},
       FusionGroup{GroupKind::kSingle, {5}, {}}}};
  ASSERT_TRUE(CheckPlan(g, mixed).ok());
  auto m = PlanFeatures(g, mixed, avx2);
  EXPECT_DOUBLE_EQ(m[3].reorder_bytes, 2 * tensor);
  EXPECT_EQ(m[3].kernels, 2);
}

// Row reductions run in our loop with or without a prologue, and a row reduction's epilogue as a
// second loop; a lone Softmax and a reduction over leading axes are oneDNN primitives, the
// softmax's exponentials at the JIT rate.
TEST(GroupFeatures, RowReductionsAreLoopsAndOtherReductionsPrimitives) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 64, 7, 7});
  TensorId gap = b.Act("gap", {1, 64, 1, 1}), y = b.Act("y", {1, 64, 1, 1});
  b.Op("GlobalAveragePool", {x}, {gap});
  b.Op("Relu", {gap}, {y});
  TensorId s = b.Input("s", {8, 128});
  TensorId sm = b.Act("sm", {8, 128}), lead = b.Act("lead", {1, 128});
  b.Op("Softmax", {s}, {sm}, {Int("axis", -1)});
  b.Op("ReduceSum", {s, b.IntConstant("axes", {0})}, {lead});
  for (TensorId t : {y, sm, lead}) b.Output(t);
  Graph g = b.Build();
  FusionPlan plan{{FusionGroup{GroupKind::kReduction, {0, 1}, {}},
                   FusionGroup{GroupKind::kSingle, {2}, {}},
                   FusionGroup{GroupKind::kSingle, {3}, {}}}};
  ASSERT_TRUE(CheckPlan(g, plan).ok());
  EXPECT_TRUE(RunsAsRowReduction(g, plan.groups[0]));
  EXPECT_FALSE(RunsAsRowReduction(g, plan.groups[1]));
  EXPECT_FALSE(RunsAsRowReduction(g, plan.groups[2]));
  TargetFingerprint t;
  t.isa = "avx2";
  auto f = PlanFeatures(g, plan, t);
  EXPECT_EQ(f[0].kernels, 0);
  EXPECT_EQ(f[0].loop_kernels, 2);  // The row reduction and its epilogue.
  EXPECT_EQ(f[0].post_ops, 0);
  EXPECT_EQ(f[1].kernels, 1);
  EXPECT_EQ(f[1].loop_kernels, 0);
  EXPECT_GT(f[1].flops[static_cast<int>(ComputeClass::kJitTranscendental)], 0);
  EXPECT_EQ(f[2].kernels, 1);
}

// LayerNorm's variance tail, ReduceMean over 128 rows of 768 then Add eps and Sqrt: the reduction
// forks (98304 elements), its epilogue over 128 values is one tile and runs on the calling thread,
// so the group wakes the team once, not once per loop kernel. A GlobalAveragePool over 1280x7x7
// with a Relu over 1280 values likewise; with a Relu over 8192 values (two tiles) the epilogue
// forks too.
TEST(GroupFeatures, ARowReductionsEpilogueOfOneTileDoesNotFork) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 128, 768});
  TensorId mean = b.Act("mean", {1, 128, 1}), eps = b.Act("eps", {1, 128, 1});
  TensorId root = b.Act("root", {1, 128, 1});
  b.Op("ReduceMean", {x, b.IntConstant("axes", {-1})}, {mean}, {Int("keepdims", 1)});
  b.Op("Add", {mean, b.FloatScalar("e", 1e-5)}, {eps});
  b.Op("Sqrt", {eps}, {root});
  b.Output(root);
  for (int64_t c : {1280, 8192}) {
    TensorId p = b.Input("p" + std::to_string(c), {1, c, 7, 7});
    TensorId gap = b.Act("gap" + std::to_string(c), {1, c, 1, 1});
    TensorId y = b.Act("y" + std::to_string(c), {1, c, 1, 1});
    b.Op("GlobalAveragePool", {p}, {gap});
    b.Op("Relu", {gap}, {y});
    b.Output(y);
  }
  Graph g = b.Build();
  FusionPlan plan{{FusionGroup{GroupKind::kReduction, {0, 1, 2}, {}},
                   FusionGroup{GroupKind::kReduction, {3, 4}, {}},
                   FusionGroup{GroupKind::kReduction, {5, 6}, {}}}};
  ASSERT_TRUE(CheckPlan(g, plan).ok());
  TargetFingerprint t;
  t.isa = "avx2";
  t.cores = 2;
  auto f = PlanFeatures(g, plan, t);
  for (const GroupFeatures& gf : f) EXPECT_EQ(gf.loop_kernels, 2);
  EXPECT_EQ(f[0].forks, 1);
  EXPECT_EQ(f[1].forks, 1);
  EXPECT_EQ(f[2].forks, 2);
}

TEST(GroupFeatures, AConcatItsProducersWriteInPlaceCostsNothingAndACopyingOneDoes) {
  // Relu(x) and Sigmoid(x) concatenated over channels, batch 1: in place. The same with x itself
  // as the second input (a graph input, the caller's buffer) copies.
  for (bool graph_input : {false, true}) {
    GraphBuilder b;
    const Shape dims = {1, 32, 28, 28};
    TensorId x = b.Input(dims);
    TensorId r = b.Op("Relu", {x}, dims);
    TensorId s = graph_input ? x : b.Op("Sigmoid", {x}, dims);
    TensorId c = b.Op("Concat", {r, s}, {1, 64, 28, 28}, {{"axis", int64_t{1}}});
    b.Output(b.Op("Neg", {c}, {1, 64, 28, 28}));
    const Graph& g = b.Linked();
    const FusionPlan plan = UnfusedPlan(g);
    const size_t concat = g.tensor(c).producer;
    const auto f = PlanFeatures(g, plan, HardwareProfile{}.target);
    const PlanCost cost = AnalyticalCostModel{HardwareProfile{}}.Cost(g, plan);
    if (graph_input) {
      EXPECT_GT(f[concat].loop_kernels, 0);
      EXPECT_GT(cost.groups[concat].total_ns, 0);
    } else {
      EXPECT_EQ(f[concat].loop_kernels + f[concat].kernels, 0);
      EXPECT_EQ(f[concat].write_bytes, (std::array<double, kNumMemoryLevels>{}));
      EXPECT_EQ(cost.groups[concat].total_ns, 0);
      // The producers still write their outputs.
      EXPECT_GT(cost.groups[g.tensor(r).producer].total_ns, 0);
    }
  }
}

}  // namespace
}  // namespace fusor
