#include "search/plan_search.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "graph/onnx_import.h"
#include "graph/op_registry.h"
#include "graph/synthetic.h"
#include "lowering/plan_legality.h"
#include "search/plan_state.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::IrBuilder;

const char* kModels[] = {"resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0",
                         "bert_base_encoder"};

Graph Load(const std::string& name) {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + name + ".onnx");
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(g).value();
}

SearchOptions With(SearchAlgorithm a) {
  SearchOptions o;
  o.algorithm = a;
  return o;
}

class ModelSearch : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelSearch, EveryAlgorithmReturnsALegalPlanAndOptimalBeatsGreedy) {
  Graph g = Load(GetParam());
  AnalyticalCostModel model{HardwareProfile{}};
  double none = 0, greedy = 0;
  for (auto a : {SearchAlgorithm::kNone, SearchAlgorithm::kRules, SearchAlgorithm::kGreedy,
                 SearchAlgorithm::kOptimal, SearchAlgorithm::kDefault}) {
    auto r = SearchPlan(g, model, With(a));
    ASSERT_TRUE(r.ok()) << AlgorithmName(a) << ": " << r.status().ToString();
    EXPECT_TRUE(CheckPlan(g, r->plan).ok()) << AlgorithmName(a);
    double t = r->cost.total.total_ns;
    if (a == SearchAlgorithm::kNone) none = t;
    if (a == SearchAlgorithm::kGreedy) greedy = t;
    if (a == SearchAlgorithm::kGreedy || a == SearchAlgorithm::kOptimal) {
      EXPECT_LT(t, none);
    }
    if (a == SearchAlgorithm::kOptimal || a == SearchAlgorithm::kDefault) {
      EXPECT_LE(t, greedy * (1 + 1e-9)) << AlgorithmName(a);
      EXPECT_GT(r->stats.candidates, 0);
      EXPECT_GT(r->stats.regions_optimized, 0);
    }
  }
}

TEST_P(ModelSearch, SameSeedSamePlan) {
  Graph g = Load(GetParam());
  AnalyticalCostModel model{HardwareProfile{}};
  auto a = SearchPlan(g, model);
  auto b = SearchPlan(g, model);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->plan, b->plan);
}

INSTANTIATE_TEST_SUITE_P(AllModels, ModelSearch, ::testing::ValuesIn(kModels));

// x[256,4096] + bias[4096] -> t, read by a Softmax and a ReduceMax. The two reductions cannot share
// a group, so t is either written once and read twice, or recomputed as each reduction's prologue;
// recomputing the cheap add saves the round trip of 4 MiB through memory. (On a runtime whose
// fused loops broadcast through index lists, each copy also pays per element: the profile here
// prices that like oneDNN's broadcasting binary kernels do, where recompute clearly wins.)
TEST(KnownBest, CheapBroadcastFeedingTwoConsumersIsRecomputed) {
  IrBuilder b;
  Shape s = {256, 4096};
  TensorId x = b.Input("x", s);
  TensorId bias = b.Weight("bias", {4096});
  TensorId t = b.Act("t", s), soft = b.Act("soft", s), max = b.Act("max", {256, 1});
  NodeId add = b.Op("Add", {x, bias}, {t});
  b.Op("Softmax", {t}, {soft}, {{"axis", int64_t{-1}}});
  b.Op("ReduceMax", {t}, {max}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}});
  b.Output(soft);
  b.Output(max);
  Graph g = b.Build();
  HardwareProfile p;
  p.indexed_gelems.value = 40;
  // A Softmax with a fused prologue runs our row reduction, whose exp is slower than oneDNN's on
  // the default profile; this case is about memory traffic, so both exps cost the same here.
  p.transcendental_gflops.value = p.jit_transcendental_gflops.value;
  p.elementwise_gflops.value = 64;  // The add is cheap, as on any CPU with vector units.
  AnalyticalCostModel model{p};
  for (auto a : {SearchAlgorithm::kGreedy, SearchAlgorithm::kDefault}) {
    auto r = SearchPlan(g, model, With(a));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->plan.groups.size(), 2u) << AlgorithmName(a);
    for (const auto& group : r->plan.groups) {
      EXPECT_EQ(group.recomputed, std::vector<NodeId>{add});
      EXPECT_EQ(group.kind, GroupKind::kReduction);
    }
    EXPECT_EQ(r->stats.recomputes, 1);
    EXPECT_LT(r->cost.total.total_ns, model.Cost(g, UnfusedPlan(g)).total.total_ns);
  }
}

