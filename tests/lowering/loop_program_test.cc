// A loop's program (lowering/loop_program.h): the operands each step reads, the maps and runs it
// reads them through and how (the one record the runtime compiles and the cost model prices), and
// the runtime refusing a step the program marks unbuildable with the program's own error.
#include "lowering/loop_program.h"

#include <gtest/gtest.h>

#include <vector>

#include "lowering/group_lowering.h"
#include "runtime/fused_loop.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::Int;
using testing::Ints;

const LoopStep& StepOf(const LoopProgram& p, TensorId t) {
  const LoopStep* s = p.Find(t);
  EXPECT_NE(s, nullptr);
  return *s;
}

// y = x + b (b a [64] row broadcast over [2,8,64]), z = y * 0.5: x is read at y's own elements, b
// streamed run by run (64 elements, step 1), y at z's own elements and the constant as a scalar.
// Over integers the row is read through its map, not streamed (the loop streams floats only).
TEST(LoopProgram, ABinaryStepStreamsAFloatBroadcastOperandAndReadsItsOwnShapeInPlace) {
  for (DType dtype : {DType::kFloat32, DType::kInt64}) {
    testing::IrBuilder b;
    TensorId x = b.Input("x", {2, 8, 64}, dtype), row = b.Input("row", {64}, dtype);
    TensorId half = b.FloatScalar("half", 0.5);
    TensorId y = b.Act("y", {2, 8, 64}, dtype), z = b.Act("z", {2, 8, 64}, dtype);
    b.Op("Add", {x, row}, {y});
    b.Op("Mul", {y, half}, {z});
    b.Output(z);
    Graph g = b.Build();
    const LoopProgram p = LowerLoopProgram(g, {0, 1}, {z});
    ASSERT_EQ(p.steps.size(), 2u);
    const LoopStep& add = StepOf(p, y);
    ASSERT_EQ(add.operands.size(), 2u);
    EXPECT_EQ(add.operands[0].read, OperandRead::kSame);
    EXPECT_FALSE(add.operands[0].computed);
    EXPECT_EQ(add.operands[1].read,
              dtype == DType::kFloat32 ? OperandRead::kStreamed : OperandRead::kMapped);
    EXPECT_EQ(add.operands[1].runs.length, 64);
    EXPECT_EQ(add.operands[1].runs.step, 1);
    const LoopStep& mul = StepOf(p, z);
    EXPECT_EQ(mul.operands[0].read, OperandRead::kSame);
    EXPECT_TRUE(mul.operands[0].computed);
    EXPECT_EQ(mul.operands[1].read, OperandRead::kScalar);
  }
}

// A Split's outputs are a step each, reading the one input through maps that start at each part;
// a Transpose of one of them reads it through a map stepping by the part's row length.
TEST(LoopProgram, EachOutputOfASplitReadsItsPartAndATransposeStepsAcrossRows) {
  testing::IrBuilder b;
  TensorId x = b.Input("x", {8, 96});
  TensorId e = b.Act("e", {8, 96}), p0 = b.Act("p0", {8, 32}), p1 = b.Act("p1", {8, 64});
  TensorId t = b.Act("t", {64, 8});
  b.Op("Exp", {x}, {e});
  b.Op("Split", {e, b.IntConstant("split", {32, 64})}, {p0, p1}, {Int("axis", 1)});
  b.Op("Transpose", {p1}, {t}, {Ints("perm", {1, 0})});
  b.Output(p0);
  b.Output(t);
  Graph g = b.Build();
  const LoopProgram p = LowerLoopProgram(g, {0, 1, 2}, {p0, t});
  ASSERT_EQ(p.steps.size(), 4u);
  const LoopStep& first = StepOf(p, p0);
  const LoopStep& second = StepOf(p, p1);
  EXPECT_EQ(first.value.kind, LoopValueKind::kMapped);
  EXPECT_EQ(second.output, 1u);
  EXPECT_EQ(first.operands[0].map.base, 0);
  EXPECT_EQ(second.operands[0].map.base, 32);
  EXPECT_EQ(first.operands[0].read, OperandRead::kMapped);
  EXPECT_TRUE(first.operands[0].computed);
  EXPECT_EQ(first.operands[0].runs.length, 32);
  EXPECT_EQ(first.operands[0].runs.step, 1);
  const LoopStep& transpose = StepOf(p, t);
  EXPECT_EQ(transpose.operands[0].read, OperandRead::kMapped);
  EXPECT_EQ(transpose.operands[0].runs.step, 64);
}

