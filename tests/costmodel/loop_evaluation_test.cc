#include "costmodel/loop_evaluation.h"

#include <gtest/gtest.h>

#include "graph/onnx_import.h"
#include "graph/op_registry.h"
#include "graph/plan.h"
#include "lowering/plan_legality.h"
#include "runtime/fused_loop.h"
#include "runtime/host_tensor.h"
#include "tests/graph/ir_builder.h"
#include "tests/lowering/bundled_models.h"
#include "tests/lowering/gelu_loop.h"

namespace fusor {
namespace {

using testing::IrBuilder;

FusionGroup Loop(std::vector<NodeId> nodes) { return {GroupKind::kLoop, std::move(nodes), {}}; }

// A squeeze-and-excite gate: gate = Sigmoid(s[1,c,1,1]); y = x[dims] * gate.
struct GateGraph {
  Graph g;
  TensorId gate, y;
};
GateGraph Gate(int64_t c, const Shape& dims) {
  IrBuilder b;
  TensorId s = b.Input("s", {1, c, 1, 1}), x = b.Input("x", dims);
  TensorId gate = b.Act("gate", {1, c, 1, 1}), y = b.Act("y", dims);
  b.Op("Sigmoid", {s}, {gate});
  b.Op("Mul", {x, gate}, {y});
  b.Output(y);
  return {b.Build(), gate, y};
}

// A transpose that moves a leaf's innermost dim reads it with a stride. With output rows of 128
// (BERT's K^T: 128 lines of 64 B, 8 KiB) the lines stay in a 32 KiB L1 for the next rows: strided;
// with rows of 768 (48 KiB of lines) every read misses L1: remapped, one per element. A smaller L1
// (8 KiB) turns the short rows into remapped reads too.
TEST(EvaluateLoop, StridedReadsAreRemappedUnlessARowsLinesStayInL1) {
  for (int64_t rows : {128, 768}) {
    for (int64_t l1 : {int64_t{32} << 10, int64_t{8} << 10}) {
      SCOPED_TRACE(std::to_string(rows) + " " + std::to_string(l1));
      IrBuilder b;
      TensorId x = b.Input("x", {rows, 512}), t = b.Act("t", {512, rows});
      b.Op("Transpose", {x}, {t}, {testing::Ints("perm", {1, 0})});
      b.Output(t);
      Graph g = b.Build();
      LoopEvaluation e = EvaluateLoop(g, Loop({0}), {t}, 2, l1);
      const double n = static_cast<double>(rows * 512);
      const bool stays = rows == 128 && l1 == (int64_t{32} << 10);
      EXPECT_DOUBLE_EQ(e.strided_elements, stays ? n : 0);
      EXPECT_DOUBLE_EQ(e.remapped_elements, stays ? 0 : n);
    }
  }
}

// A DepthToSpace (DCR, blocksize 2) of [1,4,256,256] reads the same runs as the Transpose of
// [2,2,256,256] by perm (2,0,3,1): runs of 2 a plane apart, 2 streams side by side, whose lines
// stay in L1 though the output rows are 512 long. Both are priced alike: every count equal, the
// reads strided, none remapped.
TEST(EvaluateLoop, ADepthToSpaceIsPricedAsTheTransposeThatReadsTheSameRuns) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 4, 256, 256}), y = b.Act("y", {1, 1, 512, 512});
  b.Op("DepthToSpace", {x}, {y}, {testing::Int("blocksize", 2)});
  b.Output(y);
  TensorId u = b.Input("u", {2, 2, 256, 256}), t = b.Act("t", {256, 2, 256, 2});
  b.Op("Transpose", {u}, {t}, {testing::Ints("perm", {2, 0, 3, 1})});
  b.Output(t);
  Graph g = b.Build();
  LoopEvaluation d2s = EvaluateLoop(g, Loop({0}), {y}, 2);
  LoopEvaluation transpose = EvaluateLoop(g, Loop({1}), {t}, 2);
  const double n = 4 * 256 * 256;
  EXPECT_DOUBLE_EQ(d2s.strided_elements, n);
  EXPECT_DOUBLE_EQ(d2s.remapped_elements, 0);
  EXPECT_DOUBLE_EQ(d2s.strided_elements, transpose.strided_elements);
  EXPECT_DOUBLE_EQ(d2s.indexed_elements, transpose.indexed_elements);
  EXPECT_DOUBLE_EQ(d2s.gathered_elements, transpose.gathered_elements);
  EXPECT_DOUBLE_EQ(d2s.eval_calls, transpose.eval_calls);
  EXPECT_DOUBLE_EQ(d2s.run_calls, transpose.run_calls);
}

