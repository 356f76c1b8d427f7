// Tensors kept in oneDNN's channel-blocked layout between groups (lowering/layout.h): consecutive
// convolutions exchange them without reorders, residual adds read them in place, and every other
// kernel gets plain copies, so results match the reference under any plan.
#include <gtest/gtest.h>

#include <algorithm>

#include "graph/plan.h"
#include "lowering/layout.h"
#include "lowering/plan_legality.h"
#include "runtime/executor.h"
#include "runtime/onednn_info.h"
#include "runtime/reference.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::Ints;
using testing::IrBuilder;

// x -> Conv a -> Relu -> r1 -> Conv b -> Add(r1) -> Relu -> r2 -> Conv c -> y, plus a per-channel
// scale of r2 (a broadcast, so a loop that cannot run on blocked data) as a second output.
struct ResidualBlock {
  Graph g;
  TensorId r1 = kNoId, r2 = kNoId, y = kNoId, scaled = kNoId;
};

ResidualBlock MakeResidualBlock(int64_t channels) {
  IrBuilder b;
  Shape d = {1, channels, 8, 8};
  ResidualBlock out;
  TensorId x = b.Input("x", d);
  TensorId a = b.Act("a", d), ca = b.Act("cb", d), sum = b.Act("sum", d);
  out.r1 = b.Act("r1", d);
  out.r2 = b.Act("r2", d);
  out.y = b.Act("y", d);
  out.scaled = b.Act("scaled", d);
  auto conv = [&](const std::string& w, TensorId in, TensorId o) {
    b.Op("Conv", {in, b.Weight(w, {channels, channels, 3, 3})}, {o}, {Ints("pads", {1, 1, 1, 1})});
  };
  conv("wa", x, a);
  b.Op("Relu", {a}, {out.r1});
  conv("wb", out.r1, ca);
  b.Op("Add", {ca, out.r1}, {sum});
  b.Op("Relu", {sum}, {out.r2});
  conv("wc", out.r2, out.y);
  b.Op("Mul", {out.r2, b.Weight("per_channel", {channels, 1, 1})}, {out.scaled});
  b.Output(out.y);
  b.Output(out.scaled);
  out.g = b.Build();
  return out;
}

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

TEST(BlockedLayout, WhichTensorsStayBlocked) {
  if (Block() == 0) GTEST_SKIP() << "oneDNN runs no blocked layout on this CPU";
  ResidualBlock rb = MakeResidualBlock(16);
  const Graph& g = rb.g;
  EXPECT_TRUE(KeptBlocked(g, rb.r1, 8));   // Relu -> Conv and the residual Add.
  EXPECT_FALSE(KeptBlocked(g, rb.r2, 8));  // Read by a per-channel Mul (a broadcast).
  EXPECT_FALSE(KeptBlocked(g, rb.y, 8));   // A graph output.
  EXPECT_FALSE(KeptBlocked(g, 0, 8));      // The graph input.
  EXPECT_FALSE(KeptBlocked(g, rb.r1, 0));  // No blocked layout on this ISA.
  EXPECT_FALSE(KeptBlocked(MakeResidualBlock(12).g, rb.r1, 8));  // 12 channels would pad.
  // A flat Add writes blocked only when it reads blocked: not with a graph input operand.
  IrBuilder b;
  Shape d = {1, 8, 4, 4};
  TensorId x = b.Input("x", d), a = b.Act("a", d), s = b.Act("s", d), y = b.Act("y", d);
  b.Op("Conv", {x, b.Weight("w1", {8, 8, 1, 1})}, {a});
  b.Op("Add", {a, b.Input("residual", d)}, {s});
  b.Op("Conv", {s, b.Weight("w2", {8, 8, 1, 1})}, {y});
  b.Output(y);
  Graph flat = b.Build();
  EXPECT_TRUE(KeptBlocked(flat, a, 8));
  EXPECT_FALSE(KeptBlocked(flat, s, 8));
  EXPECT_EQ(ChannelBlockForIsa("avx2"), 8);
  EXPECT_EQ(ChannelBlockForIsa("avx512_core"), 16);
}

