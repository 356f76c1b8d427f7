// Which tensors stay in oneDNN's channel-blocked or channels-last layout between groups, and which
// stem convs read the plain image (lowering/layout.h): rules of the graph, for given ISAs.
#include "lowering/layout.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <string>

#include "lowering/group_lowering.h"
#include "lowering/kernel_form.h"
#include "lowering/reorders.h"
#include "tests/graph/ir_builder.h"
#include "tests/lowering/concat_module.h"
#include "tests/lowering/reduce_branch.h"
#include "tests/lowering/residual_block.h"
#include "tests/lowering/se_block.h"

namespace fusor {
namespace {

using testing::BuildConcatModule;
using testing::ConcatModule;
using testing::Extra;
using testing::Ints;
using testing::IrBuilder;
using testing::MakeResidualBlock;
using testing::ResidualBlock;
using testing::SeBlock;

TEST(BlockedLayout, WhichTensorsStayBlocked) {
  ResidualBlock rb = MakeResidualBlock(16);
  const Graph& g = rb.g;
  EXPECT_TRUE(KeptBlocked(g, rb.r1, {8, true}));  // Relu -> Conv and the residual Add.
  // Read by a Mul of a broadcast over channels and rows: not flat.
  EXPECT_FALSE(KeptBlocked(g, rb.r2, {8, true}));
  EXPECT_FALSE(KeptBlocked(g, rb.y, {8, true}));   // A graph output.
  EXPECT_FALSE(KeptBlocked(g, 0, {8, true}));      // The graph input.
  EXPECT_FALSE(KeptBlocked(g, rb.r1, {0, true}));  // No blocked layout on this ISA.
  // 12 channels would pad nChw8c: kept channels-last instead.
  const Graph partial = MakeResidualBlock(12).g;
  EXPECT_TRUE(KeptBlocked(partial, rb.r1, {8, true}));
  EXPECT_TRUE(StoredChannelsLast(partial, rb.r1, {8, true}));
  // A flat Add writes blocked only when it reads blocked: not with a graph input operand.
  IrBuilder b;
  Shape d = {1, 8, 4, 4};
  TensorId x = b.Input("x", d), a = b.Act("a", d), s = b.Act("s", d), y = b.Act("y", d);
  b.Op("Conv", {x, b.Weight("w1", {8, 8, 1, 1})}, {a});
  b.Op("Add", {a, b.Input("residual", d)}, {s});
  b.Op("Conv", {s, b.Weight("w2", {8, 8, 1, 1})}, {y});
  b.Output(y);
  Graph flat = b.Build();
  EXPECT_TRUE(KeptBlocked(flat, a, {8, true}));
  EXPECT_FALSE(KeptBlocked(flat, s, {8, true}));
  EXPECT_EQ(ChannelBlockForIsa("avx2"), 8);
  EXPECT_EQ(ChannelBlockForIsa("avx512_core"), 16);
  EXPECT_EQ(ChannelBlockOf(32, 16), 16);
  EXPECT_EQ(ChannelBlockOf(24, 16), 8);
  EXPECT_EQ(ChannelBlockOf(32, 8), 8);
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
  for (NodeId n : {0, 2, 3, 4, 5}) EXPECT_TRUE(ConvRunsChannelsLast(g, g.node(n), {16, true})) << n;
  EXPECT_FALSE(ConvRunsChannelsLast(g, g.node(6), {16, true}));
  for (TensorId t : {c1, r1, a, q}) EXPECT_TRUE(StoredChannelsLast(g, t, {16, true})) << t;
  EXPECT_FALSE(StoredChannelsLast(g, y, {16, true}));  // A graph output: plain.
  // Without brgemm convs everything is channel-blocked.
  EXPECT_FALSE(ConvRunsChannelsLast(g, g.node(0), {16, false}));
  EXPECT_FALSE(StoredChannelsLast(g, r1, {16, false}));
  // With blocks of 8 (AVX2), 24 and 144 channels share one block (nChw8c), so only that chain
  // runs blocked; 3 against 32 channels still share none.
  EXPECT_TRUE(ConvRunsChannelsLast(g, g.node(0), {8, true}));
  EXPECT_TRUE(StoredChannelsLast(g, r1, {8, true}));
  EXPECT_FALSE(ConvRunsChannelsLast(g, g.node(4), {8, true}));
  EXPECT_FALSE(StoredChannelsLast(g, q, {8, true}));
}

// oneDNN 3.7 has brgemm convs (brg_conv_fwd, brgconv_1x1) from AVX2 on, not on AVX or SSE4.1.
TEST(BlockedLayout, BrgemmConvsRunOnAvx2AndEveryAvx512Isa) {
  for (const char* isa : {"avx2", "avx2_vnni", "avx512_core", "avx512_core_vnni",
                          "avx512_core_bf16", "avx512_core_amx"}) {
    EXPECT_TRUE(BrgemmConvsForIsa(isa)) << isa;
  }
  for (const char* isa : {"avx", "sse41", "other"}) EXPECT_FALSE(BrgemmConvsForIsa(isa)) << isa;
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
  for (int64_t block : {16, 8}) EXPECT_TRUE(StemConvReadsPlain(g, stem, {block, true})) << block;
  EXPECT_FALSE(StemConvReadsPlain(g, stem, {0, true}));  // No blocked layout on this ISA.
  auto node_writing = [&](const std::string& name) {
    for (const Node& n : g.nodes()) {
      if (g.tensor(n.outputs[0]).name == name) return n;
    }
    ADD_FAILURE() << name;
    return g.node(0);
  };
  EXPECT_FALSE(StemConvReadsPlain(g, node_writing("s24"), {16, true}));
  EXPECT_FALSE(StemConvReadsPlain(g, node_writing("s48"), {16, true}));
  EXPECT_FALSE(StemConvReadsPlain(g, node_writing("p32"), {16, true}));
  EXPECT_FALSE(StemConvReadsPlain(g, node_writing("c32"), {16, true}));  // 32 input channels.
  // The stem and the conv after it run blocked where convs are brgemm ones; the Concat stays
  // blocked. The stem whose chain reaches no Concat runs channels-last, as its reader.
  EXPECT_FALSE(ConvRunsChannelsLast(g, stem, {16, true}));
  EXPECT_FALSE(ConvRunsChannelsLast(g, node_writing("c32"), {16, true}));
  EXPECT_TRUE(KeptBlocked(g, cat, {16, true}));
  EXPECT_TRUE(ConvRunsChannelsLast(g, node_writing("p32"), {16, true}));
  EXPECT_TRUE(ConvRunsChannelsLast(g, node_writing("p32b"), {16, true}));
  // Without brgemm convs (AVX, SSE4.1: blocks of 8) oneDNN's first-layer kernel is its own choice
  // for every stem conv, whatever its chain reaches; a grouped conv still has none.
  for (const char* name : {"s32", "s24", "p32"}) {
    EXPECT_TRUE(StemConvReadsPlain(g, node_writing(name), {8, false})) << name;
  }
  EXPECT_FALSE(StemConvReadsPlain(g, node_writing("s48"), {8, false}));
  EXPECT_FALSE(ConvRunsChannelsLast(g, node_writing("p32b"), {8, false}));
}

// Without brgemm convs (AVX, SSE4.1) no conv runs channels-last and no tensor is kept so: channels
// of partial blocks stay plain, whole blocks stay channel-blocked.
TEST(BlockedLayout, WithoutBrgemmConvsPartialBlocksStayPlainAndNothingIsChannelsLast) {
  const LayoutTarget avx{8, false};
  ResidualBlock whole = MakeResidualBlock(16);
  EXPECT_TRUE(KeptBlocked(whole.g, whole.r1, avx));
  EXPECT_FALSE(StoredChannelsLast(whole.g, whole.r1, avx));
  ResidualBlock partial = MakeResidualBlock(12);
  EXPECT_FALSE(KeptBlocked(partial.g, partial.r1, avx));
  EXPECT_FALSE(StoredChannelsLast(partial.g, partial.r1, avx));
  for (const Node& n : partial.g.nodes()) EXPECT_FALSE(ConvRunsChannelsLast(partial.g, n, avx));
}

// Without brgemm convs a grouped conv of 4 channels a group has no blocked kernel (oneDNN runs it
// as gemm on plain buffers), so the tensor it reads is not kept; a depthwise conv has one.
TEST(BlockedLayout, WithoutBrgemmConvsAGroupedConvOfPartialBlocksAGroupReadsPlain) {
  IrBuilder b;
  TensorId a = b.Act("a", {1, 32, 8, 8}), r = b.Act("r", {1, 32, 8, 8});
  TensorId y = b.Act("y", {1, 32, 8, 8}), z = b.Act("z", {1, 32, 8, 8});
  b.Op("Conv", {b.Input("x", {1, 16, 8, 8}), b.Weight("wa", {32, 16, 1, 1})}, {a});
  b.Op("Relu", {a}, {r});
  b.Op("Conv", {r, b.Weight("wy", {32, 4, 3, 3})}, {y},
       {testing::Int("group", 8), Ints("pads", {1, 1, 1, 1})});
  b.Op("Conv", {r, b.Weight("wz", {32, 1, 3, 3})}, {z},
       {testing::Int("group", 32), Ints("pads", {1, 1, 1, 1})});
  b.Output(y);
  b.Output(z);
  Graph g = b.Build();
  EXPECT_TRUE(ConvHasNoBlockedKernel(g, g.node(2), {8, false}));
  EXPECT_FALSE(ConvHasNoBlockedKernel(g, g.node(3), {8, false}));  // Depthwise.
  EXPECT_FALSE(ConvHasNoBlockedKernel(g, g.node(2), {8, true}));
  EXPECT_FALSE(KeptBlocked(g, r, {8, false}));
  EXPECT_TRUE(KeptBlocked(g, r, {8, true}));
}

// A Concat of two convs reading a plain 12-channel input: convs whose channels share no block run
// channels-last where they are brgemm ones, and reorder their destinations into the Concat's
// blocked parts; without brgemm convs they write the channel-blocked parts. The Concat stays
// blocked either way.
TEST(BlockedLayout, AConcatOfConvsOfAPlainInputStaysBlockedWhateverFormTheConvsRunIn) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 12, 8, 8});
  TensorId l = b.Act("l", {1, 32, 8, 8}), r = b.Act("r", {1, 32, 8, 8});
  TensorId cat = b.Act("cat", {1, 64, 8, 8}), y = b.Act("y", {1, 16, 8, 8});
  b.Op("Conv", {x, b.Weight("wl", {32, 12, 1, 1})}, {l});
  b.Op("Conv", {x, b.Weight("wr", {32, 12, 1, 1})}, {r});
  b.Op("Concat", {l, r}, {cat}, {testing::Int("axis", 1)});
  b.Op("Conv", {cat, b.Weight("wy", {16, 64, 1, 1})}, {y});
  b.Output(y);
  Graph g = b.Build();
  EXPECT_TRUE(ConvRunsChannelsLast(g, g.node(0), {8, true}));
  for (TensorId t : {l, r, cat}) {
    EXPECT_TRUE(KeptBlocked(g, t, {8, true})) << g.tensor(t).name;
    EXPECT_FALSE(StoredChannelsLast(g, t, {8, true})) << g.tensor(t).name;
  }
  EXPECT_FALSE(ConvRunsChannelsLast(g, g.node(0), {8, false}));
  for (TensorId t : {l, r, cat}) EXPECT_TRUE(KeptBlocked(g, t, {8, false})) << g.tensor(t).name;
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
  EXPECT_TRUE(StoredChannelsLast(g, c1, {16, true}));
  EXPECT_TRUE(StoredChannelsLast(g, p, {16, true}));
  EXPECT_TRUE(ConvRunsChannelsLast(g, g.node(2), {16, true}));
  EXPECT_FALSE(StoredChannelsLast(g, p, {16, false}));
}