// A DepthToSpace asked at a scattered index list (a Transpose of it moves the innermost dim)
// divides each index into the 6 dims of its split map, as the runtime's AffineIndices does: 6
// remapped per element, not the output's 4.
TEST(EvaluateLoop, AListThroughASplitMapIsRemappedInTheSplitsDims) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 12, 32, 32}), y = b.Act("y", {1, 3, 64, 64});
  TensorId t = b.Act("t", {1, 3, 64, 64});
  b.Op("DepthToSpace", {x}, {y}, {testing::Int("blocksize", 2)});
  b.Op("Transpose", {y}, {t}, {testing::Ints("perm", {0, 1, 3, 2})});
  b.Output(t);
  Graph g = b.Build();
  LoopEvaluation e = EvaluateLoop(g, Loop({0, 1}), {t}, 2);
  const double n = 3 * 64 * 64;
  EXPECT_DOUBLE_EQ(e.evaluated.at(y), n);
  EXPECT_DOUBLE_EQ(e.remapped_elements, 6 * n);
}

// Squeeze-and-excite with a gate longer than a tile: gate = Sigmoid(s[1,8192,1,1]);
// y = x[1,8192,h,w] * gate. Over 4x4 (32 tiles of 4096) the Mul streams the gate run by run (8192
// runs of 16, one call each), evaluating it once per tile over the span of channels the tile
// reads (its share 4096 * 8192/131072 = 256, plus 1 for a partial run: 257), not once per
// element of y, and nothing is indexed or gathered. Over 2x1 the span (2049 of a 4096-element
// tile) is over a quarter of the tile: the gate is then pulled per element of y through an index
// list (n indexed), reading s at that list (n gathered).
TEST(EvaluateLoop, ABroadcastProducerIsEvaluatedOncePerSpanWhenTheSpanIsShort) {
  for (int64_t h : {4, 2}) {
    SCOPED_TRACE(h);
    const Shape dims = {1, 8192, h, h == 4 ? 4 : 1};
    const double n = static_cast<double>(8192 * h * dims[3]), tiles = n / 4096;
    auto [g, gate, y] = Gate(8192, dims);
    LoopEvaluation e = EvaluateLoop(g, Loop({0, 1}), {y}, 2);
    EXPECT_DOUBLE_EQ(e.evaluated.at(y), n);
    const bool streamed = h == 4;
    EXPECT_DOUBLE_EQ(e.evaluated.at(gate), streamed ? tiles * 257 : n);
    EXPECT_DOUBLE_EQ(e.indexed_elements, streamed ? 0 : n);
    EXPECT_DOUBLE_EQ(e.gathered_elements, streamed ? 0 : n);
    EXPECT_DOUBLE_EQ(e.remapped_elements, 0);
    EXPECT_DOUBLE_EQ(e.eval_calls, tiles * 4);  // Values y, gate, x, s: every tile.
    EXPECT_DOUBLE_EQ(e.run_calls, streamed ? 8192 : 0);
  }
}

