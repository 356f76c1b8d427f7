// Tensors kept in oneDNN's channel-blocked layout between groups (lowering/layout.h): consecutive
// convolutions exchange them without reorders, residual adds read them in place, and every other
// kernel gets plain copies, so results match the reference under any plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "graph/plan.h"
#include "lowering/layout.h"
#include "lowering/plan_legality.h"
#include "runtime/executor.h"
#include "runtime/onednn_info.h"
#include "runtime/reference.h"
#include "tests/graph/ir_builder.h"
#include "tests/lowering/reduce_branch.h"
#include "tests/lowering/residual_block.h"
#include "tests/lowering/se_block.h"

namespace fusor {
namespace {

using testing::Ints;
using testing::IrBuilder;
using testing::MakeResidualBlock;
using testing::ResidualBlock;

// Every output and the blocked intermediates `probe` (materialized under `plan`) match the
// reference; returns the executor's group descriptions.
std::string ExpectMatches(const Graph& g, const FusionPlan& plan,
                          const std::vector<TensorId>& probe, const ExecutorOptions& options = {}) {
  auto leaves = RandomLeafValues(g, 5);
  EXPECT_TRUE(leaves.ok());
  TensorValues values = *leaves;
  for (NodeId id = 0; id < static_cast<NodeId>(g.num_nodes()); ++id) {
    EXPECT_TRUE(RunReferenceNode(g, id, &values).ok());
  }
  auto exec = Executor::Create(g, plan, *leaves, options);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  if (!exec.ok()) return "";
  // An intermediate's buffer may be reused once its readers ran: read it right after its group.
  auto expect_value = [&](TensorId t) {
    auto got = (*exec)->Read(t);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok()) return;
    auto c = Compare(values.at(t), *got);
    EXPECT_TRUE(c.ok() && c->worst_ratio <= 1.0)
        << g.tensor(t).name << ": " << (c.ok() ? c->ToString() : c.status().ToString());
  };
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    (*exec)->RunGroup(i);
    for (TensorId t : probe) {
      const auto& nodes = plan.groups[i].nodes;
      if (std::find(nodes.begin(), nodes.end(), g.tensor(t).producer) != nodes.end()) {
        expect_value(t);
      }
    }
  }
  for (TensorId t : g.outputs()) expect_value(t);
  std::string described;
  for (size_t i = 0; i < (*exec)->num_groups(); ++i) described += (*exec)->DescribeGroup(i) + "\n";
  return described;
}

int64_t Block() { return ChannelBlockForIsa(OneDnnIsa()); }

// On the runtime: a stem conv (2 images, 3x3, stride 2) whose chain reaches a Concat reads the
// graph input without a reorder; the values match the reference (two images: the Concat itself
// stays plain).
TEST(BlockedLayout, AStemConvRunsWithoutReordersAndMatchesTheReference) {
  if (Block() == 0) GTEST_SKIP() << "oneDNN runs no blocked layout on this CPU";
  IrBuilder b;
  const Shape d32 = {2, 32, 9, 9};
  TensorId c1 = b.Act("c1", d32), r1 = b.Act("r1", d32), c2 = b.Act("c2", d32);
  TensorId cat = b.Act("cat", {2, 64, 9, 9}), y = b.Act("y", {2, 16, 9, 9});
  b.Op("Conv", {b.Input("rgb", {2, 3, 17, 17}), b.Weight("w1", {32, 3, 3, 3})}, {c1},
       {Ints("pads", {1, 1, 1, 1}), Ints("strides", {2, 2})});
  b.Op("Relu", {c1}, {r1});
  b.Op("Conv", {r1, b.Weight("w2", {32, 32, 1, 1})}, {c2});
  b.Op("Concat", {r1, c2}, {cat}, {testing::Int("axis", 1)});
  b.Op("Conv", {cat, b.Weight("w3", {16, 64, 1, 1})}, {y});
  b.Output(y);
  Graph g = b.Build();
  ASSERT_TRUE(StemConvReadsPlain(g, g.node(0), LayoutTargetForIsa(OneDnnIsa())));
  FusionPlan plan{
      {FusionGroup{GroupKind::kAnchor, {0, 1}, {}}, FusionGroup{GroupKind::kSingle, {2}, {}},
       FusionGroup{GroupKind::kSingle, {3}, {}}, FusionGroup{GroupKind::kSingle, {4}, {}}}};
  ASSERT_TRUE(CheckPlan(g, plan).ok());
  std::string d = ExpectMatches(g, plan, {r1});
  const std::string first = d.substr(0, d.find('\n'));
  EXPECT_EQ(first.find("reorder in"), std::string::npos) << first;
  EXPECT_EQ(first.find("ref"), std::string::npos) << first;
  ExpectMatches(g, UnfusedPlan(g), {c1, r1, c2});
}