// Channels that are no whole block (72, 24 on a 16-wide host) are kept channels-last where a conv
// writes them: a -> Conv 16->72 -> e -> depthwise -> d -> Conv 72->24 -> p -> MaxPool -> m ->
// Conv 24->24 -> y, the 16->72 conv reading the channel-blocked a through a transposing reorder,
// and where a GlobalAveragePool reads them (e2); not where a Concat (e3, e4) reads them.
TEST(BlockedLayout, PartialBlocksAreKeptChannelsLastWhereAConvWritesThem) {
  IrBuilder b;
  auto conv = [&](const std::string& name, TensorId x, int64_t in, int64_t out, int64_t group,
                  int64_t size) {
    TensorId y = b.Act(name, {1, out, size, size});
    b.Op("Conv", {x, b.Weight("w_" + name, {out, in / group, 1, 1})}, {y},
         {testing::Int("group", group)});
    return y;
  };
  TensorId a = conv("a", b.Input("x", {1, 16, 8, 8}), 16, 16, 1, 8);
  TensorId e = conv("e", a, 16, 72, 1, 8);
  TensorId d = conv("d", e, 72, 72, 72, 8);
  TensorId p = conv("p", d, 72, 24, 1, 8);
  TensorId m = b.Act("m", {1, 24, 4, 4});
  b.Op("MaxPool", {p}, {m}, {Ints("kernel_shape", {2, 2}), Ints("strides", {2, 2})});
  b.Output(conv("y", m, 24, 24, 1, 4));
  TensorId e2 = conv("e2", a, 16, 40, 1, 8), g2 = b.Act("g2", {1, 40, 1, 1});
  b.Op("GlobalAveragePool", {e2}, {g2});
  b.Output(g2);
  TensorId e3 = conv("e3", a, 16, 24, 1, 8), e4 = conv("e4", a, 16, 24, 1, 8);
  TensorId cat = b.Act("cat", {1, 48, 8, 8});
  b.Op("Concat", {e3, e4}, {cat}, {testing::Int("axis", 1)});
  b.Output(cat);
  Graph g = b.Build();
  auto writer = [&](TensorId t) { return g.node(g.tensor(t).producer); };
  EXPECT_TRUE(KeptBlocked(g, a, {16, true}));
  EXPECT_FALSE(StoredChannelsLast(g, a, {16, true}));
  for (TensorId t : {e, d, p, m}) {
    EXPECT_TRUE(KeptBlocked(g, t, {16, true})) << g.tensor(t).name;
    EXPECT_TRUE(StoredChannelsLast(g, t, {16, true})) << g.tensor(t).name;
  }
  for (TensorId t : {e, d, p}) EXPECT_TRUE(ConvRunsChannelsLast(g, writer(t), {16, true}));
  EXPECT_TRUE(PoolingRunsBlocked(g, writer(m), {16, true}));
  EXPECT_TRUE(KeptBlocked(g, e2, {16, true}));
  EXPECT_TRUE(StoredChannelsLast(g, e2, {16, true}));
  for (TensorId t : {e3, e4}) {
    EXPECT_FALSE(KeptBlocked(g, t, {16, true})) << g.tensor(t).name;
    EXPECT_FALSE(ConvRunsChannelsLast(g, writer(t), {16, true})) << g.tensor(t).name;
  }
  // With blocks of 8 all of them are whole blocks: channel-blocked.
  EXPECT_FALSE(StoredChannelsLast(g, e, {8, true}));
  EXPECT_FALSE(ConvRunsChannelsLast(g, writer(e), {8, true}));
  // The 16->72 conv alone: its blocked input transposed in, its output written as it is kept.
  FusionGroup group;
  group.kind = GroupKind::kSingle;
  group.nodes = {g.tensor(e).producer};
  std::vector<LayoutReorder> reorders = LowerReorders(g, group, {a}, {e}, LayoutTarget{16, true});
  ASSERT_EQ(reorders.size(), 1u);
  EXPECT_EQ(reorders[0].tensor, a);
  EXPECT_EQ(reorders[0].kind, ReorderKind::kIn);
  EXPECT_TRUE(reorders[0].transposed);
}

