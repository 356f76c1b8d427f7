#include "costmodel/cost_model.h"

#include <gtest/gtest.h>

#include "graph/onnx_import.h"
#include "graph/op_registry.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

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
    }
    return bytes;
  };
  // Boundary writes: materializing writes t, u2 and v2 (3 x 4 KiB), recomputing only u2 and v2.
  // Tile buffers: the loops keep u and v (and, recomputing, also their copy of t) in per-thread
  // buffers, one L1 write each.
  EXPECT_DOUBLE_EQ(written(materialize), 3 * 4096 + 2 * 4096);
  EXPECT_DOUBLE_EQ(written(recompute), 2 * 4096 + 4 * 4096);
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

TEST(AnalyticalCostModel, FusionIsPredictedFasterOnSharedModels) {
  for (const char* name : {"resnet18", "mobilenet_v2", "efficientnet_b0", "bert_base_encoder"}) {
    auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + name + ".onnx");
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    AnalyticalCostModel model{HardwareProfile{}};
    PlanCost unfused = model.Cost(*g, UnfusedPlan(*g));
    PlanCost fused = model.Cost(*g, MaxFusionPlan(*g));
    EXPECT_LT(fused.total.total_ns, unfused.total.total_ns) << name;
    EXPECT_LT(fused.total.launch_ns, unfused.total.launch_ns) << name;
    EXPECT_GT(fused.total.compute_ns, 0) << name;
    EXPECT_LE(fused.peak_activation_bytes, unfused.peak_activation_bytes) << name;
  }
}

}  // namespace
}  // namespace fusor