// [Conv a, Relu] [Conv b, Add, Relu] [Conv c] [Mul].
FusionPlan ResidualPlan() {
  return FusionPlan{
      {FusionGroup{GroupKind::kAnchor, {0, 1}, {}}, FusionGroup{GroupKind::kAnchor, {2, 3, 4}, {}},
       FusionGroup{GroupKind::kSingle, {5}, {}}, FusionGroup{GroupKind::kSingle, {6}, {}}}};
}

TEST(BlockedLayout, ConsecutiveConvsExchangeBlockedTensorsWithoutReorders) {
  if (Block() == 0) GTEST_SKIP() << "oneDNN runs no blocked layout on this CPU";
  ResidualBlock rb = MakeResidualBlock(16);
  const Graph& g = rb.g;
  FusionPlan plan = ResidualPlan();
  ASSERT_TRUE(CheckPlan(g, plan).ok());
  ExecutorOptions binary;
  binary.residual_add = ResidualAdd::kBinary;
  std::string d = ExpectMatches(g, plan, {rb.r1}, binary);
  std::vector<std::string> lines;
  for (size_t at = 0, next; (next = d.find('\n', at)) != std::string::npos; at = next + 1) {
    lines.push_back(d.substr(at, next - at));
  }
  ASSERT_EQ(lines.size(), 4u) << d;
  EXPECT_EQ(lines[0].find("reorder out"), std::string::npos) << lines[0];  // r1 stays blocked.
  EXPECT_EQ(lines[1].find("reorder in"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].find("reorder operand"), std::string::npos) << lines[1];  // Residual in place.
  EXPECT_NE(lines[1].find("reorder out"), std::string::npos) << lines[1];      // r2 is plain.
  EXPECT_NE(lines[2].find("reorder in"), std::string::npos) << lines[2];
}

// A grouped conv with 8 channels a group writes nChw8c, which on AVX-512 only AVX2 kernels read:
// the 1x1 conv after it reorders its input and keeps the full vector width, as it has alone,
// instead of reading nChw8c in place (and passing nChw8c on to every later conv).
TEST(BlockedLayout, AConvReadsAKeptInputInPlaceOnlyAtFullVectorWidth) {
  if (Block() == 0) GTEST_SKIP() << "oneDNN runs no blocked layout on this CPU";
  IrBuilder b;
  TensorId x = b.Input("x", {1, 128, 14, 14});
  TensorId g = b.Act("g", {1, 128, 14, 14}), r = b.Act("r", {1, 128, 14, 14});
  TensorId y = b.Act("y", {1, 256, 14, 14});
  b.Op("Conv", {x, b.Weight("wg", {128, 8, 3, 3})}, {g},
       {Ints("pads", {1, 1, 1, 1}), testing::Int("group", 16)});
  b.Op("Relu", {g}, {r});
  b.Op("Conv", {r, b.Weight("w1", {256, 128, 1, 1})}, {y});
  b.Output(y);
  Graph graph = b.Build();
  FusionPlan plan{
      {FusionGroup{GroupKind::kAnchor, {0, 1}, {}}, FusionGroup{GroupKind::kSingle, {2}, {}}}};
  ASSERT_TRUE(CheckPlan(graph, plan).ok());
  std::string fused = ExpectMatches(graph, plan, {r});
  std::string second = fused.substr(fused.find('\n') + 1);
  if (Block() == 16) {
    EXPECT_EQ(second.find(":avx2"), std::string::npos) << fused;
  }
}

TEST(BlockedLayout, ResidualAddAsSumPostOpOnACopyInDst) {
  ResidualBlock rb = MakeResidualBlock(16);
  ExecutorOptions sum;
  sum.residual_add = ResidualAdd::kSum;
  std::string d = ExpectMatches(rb.g, ResidualPlan(), {rb.r1}, sum);
  EXPECT_NE(d.find("residual copied to dst for a sum post-op"), std::string::npos) << d;
  // Timed against the binary post-op: either way the same values.
  ExpectMatches(rb.g, ResidualPlan(), {rb.r1});
  // Without blocked layouts the residual is reordered from plain into dst.
  sum.keep_blocked = false;
  ExpectMatches(rb.g, ResidualPlan(), {}, sum);
}

