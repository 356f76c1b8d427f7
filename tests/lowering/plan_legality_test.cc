#include "lowering/plan_legality.h"

#include <gtest/gtest.h>

#include "graph/canonical.h"
#include "graph/onnx_import.h"
#include "graph/plan.h"
#include "graph/plan_json.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::Ints;
using testing::IrBuilder;

// x -> conv -> bn -> relu -> (a) ; a -> conv2 -> add(a) -> y : a residual block in miniature.
Graph ResidualBlock() {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 4, 8, 8});
  TensorId w1 = b.Weight("w1", {4, 4, 3, 3});
  TensorId w2 = b.Weight("w2", {4, 4, 3, 3});
  TensorId s = b.Weight("s", {4}), bb = b.Weight("bb", {4}), m = b.Weight("m", {4}),
           v = b.Weight("v", {4});
  TensorId c1 = b.Act("c1", {1, 4, 8, 8}), n1 = b.Act("n1", {1, 4, 8, 8}),
           a = b.Act("a", {1, 4, 8, 8}), c2 = b.Act("c2", {1, 4, 8, 8}),
           y = b.Act("y", {1, 4, 8, 8});
  auto pads = Ints("pads", {1, 1, 1, 1});
  b.Op("Conv", {x, w1}, {c1}, {pads});                  // 0
  b.Op("BatchNormalization", {c1, s, bb, m, v}, {n1});  // 1
  b.Op("Relu", {n1}, {a});                              // 2
  b.Op("Conv", {a, w2}, {c2}, {pads});                  // 3
  b.Op("Add", {c2, a}, {y});                            // 4
  b.Output(y);
  return b.Build();
}

TEST(Plan, UnfusedIsLegal) {
  Graph g = ResidualBlock();
  EXPECT_TRUE(CheckPlan(g, UnfusedPlan(g)).ok());
}

// Found by tests/fuzz (plan_json): node ids were read with wrap-around, so node 2^32 in a plan
// file became node 0 and the plan was accepted.
TEST(PlanJson, NodeIdOutOfRangeIsAnErrorNotWrapped) {
  Graph g = ResidualBlock();
  nlohmann::json j = PlanToJson(UnfusedPlan(g), {CanonicalHash(g), ""});
  ASSERT_TRUE(PlanFromJson(g, j).ok());
  j["groups"][0]["nodes"][0] = uint64_t{1} << 32;
  auto wrapped = PlanFromJson(g, j);
  ASSERT_FALSE(wrapped.ok()) << "node 2^32 read as node " << wrapped->groups[0].nodes[0];
  EXPECT_NE(
      wrapped.status().message().find("plan group 0 nodes: node id 4294967296 is out of range"),
      std::string::npos)
      << wrapped.status().message();
  j["groups"][0]["nodes"][0] = int64_t{-4294967296};
  EXPECT_FALSE(PlanFromJson(g, j).ok());
  j["groups"][0]["recomputed"] = {uint64_t{1} << 32 | 1};
  j["groups"][0]["nodes"][0] = 0;
  EXPECT_FALSE(PlanFromJson(g, j).ok());
}

// Found by a user: squeezenet's plan loaded on mobilenet_v2 failed with "the anchor node ... must
// come first", which does not say that the plan is another model's.
TEST(PlanJson, APlanForAnotherGraphIsRefusedByItsHash) {
  auto squeezenet = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/squeezenet1_1.onnx");
  auto mobilenet = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/mobilenet_v2.onnx");
  ASSERT_TRUE(squeezenet.ok() && mobilenet.ok());
  nlohmann::json j = PlanToJson(MaxFusionPlan(*squeezenet), {CanonicalHash(*squeezenet), "t1"});
  ASSERT_TRUE(PlanFromJson(*squeezenet, j, "t1").ok());
  auto refused = PlanFromJson(*mobilenet, j, "t1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "plan is for graph " + CanonicalHash(*squeezenet) +
                                            ", this model is " + CanonicalHash(*mobilenet));
}