// A conv output read by two branches is written once: anchors are never duplicated.
TEST(KnownBest, LargeConvOutputFeedingTwoConsumersIsMaterialized) {
  IrBuilder b;
  Shape s = {1, 64, 56, 56};
  TensorId x = b.Input("x", s);
  TensorId w = b.Weight("w", {64, 64, 3, 3});
  TensorId c = b.Act("c", s), r = b.Act("r", s), m = b.Act("m", s);
  NodeId conv = b.Op("Conv", {x, w}, {c}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  b.Op("Relu", {c}, {r});
  b.Op("Sigmoid", {c}, {m});
  b.Output(r);
  b.Output(m);
  Graph g = b.Build();
  AnalyticalCostModel model{HardwareProfile{}};
  auto result = SearchPlan(g, model);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  int copies = 0;
  for (size_t i = 0; i < result->plan.groups.size(); ++i) {
    const auto& group = result->plan.groups[i];
    if (std::count(group.nodes.begin(), group.nodes.end(), conv)) {
      ++copies;
      EXPECT_EQ(MaterializedOutputs(g, result->plan, i), std::vector<TensorId>{c});
    }
  }
  EXPECT_EQ(copies, 1);
}

// x feeds 24 branches that a chain of adds combines: one loop would keep 25 values live on a
// 16-register ISA. With spilling priced high the search splits the loop.
TEST(KnownBest, AChainThatWouldSpillRegistersIsSplit) {
  IrBuilder b;
  const int64_t n = 1 << 16;
  TensorId x = b.Input("x", {n});
  std::vector<TensorId> branches;
  const char* ops[] = {"Relu", "Tanh", "Sigmoid", "Exp"};
  for (int i = 0; i < 24; ++i) {
    branches.push_back(b.Act("f" + std::to_string(i), {n}));
    b.Op(ops[i % 4], {x}, {branches.back()});
  }
  TensorId acc = branches[0];
  for (int i = 1; i < 24; ++i) {
    TensorId next = b.Act("s" + std::to_string(i), {n});
    b.Op("Add", {acc, branches[i]}, {next});
    acc = next;
  }
  b.Output(acc);
  Graph g = b.Build();
  HardwareProfile p;
  p.spill_ns_per_value.value = 5;
  AnalyticalCostModel model{p};
  FusionPlan everything = MaxFusionPlan(g);
  ASSERT_EQ(everything.groups.size(), 1u);
  auto r = SearchPlan(g, model, With(SearchAlgorithm::kGreedy));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->plan.groups.size(), 1u);
  EXPECT_LT(r->cost.total.total_ns, model.Cost(g, everything).total.total_ns);
  for (const auto& group : r->plan.groups) {
    EXPECT_LE(LiveVectorValues(g, group), 16) << "group starting at node " << group.nodes[0];
  }
}

// When the whole graph is one region the exact search is the global optimum: check it against
// brute force over every legal plan that structural enumeration can reach.
TEST(OptimalSearch, MatchesEveryRandomPlanOnASmallGraph) {
  IrBuilder b;
  Shape s = {1, 16, 32, 32};
  TensorId x = b.Input("x", s);
  TensorId w = b.Weight("w", {16, 16, 3, 3});
  TensorId bias = b.Weight("bias", {16, 1, 1});
  TensorId c = b.Act("c", s), a = b.Act("a", s), r = b.Act("r", s), m = b.Act("m", s),
           o = b.Act("o", s);
  b.Op("Conv", {x, w}, {c}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  b.Op("Add", {c, bias}, {a});
  b.Op("Relu", {a}, {r});
  b.Op("Sigmoid", {r}, {m});
  b.Op("Mul", {r, m}, {o});
  b.Output(o);
  Graph g = b.Build();
  AnalyticalCostModel model{HardwareProfile{}};
  auto r2 = SearchPlan(g, model, With(SearchAlgorithm::kOptimal));
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  double best = r2->cost.total.total_ns;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    FusionPlan p = RandomLegalPlan(g, seed, 0.5, 0.0);
    EXPECT_GE(model.Cost(g, p).total.total_ns, best * (1 - 1e-9)) << seed;
  }
  EXPECT_GE(model.Cost(g, MaxFusionPlan(g)).total.total_ns, best * (1 - 1e-9));
}

