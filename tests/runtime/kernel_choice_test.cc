// The kernel a plan names (FusionGroup::kernel, runtime/kernel_choice.h): it survives the plan's
// JSON and wire forms, the executor builds exactly that oneDNN implementation (and it computes
// what the reference does), and one this CPU does not offer is refused by name. Real oneDNN.
#include <gtest/gtest.h>

#include "graph/canonical.h"
#include "graph/plan.h"
#include "graph/plan_json.h"
#include "lowering/plan_legality.h"
#include "runtime/executor.h"
#include "runtime/reference.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::Ints;
using testing::IrBuilder;

// MatMul [64, 96] x weights [96, 128], then Relu: one anchor group.
Graph MatMulRelu() {
  IrBuilder b;
  TensorId a = b.Input("a", {64, 96});
  TensorId mm = b.Act("mm", {64, 128}), y = b.Act("y", {64, 128});
  b.Op("MatMul", {a, b.Weight("w", {96, 128})}, {mm});
  b.Op("Relu", {mm}, {y});
  b.Output(y);
  return b.Build();
}

// Conv 16 -> 32 channels, 3x3, on 14x14: one group.
Graph Conv() {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 16, 14, 14});
  TensorId c = b.Act("c", {1, 32, 14, 14});
  b.Op("Conv", {x, b.Weight("w", {32, 16, 3, 3})}, {c}, {Ints("pads", {1, 1, 1, 1})});
  b.Output(c);
  return b.Build();
}

FusionPlan OneGroup(const Graph& g, std::string kernel) {
  GroupKind kind = g.num_nodes() == 1 ? GroupKind::kSingle : GroupKind::kAnchor;
  FusionGroup group{kind, {}, {}, std::move(kernel)};
  for (size_t i = 0; i < g.num_nodes(); ++i) group.nodes.push_back(static_cast<NodeId>(i));
  return FusionPlan{{group}};
}

StatusOr<std::unique_ptr<Executor>> Build(const Graph& g, const std::string& kernel) {
  FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, RandomLeafValues(g, 5));
  return Executor::Create(g, OneGroup(g, kernel), leaves);
}

// Builds the group with every implementation oneDNN offers for it, checks that each is the one
// built and that it computes what the reference interpreter does.
void ExpectEveryOfferedImplementationIsBuiltByName(const Graph& g) {
  auto first = Build(g, "");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const KernelImplementations offered = (*first)->Implementations(0);
  ASSERT_GE(offered.offered.size(), 2u) << "oneDNN offers one implementation: nothing to choose";
  EXPECT_EQ(offered.built, offered.offered[0]);  // No kernel named: oneDNN's first choice.
  auto leaves = RandomLeafValues(g, 5);
  ASSERT_TRUE(leaves.ok());
  auto want = RunReference(g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (const std::string& name : offered.offered) {
    auto exec = Build(g, name);
    ASSERT_TRUE(exec.ok()) << name << ": " << exec.status().ToString();
    EXPECT_EQ((*exec)->Implementations(0).built, name);
    EXPECT_NE((*exec)->DescribeGroup(0).find("(" + name + ")"), std::string::npos)
        << (*exec)->DescribeGroup(0);
    (*exec)->Run();
    for (const auto& [t, value] : *want) {
      auto got = (*exec)->Read(t);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      auto c = Compare(value, *got);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      EXPECT_LE(c->worst_ratio, 1.0) << name << ": " << c->ToString();
    }
  }
}

TEST(KernelChoice, EveryMatMulImplementationOfferedIsBuiltByItsName) {
  ExpectEveryOfferedImplementationIsBuiltByName(MatMulRelu());
}

TEST(KernelChoice, EveryConvImplementationOfferedIsBuiltByItsName) {
  ExpectEveryOfferedImplementationIsBuiltByName(Conv());
}

TEST(KernelChoice, AKernelThisCpuDoesNotOfferIsRefusedNamingItAndTheOffered) {
  Graph g = MatMulRelu();
  auto first = Build(g, "");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string offered = (*first)->Implementations(0).offered[0];
  auto exec = Build(g, "brg_matmul:avx10_9");
  ASSERT_FALSE(exec.ok());
  EXPECT_EQ(exec.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(exec.status().message().find("'brg_matmul:avx10_9'"), std::string::npos)
      << exec.status().ToString();
  EXPECT_NE(exec.status().message().find(offered), std::string::npos) << exec.status().ToString();
}

TEST(KernelChoice, AKernelOnAGroupWithNoPrimitiveIsRefused) {
  IrBuilder b;
  TensorId x = b.Input("x", {4, 8}), y = b.Act("y", {4, 8});
  b.Op("Relu", {x}, {y});
  b.Output(y);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 5);
  ASSERT_TRUE(leaves.ok());
  FusionPlan plan{{FusionGroup{GroupKind::kSingle, {0}, {}, "gemm:jit:f32"}}};
  auto exec = Executor::Create(g, plan, *leaves);
  ASSERT_FALSE(exec.ok());
  EXPECT_NE(exec.status().message().find("'gemm:jit:f32'"), std::string::npos)
      << exec.status().ToString();
}

TEST(KernelChoice, TheKernelRoundTripsThroughThePlansJsonAndWireForms) {
  Graph g = MatMulRelu();
  FusionPlan plan = OneGroup(g, "brg_matmul:avx2");
  auto from_json = DecodePlanJson(g, PlanToJson(plan, {CanonicalHash(g), ""}), "", nullptr);
  ASSERT_TRUE(from_json.ok()) << from_json.status().ToString();
  EXPECT_EQ(from_json->groups[0].kernel, "brg_matmul:avx2");
  v1::Plan wire;
  PlanToProto(plan, &wire);
  auto from_wire = PlanFromProto(g, wire);
  ASSERT_TRUE(from_wire.ok()) << from_wire.status().ToString();
  EXPECT_EQ(*from_wire, plan);
}

TEST(KernelChoice, APlanWithoutKernelsWritesNoKernelKey) {
  Graph g = MatMulRelu();
  nlohmann::json j = PlanToJson(OneGroup(g, ""), {});
  EXPECT_FALSE(j["groups"][0].contains("kernel")) << j.dump();
}

}  // namespace
}  // namespace fusor