TEST(PlanJson, APlanTunedForAnotherTargetIsRefusedByName) {
  Graph g = ResidualBlock();
  nlohmann::json j = PlanToJson(MaxFusionPlan(g), {CanonicalHash(g), "target-a"});
  EXPECT_TRUE(PlanFromJson(g, j, "target-a").ok());
  EXPECT_TRUE(PlanFromJson(g, j, "").ok()) << "a reader that names no target";
  auto refused = PlanFromJson(g, j, "target-b");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("tuned for target target-a, this is target target-b"),
            std::string::npos)
      << refused.status().message();
  nlohmann::json any = PlanToJson(MaxFusionPlan(g), {CanonicalHash(g), ""});
  EXPECT_TRUE(PlanFromJson(g, any, "target-b").ok()) << "a plan tuned for no one target";
}

TEST(PlanJson, AVersionOnePlanStillLoadsWithAWarning) {
  Graph g = ResidualBlock();
  nlohmann::json j = PlanToJson(MaxFusionPlan(g), {CanonicalHash(g), "target-a"});
  j.erase("graph_hash");
  j.erase("target_id");
  j["version"] = 1;
  std::string warning;
  auto plan = PlanFromJson(g, j, "target-b", &warning);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(*plan, MaxFusionPlan(g));
  EXPECT_NE(warning.find("version 1 names no graph or target"), std::string::npos) << warning;
  j["graph_hash"] = CanonicalHash(g);
  EXPECT_FALSE(PlanFromJson(g, j).ok()) << "version 1 with version 2's fields";
  j["version"] = 2;
  j.erase("graph_hash");
  EXPECT_FALSE(PlanFromJson(g, j).ok()) << "version 2 without its graph";
}

TEST(Plan, MaxFusionMakesConvPostOpChains) {
  Graph g = ResidualBlock();
  FusionPlan plan = MaxFusionPlan(g);
  ASSERT_TRUE(CheckPlan(g, plan).ok()) << CheckPlan(g, plan).ToString();
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0], (FusionGroup{GroupKind::kAnchor, {0, 1, 2}, {}}));
  EXPECT_EQ(plan.groups[1], (FusionGroup{GroupKind::kAnchor, {3, 4}, {}}));
  EXPECT_EQ(MaterializedOutputs(g, plan, 0), (std::vector<TensorId>{g.FindTensor("a").value()}));
  EXPECT_EQ(GroupInputs(g, plan, 1),
            (std::vector<TensorId>{g.FindTensor("w2").value(), g.FindTensor("a").value()}));
}

// x * Sigmoid(x) and x * HardSigmoid(x), either way round, are gated pairs when nothing else reads
// the gate; the gate read again, a product with another tensor or another gate op is not.
TEST(GatedPairOf, OnlyXTimesItsOwnGateReadByNothingElse) {
  IrBuilder b;
  const Shape dims = {1, 8, 4, 4};
  TensorId x = b.Input("x", dims), z = b.Input("z", dims);
  TensorId s = b.Act("s", dims), m = b.Act("m", dims), m2 = b.Act("m2", dims);
  TensorId s2 = b.Act("s2", dims), o = b.Act("o", dims), again = b.Act("again", dims);
  TensorId s3 = b.Act("s3", dims), m3 = b.Act("m3", dims);
  TensorId h = b.Act("h", dims), mh = b.Act("mh", dims), t = b.Act("t", dims),
           mt = b.Act("mt", dims);
  b.Op("Sigmoid", {x}, {s});      // 0
  b.Op("Mul", {s, x}, {m});       // 1
  b.Op("Sigmoid", {x}, {s2});     // 2
  b.Op("Mul", {x, s2}, {m2});     // 3
  b.Op("Neg", {s2}, {again});     // 4: a second reader of s2.
  b.Op("Sigmoid", {x}, {s3});     // 5
  b.Op("Mul", {z, s3}, {m3});     // 6: z, not x.
  b.Op("Relu", {m}, {o});         // 7
  b.Op("HardSigmoid", {x}, {h});  // 8
  b.Op("Mul", {x, h}, {mh});      // 9
  b.Op("Tanh", {x}, {t});         // 10
  b.Op("Mul", {x, t}, {mt});      // 11: tanh is no gate oneDNN fuses.
  for (TensorId out : {o, m2, again, m3, mh, mt}) b.Output(out);
  Graph g = b.Build();
  EXPECT_EQ(GatedPairOf(g, g.node(0), g.node(1)), GatedPair::kSwish);
  EXPECT_EQ(GatedPairOf(g, g.node(2), g.node(3)), GatedPair::kNone);
  EXPECT_EQ(GatedPairOf(g, g.node(5), g.node(6)), GatedPair::kNone);
  EXPECT_EQ(GatedPairOf(g, g.node(1), g.node(0)), GatedPair::kNone);
  EXPECT_EQ(GatedPairOf(g, g.node(8), g.node(9)), GatedPair::kHardSwish);
  EXPECT_EQ(GatedPairOf(g, g.node(10), g.node(11)), GatedPair::kNone);
}