// A gate of 32 over 1x32x112x112 (98 tiles): all of it is at most a tile, so each thread
// evaluates it whole once and keeps it (runtime: StreamedOperand): 32 elements for each of the two
// threads. Only x and y are pulled per tile; the gate and s, which only the gate reads, once. A
// per-row layer-norm divisor Sqrt(var + eps) over 128 rows of 768 likewise: var and the Sqrt once,
// the Add inside the Sqrt's chain (no call of its own). All three loops stream (no tile buffers),
// so their tiles are longer: at most 16384 elements, at least four per thread of two
// (StreamingTileElements).
TEST(EvaluateLoop, ASmallBroadcastProducerIsEvaluatedWholeOnce) {
  IrBuilder b;
  const Shape dims = {1, 32, 112, 112};
  TensorId s = b.Input("s", {1, 32, 1, 1}), x = b.Input("x", dims);
  TensorId gate = b.Act("gate", {1, 32, 1, 1}), y = b.Act("y", dims);
  b.Op("Sigmoid", {s}, {gate});
  b.Op("Mul", {x, gate}, {y});
  b.Output(y);
  const Shape rows = {1, 128, 768};
  TensorId var = b.Input("var", {1, 128, 1}), h = b.Input("h", rows);
  TensorId eps = b.Act("eps", {1, 128, 1}), root = b.Act("root", {1, 128, 1});
  TensorId q = b.Act("q", rows);
  b.Op("Add", {var, b.FloatScalar("e", 1e-5)}, {eps});
  b.Op("Sqrt", {eps}, {root});
  b.Op("Div", {h, root}, {q});
  b.Output(q);
  Graph g = b.Build();
  LoopEvaluation se = EvaluateLoop(g, Loop({0, 1}), {y}, 2);
  EXPECT_DOUBLE_EQ(se.evaluated.at(gate), 2 * 32);
  EXPECT_TRUE(se.streams);
  EXPECT_DOUBLE_EQ(se.eval_calls, 25 * 2 + 2);  // 401408 elements in tiles of 16384.
  LoopEvaluation ln = EvaluateLoop(g, Loop({2, 3, 4}), {q}, 2);
  EXPECT_DOUBLE_EQ(ln.evaluated.at(root), 2 * 128);
  EXPECT_DOUBLE_EQ(ln.evaluated.at(eps), 2 * 128);
  EXPECT_EQ(ln.chained.count(eps), 1u);
  EXPECT_DOUBLE_EQ(ln.eval_calls, 8 * 2 + 2);  // 98304 in tiles of 12288.

  // EfficientNet's last gate, 1152 over 1x1152x7x7 (8 tiles of 7168): more than a quarter of a
  // default tile but not more than one, also whole once (span by span took 16 us against 12
  // whole, measured).
  GateGraph last_gate = Gate(1152, {1, 1152, 7, 7});
  LoopEvaluation last = EvaluateLoop(last_gate.g, Loop({0, 1}), {last_gate.y}, 2);
  EXPECT_DOUBLE_EQ(last.evaluated.at(last_gate.gate), 2 * 1152);
  LoopEvaluation serial = EvaluateLoop(last_gate.g, Loop({0, 1}), {last_gate.y}, 1);
  EXPECT_DOUBLE_EQ(serial.evaluated.at(last_gate.gate), 1152);
  EXPECT_DOUBLE_EQ(last.eval_calls, 8 * 2 + 2);
  EXPECT_DOUBLE_EQ(last.indexed_elements + last.gathered_elements, 0);
  // A gate of 2048 over 1x2048x2x1 (one tile of 4096): its span is half the tile, but all of it
  // fits the tile, so it is still evaluated whole once and streamed, not pulled per element; by
  // one thread, as a loop of one tile runs on the calling thread.
  GateGraph half_gate = Gate(2048, {1, 2048, 2, 1});
  LoopEvaluation half = EvaluateLoop(half_gate.g, Loop({0, 1}), {half_gate.y}, 2);
  EXPECT_DOUBLE_EQ(half.evaluated.at(half_gate.gate), 2048);
  EXPECT_DOUBLE_EQ(half.indexed_elements + half.gathered_elements, 0);
}

// z = Transpose(x[4,8] * w[8]), perm (1,0). The transpose moves the innermost dim, so the Mul is
// evaluated at a scattered list of 32; x is gathered at it (32), and w's broadcast map is applied
// to the list: each index divided back into 2 coordinates (64 remapped), then w gathered (32).
TEST(EvaluateLoop, AMapAppliedToAScatteredListDividesEveryIndexPerDimension) {
  IrBuilder b;
  TensorId x = b.Input("x", {4, 8}), w = b.Weight("w", {8});
  TensorId m = b.Act("m", {4, 8}), z = b.Act("z", {8, 4});
  b.Op("Mul", {x, w}, {m});
  b.Op("Transpose", {m}, {z}, {{"perm", std::vector<int64_t>{1, 0}}});
  b.Output(z);
  Graph g = b.Build();
  LoopEvaluation e = EvaluateLoop(g, Loop({0, 1}), {z}, 2);
  EXPECT_DOUBLE_EQ(e.evaluated.at(m), 32);
  EXPECT_DOUBLE_EQ(e.indexed_elements, 32);
  EXPECT_DOUBLE_EQ(e.gathered_elements, 64);
  EXPECT_DOUBLE_EQ(e.remapped_elements, 64);
}

