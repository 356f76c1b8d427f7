#include "costmodel/in_plan.h"

#include <gtest/gtest.h>

#include "graph/onnx_import.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::IrBuilder;

constexpr double kKiB = 1024;

// x -> Conv(w) -> a -> Relu -> r -> Add(r, x) -> y, every op its own group: the Add reads x again
// two groups after the Conv did (a skip connection), and w is read once an inference.
Graph SkipBlock() {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 16, 32, 32});  // 64 KiB, as are a, r and y.
  TensorId w = b.Weight("w", {16, 16, 1, 1});  // 1 KiB.
  TensorId a = b.Act("a", {1, 16, 32, 32}), r = b.Act("r", {1, 16, 32, 32});
  TensorId y = b.Act("y", {1, 16, 32, 32});
  b.Op("Conv", {x, w}, {a});
  b.Op("Relu", {a}, {r});
  b.Op("Add", {r, x}, {y});
  b.Output(y);
  return b.Build();
}

// One core with a 32 KiB L1, a 132 KiB L2 (the Conv's 129 KiB working set fits) and a 200 KiB L3.
TargetFingerprint SmallCaches() {
  TargetFingerprint t;
  t.cores = 1;
  t.l1d_bytes = 32 << 10;
  t.l2_bytes = 132 << 10;
  t.l3_bytes = 200 << 10;
  return t;
}

const InPlanRead& ReadOf(const Graph& g, const InPlanGroupReads& r, const std::string& name) {
  for (const InPlanRead& read : r.reads)
    if (g.tensor(read.tensor).name == name) return read;
  ADD_FAILURE() << "no read of " << name;
  return r.reads.front();
}

TEST(InPlanReads, ReuseDistanceCountsTheDistinctBytesTouchedSinceTheLastAccess) {
  Graph g = SkipBlock();
  std::vector<InPlanGroupReads> reads = InPlanReadsOf(g, UnfusedPlan(g), SmallCaches());
  ASSERT_EQ(reads.size(), 3u);
  // The weight was last read one inference ago: since then the Add touched r, x and y and the
  // Relu a (its r already counted).
  EXPECT_DOUBLE_EQ(ReadOf(g, reads[0], "w").reuse_bytes, 256 * kKiB);
  // x was last touched by the previous inference's Add, just before.
  EXPECT_DOUBLE_EQ(ReadOf(g, reads[0], "x").reuse_bytes, 0);
  // Each activation is read right after the group that wrote it.
  EXPECT_DOUBLE_EQ(ReadOf(g, reads[1], "a").reuse_bytes, 0);
  EXPECT_DOUBLE_EQ(ReadOf(g, reads[2], "r").reuse_bytes, 0);
  // The skip connection: the Relu's a and r lie between the Conv's read of x and the Add's.
  EXPECT_DOUBLE_EQ(ReadOf(g, reads[2], "x").reuse_bytes, 128 * kKiB);
  EXPECT_DOUBLE_EQ(reads[0].weight_bytes, 65 * kKiB);  // x is a graph input: a leaf too.
  EXPECT_DOUBLE_EQ(reads[2].input_bytes, 64 * kKiB);
}

TEST(InPlanReads, AReadFallsBelowItsAloneLevelWhenTheBytesBetweenDoNotFit) {
  Graph g = SkipBlock();
  std::vector<InPlanGroupReads> reads = InPlanReadsOf(g, UnfusedPlan(g), SmallCaches());
  // Alone the Conv's 129 KiB stay in L2; in the plan w comes after 257 KiB: past L3, from DRAM,
  // two steps down, and only w's bytes count.
  const InPlanRead& w = ReadOf(g, reads[0], "w");
  EXPECT_EQ(w.alone, MemoryLevel::kL2);
  EXPECT_EQ(w.in_plan, MemoryLevel::kDram);
  EXPECT_EQ(reads[0].cold_bytes, (std::array<double, kColdSteps>{0, kKiB, kKiB}));
  // The Add's 192 KiB working set is in L3 alone, and x after 192 KiB is there too: nothing.
  EXPECT_EQ(reads[2].cold_bytes, (std::array<double, kColdSteps>{0, 0, 0}));
  EXPECT_EQ(reads[1].cold_bytes, (std::array<double, kColdSteps>{0, 0, 0}));
}

TEST(InPlanReads, AGroupAloneInItsPlanReadsNothingCold) {
  Graph g = SkipBlock();
  FusionPlan fused;
  FusionGroup all;
  all.kind = GroupKind::kAnchor;
  for (const FusionGroup& group : UnfusedPlan(g).groups)
    all.nodes.insert(all.nodes.end(), group.nodes.begin(), group.nodes.end());
  fused.groups.push_back(all);
  for (const InPlanGroupReads& r : InPlanReadsOf(g, fused, SmallCaches())) {
    EXPECT_EQ(r.cold_bytes, (std::array<double, kColdSteps>{0, 0, 0}));
  }
}