TEST(BlockedLayout, LoopsOnBlockedTensorsRunFlatOrOnPlainCopies) {
  if (Block() == 0) GTEST_SKIP() << "oneDNN runs no blocked layout on this CPU";
  ResidualBlock rb = MakeResidualBlock(16);
  const Graph& g = rb.g;
  // Unfused: the Relu after Conv a and the residual Add run flat on blocked tensors.
  std::string d = ExpectMatches(g, UnfusedPlan(g), {rb.r1, rb.r2});
  EXPECT_EQ(d.find("reorder operand"), std::string::npos) << d;
  // [Add, Relu, Mul] reads blocked r1 and Conv b's output, but the Mul per channel and row cannot
  // run on blocked data: it gets plain copies.
  FusionPlan plan{
      {FusionGroup{GroupKind::kSingle, {0}, {}}, FusionGroup{GroupKind::kSingle, {1}, {}},
       FusionGroup{GroupKind::kSingle, {2}, {}}, FusionGroup{GroupKind::kLoop, {3, 4, 6}, {}},
       FusionGroup{GroupKind::kSingle, {5}, {}}}};
  ASSERT_TRUE(CheckPlan(g, plan).ok()) << CheckPlan(g, plan).ToString();
  d = ExpectMatches(g, plan, {rb.r1, rb.r2});
  EXPECT_NE(d.find("blocked input(s) reordered to plain"), std::string::npos) << d;
}

// A squeeze-and-excite block runs without reorders around its pooling and per-channel Mul: the
// pooling reads the SiLU's output as stored, the Mul's loop runs over the stored form's dims; the
// values match the reference, blocked (32 channels) and, where 40 channels are no whole block,
// channels-last, unfused and with the scale's Sigmoid fused into the Mul.
TEST(BlockedLayout, ASqueezeAndExciteBlockRunsOnItsStoredLayoutsAndMatchesTheReference) {
  if (Block() == 0) GTEST_SKIP() << "oneDNN runs no blocked layout on this CPU";
  for (int64_t channels : {32, 40}) {
    SCOPED_TRACE(std::to_string(channels) + " channels");
    testing::SeBlock se = testing::MakeSeBlock(channels);
    const Graph& g = se.g;
    FusionPlan fused = UnfusedPlan(g);
    const NodeId sigmoid = g.tensor(se.scale).producer;
    std::vector<FusionGroup> groups;
    for (const FusionGroup& group : fused.groups) {
      if (group.nodes[0] == sigmoid) continue;
      if (group.nodes[0] == se.excite) {
        groups.push_back(FusionGroup{GroupKind::kLoop, {sigmoid, se.excite}, {}});
      } else {
        groups.push_back(group);
      }
    }
    fused.groups = groups;
    ASSERT_TRUE(CheckPlan(g, fused).ok()) << CheckPlan(g, fused).ToString();
    for (const FusionPlan& plan : {UnfusedPlan(g), fused}) {
      std::string d = ExpectMatches(g, plan, {se.act, se.pooled, se.excited});
      // The pooling, and the loop, read and write what they touch in place.
      std::istringstream lines(d);
      for (std::string line; std::getline(lines, line);) {
        if (line.find("GlobalAveragePool") == 0 || line.find("fused loop") != std::string::npos) {
          EXPECT_EQ(line.find("reorder"), std::string::npos) << d;
        }
      }
      EXPECT_NE(d.find("GlobalAveragePool (jit"), std::string::npos) << d;
    }
  }
}

// A Concat's part written by a channels-last conv (after a 24-channel reduce conv) is reordered
// into its blocked slice, so the Concat stays in place and blocked: its reader reads it without a
// reorder, and every plan matches the reference.
TEST(BlockedLayout, AConcatPartAfterAChannelsLastConvIsReorderedIntoItsBlockedSlice) {
  if (Block() == 0) GTEST_SKIP() << "oneDNN runs no blocked layout on this CPU";
  testing::ReduceBranch rb = testing::MakeReduceBranch();
  const Graph& g = rb.g;
  const NodeId conv = g.tensor(rb.c).producer;
  FusionPlan fused;
  for (const FusionGroup& group : UnfusedPlan(g).groups) {
    if (group.nodes[0] == conv + 1) continue;  // The Relu, fused into its conv below.
    fused.groups.push_back(
        group.nodes[0] == conv ? FusionGroup{GroupKind::kAnchor, {conv, conv + 1}, {}} : group);
  }
  ASSERT_EQ(g.node(conv + 1).op_type, "Relu");
  ASSERT_TRUE(CheckPlan(g, fused).ok()) << CheckPlan(g, fused).ToString();
  for (const FusionPlan& plan : {UnfusedPlan(g), fused}) {
    std::string d = ExpectMatches(g, plan, {rb.r, rb.p2, rb.cat});
    EXPECT_NE(d.find("Concat]: in place"), std::string::npos) << d;
    EXPECT_NE(d.find("channel-blocked"), std::string::npos) << d;
  }
  for (uint64_t seed = 1; seed <= 4; ++seed) ExpectMatches(g, RandomLegalPlan(g, seed), {});
}

TEST(BlockedLayout, RandomPlansMatchTheReference) {
  ResidualBlock rb = MakeResidualBlock(16);
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    FusionPlan plan = RandomLegalPlan(rb.g, seed);
    ASSERT_TRUE(CheckPlan(rb.g, plan).ok());
    ExpectMatches(rb.g, plan, {});
  }
}

}  // namespace
}  // namespace fusor
