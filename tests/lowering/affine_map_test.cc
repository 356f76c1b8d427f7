// The affine index maps of fused loops and the runs ForEachRun walks through them
// (lowering/affine_map.h): the runtime reads each tile run by run and the cost model counts the
// same runs, so the runs are checked here by hand.
#include "lowering/affine_map.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

namespace fusor {
namespace {

// (element, offset, run, step) for each call ForEachRun makes.
using RunCall = std::tuple<int64_t, int64_t, int64_t, int64_t>;

std::vector<RunCall> RunsOf(const Affine& m, const Shape& dims, int64_t begin, int64_t n) {
  std::vector<RunCall> runs;
  ForEachRun(m, dims, begin, n, [&](int64_t e, int64_t off, int64_t run, int64_t step) {
    runs.emplace_back(e, off, run, step);
  });
  return runs;
}

// numpy broadcasting: a tensor of the output's shape is the identity, a one-element one a scalar,
// and a broadcast dim (missing or of size 1) has coefficient 0.
TEST(BroadcastMap, SameShapeIsTheIdentityOneElementAScalarBroadcastDimsStepZero) {
  EXPECT_TRUE(BroadcastMap({2, 3, 4}, {2, 3, 4}).identity);
  EXPECT_TRUE(BroadcastMap({1}, {2, 3, 4}).scalar);
  EXPECT_TRUE(BroadcastMap({}, {2, 3, 4}).scalar);
  const Affine row = BroadcastMap({4}, {2, 3, 4});
  EXPECT_FALSE(row.identity || row.scalar);
  EXPECT_EQ(row.coef, (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(BroadcastMap({1, 8, 1, 1}, {1, 8, 4, 4}).coef, (std::vector<int64_t>{0, 1, 0, 0}));
  EXPECT_EQ(BroadcastMap({3, 1}, {2, 3, 4}).coef, (std::vector<int64_t>{0, 1, 0}));
  // A [1,6] read over [1,6] with a leading unit dim added is still read in order.
  EXPECT_TRUE(BroadcastMap({6}, {1, 6}).identity);
}

// The identity is the row-major strides on every dim longer than 1, from base 0.
TEST(IsIdentity, RowMajorStridesOnEveryDimLongerThanOne) {
  EXPECT_TRUE(IsIdentity({12, 4, 1}, 0, {2, 3, 4}, {2, 3, 4}));
  EXPECT_TRUE(IsIdentity({99, 4, 1}, 0, {3, 4}, {1, 3, 4}));  // A unit dim never moves.
  EXPECT_FALSE(IsIdentity({12, 4, 1}, 4, {2, 3, 4}, {2, 3, 4}));
  EXPECT_FALSE(IsIdentity({1, 2}, 0, {2, 2}, {2, 2}));  // A transpose.
  EXPECT_FALSE(IsIdentity({4, 1}, 0, {2, 4}, {2, 2}));  // A slice: fewer elements.
  EXPECT_FALSE(StridedMap({1, 4}, 0, {4, 4}, {4, 4}).identity);
  EXPECT_TRUE(StridedMap({4, 1}, 0, {4, 4}, {4, 4}).identity);
}

// Trailing dims a map reads as one stretch make one run: the identity over [2,3,4] is one run of
// 24, a per-channel scale over [1,8,4,4] a run of 16 per channel repeating one element, and a
// transpose of [4,8] runs of 4 reading every 8th element.
TEST(RunShapeOf, TrailingDimsReadAsOneStretchMakeOneRun) {
  auto shape = [](const Affine& m, const Shape& dims) {
    RunShape r = RunShapeOf(m, dims);
    return std::pair<int64_t, int64_t>{r.length, r.step};
  };
  EXPECT_EQ(shape(BroadcastMap({2, 3, 4}, {2, 3, 4}), {2, 3, 4}),
            (std::pair<int64_t, int64_t>{24, 1}));
  EXPECT_EQ(shape(BroadcastMap({1, 8, 1, 1}, {1, 8, 4, 4}), {1, 8, 4, 4}),
            (std::pair<int64_t, int64_t>{16, 0}));
  EXPECT_EQ(shape(StridedMap({1, 8}, 0, {4, 8}, {8, 4}), {8, 4}),
            (std::pair<int64_t, int64_t>{4, 8}));
  EXPECT_EQ(shape(BroadcastMap({4}, {2, 3, 4}), {2, 3, 4}), (std::pair<int64_t, int64_t>{4, 1}));
  EXPECT_EQ(RunStep(StridedMap({1, 8}, 0, {4, 8}, {8, 4}), {8, 4}), 8);
}

// A walk from the middle of a dim starts with the rest of that run: elements 6..11 of a transpose
// of [4,8] (output [8,4]) are out[1][2..3], reading in[2..3][1], then out[2][0..3], reading
// in[0..3][2].
TEST(ForEachRun, AWalkFromTheMiddleOfARunFinishesItThenWalksWholeRuns) {
  const Affine t = StridedMap({1, 8}, 0, {4, 8}, {8, 4});
  EXPECT_EQ(RunsOf(t, {8, 4}, 6, 6), (std::vector<RunCall>{{0, 17, 2, 8}, {2, 2, 4, 8}}));
}

// A per-channel scale over [1,8,4,4] walks one run per channel of 16 repeats; a walk that ends
// mid-channel ends mid-run.
TEST(ForEachRun, ABroadcastOverTrailingDimsRepeatsOneElementPerRun) {
  const Affine s = BroadcastMap({1, 8, 1, 1}, {1, 8, 4, 4});
  EXPECT_EQ(RunsOf(s, {1, 8, 4, 4}, 0, 40),
            (std::vector<RunCall>{{0, 0, 16, 0}, {16, 1, 16, 0}, {32, 2, 8, 0}}));
}

// A map's base offsets every run: the second part of a Split of [8,96] into 32 and 64 reads rows
// of 64 starting 32 in, 96 apart.
TEST(ForEachRun, TheBaseOffsetsEveryRun) {
  const Affine part = StridedMap({96, 1}, 32, {8, 96}, {8, 64});
  EXPECT_FALSE(part.identity);
  EXPECT_EQ(RunsOf(part, {8, 64}, 0, 192),
            (std::vector<RunCall>{{0, 32, 64, 1}, {64, 128, 64, 1}, {128, 224, 64, 1}}));
}

// A map over split dims takes its coordinates there, whatever dims its consumer passes: a [2,3]
// repeated twice along its last dim is read over [2,6] taken as [2,2,3], in runs of the row (3
// elements from 0 or 3), the repeat coordinate reading nothing.
TEST(SplitMap, AWalkTakesItsCoordinatesInTheSplitDims) {
  const Affine tile = SplitMap({3, 0, 1}, 0, {2, 3}, {2, 2, 3});
  EXPECT_FALSE(tile.identity);
  EXPECT_EQ(SpaceOf(tile, {2, 6}), (Shape{2, 2, 3}));
  EXPECT_EQ(RunsOf(tile, {2, 6}, 1, 9),
            (std::vector<RunCall>{{0, 1, 2, 1}, {2, 0, 3, 1}, {5, 3, 3, 1}, {8, 3, 1, 1}}));
  EXPECT_EQ(RunShapeOf(tile, {2, 6}).length, 3);
  EXPECT_EQ(RunStep(tile, {2, 6}), 1);
  // Split dims read in row-major order are still the identity.
  EXPECT_TRUE(SplitMap({6, 3, 1}, 0, {2, 6}, {2, 2, 3}).identity);
}

// Merged dims: a row-major walk of [2,3,4] through the identity is one run of all it is asked.
TEST(MergeRunDims, TheIdentityMergesEveryDimIntoOne) {
  int64_t dims[4], coefs[4];
  EXPECT_EQ(MergeRunDims(BroadcastMap({2, 3, 4}, {2, 3, 4}), {2, 3, 4}, dims, coefs), 1u);
  EXPECT_EQ(dims[0], 24);
  EXPECT_EQ(coefs[0], 1);
  // Unit dims only: one run of one element.
  EXPECT_EQ(MergeRunDims(BroadcastMap({1, 1}, {1, 1}), {1, 1}, dims, coefs), 1u);
  EXPECT_EQ(dims[0], 1);
  EXPECT_EQ(RunsOf(BroadcastMap({2, 3, 4}, {2, 3, 4}), {2, 3, 4}, 5, 10),
            (std::vector<RunCall>{{0, 5, 10, 1}}));
}

}  // namespace
}  // namespace fusor