// On a real model too big for the caches, every weight of the unfused plan that one node reads is
// read from DRAM inside the plan, after at least every other weight's bytes. (The exporter shares
// equal biases between nodes: such a weight comes back after the groups between its readers.)
TEST(InPlanReads, EveryWeightOfVggComesFromDramAfterAllOtherWeights) {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/vgg11_bn.onnx");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  TargetFingerprint zen5;
  zen5.cores = 2;
  zen5.l1d_bytes = 48 << 10;
  zen5.l2_bytes = 1 << 20;
  zen5.l3_bytes = 32 << 20;
  double weights = 0;
  for (const Tensor& t : g->tensors())
    if (t.kind == TensorKind::kWeight) weights += static_cast<double>(t.bytes());
  int weight_reads = 0;
  for (const InPlanGroupReads& r : InPlanReadsOf(*g, UnfusedPlan(*g), zen5)) {
    for (const InPlanRead& read : r.reads) {
      const Tensor& t = g->tensor(read.tensor);
      if (t.kind != TensorKind::kWeight || t.consumers.size() != 1) continue;
      ++weight_reads;
      EXPECT_EQ(read.in_plan, MemoryLevel::kDram) << g->tensor(read.tensor).name;
      EXPECT_GE(read.reuse_bytes + read.bytes, weights) << g->tensor(read.tensor).name;
    }
  }
  EXPECT_GT(weight_reads, 10);
}

// x -> Relu -> a -> Relu -> b -> ... -> e, then Add(e, a): the Add reads a again after the
// groups that write c, d and e (and read b, c, d) evicted it. Every tensor is 64 KiB.
Graph LongSkip() {
  IrBuilder b;
  const Shape dims = {1, 16, 32, 32};
  TensorId x = b.Input("x", dims);
  TensorId a = b.Act("a", dims);
  b.Op("Relu", {x}, {a});
  TensorId prev = a;
  for (const char* name : {"b", "c", "d", "e"}) {
    TensorId next = b.Act(name, dims);
    b.Op("Relu", {prev}, {next});
    prev = next;
  }
  TensorId y = b.Act("y", dims);
  b.Op("Add", {prev, a}, {y});
  b.Output(y);
  return b.Build();
}

// One core: L1 32 KiB, L2 200 KiB (the Add's 192 KiB working set), L3 400 KiB.
TargetFingerprint LongSkipCaches() {
  TargetFingerprint t = SmallCaches();
  t.l2_bytes = 200 << 10;
  t.l3_bytes = 400 << 10;
  return t;
}

// The whole plan is its groups' costs, unchanged, plus the bytes read colder than alone at the
// fitted constants: a's 64 KiB come back to the Add from L3 after b-e (320 KiB), where the Add
// alone finds them in L2, and the graph input x comes to the first Relu from DRAM after a whole
// inference (448 KiB), where alone it is in L2.
TEST(WholePlan, AnActivationReadAgainFromL3IsPredictedSlowerThanTheSumOfTheGroups) {
  Graph g = LongSkip();
  HardwareProfile profile;
  profile.target = LongSkipCaches();
  const AnalyticalCostModel plain(profile);
  profile.in_plan.ns_per_byte = {0.1, 0.01, 0.05};
  profile.in_plan.samples = 18;
  const AnalyticalCostModel model(profile);
  const FusionPlan plan = UnfusedPlan(g);
  const WholePlanCost whole = model.WholePlan(g, plan);
  const PlanCost sum = plain.Cost(g, plan);
  ASSERT_EQ(whole.groups.groups.size(), sum.groups.size());
  for (size_t i = 0; i < sum.groups.size(); ++i) {
    EXPECT_DOUBLE_EQ(whole.groups.groups[i].total_ns, sum.groups[i].total_ns) << "group " << i;
  }
  const std::vector<InPlanGroupReads> reads = InPlanReadsOf(g, plan, profile.target);
  const InPlanRead& a = ReadOf(g, reads.back(), "a");
  EXPECT_EQ(a.alone, MemoryLevel::kL2);
  EXPECT_EQ(a.in_plan, MemoryLevel::kL3);
  const InPlanRead& x = ReadOf(g, reads.front(), "x");
  EXPECT_EQ(x.alone, MemoryLevel::kL2);
  EXPECT_EQ(x.in_plan, MemoryLevel::kDram);
  const double added = 64 * kKiB * 0.01 + 64 * kKiB * (0.01 + 0.05);
  EXPECT_DOUBLE_EQ(whole.in_plan_ns, added);
  EXPECT_DOUBLE_EQ(whole.total_ns, sum.total.total_ns + added);
}