// Regression: with recomputed copies, convex groups can still depend on each other in a cycle;
// greedy once returned such a plan (and dereferenced the failed ordering). Small transformers
// with cheap broadcasts recomputed everywhere reproduce it.
TEST(Greedy, NeverLeavesGroupsDependingOnEachOtherInACycle) {
  HardwareProfile cheap_broadcast;
  cheap_broadcast.indexed_gelems.value = 50;
  for (const HardwareProfile& p : {HardwareProfile{}, cheap_broadcast}) {
    AnalyticalCostModel model{p};
    for (TransformerShape shape : {TransformerShape{1, 8, 64, 2}, TransformerShape{2, 16, 32, 4},
                                   TransformerShape{3, 4, 16, 1}}) {
      auto g = SyntheticTransformer(shape);
      ASSERT_TRUE(g.ok());
      for (auto a : {SearchAlgorithm::kGreedy, SearchAlgorithm::kDefault}) {
        auto r = SearchPlan(*g, model, With(a));
        ASSERT_TRUE(r.ok()) << shape.layers << "x" << shape.hidden << ": " << r.status().ToString();
        EXPECT_TRUE(CheckPlan(*g, r->plan).ok());
      }
    }
  }
}

TEST(Rules, AnchorsTakeTheirChainAndReductionsTakeNoPrologue) {
  Graph g = Load("resnet18");
  FusionPlan plan = RulesPlan(g, 64);
  ASSERT_TRUE(CheckPlan(g, plan).ok());
  for (const auto& group : plan.groups) {
    const Node& first = g.node(group.nodes[0]);
    if (group.kind == GroupKind::kReduction) {
      EXPECT_EQ(ClassifyNode(g, first), OpClass::kReduction);
    }
  }
  // conv -> batchnorm-folded exports have Conv -> Relu: every Relu follows its Conv in a group.
  int fused_relus = 0;
  for (const auto& group : plan.groups) {
    if (group.kind == GroupKind::kAnchor && group.nodes.size() >= 2) ++fused_relus;
  }
  EXPECT_GE(fused_relus, 10);
}

// A conv's SiLU (x * Sigmoid(x)) or hard swish (x * HardSigmoid(x)) reads the conv's output twice;
// the rules plan, like TVM's FuseOps, still puts the pair behind its conv: every such pair of
// EfficientNet-B0 (49) and MobileNetV3-Small (18 after convs) lands in its conv's group.
TEST(Rules, AConvsGatedActivationJoinsItsGroup) {
  for (const auto& [model, pairs] : std::vector<std::pair<std::string, int>>{
           {"efficientnet_b0", 49}, {"mobilenet_v3_small", 18}}) {
    SCOPED_TRACE(model);
    Graph g = Load(model);
    FusionPlan plan = RulesPlan(g, 64);
    ASSERT_TRUE(CheckPlan(g, plan).ok());
    int joined = 0;
    for (const auto& group : plan.groups) {
      if (g.node(group.nodes[0]).op_type != "Conv") continue;
      for (size_t i = 1; i + 1 < group.nodes.size(); ++i) {
        joined +=
            GatedPairOf(g, g.node(group.nodes[i]), g.node(group.nodes[i + 1])) != GatedPair::kNone;
      }
    }
    EXPECT_EQ(joined, pairs);
  }
}

// A clock that moves 1 ms every time it is read: the search's deadline passes after a known
// number of checks, wherever the machine is slow or fast.
class TickingClock : public Clock {
 public:
  int64_t NowNs() const override { return now_ns_ += 1'000'000; }
  void SleepFor(std::chrono::nanoseconds d) const override { now_ns_ += d.count(); }

 private:
  mutable std::atomic<int64_t> now_ns_{0};
};

