// The LSTM lowering to oneDNN's RNN primitive against the reference interpreter (itself checked by
// hand in reference_test.cc), with seeded weights: every direction, with and without initial
// state, a full sequence_lens, and with only some outputs read. What it does not lower runs
// through the reference fallback and still gives the reference's values.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "graph/plan.h"
#include "runtime/executor.h"
#include "runtime/reference.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::Int;
using testing::IrBuilder;

struct LstmCase {
  std::string direction;
  bool initial_state;
  bool sequence_lens;
  bool read_y;             // Y a graph output (else only Y_h and Y_c are).
  std::string extra_attr;  // An attribute oneDNN's LSTM does not take: runs the fallback.
};

void PrintTo(const LstmCase& c, std::ostream* os) {
  *os << c.direction << (c.initial_state ? " h0/c0" : "") << (c.sequence_lens ? " lens" : "")
      << (c.read_y ? " Y" : "") << (c.extra_attr.empty() ? "" : " " + c.extra_attr);
}

constexpr int64_t kSeq = 5, kBatch = 3, kIn = 4, kHid = 6;

struct LstmGraph {
  Graph g;
  TensorId w, r, b;
};

LstmGraph BuildLstm(const LstmCase& c) {
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1;
  IrBuilder b;
  TensorId x = b.Input("x", {kSeq, kBatch, kIn});
  TensorId w = b.Weight("w", {dirs, 4 * kHid, kIn}), r = b.Weight("r", {dirs, 4 * kHid, kHid});
  TensorId bias = b.Weight("b", {dirs, 8 * kHid});
  TensorId lens =
      c.sequence_lens ? b.IntConstant("lens", std::vector<int64_t>(kBatch, kSeq)) : kNoId;
  TensorId h0 = c.initial_state ? b.Input("h0", {dirs, kBatch, kHid}) : kNoId;
  TensorId c0 = c.initial_state ? b.Input("c0", {dirs, kBatch, kHid}) : kNoId;
  TensorId y = b.Act("y", {kSeq, dirs, kBatch, kHid});
  TensorId yh = b.Act("yh", {dirs, kBatch, kHid}), yc = b.Act("yc", {dirs, kBatch, kHid});
  std::vector<Attribute> attrs = {Int("hidden_size", kHid), {"direction", c.direction}};
  if (c.extra_attr == "clip") attrs.push_back({"clip", 0.5});
  b.Op("LSTM", {x, w, r, bias, lens, h0, c0}, {y, yh, yc}, attrs);
  if (c.read_y) b.Output(y);
  b.Output(yh);
  b.Output(yc);
  return {b.Build(), w, r, bias};
}

class LstmLowering : public ::testing::TestWithParam<LstmCase> {};