// conv -> Sigmoid / HardSigmoid gate (-> a second gate) -> Mul(conv, gate) -> Relu: SiLU or hard
// swish written out, or (gated twice) a product that is no gated pair.
Graph GatedConv(const std::string& gate, bool twice = false) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 4, 8, 8});
  TensorId c = b.Act("c", {1, 4, 8, 8}), s = b.Act("s", {1, 4, 8, 8});
  TensorId y = b.Act("y", {1, 4, 8, 8}), r = b.Act("r", {1, 4, 8, 8});
  b.Op("Conv", {x, b.Weight("w", {4, 4, 3, 3})}, {c}, {Ints("pads", {1, 1, 1, 1})});
  b.Op(gate, {c}, {s});
  if (twice) {
    TensorId s2 = b.Act("s2", {1, 4, 8, 8});
    b.Op(gate, {s}, {s2});
    s = s2;
  }
  b.Op("Mul", {c, s}, {y});
  b.Op("Relu", {y}, {r});
  b.Output(r);
  return b.Build();
}

// A gated pair is one post-op, so an anchor group takes it; a Mul of the conv by anything else
// computed in the group still breaks the chain.
TEST(Plan, AGatedPairContinuesAnAnchorsPostOpChain) {
  for (std::string gate : {"Sigmoid", "HardSigmoid"}) {
    SCOPED_TRACE(gate);
    Graph g = GatedConv(gate);
    EXPECT_EQ(GatedPairOf(g, g.node(1), g.node(2)),
              gate == "Sigmoid" ? GatedPair::kSwish : GatedPair::kHardSwish);
    FusionGroup all{GroupKind::kAnchor, {0, 1, 2, 3}, {}};
    EXPECT_TRUE(CheckGroup(g, all).ok()) << CheckGroup(g, all).ToString();
    EXPECT_EQ(InferGroupKind(g, all.nodes).value(), GroupKind::kAnchor);
    Graph twice = GatedConv(gate, /*twice=*/true);
    EXPECT_EQ(GatedPairOf(twice, twice.node(2), twice.node(3)), GatedPair::kNone);
    Status s = CheckGroup(twice, {GroupKind::kAnchor, {0, 1, 2, 3, 4}, {}});
    EXPECT_NE(s.message().find("reads a second value computed inside the group"), std::string::npos)
        << s.ToString();
  }
}