// A squeeze-and-excite block keeps its tensors in the convs' layout: the GlobalAveragePool reads
// the SiLU's output as stored, and the per-channel Mul reads it and writes the projection conv's
// input as stored, a loop over the stored form's dims with the [1,C,1,1] scale read in place.
TEST(BlockedLayout, ASqueezeAndExciteBlockKeepsItsTensorsInTheConvsLayout) {
  struct Case {
    int64_t channels;
    LayoutTarget target;
    bool channels_last;
    Shape stored;  // The excited tensor's dims as stored.
  };
  for (const Case& c :
       {Case{32, {16, true}, false, {1, 2, 8, 8, 16}}, Case{40, {16, true}, true, {1, 8, 8, 40}},
        Case{40, {8, true}, false, {1, 5, 8, 8, 8}}}) {
    SeBlock se = testing::MakeSeBlock(c.channels);
    const Graph& g = se.g;
    SCOPED_TRACE(std::to_string(c.channels) + " channels, block " + std::to_string(c.target.block));
    for (TensorId t : {se.act, se.excited}) {
      EXPECT_TRUE(KeptBlocked(g, t, c.target)) << g.tensor(t).name;
      EXPECT_EQ(StoredChannelsLast(g, t, c.target), c.channels_last) << g.tensor(t).name;
    }
    EXPECT_FALSE(KeptBlocked(g, se.scale, c.target));  // One pixel: plain.
    // The pooling reads the kept tensor in place: oneDNN's pooling, no reorder.
    FusionGroup pool{GroupKind::kSingle, {se.pool}, {}};
    EXPECT_TRUE(GlobalPoolReadsKept(g, pool, c.target));
    GroupLowering pooled = LowerGroup(g, pool, {se.act}, {se.pooled}, c.target);
    EXPECT_EQ(pooled.form, KernelForm::kReductionPrimitive);
    EXPECT_TRUE(pooled.reorders.empty());
    // The Mul (with the scale's Sigmoid) runs over the stored form: no reorder, the scale read
    // as [1,1,1,C] or [1,C/b,1,1,b].
    const NodeId sigmoid = g.tensor(se.scale).producer;
    FusionGroup excite{GroupKind::kLoop, {sigmoid, se.excite}, {}};
    const TensorId expanded = g.node(sigmoid).inputs[0];
    GroupLowering mul = LowerGroup(g, excite, {expanded, se.act}, {se.excited}, c.target);
    EXPECT_EQ(mul.form, KernelForm::kFusedLoop);
    EXPECT_TRUE(mul.reorders.empty());
    ASSERT_NE(mul.storage_view, nullptr);
    EXPECT_EQ(mul.storage_view->tensor(se.excited).dims, c.stored);
    EXPECT_EQ(NumElements(mul.storage_view->tensor(se.scale).dims), c.channels);
    // Without a layout target all is plain and the loop is over the model's graph.
    EXPECT_EQ(LowerGroup(g, excite, {se.excited}).storage_view, nullptr);
  }
  // A broadcast over channels and pixels at once has no such bytes: [1,C,8,1] is no storage-free
  // broadcast of [1,C,8,8].
  EXPECT_TRUE(IsStorageFreeBroadcast({32, 1, 1}, {1, 32, 8, 8}));
  EXPECT_TRUE(IsStorageFreeBroadcast({1, 1, 8, 8}, {1, 32, 8, 8}));
  EXPECT_FALSE(IsStorageFreeBroadcast({1, 32, 8, 1}, {1, 32, 8, 8}));
  EXPECT_FALSE(IsStorageFreeBroadcast({1, 32, 8, 8}, {1, 32, 8, 8}));  // A full operand.
}