// A weight's read inside the plan falls from L2 (alone) to DRAM, and the whole plan adds that fall
// as the fit counts it: the group costs' constants are fitted on groups timed alone, their weights
// warm, so the fall is in no group cost (docs/costmodel.md, "Whole plans").
TEST(WholePlan, AWeightReadColderInThePlanThanAloneAddsItsFall) {
  Graph g = SkipBlock();
  HardwareProfile profile;
  profile.target = SmallCaches();
  profile.in_plan.ns_per_byte = {0.1, 0.01, 0.05};
  const std::vector<InPlanGroupReads> reads = InPlanReadsOf(g, UnfusedPlan(g), profile.target);
  EXPECT_EQ(reads[0].cold_bytes, (std::array<double, kColdSteps>{0, kKiB, kKiB}));
  EXPECT_EQ(ReadOf(g, reads[0], "w").in_plan, MemoryLevel::kDram);
  double expected = 0;
  for (const InPlanGroupReads& r : reads) {
    for (int s = 0; s < kColdSteps; ++s)
      expected += r.cold_bytes[s] * profile.in_plan.ns_per_byte[s];
  }
  EXPECT_GE(expected, kKiB * (0.01 + 0.05));
  EXPECT_DOUBLE_EQ(AnalyticalCostModel(profile).WholePlan(g, UnfusedPlan(g)).in_plan_ns, expected);
}

TEST(WholePlan, AProfileWithoutFittedConstantsPredictsTheSumOfTheGroups) {
  Graph g = LongSkip();
  HardwareProfile profile;
  profile.target = LongSkipCaches();
  const AnalyticalCostModel model(profile);
  const WholePlanCost whole = model.WholePlan(g, UnfusedPlan(g));
  EXPECT_EQ(whole.in_plan_ns, 0);
  EXPECT_DOUBLE_EQ(whole.total_ns, model.Cost(g, UnfusedPlan(g)).total.total_ns);
}

// 40 groups with cold bytes in steps 1 and 2 and the times `truth` gives them, each less
// `fall_ns` per 10 KB of step-1 bytes.
std::vector<InPlanSample> Synthetic(const InPlanConstants& truth, double fall_ns) {
  std::vector<InPlanSample> samples;
  for (int i = 0; i < 40; ++i) {
    InPlanSample s;
    s.cold_bytes = {0, 1e4 * (i % 7), 3e4 * (i % 5) * (i % 2)};
    InPlanGroupReads r;
    r.cold_bytes = s.cold_bytes;
    s.alone_ns = 1000 + 10 * i;
    s.in_plan_ns = s.alone_ns + InPlanExtraNs(r, truth) - fall_ns * (i % 7);
    samples.push_back(s);
  }
  return samples;
}

TEST(FitInPlanConstants, RecoversTheConstantsOfSyntheticTimings) {
  InPlanConstants truth;
  truth.ns_per_byte = {0, 0.004, 0.02};
  auto fitted = FitInPlanConstants(Synthetic(truth, 0));
  ASSERT_TRUE(fitted.ok()) << fitted.status().ToString();
  EXPECT_NEAR(fitted->ns_per_byte[1], 0.004, 1e-9);
  EXPECT_NEAR(fitted->ns_per_byte[2], 0.02, 1e-9);
  EXPECT_EQ(fitted->ns_per_byte[0], 0);  // No sample reads a byte cold from L2: it stays 0.
  EXPECT_EQ(fitted->samples, 40);
}

// Times that fall as step-1 bytes grow fit step 1 at -0.03 ns per byte without the bound: the fit
// holds it at 0 and gives step 2 the least squares of the rest (0.0095, not the 0.02 it has with
// step 1 free).
TEST(FitInPlanConstants, AColdReadNeverMakesAGroupFaster) {
  InPlanConstants truth;
  truth.ns_per_byte = {0, 0, 0.02};
  auto fitted = FitInPlanConstants(Synthetic(truth, 300));
  ASSERT_TRUE(fitted.ok()) << fitted.status().ToString();
  EXPECT_EQ(fitted->ns_per_byte[0], 0);
  EXPECT_EQ(fitted->ns_per_byte[1], 0);
  EXPECT_NEAR(fitted->ns_per_byte[2], 0.0095, 1e-9);
}

TEST(FitInPlanConstants, SamplesWithoutAColdByteAreAnErrorNamingIt) {
  std::vector<InPlanSample> samples(3);
  auto fitted = FitInPlanConstants(samples);
  ASSERT_FALSE(fitted.ok());
  EXPECT_NE(fitted.status().message().find("none of the 3 groups"), std::string::npos);
}

}  // namespace
}  // namespace fusor