// Layer norm's tail, y = (x[1,4,8] / s[1,4,1]) * g[8] + b[8]: each broadcast leaf operand is read
// in place run by run, with no index work and no evaluation call of its own; the three nodes are
// one single-pass chain (d and m in registers), which walks the 4 rows of 8 in 4 kernel calls.
// Then t = u[8] + s: a second broadcast operand of one node is copied (32 indexed), through an
// evaluation call.
TEST(EvaluateLoop, BroadcastLeafOperandsAreReadInPlaceOneCallPerRow) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 4, 8}), s = b.Input("s", {1, 4, 1});
  TensorId d = b.Act("d", {1, 4, 8}), m = b.Act("m", {1, 4, 8}), y = b.Act("y", {1, 4, 8});
  b.Op("Div", {x, s}, {d});
  b.Op("Mul", {d, b.Weight("g", {8})}, {m});
  b.Op("Add", {m, b.Weight("b", {8})}, {y});
  TensorId t = b.Act("t", {1, 4, 8});
  b.Op("Add", {b.Weight("u", {8}), s}, {t});
  b.Output(y);
  b.Output(t);
  Graph g = b.Build();
  LoopEvaluation e = EvaluateLoop(g, Loop({0, 1, 2}), {y}, 2);
  EXPECT_DOUBLE_EQ(e.indexed_elements + e.gathered_elements + e.remapped_elements, 0);
  EXPECT_DOUBLE_EQ(e.eval_calls, 1 * 2);  // One tile of values y and x; s, g, b in place.
  EXPECT_DOUBLE_EQ(e.run_calls, 4);       // Three streamed operands whose runs line up.
  EXPECT_EQ(e.chained, (std::unordered_set<TensorId>{d, m}));
  EXPECT_DOUBLE_EQ(e.chain_steps, 3 * 32);  // d, m and y, 32 elements each.
  LoopEvaluation two = EvaluateLoop(g, Loop({3}), {t}, 2);
  EXPECT_DOUBLE_EQ(two.indexed_elements, 32);
  EXPECT_DOUBLE_EQ(two.eval_calls, 1 * 2);  // t, and s (copied); u in place.
  EXPECT_DOUBLE_EQ(two.run_calls, 4);
}

// A per-channel scale s[1,8,1,1] over x[1,8,4,4] is one run per channel (H and W walked as one).
TEST(EvaluateLoop, ARunSpansEveryTrailingDimTheBroadcastWalksAsOne) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 8, 4, 4}), s = b.Input("s", {1, 8, 1, 1});
  TensorId y = b.Act("y", {1, 8, 4, 4});
  b.Op("Mul", {x, s}, {y});
  b.Output(y);
  Graph g = b.Build();
  LoopEvaluation e = EvaluateLoop(g, Loop({0}), {y}, 2);
  EXPECT_DOUBLE_EQ(e.indexed_elements + e.gathered_elements, 0);
  EXPECT_DOUBLE_EQ(e.eval_calls, 1 * 2);  // y, x; s is read in place.
  EXPECT_DOUBLE_EQ(e.run_calls, 8);
}

// A Transpose that only moves a dim of size 1 reads its input in order: no index work at all.
TEST(EvaluateLoop, ATransposeOfAUnitDimIsAnIdentity) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 4, 8});
  TensorId r = b.Act("r", {1, 4, 8}), z = b.Act("z", {4, 1, 8});
  b.Op("Relu", {x}, {r});
  b.Op("Transpose", {r}, {z}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  b.Output(z);
  Graph g = b.Build();
  LoopEvaluation e = EvaluateLoop(g, Loop({0, 1}), {z}, 2);
  EXPECT_DOUBLE_EQ(e.evaluated.at(r), 32);
  EXPECT_DOUBLE_EQ(e.indexed_elements + e.gathered_elements + e.remapped_elements, 0);
}

// Outputs with as many elements share the loop's pass: r and its unit-dim transpose z are
// written from one tile walk (one pull of r, z and x), not two.
TEST(EvaluateLoop, OutputsOfOneSizeShareOnePass) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 4, 8});
  TensorId r = b.Act("r", {1, 4, 8}), z = b.Act("z", {4, 1, 8});
  b.Op("Relu", {x}, {r});
  b.Op("Transpose", {r}, {z}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  b.Output(r);
  b.Output(z);
  Graph g = b.Build();
  LoopEvaluation e = EvaluateLoop(g, Loop({0, 1}), {r, z}, 2);
  EXPECT_DOUBLE_EQ(e.evaluated.at(r), 32);
  EXPECT_DOUBLE_EQ(e.eval_calls, 1 * 3);
}