TEST(Plan, IllegalGroupsAreExplained) {
  Graph g = ResidualBlock();
  // Two anchors in one group.
  FusionPlan two_anchors{{{GroupKind::kAnchor, {0, 1, 2, 3}, {}}, {GroupKind::kSingle, {4}, {}}}};
  EXPECT_NE(CheckPlan(g, two_anchors).message().find("at most one anchor"), std::string::npos);
  // The relu's output feeds the second conv and the add: an anchor group cannot expose it midway.
  FusionPlan midway{{{GroupKind::kAnchor, {0, 1, 2}, {}},
                     {GroupKind::kSingle, {3}, {}},
                     {GroupKind::kSingle, {4}, {}}}};
  EXPECT_TRUE(CheckPlan(g, midway).ok());
  FusionPlan leaks{{{GroupKind::kAnchor, {0, 1}, {}},
                    {GroupKind::kLoop, {2, 4}, {}},
                    {GroupKind::kSingle, {3}, {}}}};
  EXPECT_FALSE(CheckPlan(g, leaks).ok());  // Not convex: 2 -> 3 -> 4 leaves and re-enters.
  // A missing node.
  FusionPlan missing{{{GroupKind::kAnchor, {0, 1, 2}, {}}, {GroupKind::kSingle, {3}, {}}}};
  EXPECT_NE(CheckPlan(g, missing).message().find("is in no group"), std::string::npos);
  // Out of order.
  FusionPlan backwards{{{GroupKind::kSingle, {3}, {}},
                        {GroupKind::kAnchor, {0, 1, 2}, {}},
                        {GroupKind::kSingle, {4}, {}}}};
  EXPECT_NE(CheckPlan(g, backwards).message().find("no earlier group writes"), std::string::npos);
  // A declared kind that does not match.
  FusionPlan wrong_kind{{{GroupKind::kLoop, {0, 1, 2}, {}}, {GroupKind::kAnchor, {3, 4}, {}}}};
  EXPECT_NE(CheckPlan(g, wrong_kind).message().find("declared loop but its nodes form anchor"),
            std::string::npos);
}

// A cheap broadcast feeding two loops can be recomputed in both; the copies are not written.
TEST(Plan, RecomputedProducerIsLegalAndNotMaterialized) {
  IrBuilder b;
  TensorId x = b.Input("x", {8, 16});
  TensorId bias = b.Weight("bias", {16});
  TensorId t = b.Act("t", {8, 16}), u = b.Act("u", {8, 16}), v = b.Act("v", {8, 16}),
           u2 = b.Act("u2", {8, 16}), v2 = b.Act("v2", {8, 16});
  b.Op("Add", {x, bias}, {t});  // 0: shared producer
  b.Op("Relu", {t}, {u});       // 1
  b.Op("Tanh", {t}, {v});       // 2
  b.Op("Exp", {u}, {u2});       // 3
  b.Op("Sigmoid", {v}, {v2});   // 4
  b.Output(u2);
  b.Output(v2);
  Graph g = b.Build();
  FusionPlan plan{{{GroupKind::kLoop, {0, 1, 3}, {0}}, {GroupKind::kLoop, {0, 2, 4}, {0}}}};
  EXPECT_TRUE(CheckPlan(g, plan).ok()) << CheckPlan(g, plan).ToString();
  EXPECT_EQ(MaterializedOutputs(g, plan, 0), (std::vector<TensorId>{u2}));
  // Owned twice is illegal.
  FusionPlan twice{{{GroupKind::kLoop, {0, 1, 3}, {}}, {GroupKind::kLoop, {0, 2, 4}, {}}}};
  EXPECT_NE(CheckPlan(g, twice).message().find("owned by 2 groups"), std::string::npos);
  v1::Plan p;
  PlanToProto(plan, &p);
  ASSERT_EQ(p.shared_producers_size(), 1);
  EXPECT_TRUE(p.shared_producers(0).recompute());
  auto back = PlanFromProto(g, p);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, plan);
}

class ModelPlans : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelPlans, MaxAndRandomPlansAreLegal) {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + GetParam() + ".onnx");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  FusionPlan max = MaxFusionPlan(*g);
  ASSERT_TRUE(CheckPlan(*g, max).ok()) << CheckPlan(*g, max).ToString();
  EXPECT_LT(max.groups.size(), g->num_nodes());
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    FusionPlan random = RandomLegalPlan(*g, seed);
    EXPECT_TRUE(CheckPlan(*g, random).ok()) << seed << ": " << CheckPlan(*g, random).ToString();
    EXPECT_LE(max.groups.size(), random.groups.size() + 5)
        << "max fusion should fuse about as much";
  }
}

INSTANTIATE_TEST_SUITE_P(AllModels, ModelPlans,
                         ::testing::Values("resnet18", "mobilenet_v2", "squeezenet1_1",
                                           "efficientnet_b0", "bert_base_encoder"));

}  // namespace
}  // namespace fusor