// Where oneDNN has brgemm convs, the form of a chain of kept tensors is decided where it starts:
// a conv on a plain input whose channel counts share no block runs channels-last, and so does
// every conv that reads what it wrote. stem[1,3,8,8] -> Conv 3->32 -> Relu -> Conv 32->32 -> a ->
// Conv 32->48 -> y (an output); beside it p[1,24,8,8] (plain) -> Conv 24->144 -> q -> depthwise
// -> out2, and r[1,16,8,8] -> Conv 16->32 -> out3 (one block: channel-blocked).
TEST(BlockedLayout, ChannelsLastChainsStartWhereAPlainInputMeetsMixedBlocks) {
  IrBuilder b;
  auto act = [&](const std::string& name, int64_t c) { return b.Act(name, {1, c, 8, 8}); };
  TensorId c1 = act("c1", 32), r1 = act("r1", 32), a = act("a", 32), y = act("y", 48);
  TensorId q = act("q", 144), out2 = act("out2", 144), out3 = act("out3", 32);
  b.Op("Conv", {b.Input("stem", {1, 3, 8, 8}), b.Weight("w1", {32, 3, 1, 1})}, {c1});
  b.Op("Relu", {c1}, {r1});
  b.Op("Conv", {r1, b.Weight("w2", {32, 32, 1, 1})}, {a});
  b.Op("Conv", {a, b.Weight("w3", {48, 32, 1, 1})}, {y});
  b.Op("Conv", {b.Input("p", {1, 24, 8, 8}), b.Weight("w4", {144, 24, 1, 1})}, {q});
  b.Op("Conv", {q, b.Weight("w5", {144, 1, 3, 3})}, {out2},
       {Ints("pads", {1, 1, 1, 1}), testing::Int("group", 144)});
  b.Op("Conv", {b.Input("r", {1, 16, 8, 8}), b.Weight("w6", {32, 16, 1, 1})}, {out3});
  b.Output(y);
  b.Output(out2);
  b.Output(out3);
  Graph g = b.Build();
  for (NodeId n : {0, 2, 3, 4, 5}) EXPECT_TRUE(ConvRunsChannelsLast(g, g.node(n), 16, true)) << n;
  EXPECT_FALSE(ConvRunsChannelsLast(g, g.node(6), 16, true));
  for (TensorId t : {c1, r1, a, q}) EXPECT_TRUE(StoredChannelsLast(g, t, 16, true)) << t;
  EXPECT_FALSE(StoredChannelsLast(g, y, 16, true));  // A graph output: plain.
  // Without brgemm convs, or with blocks of 8, everything is channel-blocked.
  EXPECT_FALSE(ConvRunsChannelsLast(g, g.node(0), 16, false));
  EXPECT_FALSE(ConvRunsChannelsLast(g, g.node(0), 8, true));
  EXPECT_FALSE(StoredChannelsLast(g, r1, 16, false));
  EXPECT_TRUE(BrgemmConvsForIsa("avx512_core_bf16"));
  EXPECT_TRUE(BrgemmConvsForIsa("avx512_core_amx"));
  EXPECT_FALSE(BrgemmConvsForIsa("avx512_core"));
  EXPECT_FALSE(BrgemmConvsForIsa("avx2"));
}

