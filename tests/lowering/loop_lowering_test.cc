// The lowering's rules for a loop (chains, streaming, values evaluated once), and the runtime
// compiling every loop program the lowering records for the bundled models' groups.
#include "lowering/loop_lowering.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_set>
#include <vector>

#include "graph/node_attrs.h"
#include "graph/op_registry.h"
#include "lowering/group_lowering.h"
#include "runtime/affine_map.h"
#include "runtime/fused_loop.h"
#include "runtime/reference.h"
#include "tests/graph/ir_builder.h"
#include "tests/lowering/bundled_models.h"
#include "tests/lowering/gelu_loop.h"

namespace fusor {
namespace {

using testing::BundledModels;
using testing::GroupText;
using testing::Int;
using testing::OneOpGraph;

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

// Node 0's output read through its MappedReadOf from random x, run by run in ranges of 7
// elements (ranges that start and end mid-run, mid-block) and at a list of every third element,
// against the reference interpreter's kernel for the op.
void ExpectMapReadsWhatTheReferenceComputes(const Graph& g) {
  const Node& n = g.node(0);
  SCOPED_TRACE(NodeLabel(n) + " " + ShapeString(g.tensor(n.inputs[0]).dims) + " -> " +
               ShapeString(g.tensor(n.outputs[0]).dims));
  EXPECT_EQ(ClassifyNode(g, n), OpClass::kInjective);
  EXPECT_EQ(LoopValueKindOf(g, n), LoopValueKind::kMapped);
  StatusOr<Affine> m = MappedReadOf(g, n, 0);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto leaves = RandomLeafValues(g, 7);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  auto want = RunReference(g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  const std::vector<float>& x = leaves->at(n.inputs[0]).f;
  const std::vector<float>& y = want->at(n.outputs[0]).f;
  const Shape& out = g.tensor(n.outputs[0]).dims;
  const int64_t total = NumElements(out);
  std::vector<float> runs(total, -1);
  for (int64_t begin = 0; begin < total; begin += 7) {
    ForEachRun(*m, out, begin, std::min<int64_t>(7, total - begin),
               [&](int64_t e, int64_t off, int64_t run, int64_t step) {
                 for (int64_t j = 0; j < run; ++j) runs[begin + e + j] = x[off + j * step];
               });
  }
  EXPECT_EQ(runs, y);
  std::vector<int64_t> list, at;
  for (int64_t e = 0; e < total; e += 3) list.push_back(e);
  at.resize(list.size());
  AffineIndices(*m, out, {0, static_cast<int64_t>(list.size()), list.data()}, at.data());
  for (size_t k = 0; k < list.size(); ++k) {
    EXPECT_EQ(x[at[k]], y[list[k]]) << "element " << list[k];
  }
}

// DepthToSpace (DCR and CRD) and SpaceToDepth divide coordinates by the blocksize: their maps
// take the output's dims with the blocks split out (Affine::split), and read what
// runtime/reference.cc's RunSpaceDepth computes, blocksize 1 as the identity.
TEST(MappedReadOf, DepthToSpaceInBothModesAndSpaceToDepthReadWhatTheReferenceComputes) {
  for (const char* mode : {"DCR", "CRD"}) {
    ExpectMapReadsWhatTheReferenceComputes(
        OneOpGraph("DepthToSpace", {2, 12, 3, 5}, {2, 3, 6, 10},
                   {Int("blocksize", 2), {"mode", std::string(mode)}}));
    ExpectMapReadsWhatTheReferenceComputes(
        OneOpGraph("DepthToSpace", {1, 18, 2, 3}, {1, 2, 6, 9},
                   {Int("blocksize", 3), {"mode", std::string(mode)}}));
  }
  ExpectMapReadsWhatTheReferenceComputes(
      OneOpGraph("SpaceToDepth", {2, 3, 6, 10}, {2, 12, 3, 5}, {Int("blocksize", 2)}));
  ExpectMapReadsWhatTheReferenceComputes(
      OneOpGraph("SpaceToDepth", {1, 2, 6, 9}, {1, 18, 2, 3}, {Int("blocksize", 3)}));
  Graph one = OneOpGraph("DepthToSpace", {1, 4, 3, 5}, {1, 4, 3, 5}, {Int("blocksize", 1)});
  EXPECT_TRUE(MappedReadOf(one, one.node(0), 0)->identity);
}

// Tile reads each output coordinate modulo the input's dim: a [r, d] split per dim whose repeat
// coordinate reads nothing, so a row repeated along the last dim is read in runs of the row.
TEST(MappedReadOf, TileReadsEachOutputDimModuloTheInputs) {
  ExpectMapReadsWhatTheReferenceComputes(OneOpGraph("Tile", {2, 1, 3}, {4, 4, 9}, {}, {2, 4, 3}));
  ExpectMapReadsWhatTheReferenceComputes(OneOpGraph("Tile", {5, 6}, {5, 12}, {}, {1, 2}));
  Graph g = OneOpGraph("Tile", {5, 6}, {5, 12}, {}, {1, 2});
  const RunShape runs = RunShapeOf(*MappedReadOf(g, g.node(0), 0), {5, 12});
  EXPECT_EQ(runs.length, 6);
  EXPECT_EQ(runs.step, 1);
}

// The runs a split map records for the cost model: DepthToSpace (DCR, blocksize 2) over a 256-wide
// plane reads runs of 2, a channel plane apart, from 2 streams side by side (each along a row of
// its input channel), and an index list is divided into the split's 6 dims, not the output's 4. A
// transpose [R, C] -> [C, R] reads R streams; a plain copy one, in 4 dims.
TEST(RunShapeOf, RecordsTheStreamsAndTheRankOfTheMapsSpace) {
  Graph d2s = OneOpGraph("DepthToSpace", {1, 12, 256, 256}, {1, 3, 512, 512},
                         {Int("blocksize", 2), {"mode", std::string("DCR")}});
  const RunShape runs = RunShapeOf(*MappedReadOf(d2s, d2s.node(0), 0), {1, 3, 512, 512});
  EXPECT_EQ(runs.length, 2);
  EXPECT_EQ(runs.step, 3 * 256 * 256);
  EXPECT_EQ(runs.streams, 2);
  EXPECT_EQ(runs.rank, 6);
  Graph t = OneOpGraph("Transpose", {768, 512}, {512, 768}, {testing::Ints("perm", {1, 0})});
  const RunShape transposed = RunShapeOf(*MappedReadOf(t, t.node(0), 0), {512, 768});
  EXPECT_EQ(transposed.streams, 768);
  EXPECT_EQ(transposed.rank, 2);
  const RunShape copy =
      RunShapeOf(StridedMap({1, 1, 1, 1}, 0, {1, 1, 1, 8}, {1, 1, 1, 8}), {1, 1, 1, 8});
  EXPECT_EQ(copy.streams, 1);
  EXPECT_EQ(copy.rank, 4);
}

// A DepthToSpace whose shapes its blocksize does not explain has no map: the error names the node
// and the shapes, and the loop refuses the step with it.
TEST(MappedReadOf, ASpaceDepthOpItsBlocksizeDoesNotExplainIsRefusedNamingTheNode) {
  Graph g = OneOpGraph("DepthToSpace", {1, 12, 3, 5}, {1, 3, 6, 10}, {Int("blocksize", 3)});
  StatusOr<Affine> m = MappedReadOf(g, g.node(0), 0);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("DepthToSpace_0"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("blocksize 3"), std::string::npos) << m.status().message();
}

}  // namespace
}  // namespace fusor
