// Which groups run on one thread and how long a fused loop's tiles are (lowering/threading.h): the
// serial thresholds on a group's work, opaque and recurrent nodes, streaming tiles and the row
// reduction's forks and pulls. Rules of the graph alone; the runtime sets the threads they name
// and the cost model prices them (tests/costmodel).
#include "lowering/threading.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::Int;
using testing::IrBuilder;

FusionGroup Single(NodeId n) { return FusionGroup{GroupKind::kSingle, {n}, {}}; }

// A Relu over n floats reads and writes 8n bytes: serial below kSerialMaxBytes (16384 floats),
// on the team from there.
TEST(RunsSerially, AGroupRunsSeriallyExactlyBelowTheByteThreshold) {
  auto relu = [](int64_t n) {
    IrBuilder b;
    TensorId y = b.Act("y", {n});
    b.Op("Relu", {b.Input("x", {n})}, {y});
    b.Output(y);
    return b.Build();
  };
  const int64_t floats = static_cast<int64_t>(kSerialMaxBytes) / 8;
  EXPECT_TRUE(RunsSerially(relu(floats - 1), Single(0)));
  EXPECT_FALSE(RunsSerially(relu(floats), Single(0)));
}

// A 64x64x64 MatMul moves 48 KiB but does 2^19 FLOPs: on the team; half of it, serially.
TEST(RunsSerially, AGroupOfFewBytesAndManyFlopsRunsOnTheTeam) {
  auto matmul = [](int64_t m) {
    IrBuilder b;
    TensorId y = b.Act("y", {m, 64});
    b.Op("MatMul", {b.Input("a", {m, 64}), b.Weight("w", {64, 64})}, {y});
    b.Output(y);
    return b.Build();
  };
  EXPECT_FALSE(RunsSerially(matmul(64), Single(0)));
  EXPECT_TRUE(RunsSerially(matmul(32), Single(0)));
}

// A view moves nothing inside a group, but alone it is a copy of its output: a large one runs on
// the team, a small one serially.
TEST(RunsSerially, AViewAloneRunsInParallelWhenItsCopyIsLarge) {
  auto reshape = [](int64_t n) {
    IrBuilder b;
    TensorId x = b.Input("x", {n, 768}), y = b.Act("y", {n, 1, 768});
    b.Op("Reshape", {x, b.IntConstant("shape", {n, 1, 768})}, {y});
    b.Output(y);
    return b.Build();
  };
  Graph small = reshape(4), large = reshape(128);
  EXPECT_TRUE(RunsSerially(small, UnfusedPlan(small).groups[0]));
  EXPECT_FALSE(RunsSerially(large, UnfusedPlan(large).groups[0]));
}

// A node the reference fallback runs is serial however large; a large GRU on oneDNN's primitive
// (batch kRnnPrimitiveMinGruBatch) too, but on our recurrence loop, forced or as an LSTM's, the
// thresholds decide.
TEST(RunsSerially, OpaqueNodesRunSeriallyUnlessOnOurRecurrenceLoop) {
  IrBuilder b;
  TensorId c = b.Act("c", {1 << 20});
  b.Op("CumSum", {b.Input("x", {1 << 20}), b.IntScalar("axis", 0)}, {c});  // 0
  b.Output(c);
  const int64_t seq = 16, batch = kRnnPrimitiveMinGruBatch, in = 256, hid = 256;
  TensorId x = b.Input("seq", {seq, batch, in});
  for (const auto& [op, gates] : {std::pair<std::string, int64_t>{"GRU", 3}, {"LSTM", 4}}) {
    TensorId y = b.Act(op + "_y", {seq, 1, batch, hid});
    b.Op(op,
         {x, b.Weight(op + "_w", {1, gates * hid, in}), b.Weight(op + "_r", {1, gates * hid, hid})},
         {y}, {Int("hidden_size", hid)});  // 1: GRU, 2: LSTM.
    b.Output(y);
  }
  Graph g = b.Build();
  EXPECT_TRUE(RunsSerially(g, Single(0)));
  ASSERT_EQ(RnnPrimitiveForm(g, g.node(1))->implementation, RnnImplementation::kPrimitive);
  EXPECT_TRUE(RunsSerially(g, Single(1)));
  EXPECT_FALSE(RunsSerially(g, Single(1), RnnImplementation::kLoop));
  ASSERT_EQ(RnnPrimitiveForm(g, g.node(2))->implementation, RnnImplementation::kLoop);
  EXPECT_FALSE(RunsSerially(g, Single(2)));
}

// A streaming loop's tiles are a quarter of each thread's share, in whole KiB-elements, within
// [kLoopTileElements, kStreamingTileElements]; a loop that keeps tiles in buffers takes the short
// ones.
TEST(LoopTileElements, StreamingTilesAreAQuarterOfAThreadsShareWithinTheBounds) {
  EXPECT_EQ(StreamingTileElements(1 << 20, 2), kStreamingTileElements);
  EXPECT_EQ(StreamingTileElements(40000, 2), 5120);  // 5000 rounded up to 1024s.
  EXPECT_EQ(StreamingTileElements(1000, 2), kLoopTileElements);
  EXPECT_EQ(StreamingTileElements(40000, 0), 10240);  // No thread count: one thread's share.
  EXPECT_EQ(LoopTileElements(false, 1 << 20, 2), kLoopTileElements);
  EXPECT_EQ(LoopTileElements(true, 40000, 2), 5120);
}

// The row reduction forks over more than one row and more than kRowReductionForkElements.
TEST(RowReductionForks, OverSeveralRowsOfEnoughElements) {
  EXPECT_TRUE(RowReductionForks(128, 768));
  EXPECT_FALSE(RowReductionForks(1, 1 << 20));
  EXPECT_FALSE(RowReductionForks(8, 128));
  EXPECT_FALSE(RowReductionForks(2, kRowReductionForkElements / 2));
  EXPECT_TRUE(RowReductionForks(2, kRowReductionForkElements / 2 + 1));
}

// Short rows are pulled a block of whole rows at a time (4096 / 49 = 83 rows of a 7x7 pool),
// long ones chunk by chunk (a row of 5000 in two pulls).
TEST(RowReductionPulls, ShortRowsInBlocksLongRowsInChunks) {
  EXPECT_EQ(RowReductionRowsPerPull(49), 83);
  EXPECT_EQ(RowReductionPulls(1280, 49), 16);
  EXPECT_EQ(RowReductionPulls(128, 768), 26);
  EXPECT_EQ(RowReductionRowsPerPull(5000), 1);
  EXPECT_EQ(RowReductionPulls(3, 5000), 6);
  EXPECT_EQ(RowReductionPulls(3, kRowReductionPullElements), 3);
}

}  // namespace
}  // namespace fusor