// y = Concat(Relu(a[2,2,4]), c[2,2,4]) on axis 1, asked for its range: one run per input per
// index of the leading dim (4 calls), the Relu evaluated at its 16 elements as a range, c copied
// (16 indexed), nothing gathered. Through a Transpose that keeps the inner dim (the transpose walks
// its range: 32 indexed; the concat gets a list of runs) it steps each element's axis coordinate
// along the list (32 gathered), sorts the elements by input (32), maps each input (2 x 32) and
// reads each at the list of its elements: the Relu at 16, a and c gathered there (16 each).
TEST(EvaluateLoop, ConcatAskedForARangeCopiesRunsAtAListSelectsElements) {
  for (bool transposed : {false, true}) {
    SCOPED_TRACE(transposed ? "transposed" : "range");
    IrBuilder b;
    TensorId a = b.Input("a", {2, 2, 4}), c = b.Input("c", {2, 2, 4});
    TensorId r = b.Act("r", {2, 2, 4}), y = b.Act("y", {2, 4, 4}), t = b.Act("t", {4, 2, 4});
    b.Op("Relu", {a}, {r});
    b.Op("Concat", {r, c}, {y}, {{"axis", int64_t{1}}});
    if (transposed) b.Op("Transpose", {y}, {t}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    b.Output(transposed ? t : y);
    Graph g = b.Build();
    LoopEvaluation e = transposed ? EvaluateLoop(g, Loop({0, 1, 2}), {t}, 2)
                                  : EvaluateLoop(g, Loop({0, 1}), {y}, 2);
    EXPECT_DOUBLE_EQ(e.evaluated.at(r), 16);
    EXPECT_DOUBLE_EQ(e.indexed_elements, transposed ? 32 : 16);
    EXPECT_DOUBLE_EQ(e.gathered_elements, transposed ? 32 + 32 + 64 + 16 + 16 : 0);
    const double values = transposed ? 5 : 4;  // a, c, r, y (and t): one call each per pull.
    EXPECT_DOUBLE_EQ(e.eval_calls, values);
    EXPECT_DOUBLE_EQ(e.run_calls, transposed ? 0 : 4);  // Concat's runs: 2 per input.
  }
}

// Builds t = Transpose(Reshape(Slice(x[8,1,384] + w[384], 128..256 of the last dim) into heads
// of `head`), perm (1,0,2)): the tensors x, w, m (the Add), s, r, t.
std::vector<TensorId> QuerySplit(IrBuilder& b, int64_t head) {
  TensorId x = b.Input("x", {8, 1, 384}), w = b.Weight("w", {384});
  TensorId m = b.Act("m", {8, 1, 384}), s = b.Act("s", {8, 1, 128});
  TensorId r = b.Act("r", {8, 128 / head, head}), t = b.Act("t", {128 / head, 8, head});
  b.Op("Add", {x, w}, {m});
  b.Op(
      "Slice",
      {m, b.IntConstant("starts", {128}), b.IntConstant("ends", {256}), b.IntConstant("axes", {2})},
      {s});
  b.Op("Reshape", {s, b.IntConstant("shape", {8, 128 / head, head})}, {r});
  b.Op("Transpose", {r}, {t}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  b.Output(t);
  return {x, w, m, s, r, t};
}

// BERT's query split, small (QuerySplit with heads of 64, t[2,8,64]). The transpose keeps runs of
// 64 (>= 64) in order, so the reshaped slice is asked for 1024 / 64 = 16 pieces, each evaluated as
// a range of its own (16 calls of each of the three computed values below the transpose); the slice
// keeps runs of 128, fewer than its pieces, so the Add is asked for the same 16 pieces, and streams
// w once per piece. Nothing is indexed or gathered. Run calls: 16 pieces of the slice, 16 of the
// Add, 16 streamed runs of w.
TEST(EvaluateLoop, AComputedValueReadInLongRunsIsEvaluatedPieceByPiece) {
  IrBuilder b;
  std::vector<TensorId> v = QuerySplit(b, 64);
  Graph g = b.Build();
  LoopEvaluation e = EvaluateLoop(g, Loop({0, 1, 2, 3}), {v[5]}, 2);
  for (size_t i = 2; i < 6; ++i) EXPECT_DOUBLE_EQ(e.evaluated.at(v[i]), 1024);
  EXPECT_DOUBLE_EQ(e.indexed_elements, 0);
  EXPECT_DOUBLE_EQ(e.gathered_elements, 0);
  EXPECT_DOUBLE_EQ(e.remapped_elements, 0);
  EXPECT_DOUBLE_EQ(e.eval_calls, 5 + 3 * 16);  // t, r, s, m, x for the tile; r, s, m per piece.
  EXPECT_DOUBLE_EQ(e.run_calls, 3 * 16);

  // With heads of 32 the runs are too short: the slice is evaluated at an index list.
  IrBuilder b32;
  v = QuerySplit(b32, 32);
  Graph g32 = b32.Build();
  e = EvaluateLoop(g32, Loop({0, 1, 2, 3}), {v[5]}, 2);
  EXPECT_DOUBLE_EQ(e.evaluated.at(v[2]), 1024);
  EXPECT_GT(e.gathered_elements, 0);
  EXPECT_DOUBLE_EQ(e.eval_calls, 6);  // w too: at an index list it is evaluated, not streamed.
}

// Swin-T's patch merging, small: s = (x[1,8,8,96] + w[96])[:, 0::2, 0::2, :]. The slice steps by
// 2 along H and W, so the runs it reads of the Add are one pixel's 96 channels, not whole rows:
// the runtime evaluates the Add run by run over 1536 / 96 = 16 pieces (EvalComputedRuns walks the
// slice's map), and w is streamed once per piece. Priced as if the slice's steps were 1, the Add
// was 4 pieces of 384.
TEST(EvaluateLoop, ASliceWithStepsIsReadInTheRunsItsStepsLeave) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 8, 8, 96}), w = b.Weight("w", {96});
  TensorId m = b.Act("m", {1, 8, 8, 96}), s = b.Act("s", {1, 4, 4, 96});
  b.Op("Add", {x, w}, {m});
  b.Op("Slice",
       {m, b.IntConstant("starts", {0, 0}), b.IntConstant("ends", {8, 8}),
        b.IntConstant("axes", {1, 2}), b.IntConstant("steps", {2, 2})},
       {s});
  b.Output(s);
  Graph g = b.Build();
  LoopEvaluation e = EvaluateLoop(g, Loop({0, 1}), {s}, 2);
  EXPECT_DOUBLE_EQ(e.evaluated.at(m), 1536);
  EXPECT_DOUBLE_EQ(e.run_calls, 16 + 16);  // The slice's pieces; w's streamed runs.
  EXPECT_DOUBLE_EQ(e.gathered_elements, 0);
}