TEST_P(LstmLowering, MatchesTheReference) {
  const LstmCase& c = GetParam();
  LstmGraph lg = BuildLstm(c);
  const Graph& g = lg.g;
  auto leaves = RandomLeafValues(g, 21);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> weight(-0.5f, 0.5f);
  for (TensorId t : {lg.w, lg.r, lg.b}) {
    for (float& v : (*leaves)[t].f) v = weight(rng);
  }
  auto want = RunReference(g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  auto exec = Executor::Create(g, UnfusedPlan(g), *leaves);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  const std::string kernel = (*exec)->DescribeGroup(0);
  const bool lowered = c.extra_attr.empty();
  EXPECT_NE(kernel.find(lowered ? "LSTM oneDNN" : "reference fallback"), std::string::npos)
      << kernel;
  for (int run = 0; run < 2; ++run) {  // A second run starts from the same state.
    (*exec)->Run();
    for (TensorId t : g.outputs()) {
      auto got = (*exec)->Read(t);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      auto close = Compare(want->at(t), *got);
      ASSERT_TRUE(close.ok()) << close.status().ToString();
      EXPECT_LE(close->worst_ratio, 1.0) << g.tensor(t).name << ": " << close->ToString();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Directions, LstmLowering,
                         ::testing::Values(LstmCase{"forward", false, false, true, ""},
                                           LstmCase{"forward", true, true, true, ""},
                                           LstmCase{"reverse", true, false, true, ""},
                                           LstmCase{"reverse", false, false, false, ""},
                                           LstmCase{"bidirectional", true, false, true, ""},
                                           LstmCase{"bidirectional", false, true, false, ""},
                                           LstmCase{"forward", true, false, true, "clip"}),
                         [](const ::testing::TestParamInfo<LstmCase>& info) {
                           const LstmCase& c = info.param;
                           return c.direction + (c.initial_state ? "_state" : "") +
                                  (c.sequence_lens ? "_lens" : "") +
                                  (c.read_y ? "_y" : "_states_only") +
                                  (c.extra_attr.empty() ? "" : "_" + c.extra_attr);
                         });

// initial_h without initial_c (the cell starts at zero), and Y_h read without Y_c.
TEST(LstmLowering, InitialHiddenAloneAndFinalHiddenAlone) {
  IrBuilder b;
  TensorId x = b.Input("x", {kSeq, kBatch, kIn});
  TensorId w = b.Weight("w", {1, 4 * kHid, kIn}), r = b.Weight("r", {1, 4 * kHid, kHid});
  TensorId h0 = b.Input("h0", {1, kBatch, kHid});
  TensorId y = b.Act("y", {kSeq, 1, kBatch, kHid}), yh = b.Act("yh", {1, kBatch, kHid});
  b.Op("LSTM", {x, w, r, kNoId, kNoId, h0}, {y, yh}, {Int("hidden_size", kHid)});
  b.Output(yh);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 5);
  ASSERT_TRUE(leaves.ok());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> weight(-0.5f, 0.5f);
  for (TensorId t : {w, r}) {
    for (float& v : (*leaves)[t].f) v = weight(rng);
  }
  auto exec = Executor::Create(g, UnfusedPlan(g), *leaves);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  EXPECT_NE((*exec)->DescribeGroup(0).find("LSTM oneDNN"), std::string::npos);
  (*exec)->Run();
  auto want = RunReference(g, *leaves);
  ASSERT_TRUE(want.ok());
  auto got = (*exec)->Read(yh);
  ASSERT_TRUE(got.ok());
  auto close = Compare(want->at(yh), *got);
  ASSERT_TRUE(close.ok());
  EXPECT_LE(close->worst_ratio, 1.0) << (*exec)->DescribeGroup(0) << ": " << close->ToString();
}

// A sequence_lens shorter than the sequence changes which steps run: oneDNN's LSTM has no such
// input, so the node runs through the fallback, with the reference's values.
TEST(LstmLowering, ShortSequenceLensRunsTheFallback) {
  IrBuilder b;
  TensorId x = b.Input("x", {kSeq, 2, kIn});
  TensorId w = b.Weight("w", {1, 4 * kHid, kIn}), r = b.Weight("r", {1, 4 * kHid, kHid});
  TensorId lens = b.IntConstant("lens", {kSeq, 2});
  TensorId y = b.Act("y", {kSeq, 1, 2, kHid});
  b.Op("LSTM", {x, w, r, kNoId, lens}, {y}, {Int("hidden_size", kHid)});
  b.Output(y);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 3);
  ASSERT_TRUE(leaves.ok());
  auto exec = Executor::Create(g, UnfusedPlan(g), *leaves);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  EXPECT_NE((*exec)->DescribeGroup(0).find("reference fallback"), std::string::npos);
  (*exec)->Run();
  auto want = RunReference(g, *leaves);
  ASSERT_TRUE(want.ok());
  auto got = (*exec)->Read(y);
  ASSERT_TRUE(got.ok());
  auto close = Compare(want->at(y), *got);
  ASSERT_TRUE(close.ok());
  EXPECT_LE(close->worst_ratio, 1.0) << close->ToString();
}

}  // namespace
}  // namespace fusor