// A stem conv: fewer input channels than a block, ungrouped, whole blocks of output channels, and
// a chain that reaches a Concat (rgb -> Conv -> Relu -> Concat with a 1x1 conv of it).
TEST(BlockedLayout, AStemConvWhoseChainReachesAConcatWritesBlocked) {
  IrBuilder b;
  TensorId rgb = b.Input("rgb", {1, 3, 8, 8});
  auto conv = [&](const std::string& name, TensorId x, int64_t in, int64_t out, int64_t group) {
    TensorId y = b.Act(name, {1, out, 8, 8});
    b.Op("Conv", {x, b.Weight("w_" + name, {out, in / group, 1, 1})}, {y},
         {testing::Int("group", group)});
    return y;
  };
  TensorId s32 = conv("s32", rgb, 3, 32, 1);
  TensorId r = b.Act("r", {1, 32, 8, 8}), cat = b.Act("cat", {1, 64, 8, 8});
  b.Op("Relu", {s32}, {r});
  b.Op("Concat", {r, conv("c32", r, 32, 32, 1)}, {cat}, {testing::Int("axis", 1)});
  b.Output(conv("after", cat, 64, 16, 1));
  b.Output(conv("s24", rgb, 3, 24, 1));               // 24 channels: whole blocks of 8, not of 16.
  b.Output(conv("s48", rgb, 3, 48, 3));               // Grouped: no first-layer kernel.
  TensorId plain_chain = conv("p32", rgb, 3, 32, 1);  // Its chain reaches no Concat.
  b.Output(conv("p32b", plain_chain, 32, 32, 1));
  Graph g = b.Build();
  const Node& stem = g.node(0);
  for (int64_t block : {16, 8}) EXPECT_TRUE(StemConvReadsPlain(g, stem, block)) << block;
  EXPECT_FALSE(StemConvReadsPlain(g, stem, 0));  // No blocked layout on this ISA.
  auto node_writing = [&](const std::string& name) {
    for (const Node& n : g.nodes()) {
      if (g.tensor(n.outputs[0]).name == name) return n;
    }
    ADD_FAILURE() << name;
    return g.node(0);
  };
  EXPECT_FALSE(StemConvReadsPlain(g, node_writing("s24"), 16));
  EXPECT_FALSE(StemConvReadsPlain(g, node_writing("s48"), 16));
  EXPECT_FALSE(StemConvReadsPlain(g, node_writing("p32"), 16));
  EXPECT_FALSE(StemConvReadsPlain(g, node_writing("c32"), 16));  // 32 input channels.
  // The stem and the conv after it run blocked where convs are brgemm ones; the Concat stays
  // blocked. The stem whose chain reaches no Concat runs channels-last, as its reader.
  EXPECT_FALSE(ConvRunsChannelsLast(g, stem, 16, true));
  EXPECT_FALSE(ConvRunsChannelsLast(g, node_writing("c32"), 16, true));
  EXPECT_TRUE(KeptBlocked(g, cat, 16));
  EXPECT_TRUE(ConvRunsChannelsLast(g, node_writing("p32"), 16, true));
  EXPECT_TRUE(ConvRunsChannelsLast(g, node_writing("p32b"), 16, true));
}

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
  ASSERT_TRUE(StemConvReadsPlain(g, g.node(0), Block()));
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

// oneDNN pools a kept tensor in the layout it is stored in: a pooling of a channels-last stem's
// output writes channels-last, and the conv reading it runs so although its channels share a block.
TEST(BlockedLayout, APoolingKeepsTheLayoutOfItsInput) {
  IrBuilder b;
  TensorId c1 = b.Act("c1", {1, 32, 8, 8}), p = b.Act("p", {1, 32, 4, 4});
  TensorId y = b.Act("y", {1, 32, 4, 4});
  b.Op("Conv", {b.Input("stem", {1, 3, 8, 8}), b.Weight("w1", {32, 3, 1, 1})}, {c1});
  b.Op("MaxPool", {c1}, {p}, {Ints("kernel_shape", {2, 2}), Ints("strides", {2, 2})});
  b.Op("Conv", {p, b.Weight("w2", {32, 32, 1, 1})}, {y});
  b.Output(y);
  Graph g = b.Build();
  EXPECT_TRUE(StoredChannelsLast(g, c1, 16, true));
  EXPECT_TRUE(StoredChannelsLast(g, p, 16, true));
  EXPECT_TRUE(ConvRunsChannelsLast(g, g.node(2), 16, true));
  EXPECT_FALSE(StoredChannelsLast(g, p, 16, false));
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
  // [Add, Relu, Mul] reads blocked r1 and Conv b's output, but the per-channel Mul cannot run on
  // blocked data: it gets plain copies.
  FusionPlan plan{
      {FusionGroup{GroupKind::kSingle, {0}, {}}, FusionGroup{GroupKind::kSingle, {1}, {}},
       FusionGroup{GroupKind::kSingle, {2}, {}}, FusionGroup{GroupKind::kLoop, {3, 4, 6}, {}},
       FusionGroup{GroupKind::kSingle, {5}, {}}}};
  ASSERT_TRUE(CheckPlan(g, plan).ok()) << CheckPlan(g, plan).ToString();
  d = ExpectMatches(g, plan, {rb.r1, rb.r2});
  EXPECT_NE(d.find("blocked input(s) reordered to plain"), std::string::npos) << d;
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