// A Gather by index (blocks of 8, too short to copy block by block) reads its indices, as its data,
// through an index list (runtime: EvalGather): the index leaf is gathered once per element, not
// copied run by run.
TEST(EvaluateLoop, AGatherReadsItsIndicesThroughAnIndexList) {
  IrBuilder b;
  TensorId data = b.Input("data", {10, 8}), ind = b.Input("ind", {5}, DType::kInt64);
  TensorId y = b.Act("y", {5, 8});
  b.Op("Gather", {data, ind}, {y}, {{"axis", int64_t{0}}});
  b.Output(y);
  Graph g = b.Build();
  LoopEvaluation e = EvaluateLoop(g, Loop({0}), {y}, 2);
  EXPECT_DOUBLE_EQ(e.indexed_elements, 2 * 40);   // The data's map and the indices' map.
  EXPECT_DOUBLE_EQ(e.gathered_elements, 2 * 40);  // The indices and the data, per element.
}

// A leaf seen through a Reshape and read through a Transpose that keeps the inner dim, from the
// loop's range: the leaf is copied run by run (indexed), as the runtime looks through views;
// nothing is gathered and the Reshape is never evaluated.
TEST(EvaluateLoop, ALeafBehindAViewIsReadRunByRun) {
  IrBuilder b;
  TensorId x = b.Input("x", {8, 1, 12});
  TensorId r = b.Act("r", {8, 3, 4}), t = b.Act("t", {3, 8, 4});
  b.Op("Reshape", {x, b.IntConstant("shape", {8, 3, 4})}, {r});
  b.Op("Transpose", {r}, {t}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  b.Output(t);
  Graph g = b.Build();
  LoopEvaluation e = EvaluateLoop(g, Loop({0, 1}), {t}, 2);
  EXPECT_DOUBLE_EQ(e.indexed_elements, 96);
  EXPECT_DOUBLE_EQ(e.gathered_elements, 0);
  EXPECT_DOUBLE_EQ(e.evaluated.at(r), 0);
}

// A reduction with a fused prologue pulls its input a block of short rows at a time: Relu(x[4,49])
// -> ReduceMean over the rows is one pull of the two values (Relu's output and x), as 4 rows of 49
// fit a tile; rows of 5000 are pulled in 2 chunks each.
TEST(EvaluateLoop, ARowReductionPullsShortRowsInBlocksLongRowsInChunks) {
  auto reduce = [](int64_t rows, int64_t len) {
    IrBuilder b;
    TensorId x = b.Input("x", {rows, len});
    TensorId axes = b.IntConstant("axes", {1});
    TensorId r = b.Act("r", {rows, len}), m = b.Act("m", {rows, 1});
    b.Op("Relu", {x}, {r});
    b.Op("ReduceMean", {r, axes}, {m}, {{"keepdims", int64_t{1}}});
    b.Output(m);
    Graph g = b.Build();
    return EvaluateLoop(g, {GroupKind::kReduction, {0, 1}, {}}, {m}, 2);
  };
  LoopEvaluation few = reduce(4, 49);
  EXPECT_DOUBLE_EQ(few.eval_calls, 1 * 2);
  EXPECT_DOUBLE_EQ(reduce(512, 49).eval_calls, 7 * 2);  // Blocks of 83 rows.
  EXPECT_DOUBLE_EQ(reduce(3, 5000).eval_calls, 3 * 2 * 2);
}

// A linear Resize from [1,1,2,2] to [1,1,4,4] blends 4 corners per output element: the Relu fused
// before it is evaluated 4 times per element of the output (64), at scattered lists.
TEST(EvaluateLoop, ALinearResizeEvaluatesItsInputOncePerCorner) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 1, 2, 2});
  TensorId r = b.Act("r", {1, 1, 2, 2}), y = b.Act("y", {1, 1, 4, 4});
  b.Op("Relu", {x}, {r});
  b.Op("Resize", {r}, {y}, {{"mode", std::string("linear")}});
  b.Output(y);
  Graph g = b.Build();
  LoopEvaluation e = EvaluateLoop(g, Loop({0, 1}), {y}, 2);
  EXPECT_DOUBLE_EQ(e.evaluated.at(r), 64);
  EXPECT_DOUBLE_EQ(e.indexed_elements, 4 * 16);        // One coordinate map per dim.
  EXPECT_DOUBLE_EQ(e.gathered_elements, 4 * 16 + 64);  // Corner weights; x read at each corner.
}