TEST(SearchStop, ACancelledSearchFailsAsCancelled) {
  Graph g = Load("resnet18");
  AnalyticalCostModel model{HardwareProfile{}};
  std::atomic<bool> cancelled{true};
  SearchStop stop;
  stop.cancelled = &cancelled;
  for (auto a : {SearchAlgorithm::kGreedy, SearchAlgorithm::kDefault}) {
    auto r = SearchPlan(g, model, With(a), stop);
    ASSERT_FALSE(r.ok()) << AlgorithmName(a);
    EXPECT_EQ(r.status().code(), Status::Code::kCancelled) << r.status().ToString();
  }
}

TEST(SearchStop, ADeadlineEndsTheSearchWithALegalPartlyFusedPlan) {
  Graph g = Load("mobilenet_v2");
  AnalyticalCostModel model{HardwareProfile{}};
  auto full = SearchPlan(g, model, With(SearchAlgorithm::kDefault));
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_FALSE(full->stats.stopped_early);
  TickingClock clock;
  SearchStop stop;
  stop.clock = &clock;
  stop.deadline_ns = 20'000'000;  // 20 reads of the clock: a few greedy steps.
  auto partial = SearchPlan(g, model, With(SearchAlgorithm::kDefault), stop);
  ASSERT_TRUE(partial.ok()) << partial.status().ToString();
  EXPECT_TRUE(partial->stats.stopped_early);
  EXPECT_TRUE(CheckPlan(g, partial->plan).ok());
  EXPECT_EQ(partial->stats.regions_optimized, 0);
  EXPECT_LT(partial->plan.groups.size(), UnfusedPlan(g).groups.size());
  EXPECT_GT(partial->plan.groups.size(), full->plan.groups.size());
  EXPECT_GT(partial->cost.total.total_ns, full->cost.total.total_ns);
}

TEST(SearchOptions, BudgetAlgorithmNamesAndCanonicalText) {
  Graph g = Load("squeezenet1_1");
  AnalyticalCostModel model{HardwareProfile{}};
  SearchOptions tight;
  tight.memory_budget_bytes = 1000;
  auto r = SearchPlan(g, model, tight);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(r.status().message().find("over the memory budget of 1000 bytes"), std::string::npos);
  EXPECT_FALSE(ParseAlgorithm("fastest").ok());
  EXPECT_EQ(*ParseAlgorithm("greedy"), SearchAlgorithm::kGreedy);
  SearchOptions a, b2;
  b2.seed = 2;
  EXPECT_NE(a.CanonicalText(), b2.CanonicalText());
  EXPECT_EQ(a.CanonicalText(), SearchOptions{}.CanonicalText());
}

// Regression (EfficientNet's squeeze-and-excite, greedy returned an illegal plan): with the Mul of
// x * Sigmoid(x) recomputed both in the pooling group that owns the Sigmoid and in the excite
// group, the excite group's copy reads the Sigmoid's output from memory, so the pooling group must
// write it, which a reduction group cannot. Materialized() used to skip consumers that the group
// itself computes and missed the other copy.
TEST(PlanState, ARecomputedCopyElsewhereKeepsItsInputMaterialized) {
  IrBuilder b;
  Shape d = {1, 8, 4, 4}, c = {1, 8, 1, 1};
  TensorId x = b.Input("x", d);
  TensorId s = b.Act("s", d), m = b.Act("m", d), p = b.Act("p", c), y = b.Act("y", d);
  b.Op("Sigmoid", {x}, {s});
  b.Op("Mul", {x, s}, {m});
  b.Op("GlobalAveragePool", {m}, {p});
  b.Op("Mul", {m, p}, {y});
  b.Output(y);
  Graph g = b.Build();
  FusionPlan plan{{{GroupKind::kReduction, {0, 1, 2}, {1}}, {GroupKind::kLoop, {1, 3}, {1}}}};
  PlanState state(g, plan);
  FusionGroup pooling = plan.groups[0];
  std::vector<TensorId> written = state.Materialized(pooling, {});
  EXPECT_NE(std::find(written.begin(), written.end(), s), written.end());
  EXPECT_FALSE(IsLegalGroup(g, &pooling, written));
}

}  // namespace
}  // namespace fusor