// A branch that reduces to 24 channels (kept channels-last on a 16-wide host) and widens again
// into a Concat's part: the 3x3 conv reading the channels-last tensor runs so, and its Relu's
// output, the part, is still stored blocked, so the Concat stays blocked in place. The anchor
// [Conv, Relu] reorders its destination into the part (a transpose); the Relu alone reads a plain
// copy and writes the part through a blocked reorder.
TEST(InPlaceConcat, APartAfterAChannelsLastConvIsStillStoredBlocked) {
  testing::ReduceBranch rb = testing::MakeReduceBranch();
  const Graph& g = rb.g;
  const LayoutTarget target{16, true};
  EXPECT_TRUE(KeptBlocked(g, rb.r, target));
  EXPECT_TRUE(StoredChannelsLast(g, rb.r, target));
  const NodeId conv = g.tensor(rb.c).producer, relu = g.tensor(rb.p2).producer;
  EXPECT_TRUE(ConvRunsChannelsLast(g, g.node(conv), target));
  EXPECT_TRUE(StoredChannelsLast(g, rb.c, target));
  for (TensorId t : {rb.p2, rb.cat, rb.a}) {
    EXPECT_TRUE(KeptBlocked(g, t, target)) << g.tensor(t).name;
    EXPECT_FALSE(StoredChannelsLast(g, t, target)) << g.tensor(t).name;
  }
  std::vector<LayoutReorder> anchor =
      LowerReorders(g, FusionGroup{GroupKind::kAnchor, {conv, relu}, {}}, {rb.r}, {rb.p2}, target);
  ASSERT_EQ(anchor.size(), 1u);
  EXPECT_EQ(anchor[0].tensor, rb.p2);
  EXPECT_EQ(anchor[0].kind, ReorderKind::kOut);
  EXPECT_TRUE(anchor[0].transposed);
  const FusionGroup alone{GroupKind::kSingle, {relu}, {}};
  EXPECT_FALSE(RunsFlatOnBlocked(g, alone, {rb.c}, {rb.p2}, target));
  std::vector<LayoutReorder> loop = LowerReorders(g, alone, {rb.c}, {rb.p2}, target);
  ASSERT_EQ(loop.size(), 2u);
  EXPECT_EQ(loop[0].kind, ReorderKind::kPlainCopy);
  EXPECT_TRUE(loop[0].transposed);
  EXPECT_EQ(loop[1].kind, ReorderKind::kBlockedOut);
  EXPECT_FALSE(loop[1].transposed);
  // With blocks of 8, 24 channels are whole blocks: no channels-last at all.
  EXPECT_FALSE(StoredChannelsLast(g, rb.r, {8, true}));
  EXPECT_FALSE(ConvRunsChannelsLast(g, g.node(conv), {8, true}));
}