// Binds every leaf and output of `loop` to zeroed memory (8 bytes an element, enough for int64).
std::vector<std::vector<int64_t>> BindZeros(const Graph& g, FusedLoop* loop) {
  std::vector<std::vector<int64_t>> memory;
  auto bind = [&](TensorId t) {
    memory.emplace_back(std::max<int64_t>(g.tensor(t).num_elements(), 1), 0);
    loop->Bind(t, memory.back().data());
  };
  for (TensorId t : loop->leaves()) bind(t);
  for (TensorId t : loop->outputs()) bind(t);
  return memory;
}

// A chain's source that only the chain reads joins it (lowering/loop_lowering.h), and then the
// loop streams: GELU with its bias Add, x = bias + mm read by the Div that starts the Erf chain
// and by the Mul that ends it. The model prices the loop as streaming exactly when the runtime's
// loop, run, takes no tile buffer: not when x is also an output, nor when a node outside the chain
// reads it.
TEST(EvaluateLoop, AChainsSourceReadOnlyByTheChainStreamsAsTheRuntimesLoopDoes) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    auto [g, nodes, outputs, x, d, e, a, y] = testing::GeluWithBias(variant);
    LoopEvaluation model = EvaluateLoop(g, Loop(nodes), outputs, 2);
    EXPECT_EQ(model.streams, variant == 0);
    EXPECT_EQ(model.chained.count(x), variant == 0 ? 1u : 0u);
    auto loop = FusedLoop::Build(
        g, nodes, outputs, [](TensorId) { return nullptr; },
        FusedLoop::Tiles::kLongerWhenStreaming);
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    auto memory = BindZeros(g, loop->get());
    const FusedLoop::Observation seen = (*loop)->Observe(2);
    EXPECT_EQ(seen.tile_buffers == 0, model.streams) << seen.tile_buffers << " tile buffers";
    EXPECT_DOUBLE_EQ(model.pulls, static_cast<double>(seen.tiles));
  }
}

