// The lowering's rules for a loop (chains, streaming, values evaluated once), and the runtime
// compiling every loop program the lowering records for the bundled models' groups.
#include "lowering/loop_lowering.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_set>
#include <vector>

#include "lowering/group_lowering.h"
#include "runtime/fused_loop.h"
#include "tests/graph/ir_builder.h"
#include "tests/lowering/bundled_models.h"
#include "tests/lowering/gelu_loop.h"

namespace fusor {
namespace {

using testing::BundledModels;
using testing::GroupText;

class LoopsOfEveryModel : public ::testing::TestWithParam<std::string> {};

// Every loop program of every group's record (a fused loop, a row reduction's prologue and
// epilogue) compiles, chains included: a chain the compiled values cannot run is an error.
TEST_P(LoopsOfEveryModel, TheRuntimeBuildsEveryLoopProgramTheLoweringRecords) {
  auto g = testing::ImportBundledModel(GetParam());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ConstantValues constants(*g);
  const auto known = [&](TensorId t) { return constants(t); };
  int loops = 0;
  for (const FusionPlan& plan : testing::PlansToCheck(*g)) {
    const auto materialized = AllMaterializedOutputs(*g, plan);
    for (size_t i = 0; i < plan.groups.size(); ++i) {
      const FusionGroup& group = plan.groups[i];
      const GroupLowering record = LowerGroup(*g, group, materialized[i]);
      if (record.form != KernelForm::kFusedLoop && record.form != KernelForm::kRowReduction) {
        continue;
      }
      for (const LoopProgram* program : {&record.prologue, &record.loop}) {
        if (program->empty()) continue;
        auto loop = FusedLoop::Build(*g, *program, known);
        const std::string where = GroupText(*g, group);
        ASSERT_TRUE(loop.ok()) << where << ": " << loop.status().ToString();
        int chained = 0;
        for (const LoopStep& step : program->steps) chained += step.value.chained ? 1 : 0;
        EXPECT_EQ((*loop)->chained_values(), chained) << where;
        ++loops;
      }
    }
  }
  EXPECT_GT(loops, 0) << "no loop group in any plan of " << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Lowering, LoopsOfEveryModel, ::testing::ValuesIn(BundledModels()),
                         [](const auto& info) { return info.param; });

// The values the lowering computes inside single-pass chains: not a value after Log (Log does not
// chain), not one read twice, not an output; a Pow by a constant 2 chains; a chain of 18 Relus is
// cut after 16 values.
TEST(LoopLowering, ChainedValuesFollowTheChainRules) {
  testing::IrBuilder b;
  const Shape dims = {2, 40};
  std::vector<TensorId> v;
  std::vector<NodeId> nodes;
  auto step = [&](const std::string& op, std::vector<TensorId> in) {
    v.push_back(b.Act("v" + std::to_string(v.size()), dims));
    nodes.push_back(b.Op(op, std::move(in), {v.back()}));
    return v.back();
  };
  TensorId log = step("Log", {b.Input("x", dims)});
  TensorId exp = step("Exp", {log});
  TensorId relu = step("Relu", {exp});
  TensorId twice = step("Add", {relu, relu});
  TensorId square = step("Pow", {twice, b.FloatScalar("two", 2)});
  TensorId out = step("Sqrt", {square});
  std::vector<TensorId> relus;
  for (int i = 0; i < 18; ++i) relus.push_back(step("Relu", {i == 0 ? out : relus.back()}));
  Graph g = b.Build();
  const LoopLowering record = LowerLoop(g, nodes, {out, relus.back()});
  std::unordered_set<TensorId> want = {exp, twice, square};
  // relus[17] heads relus[16..2] (16 values); relus[1] heads relus[0].
  for (int i = 2; i < 17; ++i) want.insert(relus[i]);
  want.insert(relus[0]);
  std::unordered_set<TensorId> chained;
  for (const auto& [t, value] : record.values) {
    if (value.chained) chained.insert(t);
  }
  EXPECT_EQ(chained, want);
  EXPECT_EQ(record.values.at(relus[17]).chain_head, relus[17]);
  EXPECT_EQ(record.values.at(relus[2]).chain_head, relus[17]);
  EXPECT_EQ(record.values.at(relus[0]).chain_head, relus[1]);
}

// A chain's source that only the chain's own steps read joins it as its first value: GELU with
// its bias Add, x = bias + mm read by the Div that starts the Erf chain and by the Mul that ends
// it (the Mul reads x again from registers: its saved input). Then the loop streams. Not when x is
// also an output, nor when a node outside the chain reads it.
TEST(LoopLowering, AChainsSourceReadOnlyByTheChainJoinsIt) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    auto [g, nodes, outputs, x, d, e, a, y] = testing::GeluWithBias(variant);
    const LoopLowering record = LowerLoop(g, nodes, outputs);
    for (TensorId t : {d, e, a}) EXPECT_TRUE(record.values.at(t).chained) << g.tensor(t).name;
    EXPECT_EQ(record.values.at(x).chained, variant == 0);
    EXPECT_EQ(record.values.at(y).saved_input, variant == 0 ? 0 : -1);
    EXPECT_EQ(record.streams, variant == 0);
  }
}