// A Reshape hands its input on: a step reading it reads the leaf behind it (ViewSource), at its
// own elements.
TEST(LoopProgram, AStepReadsALeafThroughTheViewsBeforeIt) {
  testing::IrBuilder b;
  TensorId x = b.Input("x", {4, 16});
  TensorId r = b.Act("r", {64}), y = b.Act("y", {64});
  b.Op("Reshape", {x, b.IntConstant("shape", {64})}, {r});
  b.Op("Sigmoid", {r}, {y});
  b.Output(y);
  Graph g = b.Build();
  const LoopProgram p = LowerLoopProgram(g, {0, 1}, {y});
  EXPECT_EQ(p.ViewSource(r), x);
  EXPECT_EQ(StepOf(p, r).value.kind, LoopValueKind::kView);
  EXPECT_EQ(StepOf(p, r).operands.size(), 1u);
  EXPECT_EQ(StepOf(p, y).operands[0].read, OperandRead::kSame);
  EXPECT_FALSE(StepOf(p, y).operands[0].computed);
}

// A Slice whose starts are computed has no map the loop can compile: the program records why, the
// runtime refuses the loop with that error (naming the node), and the group's record holds the
// same program.
TEST(LoopProgram, AStepWithNoMapIsRefusedByTheRuntimeWithTheProgramsError) {
  testing::IrBuilder b;
  TensorId x = b.Input("x", {4, 16}), starts = b.Input("starts", {1}, DType::kInt64);
  TensorId s = b.Act("s", {4, 8});
  b.Op("Slice", {x, starts, b.IntConstant("ends", {8}), b.IntConstant("axes", {1})}, {s});
  b.Output(s);
  Graph g = b.Build();
  const LoopProgram p = LowerLoopProgram(g, {0}, {s});
  const Status& why = StepOf(p, s).unbuildable;
  ASSERT_FALSE(why.ok());
  EXPECT_NE(why.message().find(g.node(0).name), std::string::npos) << why.ToString();
  auto loop = FusedLoop::Build(g, p, [](TensorId) { return nullptr; });
  ASSERT_FALSE(loop.ok());
  EXPECT_EQ(loop.status().message(), why.message());
  const GroupLowering record = LowerGroup(g, FusionGroup{GroupKind::kLoop, {0}, {}}, {s});
  ASSERT_EQ(record.form, KernelForm::kFusedLoop);
  EXPECT_FALSE(StepOf(record.loop, s).unbuildable.ok());
}

// A Concat's inputs are read a range per run: one run per index of the dims before the axis, as
// long as the input's part of it.
TEST(LoopProgram, AConcatReadsEachInputARunPerIndexBeforeTheAxis) {
  testing::IrBuilder b;
  TensorId a = b.Input("a", {2, 3, 4}), c = b.Input("c", {2, 5, 4});
  TensorId y = b.Act("y", {2, 8, 4});
  b.Op("Concat", {a, c}, {y}, {Int("axis", 1)});
  b.Output(y);
  Graph g = b.Build();
  const LoopProgram p = LowerLoopProgram(g, {0}, {y});
  const LoopStep& concat = StepOf(p, y);
  ASSERT_EQ(concat.operands.size(), 2u);
  EXPECT_EQ(concat.operands[0].read, OperandRead::kConcatPart);
  EXPECT_EQ(concat.operands[0].runs.length, 12);
  EXPECT_EQ(concat.operands[1].runs.length, 20);
  EXPECT_EQ(concat.operands[1].map.base, -3 * 4);
}

}  // namespace
}  // namespace fusor