// Each value of `program` that the runtime evaluates per tile is evaluated at as many elements as
// the model counts (LoopEvaluation::evaluated against FusedLoop::Observation::evaluated). Not
// compared: values kept whole or evaluated once per thread (evaluated before the observed walk),
// and views of leaves (the model prices the leaf's reads, the view only hands them on). A value
// several steps read, and what it reads, may be counted once per reader where the runtime shares
// one evaluation (two readers asking for the same piece of a run share the piece's memo): at least
// the runtime's count there. Returns how many values were compared.
int ExpectEvaluatedAsTheRuntimeDoes(const Graph& g, const LoopProgram& program,
                                    const LoopEvaluation& model, const FusedLoop::Observation& seen,
                                    const std::string& where) {
  // Values several steps read, and what they read (counted as often as they are).
  std::unordered_map<TensorId, int> readers;
  for (const LoopStep& step : program.steps) {
    for (const LoopOperand& o : step.operands) ++readers[o.tensor];
  }
  std::unordered_set<TensorId> shared;
  for (auto it = program.steps.rbegin(); it != program.steps.rend(); ++it) {
    if (readers[it->tensor] < 2 && !shared.count(it->tensor)) continue;
    shared.insert(it->tensor);
    for (const LoopOperand& o : it->operands) shared.insert(o.tensor);
  }
  int compared = 0;
  for (const LoopStep& step : program.steps) {
    const TensorId t = step.tensor;
    if (model.hoisted.count(t) || program.evaluated_once.count(t)) continue;
    if (step.value.kind == LoopValueKind::kView && !step.operands[0].computed) continue;
    const auto it = seen.evaluated.find(t);
    const double runtime = it == seen.evaluated.end() ? 0.0 : static_cast<double>(it->second);
    const std::string value = where + " value '" + g.tensor(t).name + "'";
    if (shared.count(t)) {
      EXPECT_GE(model.evaluated.at(t), runtime) << value;
    } else {
      EXPECT_EQ(model.evaluated.at(t), runtime) << value;
    }
    ++compared;
  }
  return compared;
}

// The loop the model prices is the loop the runtime runs: over every plain loop group of the
// bundled models under several plans, the runtime builds each group's loop from its record's
// program (GroupLowering::loop) and runs it on two threads' tiles, observed. A loop the model
// prices as streaming takes no tile buffer, every loop walks as many tiles as the model pulls and
// keeps whole the values the model evaluates once per thread, and every value is evaluated at as
// many elements as the model counts (a chain's first value read again from registers is not
// asked for again).
// (Some loops take no buffer without streaming: a lone Transpose or Slice writes straight into
// its output, yet walks default tiles, as the model prices it.)
TEST(EvaluateLoop, PricesTheTilesBuffersAndHoistsOfTheLoopTheRuntimeRuns) {
  int streams = 0, buffered = 0, hoists = 0, values = 0;
  for (const std::string& name : testing::BundledModels()) {
    auto g = testing::ImportBundledModel(name);
    ASSERT_TRUE(g.ok()) << name << ": " << g.status().ToString();
    ConstantValues constants(*g);
    const auto known = [&](TensorId t) { return constants(t); };
    for (const FusionPlan& plan : testing::PlansToCheck(*g)) {
      const auto materialized = AllMaterializedOutputs(*g, plan);
      for (size_t i = 0; i < plan.groups.size(); ++i) {
        const FusionGroup& group = plan.groups[i];
        const GroupLowering record = LowerGroup(*g, group, materialized[i]);
        if (record.form != KernelForm::kFusedLoop) continue;
        auto loop =
            FusedLoop::Build(*g, record.loop, known, FusedLoop::Tiles::kLongerWhenStreaming);
        if (!loop.ok() && loop.status().code() == Status::Code::kUnimplemented) continue;
        ASSERT_TRUE(loop.ok()) << loop.status().ToString();
        auto memory = BindZeros(*g, loop->get());
        const FusedLoop::Observation seen = (*loop)->Observe(2);
        const LoopEvaluation model = EvaluateLoop(*g, record, 2);
        const std::string where = name + " " + testing::GroupText(*g, group);
        if (model.streams) {
          EXPECT_EQ(seen.tile_buffers, 0)
              << where << ": priced as streaming, took buffers over " << seen.tiles << " tiles";
        }
        EXPECT_DOUBLE_EQ(model.pulls, static_cast<double>(seen.tiles)) << where;
        values += ExpectEvaluatedAsTheRuntimeDoes(*g, record.loop, model, seen, where);
        EXPECT_EQ(model.hoisted,
                  std::unordered_set<TensorId>(seen.hoisted.begin(), seen.hoisted.end()))
            << where;
        ++(model.streams ? streams : buffered);
        hoists += static_cast<int>(seen.hoisted.size());
      }
    }
  }
  EXPECT_GT(streams, 1000);
  EXPECT_GT(buffered, 300);
  EXPECT_GT(hoists, 10);
  EXPECT_GT(values, 5000);
}

}  // namespace
}  // namespace fusor