// A squeeze-and-excite gate y = x * Sigmoid(s[1,32,1,1]) over 1x32x8x8: the Mul reads the gate as
// a streamed operand, so each thread evaluates it whole once and keeps it (runtime:
// StreamedOperand), and reads s only then; x is read per tile. When z = y + s also reads s (in
// place, every tile), s is not evaluated once; when the gate is an output too, it is computed
// per tile for the output.
TEST(LoopLowering, ValuesEvaluatedOnceAreOperandsKeptWholeAndWhatOnlyTheyRead) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    testing::IrBuilder b;
    TensorId s = b.Input("s", {1, 32, 1, 1}), x = b.Input("x", {1, 32, 8, 8});
    TensorId gate = b.Act("gate", {1, 32, 1, 1}), y = b.Act("y", {1, 32, 8, 8});
    b.Op("Sigmoid", {s}, {gate});
    b.Op("Mul", {x, gate}, {y});
    std::vector<NodeId> nodes = {0, 1};
    std::vector<TensorId> outputs = {y};
    if (variant == 1) {
      TensorId z = b.Act("z", {1, 32, 8, 8});
      b.Op("Add", {y, s}, {z});
      nodes.push_back(2);
      outputs = {z};
    }
    if (variant == 2) outputs.push_back(gate);
    for (TensorId t : outputs) b.Output(t);
    Graph g = b.Build();
    const LoopLowering record = LowerLoop(g, nodes, outputs);
    using Set = std::unordered_set<TensorId>;
    const Set expected = variant == 0 ? Set{gate, s} : variant == 1 ? Set{gate} : Set{};
    EXPECT_EQ(record.evaluated_once, expected);
    EXPECT_EQ(record.evaluated_once.count(x), 0u);
  }
}

// A value the lowering chains that the compiled loop cannot run as a chain step is an error
// naming it, not a wrong result: a Pow whose exponent is a constant 2 in the graph chains, but a
// loop told nothing of the constant's value compiles it as a general power.
// Whether a Pow by 2 is a unary step is the registry's fact about the graph (UnaryPowExponent), so
// the compiled loop chains it as the lowering does even when its lookup does not hold the exponent.
TEST(LoopLowering, ACompiledLoopChainsAPowByTwoAsTheLoweringDoesWhateverItsLookupHolds) {
  testing::IrBuilder b;
  const Shape dims = {1, 64};
  TensorId x = b.Input("x", dims), two = b.FloatScalar("two", 2.0);
  TensorId e = b.Act("e", dims), p = b.Act("p", dims), y = b.Act("y", dims);
  std::vector<NodeId> nodes = {b.Op("Exp", {x}, {e}), b.Op("Pow", {e, two}, {p}),
                               b.Op("Relu", {p}, {y})};
  b.Output(y);
  Graph g = b.Build();
  const LoopLowering record = LowerLoop(g, nodes, {y});
  EXPECT_EQ(record.chained_values(), 2);
  auto told = FusedLoop::Build(g, nodes, {y}, [&](TensorId t) -> const HostTensor* {
    static const HostTensor kTwo = [] {
      HostTensor h = HostTensor::Zeros(DType::kFloat32, {1});
      h.f[0] = 2;
      return h;
    }();
    return t == two ? &kTwo : nullptr;
  });
  ASSERT_TRUE(told.ok()) << told.status().ToString();
  EXPECT_EQ((*told)->chained_values(), record.chained_values());
  auto untold = FusedLoop::Build(g, nodes, {y}, [](TensorId) { return nullptr; });
  ASSERT_TRUE(untold.ok()) << untold.status().ToString();
  EXPECT_EQ((*untold)->chained_values(), record.chained_values());
}

}  // namespace
}  // namespace fusor