TEST(InPlaceConcat, WholeChannelBlocksOfOneImageStayBlockedThroughTheConcat) {
  auto kept = [](int64_t n, int64_t cx, int64_t b_channels, Extra extra, int64_t block) {
    ConcatModule m;
    BuildConcatModule(&m, n, cx, b_channels, extra);
    const Graph& g = m.b.Linked();
    const LayoutTarget target{block, true};
    const bool all = AllPartsKept(m, target);
    // Never some parts blocked and others not: the Concat reads and writes one layout.
    EXPECT_EQ(KeptBlocked(g, m.a, target), all);
    EXPECT_EQ(KeptBlocked(g, m.c, target), all);
    return all;
  };
  EXPECT_TRUE(kept(1, 16, 32, Extra::kNone, 16));
  EXPECT_TRUE(kept(1, 16, 32, Extra::kNone, 8));
  EXPECT_FALSE(kept(2, 16, 32, Extra::kNone, 16));  // Channels of two images: strided slices.
  EXPECT_FALSE(kept(1, 16, 8, Extra::kNone, 16));   // 8 channels are half a block of 16,
  EXPECT_TRUE(kept(1, 16, 8, Extra::kNone, 8));     // a whole block of 8.
  EXPECT_FALSE(kept(1, 16, 32, Extra::kFlattenOfTheWhole, 16));
  EXPECT_FALSE(kept(1, 16, 32, Extra::kSecondConcatOfAPart, 16));
  EXPECT_FALSE(kept(1, 16, 32, Extra::kConcatOfTheWhole, 16));
  // A conv on a 24-channel plain input runs channels-last where convs are brgemm ones (at 16), and
  // reorders its destination into the blocked part; blocks of 8 have no such convs. A 3-channel
  // stem writes blocked.
  EXPECT_TRUE(kept(1, 24, 32, Extra::kNone, 16));
  EXPECT_TRUE(kept(1, 24, 32, Extra::kNone, 8));
  EXPECT_TRUE(kept(1, 3, 32, Extra::kNone, 16));
}

}  // namespace
}  // namespace fusor
