// Each lowering (anchor post-ops, BatchNormalization folding, reductions with prologues and
// epilogues, fused loops over injective ops, eltwise/binary primitive chains) against the
// reference interpreter on small graphs, with real oneDNN.
#include <gtest/gtest.h>

#include "graph/canonical.h"
#include "graph/node_attrs.h"
#include "graph/op_registry.h"
#include "graph/plan.h"
#include "graph/plan_json.h"
#include "lowering/group_lowering.h"
#include "lowering/kernel_form.h"
#include "lowering/layout.h"
#include "lowering/loop_lowering.h"
#include "lowering/plan_legality.h"
#include "runtime/executor.h"
#include "runtime/fused_loop.h"
#include "runtime/group_kernel.h"
#include "runtime/onednn_info.h"
#include "runtime/reference.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::Int;
using testing::Ints;
using testing::IrBuilder;

FusionPlan OneGroup(GroupKind kind, std::vector<NodeId> nodes) {
  return FusionPlan{{FusionGroup{kind, std::move(nodes), {}}}};
}

// Runs `plan` through the executor and checks every graph output against the reference.
void ExpectMatchesReference(const Graph& g, const FusionPlan& plan,
                            ChainBackend backend = ChainBackend::kFusedLoop,
                            std::string* description = nullptr) {
  auto leaves = RandomLeafValues(g, 11);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  auto want = RunReference(g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ExecutorOptions options;
  options.chain_backend = backend;
  auto exec = Executor::Create(g, plan, *leaves, options);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  (*exec)->Run();
  (*exec)->Run();  // A second run must not depend on state the first one left behind.
  for (size_t i = 0; description && i < (*exec)->num_groups(); ++i) {
    *description += (*exec)->DescribeGroup(i) + "\n";
  }
  for (const auto& [t, value] : *want) {
    auto got = (*exec)->Read(t);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    auto c = Compare(value, *got);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_LE(c->worst_ratio, 1.0) << g.tensor(t).name << ": " << c->ToString();
  }
}

// Appends BatchNormalization -> Relu -> Add(residual input) after the anchor output `c` (dims
// [N, C, ...]), the graph's output; runs the four nodes as one anchor group and returns how the
// executor lowered it.
std::string RunWithBatchNormReluResidual(IrBuilder& b, TensorId c, const Shape& dims) {
  int64_t ch = dims[1];
  TensorId bn = b.Act("bn", dims), relu = b.Act("relu", dims), y = b.Act("y", dims);
  b.Op("BatchNormalization",
       {c, b.Weight("s", {ch}), b.Weight("bb", {ch}), b.Weight("m", {ch}), b.Weight("v", {ch})},
       {bn});
  b.Op("Relu", {bn}, {relu});
  b.Op("Add", {relu, b.Input("res", dims)}, {y});
  b.Output(y);
  Graph g = b.Build();
  std::string described;
  ExpectMatchesReference(g, OneGroup(GroupKind::kAnchor, {0, 1, 2, 3}), ChainBackend::kFusedLoop,
                         &described);
  ExpectMatchesReference(g, UnfusedPlan(g));
  return described;
}

TEST(AnchorKernel, ConvFoldsBatchNormAndTakesReluAndResidualAsPostOps) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 16, 8, 8});
  TensorId w = b.Weight("w", {16, 16, 3, 3});
  TensorId c = b.Act("c", {1, 16, 8, 8});
  b.Op("Conv", {x, w}, {c}, {Ints("pads", {1, 1, 1, 1})});
  std::string described = RunWithBatchNormReluResidual(b, c, {1, 16, 8, 8});
  EXPECT_NE(described.find("2/2 chain nodes as post-ops"), std::string::npos) << described;
}

TEST(AnchorKernel, DepthwiseStridedConvWithClipPowAndRepeatedLinearPostOps) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 8, 9, 9});
  TensorId c = b.Act("c", {1, 8, 5, 5}), clip = b.Act("clip", {1, 8, 5, 5});
  TensorId half = b.Act("half", {1, 8, 5, 5}), sq = b.Act("sq", {1, 8, 5, 5});
  TensorId y = b.Act("y", {1, 8, 5, 5});
  b.Op("Conv", {x, b.Weight("w", {8, 1, 3, 3}), b.Weight("bias", {8})}, {c},
       {Int("group", 8), Ints("strides", {2, 2}), Ints("pads", {1, 1, 1, 1})});
  b.Op("Clip", {c, b.FloatScalar("lo", 0), b.FloatScalar("hi", 6)}, {clip});
  b.Op("Mul", {clip, b.FloatScalar("k", 0.5)}, {half});
  b.Op("Pow", {half, b.FloatScalar("two", 2)}, {sq});
  // A second linear map, not adjacent to the first: oneDNN 2.6 would reuse the first one's
  // constants, so the lowering ends the post-ops before it and runs it as the in-place tail loop.
  b.Op("Add", {sq, b.FloatScalar("one", 1)}, {y});
  b.Output(y);
  Graph g = b.Build();
  std::string described;
  ExpectMatchesReference(g, OneGroup(GroupKind::kAnchor, {0, 1, 2, 3, 4}), ChainBackend::kFusedLoop,
                         &described);
  EXPECT_NE(described.find("3/4 chain nodes as post-ops"), std::string::npos) << described;
  EXPECT_NE(described.find("tail loop [Add]"), std::string::npos) << described;
}

TEST(AnchorKernel, BatchedMatMulWithBroadcastAndBiasOperandFirst) {
  IrBuilder b;
  TensorId a = b.Input("a", {3, 4, 5});
  TensorId m = b.Input("m", {1, 5, 6});
  TensorId mm = b.Act("mm", {3, 4, 6}), y = b.Act("y", {3, 4, 6}), z = b.Act("z", {3, 4, 6});
  b.Op("MatMul", {a, m}, {mm});
  b.Op("Add", {b.Weight("bias", {6}), mm}, {y});
  b.Op("Sub", {y, b.Weight("k", {3, 1, 1})}, {z});
  b.Output(z);
  Graph g = b.Build();
  ExpectMatchesReference(g, OneGroup(GroupKind::kAnchor, {0, 1, 2}));
}

TEST(AnchorKernel, MatMulWithWeightsCollapsesLeadingDims) {
  IrBuilder b;
  TensorId a = b.Input("a", {8, 1, 32});
  TensorId mm = b.Act("mm", {8, 1, 16}), y = b.Act("y", {8, 1, 16});
  b.Op("MatMul", {a, b.Weight("w", {32, 16})}, {mm});
  b.Op("Div", {mm, b.FloatScalar("d", 4.0)}, {y});
  b.Output(y);
  Graph g = b.Build();
  ExpectMatchesReference(g, OneGroup(GroupKind::kAnchor, {0, 1}));
}

TEST(AnchorKernel, GemmTransposedWithAlphaBeta) {
  IrBuilder b;
  TensorId a = b.Input("a", {7, 3});
  TensorId y = b.Act("y", {3, 5}), r = b.Act("r", {3, 5});
  b.Op("Gemm", {a, b.Weight("w", {5, 7}), b.Weight("c", {5})}, {y},
       {Int("transA", 1), Int("transB", 1), {"alpha", 0.5}, {"beta", 2.0}});
  b.Op("Tanh", {y}, {r});
  b.Output(r);
  Graph g = b.Build();
  ExpectMatchesReference(g, OneGroup(GroupKind::kAnchor, {0, 1}));
}

TEST(ReductionKernel, VariancePrologueFusedIntoRowReduction) {
  IrBuilder b;
  TensorId x = b.Input("x", {2, 4, 64});
  TensorId d = b.Act("d", {2, 4, 64}), sq = b.Act("sq", {2, 4, 64}), var = b.Act("var", {2, 4, 1});
  TensorId eps = b.Act("eps", {2, 4, 1}), sd = b.Act("sd", {2, 4, 1});
  b.Op("Mul", {x, b.FloatScalar("k", 0.5)}, {d});
  b.Op("Pow", {d, b.FloatScalar("two", 2)}, {sq});
  b.Op("ReduceMean", {sq}, {var}, {Ints("axes", {-1})});
  b.Op("Add", {var, b.FloatScalar("e", 1e-5)}, {eps});
  b.Op("Sqrt", {eps}, {sd});
  b.Output(sd);
  Graph g = b.Build();
  std::string described;
  ExpectMatchesReference(g, OneGroup(GroupKind::kReduction, {0, 1, 2, 3, 4}),
                         ChainBackend::kFusedLoop, &described);
  EXPECT_NE(described.find("fused row reduction"), std::string::npos) << described;
}

// The row reduction pulls its prologue as its record says (GroupLowering::prologue_pulls); a
// record whose pulls would put more rows in one pull than a tile holds is refused, naming them.
TEST(ReductionKernel, ARowReductionPullsAsItsRecordSaysAndRefusesPullsThatOverrunATile) {
  IrBuilder b;
  TensorId x = b.Input("x", {8, 1024});
  TensorId d = b.Act("d", {8, 1024}), m = b.Act("m", {8, 1});
  b.Op("Mul", {x, b.FloatScalar("k", 0.5)}, {d});
  b.Op("ReduceMean", {d}, {m}, {Ints("axes", {-1})});
  b.Output(m);
  Graph g = b.Build();
  const FusionGroup group{GroupKind::kReduction, {0, 1}, {}};
  GroupLowering record = LowerGroup(g, group, {m});
  ASSERT_EQ(record.form, KernelForm::kRowReduction);
  EXPECT_EQ(record.prologue_pulls, 2);  // Four rows of 1024 a pull.
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  KernelContext ctx;
  ctx.g = &g;
  ctx.engine = &engine;
  ctx.stream = &stream;
  ctx.known = [](TensorId) -> const HostTensor* { return nullptr; };
  ctx.outputs = {m};
  EXPECT_TRUE(BuildRowReductionKernel(ctx, record).ok());
  record.prologue_pulls = 1;  // Eight rows of 1024 in one pull: twice a tile.
  auto overrun = BuildRowReductionKernel(ctx, record);
  ASSERT_FALSE(overrun.ok());
  EXPECT_NE(overrun.status().message().find("1 prologue pulls do not fit 8 rows of 1024"),
            std::string::npos)
      << overrun.status().message();
  ExpectMatchesReference(g, FusionPlan{{group}});
}

TEST(ReductionKernel, SoftmaxWithPrologueAndPoolingWithEpilogue) {
  IrBuilder b;
  TensorId x = b.Input("x", {3, 10});
  TensorId s = b.Act("s", {3, 10}), sm = b.Act("sm", {3, 10}), sm2 = b.Act("sm2", {3, 10});
  b.Op("Mul", {x, b.FloatScalar("k", 0.125)}, {s});
  b.Op("Softmax", {s}, {sm}, {Int("axis", -1)});
  b.Op("Mul", {sm, b.Weight("scale", {10})}, {sm2});
  TensorId img = b.Input("img", {1, 8, 7, 7});
  TensorId mp = b.Act("mp", {1, 8, 4, 4}), r = b.Act("r", {1, 8, 4, 4});
  b.Op("MaxPool", {img}, {mp},
       {Ints("kernel_shape", {3, 3}), Ints("strides", {2, 2}), Int("ceil_mode", 1)});
  b.Op("Relu", {mp}, {r});
  b.Output(sm2);
  b.Output(r);
  Graph g = b.Build();
  FusionPlan plan{{FusionGroup{GroupKind::kReduction, {0, 1, 2}, {}},
                   FusionGroup{GroupKind::kReduction, {3, 4}, {}}}};
  ExpectMatchesReference(g, plan);
  // Without the prologue the softmax is oneDNN's, and its epilogue a post-op or the tail loop.
  IrBuilder b2;
  TensorId x2 = b2.Input("x", {3, 10});
  TensorId e = b2.Act("e", {3, 10}), f = b2.Act("f", {3, 10});
  b2.Op("Softmax", {x2}, {e}, {Int("axis", -1)});
  b2.Op("Mul", {e, b2.Weight("scale", {10})}, {f});
  b2.Output(f);
  Graph g2 = b2.Build();
  ExpectMatchesReference(g2, OneGroup(GroupKind::kReduction, {0, 1}));
}

// 4-D pooling, batch 2, with a Relu epilogue: 24 channels (no whole 16-channel block: plain NCHW
// on an AVX-512 host, no reorders; channel-blocked by 8 elsewhere) and 32 channels (blocked on
// every host), MaxPool and AveragePool with padding.
TEST(ReductionKernel, PoolingOnChannelsThatAreNoWholeBlock) {
  const bool avx512 = ChannelBlockForIsa(OneDnnIsa()) == 16;
  for (int64_t channels : {24, 32}) {
    for (std::string op : {"MaxPool", "AveragePool"}) {
      SCOPED_TRACE(op + " on " + std::to_string(channels) + " channels");
      IrBuilder b;
      TensorId x = b.Input("x", {2, channels, 15, 15});
      TensorId p = b.Act("p", {2, channels, 8, 8}), r = b.Act("r", {2, channels, 8, 8});
      b.Op(op, {x}, {p},
           {Ints("kernel_shape", {3, 3}), Ints("strides", {2, 2}), Ints("pads", {1, 1, 1, 1})});
      b.Op("Relu", {p}, {r});
      b.Output(r);
      Graph g = b.Build();
      std::string described;
      ExpectMatchesReference(g, OneGroup(GroupKind::kReduction, {0, 1}), ChainBackend::kFusedLoop,
                             &described);
      bool plain = avx512 && channels % 16 != 0;
      EXPECT_EQ(described.find("reorder in") == std::string::npos, plain) << described;
      EXPECT_EQ(described.find("(ref") == std::string::npos, true) << described;
    }
  }
}

// Rows shorter than a chunk (4096) go through the prologue a block of rows at a time, the last
// block partial (500 rows of 49: blocks of 83; 120 softmax rows of 128: blocks of 32); longer rows
// chunk by chunk (5000).
TEST(ReductionKernel, ShortRowsInBlocksLongRowsInChunks) {
  IrBuilder b;
  TensorId x = b.Input("x", {5, 100, 49});
  TensorId a = b.Act("a", {5, 100, 49}), mx = b.Act("mx", {5, 100, 1});
  b.Op("Add", {x, b.Weight("bias", {49})}, {a});
  b.Op("ReduceMax", {a}, {mx}, {Ints("axes", {-1})});
  TensorId y = b.Input("y", {3, 40, 128});
  TensorId s = b.Act("s", {3, 40, 128}), sm = b.Act("sm", {3, 40, 128});
  b.Op("Mul", {y, b.FloatScalar("k", 0.125)}, {s});
  b.Op("Softmax", {s}, {sm}, {Int("axis", -1)});
  TensorId z = b.Input("z", {2, 5000});
  TensorId e = b.Act("e", {2, 5000}), m = b.Act("m", {2, 1});
  b.Op("Exp", {z}, {e});
  b.Op("ReduceMean", {e}, {m}, {Ints("axes", {-1})});
  b.Output(mx);
  b.Output(sm);
  b.Output(m);
  Graph g = b.Build();
  FusionPlan plan{{FusionGroup{GroupKind::kReduction, {0, 1}, {}},
                   FusionGroup{GroupKind::kReduction, {2, 3}, {}},
                   FusionGroup{GroupKind::kReduction, {4, 5}, {}}}};
  std::string described;
  ExpectMatchesReference(g, plan, ChainBackend::kFusedLoop, &described);
  int row_reductions = 0;
  for (size_t at = 0; (at = described.find("fused row reduction", at)) != std::string::npos; ++at) {
    ++row_reductions;
  }
  EXPECT_EQ(row_reductions, 3) << described;
}

// oneDNN 2.6's reduction primitive is a reference kernel on AVX2, so row reductions run in our
// loop with or without a prologue (lowering/kernel_form.h RunsAsRowReduction); a lone Softmax and a
// reduction over leading axes stay oneDNN's. The pooled tensor comes from a Conv, so it is stored
// channel-blocked (or channels-last), and the GlobalAveragePool runs as oneDNN's pooling over it
// as stored (kernel_form.h GlobalPoolReadsKept) rather than as our loop on a plain copy; the
// ReduceSum has an epilogue.
TEST(ReductionKernel, RowReductionsWithoutAPrologueRunInOurLoop) {
  IrBuilder b;
  TensorId img = b.Input("img", {1, 3, 9, 9});
  TensorId c = b.Act("c", {1, 16, 9, 9}), gap = b.Act("gap", {1, 16, 1, 1});
  b.Op("Conv", {img, b.Weight("w", {16, 3, 3, 3})}, {c}, {Ints("pads", {1, 1, 1, 1})});
  b.Op("GlobalAveragePool", {c}, {gap});
  TensorId x = b.Input("x", {6, 70});
  TensorId mean = b.Act("mean", {6}), sum = b.Act("sum", {6, 1}), biased = b.Act("biased", {6, 1});
  b.Op("ReduceMean", {x}, {mean}, {Ints("axes", {1}), Int("keepdims", 0)});
  b.Op("ReduceSum", {x, b.IntConstant("axes", {-1})}, {sum});
  b.Op("Add", {sum, b.FloatScalar("one", 1)}, {biased});
  TensorId sm = b.Act("sm", {6, 70}), lead = b.Act("lead", {1, 70});
  b.Op("Softmax", {x}, {sm}, {Int("axis", -1)});
  b.Op("ReduceMax", {x}, {lead}, {Ints("axes", {0})});
  for (TensorId t : {gap, mean, biased, sm, lead}) b.Output(t);
  Graph g = b.Build();
  FusionPlan plan{
      {FusionGroup{GroupKind::kSingle, {0}, {}}, FusionGroup{GroupKind::kSingle, {1}, {}},
       FusionGroup{GroupKind::kSingle, {2}, {}}, FusionGroup{GroupKind::kReduction, {3, 4}, {}},
       FusionGroup{GroupKind::kSingle, {5}, {}}, FusionGroup{GroupKind::kSingle, {6}, {}}}};
  ASSERT_TRUE(CheckPlan(g, plan).ok()) << CheckPlan(g, plan).ToString();
  std::string described;
  ExpectMatchesReference(g, plan, ChainBackend::kFusedLoop, &described);
  std::vector<std::string> lines;
  for (size_t at = 0, end; (end = described.find('\n', at)) != std::string::npos; at = end + 1) {
    lines.push_back(described.substr(at, end - at));
  }
  ASSERT_EQ(lines.size(), 6u) << described;
  if (ChannelBlockForIsa(OneDnnIsa()) > 0) {
    EXPECT_NE(lines[1].find("GlobalAveragePool (jit"), std::string::npos) << lines[1];
    EXPECT_EQ(lines[1].find("reorder"), std::string::npos) << lines[1];
  } else {
    EXPECT_NE(lines[1].find("fused row reduction"), std::string::npos) << lines[1];
  }
  for (int i : {2, 3}) {
    EXPECT_NE(lines[i].find("fused row reduction"), std::string::npos) << lines[i];
  }
  EXPECT_NE(lines[3].find("in-place epilogue loop"), std::string::npos) << lines[3];
  for (int i : {4, 5}) {
    EXPECT_EQ(lines[i].find("fused row reduction"), std::string::npos) << lines[i];
  }
}

TEST(ReductionKernel, NonTrailingReduceWithPrologueGoesThroughScratch) {
  IrBuilder b;
  TensorId x = b.Input("x", {2, 3, 4});
  TensorId e = b.Act("e", {2, 3, 4}), r = b.Act("r", {2, 1, 4});
  b.Op("Exp", {x}, {e});
  b.Op("ReduceSum", {e, b.IntConstant("axes", {1})}, {r});
  b.Output(r);
  Graph g = b.Build();
  std::string described;
  ExpectMatchesReference(g, OneGroup(GroupKind::kReduction, {0, 1}), ChainBackend::kFusedLoop,
                         &described);
  EXPECT_NE(described.find("prologue loop into scratch"), std::string::npos) << described;
}

// Every op graph/op_registry calls unary elementwise has a fused-loop kernel: the lowering puts
// such an op in a loop by the registry alone, so an op added there without a kernel would be
// planned into loops the runtime cannot build. Cast (which needs `to`) has its own tests.
TEST(LoopKernel, EveryUnaryElementwiseOpOfTheRegistryRunsInALoop) {
  int checked = 0;
  for (std::string_view name : KnownOps()) {
    const std::string op(name);
    if (!IsUnaryElementwise(op) || op == "Cast") continue;
    SCOPED_TRACE(op);
    IrBuilder b;
    TensorId x = b.Input("x", {2, 3, 50}), y = b.Act("y", {2, 3, 50}), z = b.Act("z", {2, 3, 50});
    b.Op(op, {x}, {y});
    b.Op("Add", {y, b.Weight("w", {50})}, {z});  // A loop group has two nodes at least.
    b.Output(z);
    Graph g = b.Build();
    ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1}));
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

TEST(LoopKernel, InjectiveAndBroadcastOpsInOneLoop) {
  IrBuilder b;
  TensorId x = b.Input("x", {2, 6, 4});
  TensorId ids = b.Input("ids", {3}, DType::kInt64);
  TensorId t = b.Act("t", {6, 2, 4}), s = b.Act("s", {3, 2, 4}), gth = b.Act("gth", {3, 2, 4});
  TensorId cat = b.Act("cat", {6, 2, 4}), pad = b.Act("pad", {6, 2, 6}),
           tri = b.Act("tri", {6, 2, 6});
  TensorId wh = b.Act("wh", {6, 2, 6}), cond = b.Act("cond", {6, 2, 6}, DType::kBool);
  b.Op("Transpose", {x}, {t}, {Ints("perm", {1, 0, 2})});
  b.Op("Slice",
       {t, b.IntConstant("st", {1}), b.IntConstant("en", {6}), b.IntConstant("ax", {0}),
        b.IntConstant("sp", {2})},
       {s});
  b.Op("Gather", {t, ids}, {gth});
  b.Op("Concat", {s, gth}, {cat}, {Int("axis", 0)});
  b.Op("Pad", {cat, b.IntConstant("pads", {0, 0, 1, 0, 0, 1})}, {pad});
  b.Op("Trilu", {pad}, {tri}, {Int("upper", 0)});
  b.Op("Cast", {tri}, {cond}, {Int("to", 9)});
  b.Op("Where", {cond, pad, b.Weight("alt", {6})}, {wh});
  b.Output(wh);
  b.Output(t);  // A second output of another shape.
  Graph g = b.Build();
  ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1, 2, 3, 4, 5, 6, 7}));
}

// DepthToSpace, SpaceToDepth and Tile are steps of the fused loop, read through maps over their
// output's dims with the blocks split out: a DepthToSpace of a conv's output (a group of its
// own) with a Relu, a Reshape and a Transpose after it in one loop; in both modes, across tiles
// of 4096 elements. A SpaceToDepth of a computed Add (read through an index list: its runs step
// by the blocksize) and a Tile of that (runs of 128 in order: evaluated run by run), with a Mul
// after them. None runs through the reference fallback.
TEST(LoopKernel, SpaceDepthAndTileRunInTheLoopWithTheirNeighbours) {
  for (const char* mode : {"DCR", "CRD"}) {
    SCOPED_TRACE(mode);
    IrBuilder b;
    TensorId x = b.Input("x", {1, 8, 16, 16});
    TensorId c = b.Act("c", {1, 32, 16, 16}), d = b.Act("d", {1, 8, 32, 32});
    TensorId r = b.Act("r", {1, 8, 32, 32}), v = b.Act("v", {8, 32, 32});
    TensorId y = b.Act("y", {32, 8, 32});
    b.Op("Conv", {x, b.Weight("w", {32, 8, 3, 3}), b.Weight("bias", {32})}, {c},
         {Ints("pads", {1, 1, 1, 1})});
    b.Op("DepthToSpace", {c}, {d}, {Int("blocksize", 2), {"mode", std::string(mode)}});
    b.Op("Relu", {d}, {r});
    b.Op("Reshape", {r, b.IntConstant("shape", {8, 32, 32})}, {v});
    b.Op("Transpose", {v}, {y}, {Ints("perm", {1, 0, 2})});
    b.Output(y);
    Graph g = b.Build();
    std::string described;
    ExpectMatchesReference(g,
                           FusionPlan{{FusionGroup{GroupKind::kSingle, {0}, {}},
                                       FusionGroup{GroupKind::kLoop, {1, 2, 3, 4}, {}}}},
                           ChainBackend::kFusedLoop, &described);
    EXPECT_NE(described.find("fused loop"), std::string::npos) << described;
    EXPECT_EQ(described.find("reference fallback"), std::string::npos) << described;
  }
  IrBuilder b;
  TensorId x = b.Input("x", {2, 4, 8, 256});
  TensorId a = b.Act("a", {2, 4, 8, 256}), s = b.Act("s", {2, 16, 4, 128});
  TensorId t = b.Act("t", {2, 32, 8, 128}), y = b.Act("y", {2, 32, 8, 128});
  b.Op("Add", {x, b.Weight("bias", {256})}, {a});
  b.Op("SpaceToDepth", {a}, {s}, {Int("blocksize", 2)});
  b.Op("Tile", {s, b.IntConstant("repeats", {1, 2, 2, 1})}, {t});
  b.Op("Mul", {t, b.Input("scale", {128})}, {y});
  b.Output(y);
  Graph g = b.Build();
  std::string described;
  ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1, 2, 3}), ChainBackend::kFusedLoop,
                         &described);
  EXPECT_NE(described.find("fused loop"), std::string::npos) << described;
  ExpectMatchesReference(g, UnfusedPlan(g), ChainBackend::kFusedLoop, &described);
  EXPECT_EQ(described.find("reference fallback"), std::string::npos) << described;
}

// A Concat asked for contiguous tiles copies its inputs run by run: a leaf, a computed value and a
// leaf read through a broadcast, along a middle axis (runs end where an input's channels end, and
// again each outer index), the first axis (one run per input) and the last (runs of 3 and 5).
// Tiles (4096 elements) end mid-run, a run can cover a whole tile (the concat then hands on its
// input's tile, which the chain after it must not overwrite: a leaf), and the concat is both read
// by a node and written out.
TEST(LoopKernel, ConcatCopiesContiguousRunsOfItsInputs) {
  IrBuilder b;
  TensorId leaf = b.Input("leaf", {3, 5, 37, 41}), x = b.Input("x", {3, 2, 37, 41});
  TensorId r = b.Act("r", {3, 2, 37, 41}), m = b.Act("m", {3, 4, 37, 41});
  TensorId cat = b.Act("cat", {3, 11, 37, 41}), y = b.Act("y", {3, 11, 37, 41});
  b.Op("Relu", {x}, {r});
  b.Op("Mul", {b.Input("z", {3, 4, 37, 41}), b.Weight("w", {41})}, {m});
  b.Op("Concat", {leaf, r, m}, {cat}, {Int("axis", 1)});
  b.Op("Sigmoid", {cat}, {y});
  b.Output(cat);
  b.Output(y);
  TensorId first = b.Act("first", {9000, 2}), last = b.Act("last", {2000, 8});
  TensorId relu = b.Act("relu", {9000, 2}), sig = b.Act("sig", {9000, 2});
  b.Op("Concat", {b.Input("p", {5000, 2}), b.Input("q", {4000, 2})}, {first}, {Int("axis", 0)});
  b.Op("Relu", {first}, {relu});
  b.Op("Sigmoid", {relu}, {sig});
  b.Op("Concat", {b.Input("u", {2000, 3}), b.Input("v", {2000, 5})}, {last}, {Int("axis", 1)});
  b.Output(sig);
  b.Output(last);
  Graph g = b.Build();
  ExpectMatchesReference(g, FusionPlan{{FusionGroup{GroupKind::kLoop, {0, 1, 2, 3}, {}},
                                        FusionGroup{GroupKind::kLoop, {4, 5, 6}, {}},
                                        FusionGroup{GroupKind::kSingle, {7}, {}}}});
}

// BERT's head split: a leaf seen through a Reshape (a view: the same flat indices) and then a
// Transpose is read run by run from the leaf, across tiles, and through two views in a row.
TEST(LoopKernel, LeafBehindViewsReadThroughATranspose) {
  IrBuilder b;
  TensorId x = b.Input("x", {128, 1, 96});
  TensorId r = b.Act("r", {128, 4, 24}), u = b.Act("u", {1, 128, 4, 24});
  TensorId t = b.Act("t", {1, 4, 128, 24}), y = b.Act("y", {1, 4, 128, 24});
  b.Op("Reshape", {x, b.IntConstant("shape", {128, 4, 24})}, {r});
  b.Op("Unsqueeze", {r, b.IntConstant("axes", {0})}, {u});
  b.Op("Transpose", {u}, {t}, {Ints("perm", {0, 2, 1, 3})});
  b.Op("Div", {t, b.FloatScalar("scale", 8)}, {y});
  b.Output(y);
  Graph g = b.Build();
  ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1, 2, 3}));
}

// A Gather of one constant index takes one slice of its data (GatherSliceIndex): Swin's Q / K / V
// split (a [3, ...] tensor indexed 0, 1, 2 on axis 0, fused with the transpose before it and the
// scale after), a negative scalar index on a middle axis, and a one-element index tensor on the
// last axis (which keeps a unit dim) all match the reference. Tiles end mid-slice.
TEST(LoopKernel, GatherOfOneConstantIndexIsASlice) {
  IrBuilder b;
  TensorId qkv = b.Input("qkv", {5, 49, 3, 3, 32});
  TensorId t = b.Act("t", {3, 5, 3, 49, 32});
  b.Op("Transpose", {qkv}, {t}, {Ints("perm", {2, 0, 3, 1, 4})});
  TensorId q = b.Act("q", {5, 3, 49, 32}), qs = b.Act("qs", {5, 3, 49, 32});
  TensorId k = b.Act("k", {5, 3, 49, 32}), v = b.Act("v", {5, 3, 49, 32});
  b.Op("Gather", {t, b.IntScalar("i0", 0)}, {q}, {Int("axis", 0)});
  b.Op("Mul", {q, b.FloatScalar("scale", 0.17)}, {qs});
  b.Op("Gather", {t, b.IntScalar("i1", 1)}, {k}, {Int("axis", 0)});
  b.Op("Gather", {t, b.IntScalar("i2", -1)}, {v}, {Int("axis", 0)});
  TensorId mid = b.Act("mid", {7, 300});
  b.Op("Gather", {b.Input("x", {7, 5, 300}), b.IntScalar("im", -2)}, {mid}, {Int("axis", 1)});
  TensorId last = b.Act("last", {40, 70, 1});
  b.Op("Gather", {b.Input("y", {40, 70, 9}), b.IntConstant("il", {4})}, {last}, {Int("axis", 2)});
  b.Output(qs);
  b.Output(k);
  b.Output(v);
  b.Output(mid);
  b.Output(last);
  Graph g = b.Build();
  for (NodeId id : {1, 3, 4, 5, 6}) EXPECT_GE(GatherSliceIndex(g, g.node(id)), 0) << id;
  ExpectMatchesReference(
      g, FusionPlan{
             {FusionGroup{GroupKind::kLoop, {0, 1, 2}, {}},
              FusionGroup{GroupKind::kSingle, {3}, {}}, FusionGroup{GroupKind::kSingle, {4}, {}},
              FusionGroup{GroupKind::kSingle, {5}, {}}, FusionGroup{GroupKind::kSingle, {6}, {}}}});
  ExpectMatchesReference(g, FusionPlan{{FusionGroup{GroupKind::kLoop, {0, 1, 2, 3, 4}, {}},
                                        FusionGroup{GroupKind::kSingle, {5}, {}},
                                        FusionGroup{GroupKind::kSingle, {6}, {}}}});
}

// A Gather whose blocks (the data dims after the axis) are at least kMinEvaluatedRun long copies a
// range block by block (GatherRuns): an embedding lookup of a leaf table by token ids that a graph
// input carries, with a unit-dim transpose after it (BERT's first group); a gather of a computed
// value on a middle axis with constant indices, one negative, read back by a Mul; tiles (4096
// elements) end mid-block. A gather of short blocks stays on the index list.
TEST(LoopKernel, GatherOfLongBlocksCopiesBlockByBlock) {
  IrBuilder b;
  TensorId ids = b.Input("ids", {1, 45}, DType::kInt64);
  TensorId emb = b.Act("emb", {1, 45, 96}), t = b.Act("t", {45, 1, 96});
  b.Op("Gather", {b.Input("table", {300, 96}), ids}, {emb});
  b.Op("Transpose", {emb}, {t}, {Ints("perm", {1, 0, 2})});
  TensorId r = b.Act("r", {6, 9, 130}), gth = b.Act("gth", {6, 4, 130}),
           m = b.Act("m", {6, 4, 130});
  b.Op("Relu", {b.Input("x", {6, 9, 130})}, {r});
  b.Op("Gather", {r, b.IntConstant("pick", {5, -1, 0, 5})}, {gth}, {Int("axis", 1)});
  b.Op("Mul", {gth, b.Weight("w", {130})}, {m});
  TensorId shortb = b.Act("short", {40, 3, 8});
  b.Op("Gather", {b.Input("y", {40, 9, 8}), b.IntConstant("few", {8, 0, 4})}, {shortb},
       {Int("axis", 1)});
  b.Output(t);
  b.Output(m);
  b.Output(gth);
  b.Output(shortb);
  Graph g = b.Build();
  EXPECT_TRUE(GatherCopiesBlocks(g, g.node(0)));
  EXPECT_TRUE(GatherCopiesBlocks(g, g.node(3)));
  EXPECT_FALSE(GatherCopiesBlocks(g, g.node(5)));
  ExpectMatchesReference(g, FusionPlan{{FusionGroup{GroupKind::kLoop, {0, 1}, {}},
                                        FusionGroup{GroupKind::kLoop, {2, 3, 4}, {}},
                                        FusionGroup{GroupKind::kSingle, {5}, {}}}});
  ExpectMatchesReference(
      g, FusionPlan{
             {FusionGroup{GroupKind::kSingle, {0}, {}}, FusionGroup{GroupKind::kSingle, {1}, {}},
              FusionGroup{GroupKind::kSingle, {2}, {}}, FusionGroup{GroupKind::kLoop, {3, 4}, {}},
              FusionGroup{GroupKind::kSingle, {5}, {}}}});
}

// Values read through a map are written straight into the loop's output when they are one: a
// slice of a leaf behind a Reshape (BERT's head split), a transpose of a leaf alone, a transpose
// of a leaf as one part of a Concat, and a transpose that another output of the loop also reads
// (from the first output's buffer). Tiles end mid-row.
TEST(LoopKernel, MappedValuesAreWrittenStraightIntoTheOutput) {
  IrBuilder b;
  TensorId x = b.Input("x", {97, 1, 150});
  TensorId s = b.Act("s", {97, 1, 50}), r = b.Act("r", {97, 5, 10});
  b.Op("Slice",
       {x, b.IntConstant("st", {50}), b.IntConstant("en", {100}), b.IntConstant("ax", {2})}, {s});
  b.Op("Reshape", {s, b.IntConstant("shape", {97, 5, 10})}, {r});
  TensorId t = b.Act("t", {150, 97}), u = b.Act("u", {150, 97});
  b.Op("Transpose", {b.Input("z", {97, 150})}, {t}, {Ints("perm", {1, 0})});
  b.Op("Relu", {t}, {u});
  TensorId tc = b.Act("tc", {150, 97}), cat = b.Act("cat", {300, 97});
  b.Op("Transpose", {b.Input("w", {97, 150})}, {tc}, {Ints("perm", {1, 0})});
  b.Op("Concat", {tc, b.Input("v", {150, 97})}, {cat}, {Int("axis", 0)});
  b.Output(r);
  b.Output(t);
  b.Output(u);
  b.Output(cat);
  Graph g = b.Build();
  ExpectMatchesReference(g, FusionPlan{{FusionGroup{GroupKind::kLoop, {0, 1}, {}},
                                        FusionGroup{GroupKind::kLoop, {2, 3}, {}},
                                        FusionGroup{GroupKind::kLoop, {4, 5}, {}}}});
}

// A transpose that moves only unit dims (BERT's [1,128,768] <-> [128,1,768] around each layer) is
// handed on like a view: a layer norm's tail computed into both its own output and the transposed
// one, a tail computed only into the transposed output, and a residual Add that reads a transposed
// leaf in place all stream (no tile buffers, longer tiles), and match the reference. A transpose
// that moves a dim longer than 1 still goes through a map, in a tile.
TEST(LoopKernel, UnitDimTransposesAreHandedOnLikeViews) {
  IrBuilder b;
  const Shape dims = {1, 97, 150}, moved = {97, 1, 150};
  TensorId m = b.Act("m", dims), a = b.Act("a", dims), t = b.Act("t", moved);
  b.Op("Mul", {b.Input("x", dims), b.Weight("w", {150})}, {m});
  b.Op("Add", {m, b.Weight("bias", {150})}, {a});
  b.Op("Transpose", {a}, {t}, {Ints("perm", {1, 0, 2})});
  TensorId a2 = b.Act("a2", dims), t2 = b.Act("t2", moved);
  b.Op("Add", {b.Input("y", dims), b.Input("z", dims)}, {a2});
  b.Op("Transpose", {a2}, {t2}, {Ints("perm", {1, 0, 2})});
  TensorId t3 = b.Act("t3", dims), r = b.Act("r", dims);
  b.Op("Transpose", {b.Input("q", moved)}, {t3}, {Ints("perm", {1, 0, 2})});
  b.Op("Add", {t3, b.Input("s", dims)}, {r});
  TensorId a4 = b.Act("a4", dims), t4 = b.Act("t4", {150, 97, 1});
  b.Op("Add", {b.Input("u", dims), b.Input("v", dims)}, {a4});
  b.Op("Transpose", {a4}, {t4}, {Ints("perm", {2, 1, 0})});
  b.Output(a);
  b.Output(t);
  b.Output(t2);
  b.Output(r);
  b.Output(t4);
  Graph g = b.Build();
  std::string description;
  ExpectMatchesReference(
      g,
      FusionPlan{
          {FusionGroup{GroupKind::kLoop, {0, 1, 2}, {}}, FusionGroup{GroupKind::kLoop, {3, 4}, {}},
           FusionGroup{GroupKind::kLoop, {5, 6}, {}}, FusionGroup{GroupKind::kLoop, {7, 8}, {}}}},
      ChainBackend::kFusedLoop, &description);
  std::vector<std::string> lines;
  for (size_t at = 0, end; (end = description.find('\n', at)) != std::string::npos; at = end + 1)
    lines.push_back(description.substr(at, end - at));
  ASSERT_EQ(lines.size(), 4u) << description;
  for (int i = 0; i < 3; ++i) EXPECT_NE(lines[i].find("streams"), std::string::npos) << lines[i];
  EXPECT_EQ(lines[3].find("streams"), std::string::npos) << lines[3];
}

// A computed value read through a map that keeps long runs (BERT's bias Add, sliced to the query
// third, split into heads of 64, heads moved outward) is evaluated run by run straight into place;
// heads of 24 are too short and go through an index list. The Add is also an output of its own,
// evaluated over the loop's ranges: its pieces must not disturb that. 96 rows of 3 x 192
// straddle the 4096-element tiles.
TEST(LoopKernel, ComputedValuesReadInLongRunsAreEvaluatedRunByRun) {
  IrBuilder b;
  TensorId m = b.Act("m", {96, 1, 576});
  TensorId q = b.Act("q", {96, 1, 192}), qr = b.Act("qr", {96, 3, 64}),
           qt = b.Act("qt", {3, 96, 64});
  TensorId k = b.Act("k", {96, 1, 192}), kr = b.Act("kr", {96, 8, 24}),
           kt = b.Act("kt", {8, 96, 24});
  b.Op("Add", {b.Input("x", {96, 1, 576}), b.Weight("bias", {576})}, {m});
  b.Op("Slice",
       {m, b.IntConstant("qs", {192}), b.IntConstant("qe", {384}), b.IntConstant("qa", {2})}, {q});
  b.Op("Reshape", {q, b.IntConstant("qshape", {96, 3, 64})}, {qr});
  b.Op("Transpose", {qr}, {qt}, {Ints("perm", {1, 0, 2})});
  b.Op("Slice",
       {m, b.IntConstant("ks", {384}), b.IntConstant("ke", {576}), b.IntConstant("ka", {2})}, {k});
  b.Op("Reshape", {k, b.IntConstant("kshape", {96, 8, 24})}, {kr});
  b.Op("Transpose", {kr}, {kt}, {Ints("perm", {1, 0, 2})});
  b.Output(m);
  b.Output(qt);
  b.Output(kt);
  Graph g = b.Build();
  ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1, 2, 3, 4, 5, 6}));
}

// Computed values broadcast over the loop (one per row as layer norm's Sqrt of the variance, a row
// along the inner dim, one per outer index) are evaluated once over the span a tile reads, then
// read from there; tiles (4096 elements) end mid-row. A transpose of a computed value (a span as
// long as the tile) is still evaluated element by element.
TEST(LoopKernel, BroadcastComputedValuesAreEvaluatedOncePerSpan) {
  IrBuilder b;
  const Shape dims = {2, 5, 700};
  TensorId x = b.Input("x", dims);
  TensorId eps = b.Act("eps", {2, 5, 1}), root = b.Act("root", {2, 5, 1});
  TensorId twice = b.Act("twice", {700}), outer = b.Act("outer", {2, 1, 700});
  TensorId q = b.Act("q", dims), a = b.Act("a", dims), y = b.Act("y", dims);
  TensorId xt = b.Act("xt", {2, 700, 5}), tr = b.Act("tr", dims), z = b.Act("z", dims);
  b.Op("Add", {b.Input("var", {2, 5, 1}), b.FloatScalar("e", 1e-5)}, {eps});
  b.Op("Sqrt", {eps}, {root});
  b.Op("Div", {x, root}, {q});
  b.Op("Mul", {b.Input("w", {700}), b.FloatScalar("two", 2)}, {twice});
  b.Op("Add", {q, twice}, {a});
  b.Op("Exp", {b.Input("o", {2, 1, 700})}, {outer});
  b.Op("Mul", {a, outer}, {y});
  b.Op("Relu", {b.Input("xi", {2, 700, 5})}, {xt});
  b.Op("Transpose", {xt}, {tr}, {Ints("perm", {0, 2, 1})});
  b.Op("Add", {y, tr}, {z});
  b.Output(z);
  Graph g = b.Build();
  ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

// A squeeze-and-excite gate, a per-channel Sigmoid, read by a Mul over four tiles on two threads:
// the gate is small, so each thread evaluates it whole once and keeps it for all its tiles; a
// second, per-row gate behind a Reshape is read across tiles that start mid-row.
TEST(LoopKernel, SmallBroadcastComputedValuesAreEvaluatedWholeOncePerThread) {
  IrBuilder b;
  const Shape dims = {1, 8, 40, 40};
  TensorId gate = b.Act("gate", {1, 8, 1, 1}), y = b.Act("y", dims);
  b.Op("Sigmoid", {b.Input("g", {1, 8, 1, 1})}, {gate});
  b.Op("Mul", {b.Input("x", dims), gate}, {y});
  TensorId row = b.Act("row", {320}), rows = b.Act("rows", {1, 8, 40, 1}), z = b.Act("z", dims);
  b.Op("Exp", {b.Input("r", {320})}, {row});
  b.Op("Reshape", {row, b.IntConstant("shape", {1, 8, 40, 1})}, {rows});
  b.Op("Add", {y, rows}, {z});
  b.Output(z);
  Graph g = b.Build();
  ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1, 2, 3, 4}));

  // A gate of 2048 channels over 1x2048x3x1: more than a quarter of a tile of 4096, kept whole
  // too; the second tile starts mid-channel and is shorter than the gate.
  IrBuilder b2;
  TensorId gate2 = b2.Act("gate", {1, 2048, 1, 1}), y2 = b2.Act("y", {1, 2048, 3, 1});
  b2.Op("Sigmoid", {b2.Input("g", {1, 2048, 1, 1})}, {gate2});
  b2.Op("Mul", {b2.Input("x", {1, 2048, 3, 1}), gate2}, {y2});
  b2.Output(y2);
  Graph g2 = b2.Build();
  ExpectMatchesReference(g2, OneGroup(GroupKind::kLoop, {0, 1}));
}

// Leaves read through broadcasts (along and across the inner dim) and a transpose, and scalar
// operands on either side, over more elements than one tile with rows that straddle tiles: the
// run-by-run reads and the scalar loops must index exactly like the general index lists.
TEST(LoopKernel, LeafBroadcastsTransposesAndScalarsAcrossTiles) {
  IrBuilder b;
  TensorId x = b.Input("x", {3, 37, 129});
  TensorId tr = b.Act("tr", {3, 37, 129}), q = b.Act("q", {3, 37, 129});
  TensorId m = b.Act("m", {3, 37, 129}), a = b.Act("a", {3, 37, 129});
  TensorId s = b.Act("s", {3, 37, 129}), y = b.Act("y", {3, 37, 129});
  b.Op("Transpose", {b.Input("xt", {3, 129, 37})}, {tr}, {Ints("perm", {0, 2, 1})});
  b.Op("Div", {x, b.Weight("col", {3, 37, 1})}, {q});
  b.Op("Mul", {q, b.Weight("row", {129})}, {m});
  b.Op("Add", {m, tr}, {a});
  b.Op("Sub", {b.FloatScalar("one", 1), a}, {s});
  b.Op("Mul", {s, b.FloatScalar("half", 0.5)}, {y});
  b.Output(y);
  Graph g = b.Build();
  ExpectMatchesReference(
      g, FusionPlan{
             {FusionGroup{GroupKind::kSingle, {0}, {}}, FusionGroup{GroupKind::kSingle, {1}, {}},
              FusionGroup{GroupKind::kSingle, {2}, {}}, FusionGroup{GroupKind::kLoop, {3, 4}, {}},
              FusionGroup{GroupKind::kSingle, {5}, {}}}});
}

// BERT's layer-norm tail leaves the loop twice: as itself ([1,S,H], the next residual) and through
// a Transpose that moves only a unit dim ([S,1,H]). Outputs with as many elements run in one pass
// (the shared values computed once; two passes made the group 2x slower than its ops apart); an
// output of the same size through a real transpose must still get its own values, not the shared
// ones.
TEST(LoopKernel, OutputsOfOneSizeInOtherDimsShareAPassAndStayExact) {
  IrBuilder b;
  const Shape dims = {1, 64, 96}, unit_moved = {64, 1, 96}, swapped = {1, 96, 64};
  TensorId m = b.Act("m", dims), a = b.Act("a", dims);
  TensorId t_unit = b.Act("t_unit", unit_moved), t_swap = b.Act("t_swap", swapped);
  b.Op("Mul", {b.Input("x", dims), b.Weight("scale", {96})}, {m});
  b.Op("Add", {m, b.Weight("shift", {96})}, {a});
  b.Op("Transpose", {a}, {t_unit}, {Ints("perm", {1, 0, 2})});
  b.Op("Transpose", {a}, {t_swap}, {Ints("perm", {0, 2, 1})});
  b.Output(a);
  b.Output(t_unit);
  b.Output(t_swap);
  Graph g = b.Build();
  ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1, 2, 3}));
}

// Broadcast leaves are read run by run (a row of weights, one value per row) with the leaf as
// either operand; a chain writes over the tile of a value only it reads, but never over a value
// read twice or written out. Tiles (4096 elements) end mid-row.
TEST(LoopKernel, StreamedBroadcastsAndReusedTilesStayExact) {
  IrBuilder b;
  const Shape dims = {2, 6, 700};
  TensorId x = b.Input("x", dims);
  TensorId a = b.Act("a", dims), d = b.Act("d", dims), r = b.Act("r", dims);
  TensorId m = b.Act("m", dims), q = b.Act("q", dims), w = b.Act("w", dims);
  b.Op("Sub", {b.Weight("per_row", {2, 6, 1}), x}, {a});
  b.Op("Sub", {b.Weight("row", {700}), a}, {d});
  b.Op("Relu", {d}, {r});
  b.Op("Div", {r, b.Weight("per_channel", {6, 1})}, {m});
  b.Op("Add", {m, x}, {q});
  b.Op("Mul", {m, q}, {w});
  b.Output(r);
  b.Output(w);
  Graph g = b.Build();
  std::string described;
  ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1, 2, 3, 4, 5}),
                         ChainBackend::kFusedLoop, &described);
  EXPECT_NE(described.find("fused loop"), std::string::npos) << described;
}

// Single-pass chains: a broadcast side read run by run (per row with step 0, per column with step
// 1), a scalar side on either side of Sub and Div, a side read from a leaf in step, every unary op
// a chain has, a chain longer than one kernel call takes (cut in two), a value read twice (it ends
// a chain and starts another), and lengths that leave tails in both tiles.
TEST(LoopKernel, SinglePassChainsMatchTheReference) {
  IrBuilder b;
  const Shape dims = {3, 5, 331};
  TensorId x = b.Input("x", dims), y = b.Input("y", dims);
  std::vector<TensorId> v;
  auto step = [&](const std::string& op, std::vector<TensorId> in,
                  std::vector<Attribute> attrs = {}) {
    v.push_back(b.Act("v" + std::to_string(v.size()), dims));
    b.Op(op, std::move(in), {v.back()}, std::move(attrs));
    return v.back();
  };
  step("Sub", {b.Weight("per_row", {3, 5, 1}), x});
  step("Mul", {v.back(), b.Weight("per_column", {331})});
  step("Div", {v.back(), b.FloatScalar("three", 3)});
  TensorId shared = step("Sigmoid", {v.back()});
  step("Div", {b.FloatScalar("one_and_a_half", 1.5), shared});
  step("Erf", {v.back()});
  step("Tanh", {v.back()});
  step("HardSwish", {v.back()});
  step("Clip", {v.back(), b.FloatScalar("lo", -0.5), b.FloatScalar("hi", 0.8)});
  step("LeakyRelu", {v.back()}, {{"alpha", 0.1}});
  step("HardSigmoid", {v.back()});
  step("Exp", {v.back()});
  step("Sqrt", {v.back()});
  for (int i = 0; i < 4; ++i) {  // Long enough to be cut: 18 values from the Div to the Relu.
    step("Mul", {v.back(), b.FloatScalar("k" + std::to_string(i), 0.9)});
    step("Add", {b.FloatScalar("c" + std::to_string(i), 0.05), v.back()});
  }
  TensorId relu = step("Relu", {v.back()});
  step("Mul", {x, v.back()});
  step("Sub", {v.back(), y});
  step("Pow", {v.back(), b.FloatScalar("two", 2)});
  step("Sub", {b.FloatScalar("one", 1), v.back()});
  step("Add", {v.back(), shared});
  b.Output(v.back());
  b.Output(relu);  // An output: no chain takes it in.
  Graph g = b.Build();
  std::vector<NodeId> nodes(g.num_nodes());
  for (size_t i = 0; i < nodes.size(); ++i) nodes[i] = static_cast<NodeId>(i);
  // Each build of the chains the CPU can run (AVX-512, AVX2 and SSE registers), then the best.
  for (ChainIsa isa : {ChainIsa::kSse, ChainIsa::kAvx2, ChainIsa::kAvx512}) {
    if (isa > BestChainIsa()) continue;
    SCOPED_TRACE("chain ISA " + std::to_string(static_cast<int>(isa)));
    UseChainIsa(isa);
    std::string described;
    ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, nodes), ChainBackend::kFusedLoop,
                           &described);
    // Chained: the first Sub, Mul and Div (under the Sigmoid); the 15 values under the Relu down
    // to the Tanh and, past the cut, the Div under the Erf that heads the rest; the Mul, Sub, Pow
    // and Sub under the last Add.
    EXPECT_NE(described.find("fused loop"), std::string::npos) << described;
    EXPECT_NE(described.find(", 23 values only in registers"), std::string::npos) << described;
  }
  UseChainIsa(BestChainIsa());
}

// BestChainIsa asks for the features of x86-64-v3 and -v4 one by one (clang 14 knows no level
// names); g++ knows the levels, so under g++ both ways must agree on this CPU.
#if defined(__GNUC__) && !defined(__clang__)
TEST(LoopKernel, TheChainIsaFromFeaturesIsTheLevelTheCompilerNames) {
  __builtin_cpu_init();
  const ChainIsa level = __builtin_cpu_supports("x86-64-v4")   ? ChainIsa::kAvx512
                         : __builtin_cpu_supports("x86-64-v3") ? ChainIsa::kAvx2
                                                               : ChainIsa::kSse;
  EXPECT_EQ(static_cast<int>(BestChainIsa()), static_cast<int>(level));
}
#endif

// GELU with its bias Add: x = bias + mm is read by the Div that starts the Erf chain and by the
// Mul that ends it, so it joins the chain as its first value, kept in registers for the Mul, and
// the loop streams. Also x read twice by the chain's first node (x * x), and, as a control, x an
// output too: then it is computed into its output and read back through a tile.
TEST(LoopKernel, AValueReadAgainByItsChainIsKeptInRegisters) {
  for (bool x_out : {false, true}) {
    for (bool square : {false, true}) {
      SCOPED_TRACE(std::string(x_out ? "x an output" : "x internal") + (square ? ", x * x" : ""));
      IrBuilder b;
      const Shape dims = {2, 3, 100};
      TensorId mm = b.Input("mm", dims), x = b.Act("x", dims), d = b.Act("d", dims);
      TensorId e = b.Act("e", dims), a = b.Act("a", dims), y = b.Act("y", dims);
      b.Op("Add", {b.Weight("bias", {100}), mm}, {x});
      if (square) {
        b.Op("Mul", {x, x}, {d});
      } else {
        b.Op("Div", {x, b.FloatScalar("root_two", 1.4142135f)}, {d});
      }
      b.Op("Erf", {d}, {e});
      b.Op("Add", {e, b.FloatScalar("one", 1)}, {a});
      b.Op("Mul", {x, a}, {y});
      b.Output(y);
      if (x_out) b.Output(x);
      Graph g = b.Build();
      for (ChainIsa isa : {ChainIsa::kSse, ChainIsa::kAvx2, ChainIsa::kAvx512}) {
        if (isa > BestChainIsa()) continue;
        SCOPED_TRACE("chain ISA " + std::to_string(static_cast<int>(isa)));
        UseChainIsa(isa);
        std::string described;
        ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1, 2, 3, 4}),
                               ChainBackend::kFusedLoop, &described);
        const std::string chained = x_out ? ", 3 values" : ", 4 values";
        EXPECT_NE(described.find(chained + " only in registers"), std::string::npos) << described;
        EXPECT_EQ(described.find("streams") != std::string::npos, !x_out) << described;
      }
      UseChainIsa(BestChainIsa());
    }
  }
}

// lowering/kernel_form.h's HasPrimitiveChainForm (the form the runtime tries and the cost model
// prices) against what the runtime builds with the oneDNN backend forced, for two-node chains: an
// eltwise head (unary, or a binary node with a scalar constant) takes no post-op but an affine map
// it merges; a binary head takes any. The Mul's other operand: full size, per channel, scalar
// constant.
TEST(LoopKernel, PrimitiveChainFormMatchesWhatTheRuntimeBuilds) {
  const Shape dims = {1, 16, 96};
  for (const char* head : {"Relu", "Add", "Mul", "Sub"}) {
    for (int operand = 0; operand < 3; ++operand) {
      IrBuilder b;
      TensorId e = b.Input("e", dims);
      TensorId a = b.Act("a", dims), y = b.Act("y", dims);
      if (std::string(head) == "Relu") {
        b.Op(head, {e}, {a});
      } else if (std::string(head) == "Sub") {
        b.Op(head, {e, b.Input("f", dims)}, {a});
      } else {
        b.Op(head, {e, b.FloatScalar("c", 1.5)}, {a});
      }
      TensorId other = operand == 0   ? b.Input("x", dims)
                       : operand == 1 ? b.Input("x", {1, 16, 1})
                                      : b.FloatScalar("k", 0.5);
      b.Op("Mul", {a, other}, {y});
      b.Output(y);
      Graph g = b.Build();
      std::string described;
      ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1}), ChainBackend::kOneDnn,
                             &described);
      bool primitive = described.find("1 chain nodes as post-ops") != std::string::npos;
      EXPECT_EQ(HasPrimitiveChainForm(g, {0, 1}, {y}), primitive) << head << " " << described;
    }
  }
}

TEST(LoopKernel, ChainPrimitiveAndFusedLoopAgree) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 16, 5, 5});
  TensorId s = b.Act("s", {1, 16, 5, 5}), m = b.Act("m", {1, 16, 5, 5});
  TensorId h = b.Act("h", {1, 16, 5, 5});
  b.Op("Add", {x, b.Weight("bias", {16, 1, 1})}, {s});
  b.Op("Mul", {s, b.FloatScalar("k", 3)}, {m});
  b.Op("HardSigmoid", {m}, {h});
  b.Output(h);
  Graph g = b.Build();
  FusionPlan plan = OneGroup(GroupKind::kLoop, {0, 1, 2});
  std::string onednn, loop;
  ExpectMatchesReference(g, plan, ChainBackend::kOneDnn, &onednn);
  ExpectMatchesReference(g, plan, ChainBackend::kFusedLoop, &loop);
  ExpectMatchesReference(g, plan, ChainBackend::kAuto);
  EXPECT_NE(onednn.find("binary ("), std::string::npos) << onednn;
  EXPECT_NE(loop.find("fused loop"), std::string::npos) << loop;
}

// x * Sigmoid(x) (EfficientNet's SiLU) is one swish eltwise primitive, with the product's
// operands either way round. (oneDNN 2.6's jit eltwise takes no post-ops, so a longer chain runs
// as a fused loop.)
TEST(LoopKernel, SigmoidTimesInputIsOneSwishPrimitive) {
  for (bool sigmoid_first : {true, false}) {
    IrBuilder b;
    TensorId x = b.Input("x", {1, 16, 9, 9});
    TensorId s = b.Act("s", {1, 16, 9, 9}), m = b.Act("m", {1, 16, 9, 9});
    b.Op("Sigmoid", {x}, {s});
    b.Op("Mul", {sigmoid_first ? s : x, sigmoid_first ? x : s}, {m});
    b.Output(m);
    Graph g = b.Build();
    std::string described;
    ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1}), ChainBackend::kOneDnn,
                           &described);
    EXPECT_NE(described.find("eltwise (jit"), std::string::npos) << described;
  }
}

// A gated pair after a Conv is one post-op: x * Sigmoid(x) eltwise_swish, x * HardSigmoid(x)
// eltwise_hardswish with the HardSigmoid's alpha and beta (ONNX's defaults and others), and a
// HardSwish node eltwise_hardswish at ONNX's fixed 1/6 and 1/2 (oneDNN 3 reads both from alpha and
// beta: left at 0 it computes 0). A Relu after the pair continues the chain.
TEST(AnchorKernel, GatedPairsAndHardSwishAfterAConvAreOnePostOpEach) {
  struct Case {
    std::string gate;
    std::vector<Attribute> attrs;
  };
  for (const Case& gc : std::vector<Case>{{"Sigmoid", {}},
                                          {"HardSigmoid", {}},
                                          {"HardSigmoid", {{"alpha", 0.25}, {"beta", 0.4}}},
                                          {"HardSwish", {}}}) {
    for (bool gate_first : {true, false}) {
      SCOPED_TRACE(gc.gate + (gate_first ? ", gate first" : ", gate second"));
      IrBuilder b;
      TensorId x = b.Input("x", {1, 8, 9, 9});
      TensorId c = b.Act("c", {1, 16, 9, 9}), s = b.Act("s", {1, 16, 9, 9});
      TensorId y = b.Act("y", {1, 16, 9, 9}), r = b.Act("r", {1, 16, 9, 9});
      b.Op("Conv", {x, b.Weight("w", {16, 8, 3, 3}), b.Weight("bias", {16})}, {c},
           {Ints("pads", {1, 1, 1, 1})});
      b.Op(gc.gate, {c}, {s}, gc.attrs);
      const bool pair = gc.gate != "HardSwish";
      if (pair) b.Op("Mul", {gate_first ? s : c, gate_first ? c : s}, {y});
      b.Op("LeakyRelu", {pair ? y : s}, {r}, {{"alpha", 0.1}});
      b.Output(r);
      Graph g = b.Build();
      std::vector<NodeId> nodes(g.num_nodes());
      for (size_t i = 0; i < nodes.size(); ++i) nodes[i] = static_cast<NodeId>(i);
      ASSERT_TRUE(CheckGroup(g, {GroupKind::kAnchor, nodes, {}}).ok());
      std::string described;
      ExpectMatchesReference(g, OneGroup(GroupKind::kAnchor, nodes), ChainBackend::kFusedLoop,
                             &described);
      const std::string all = std::to_string(nodes.size() - 1);
      EXPECT_NE(described.find(all + "/" + all + " chain nodes as post-ops"), std::string::npos)
          << described;
      if (!pair) break;
    }
  }
}

TEST(AnchorKernel, GroupedStridedConvTransposeFoldsBatchNormAndTakesReluAndResidual) {
  IrBuilder b;
  TensorId x = b.Input("x", {2, 16, 5, 5});
  // Stride 2, pads 1, output_padding 1: 2 * 4 + 1 + 3 - 2 = 10. Two groups, 8 -> 8 channels each.
  TensorId c = b.Act("c", {2, 16, 10, 10});
  b.Op("ConvTranspose", {x, b.Weight("w", {16, 8, 3, 3}), b.Weight("bias", {16})}, {c},
       {Int("group", 2), Ints("strides", {2, 2}), Ints("pads", {1, 1, 1, 1}),
        Ints("output_padding", {1, 1})});
  std::string described = RunWithBatchNormReluResidual(b, c, {2, 16, 10, 10});
  EXPECT_NE(described.find("deconv ("), std::string::npos) << described;
  EXPECT_NE(described.find("2/2 chain nodes as post-ops"), std::string::npos) << described;
}

// SAME_UPPER with dilation, SAME_LOWER with bias, output_padding without pads (oneDNN's right
// padding is then negative), and a 3-D transposed convolution.
TEST(AnchorKernel, ConvTransposeWindowsOfEveryKind) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 8, 5, 6});
  TensorId up = b.Act("up", {1, 4, 10, 12}), low = b.Act("low", {1, 4, 10, 12});
  b.Op("ConvTranspose", {x, b.Weight("w", {8, 4, 3, 2})}, {up},
       {Ints("strides", {2, 2}), Ints("dilations", {2, 1}), {"auto_pad", "SAME_UPPER"}});
  b.Op("ConvTranspose", {x, b.Weight("w2", {8, 4, 3, 3}), b.Weight("b2", {4})}, {low},
       {Ints("strides", {2, 2}), {"auto_pad", "SAME_LOWER"}});
  TensorId extra = b.Act("extra", {1, 4, 12, 14});
  b.Op("ConvTranspose", {x, b.Weight("w4", {8, 4, 3, 3})}, {extra},
       {Ints("strides", {2, 2}), Ints("output_padding", {1, 1})});
  TensorId v = b.Input("v", {1, 3, 2, 3, 4});
  TensorId y3 = b.Act("y3", {1, 6, 4, 6, 8});
  b.Op("ConvTranspose", {v, b.Weight("w3", {3, 6, 2, 2, 2})}, {y3}, {Ints("strides", {2, 2, 2})});
  for (TensorId t : {up, low, extra, y3}) b.Output(t);
  Graph g = b.Build();
  ExpectMatchesReference(g, UnfusedPlan(g));
}

// Each supported (mode, coordinate_transformation_mode, nearest_mode) with non-integer scales and
// with sizes, inside a loop with a producer before and a consumer after the Resize.
TEST(LoopKernel, ResizeEveryModeMatchesReference) {
  const char* coordinates[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"};
  const char* nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  std::vector<std::vector<Attribute>> variants;
  for (const char* c : coordinates) {
    for (const char* m : nearest) {
      variants.push_back({{"coordinate_transformation_mode", c}, {"nearest_mode", m}});
    }
    variants.push_back({{"coordinate_transformation_mode", c}, {"mode", "linear"}});
  }
  for (const auto& attrs : variants) {
    for (bool sizes : {false, true}) {
      IrBuilder b;
      TensorId x = b.Input("x", {2, 3, 6, 7});
      TensorId r = b.Act("r", {2, 3, 6, 7}), z = b.Act("z", {2, 3, 9, 4});
      TensorId y = b.Act("y", {2, 3, 9, 4});
      b.Op("Relu", {x}, {r});
      TensorId roi = b.FloatConstant("roi", {});
      if (sizes) {
        b.Op("Resize", {r, roi, b.FloatConstant("sc", {}), b.IntConstant("sz", {2, 3, 9, 4})}, {z},
             attrs);
      } else {
        b.Op("Resize", {r, roi, b.FloatConstant("sc", {1, 1, 1.5, 0.6})}, {z}, attrs);
      }
      b.Op("Mul", {z, b.Weight("k", {4})}, {y});
      b.Output(y);
      Graph g = b.Build();
      SCOPED_TRACE(std::get<std::string>(attrs[0].value) + " " +
                   std::get<std::string>(attrs[1].value) + (sizes ? " sizes" : " scales"));
      ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1, 2}));
      ExpectMatchesReference(g, UnfusedPlan(g));
    }
  }
}

TEST(LoopKernel, TrilinearResizeAcrossTiles) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 2, 5, 9, 13});
  TensorId y = b.Act("y", {1, 2, 9, 20, 31});
  b.Op("Resize",
       {x, b.FloatConstant("roi", {}), b.FloatConstant("sc", {}),
        b.IntConstant("sz", {1, 2, 9, 20, 31})},
       {y}, {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}});
  b.Output(y);
  Graph g = b.Build();
  ExpectMatchesReference(g, UnfusedPlan(g));
}

// A lone linear half-pixel Resize of the spatial dims runs as oneDNN's resampling primitive
// (lowering/kernel_form.h RunsAsResampling): a segmentation head's 8x upsampling, a 2x
// downsampling, and 1-D and 3-D forms, each against the reference interpreter.
TEST(ResamplingKernel, LinearHalfPixelResizeRunsAsOneDnnResamplingAndMatchesReference) {
  struct Case {
    Shape in, out;
    const char* coordinates;
  };
  const Case cases[] = {{{1, 21, 5, 5}, {1, 21, 40, 40}, "half_pixel"},
                        {{2, 3, 16, 12}, {2, 3, 8, 6}, "pytorch_half_pixel"},
                        {{1, 4, 7}, {1, 4, 19}, "half_pixel"},
                        {{1, 2, 3, 5, 4}, {1, 2, 6, 9, 8}, "half_pixel"}};
  for (const Case& c : cases) {
    IrBuilder b;
    TensorId x = b.Input("x", c.in);
    TensorId y = b.Act("y", c.out);
    b.Op("Resize",
         {x, b.FloatConstant("roi", {}), b.FloatConstant("sc", {}), b.IntConstant("sz", c.out)},
         {y}, {{"mode", "linear"}, {"coordinate_transformation_mode", c.coordinates}});
    b.Output(y);
    Graph g = b.Build();
    SCOPED_TRACE(ShapeString(c.in) + " -> " + ShapeString(c.out));
    std::string described;
    ExpectMatchesReference(g, UnfusedPlan(g), ChainBackend::kFusedLoop, &described);
    EXPECT_NE(described.find("resampling"), std::string::npos) << described;
  }
}

TEST(Executor, UnsupportedResizeModeNamesNodeAndMode) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 1, 2, 2});
  TensorId y = b.Act("y", {1, 1, 4, 4});
  b.Op("Resize", {x, b.FloatConstant("roi", {}), b.FloatConstant("sc", {1, 1, 2, 2})}, {y},
       {{"mode", "lanczos"}});
  b.Output(y);
  Graph g = b.Build();
  auto exec = Executor::Create(g, UnfusedPlan(g), *RandomLeafValues(g, 1));
  ASSERT_FALSE(exec.ok());
  EXPECT_EQ(exec.status().code(), Status::Code::kUnimplemented);
  EXPECT_NE(
      exec.status().message().find("node 'Resize_0' (Resize): mode 'lanczos' is not supported"),
      std::string::npos)
      << exec.status().message();
}

// The fused loop resamples nearest and linear only; a cubic Resize, alone or between elementwise
// ops, runs through the reference interpreter and gives its values in every plan.
TEST(Executor, CubicResizeRunsThroughTheReferenceInEveryPlan) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 2, 3, 5});
  TensorId r = b.Act("r", {1, 2, 3, 5});
  TensorId z = b.Act("z", {1, 2, 6, 10});
  TensorId y = b.Act("y", {1, 2, 6, 10});
  b.Op("Relu", {x}, {r});
  b.Op("Resize", {r, b.FloatConstant("roi", {}), b.FloatConstant("sc", {1, 1, 2, 2})}, {z},
       {{"mode", "cubic"}, {"exclude_outside", int64_t{1}}});
  b.Op("Sigmoid", {z}, {y});
  b.Output(y);
  Graph g = b.Build();
  ExpectMatchesReference(g, UnfusedPlan(g));
  ExpectMatchesReference(g, MaxFusionPlan(g));
}

TEST(LoopKernel, PadReflectEdgeConstantInOneLoop) {
  IrBuilder b;
  TensorId x = b.Input("x", {2, 5, 7});
  TensorId e = b.Act("e", {2, 5, 7});
  TensorId reflect = b.Act("reflect", {2, 9, 10}), edge = b.Act("edge", {3, 5, 13});
  TensorId constant = b.Act("constant", {2, 7, 8}), y = b.Act("y", {2, 9, 10});
  b.Op("Exp", {x}, {e});
  b.Op("Pad", {e, b.IntConstant("p1", {0, 2, 1, 0, 2, 2})}, {reflect}, {{"mode", "reflect"}});
  b.Op("Pad", {e, b.IntConstant("p2", {1, 0, 3, 0, 0, 3})}, {edge}, {{"mode", "edge"}});
  b.Op("Pad", {e, b.IntConstant("p3", {0, 1, 0, 0, 1, 1}), b.Input("value", {})}, {constant});
  b.Op("Sqrt", {reflect}, {y});
  for (TensorId t : {y, edge, constant}) b.Output(t);
  Graph g = b.Build();
  ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1, 2, 3, 4}));
  ExpectMatchesReference(g, UnfusedPlan(g));
}

// Pads computed by nodes (an exporter that does not fold them): the Pad reads them as it runs,
// whether the nodes that compute them run in the same loop or in groups of their own.
TEST(LoopKernel, PadWithPadsComputedAtRunTime) {
  IrBuilder b;
  TensorId x = b.Input("x", {2, 3, 4});
  TensorId pairs = b.Act("pairs", {3, 2}, DType::kInt64);
  TensorId swapped = b.Act("swapped", {2, 3}, DType::kInt64);
  TensorId pads = b.Act("pads", {6}, DType::kInt64);
  TensorId y = b.Act("y", {2, 6, 7});
  // (begin, end) per dim: (0, 0), (1, 2), (3, 0) -> pads [0, 1, 3, 0, 2, 0].
  b.Op("Reshape", {b.IntConstant("flat", {0, 0, 1, 2, 3, 0}), b.IntConstant("s32", {3, 2})},
       {pairs});
  b.Op("Transpose", {pairs}, {swapped});
  b.Op("Reshape", {swapped, b.IntConstant("s6", {6})}, {pads});
  b.Op("Pad", {x, pads}, {y}, {{"mode", "reflect"}});
  b.Output(y);
  Graph g = b.Build();
  ExpectMatchesReference(g, OneGroup(GroupKind::kLoop, {0, 1, 2, 3}));
  ExpectMatchesReference(g, UnfusedPlan(g));
  ExpectMatchesReference(g, MaxFusionPlan(g));
}

TEST(AnchorKernel, MatMulWithOneDimensionalOperands) {
  IrBuilder b;
  TensorId v = b.Input("v", {32});
  TensorId m = b.Input("m", {4, 32, 16});
  TensorId a = b.Input("a", {5, 32});
  TensorId vm = b.Act("vm", {4, 16}), vm2 = b.Act("vm2", {4, 16});
  TensorId av = b.Act("av", {5}), av2 = b.Act("av2", {5}), vw = b.Act("vw", {16});
  TensorId dot = b.Act("dot", {});
  b.Op("MatMul", {v, m}, {vm});  // 1-D x 3-D.
  b.Op("Add", {vm, b.Weight("bias", {16})}, {vm2});
  b.Op("MatMul", {a, v}, {av});  // 2-D x 1-D.
  b.Op("Mul", {av, b.Weight("scale", {5})}, {av2});
  b.Op("MatMul", {v, b.Weight("w", {32, 16})}, {vw});  // 1-D x prepacked 2-D.
  b.Op("MatMul", {v, b.Weight("u", {32})}, {dot});     // 1-D x 1-D.
  TensorId vm3 = b.Act("vm3", {4, 16}), vm4 = b.Act("vm4", {4, 16});
  b.Op("MatMul", {v, m}, {vm3});
  b.Op("Sub", {vm3, b.Weight("k", {4, 1})}, {vm4});  // Broadcast along the product's N.
  for (TensorId t : {vm2, av2, vw, dot, vm4}) b.Output(t);
  Graph g = b.Build();
  std::string described;
  FusionPlan plan{
      {FusionGroup{GroupKind::kAnchor, {0, 1}, {}}, FusionGroup{GroupKind::kAnchor, {2, 3}, {}},
       FusionGroup{GroupKind::kSingle, {4}, {}}, FusionGroup{GroupKind::kSingle, {5}, {}},
       FusionGroup{GroupKind::kAnchor, {6, 7}, {}}}};
  ExpectMatchesReference(g, plan, ChainBackend::kFusedLoop, &described);
  // The operands of the 1-D products map onto the promoted dst: post-ops, not tail loops.
  for (const char* group : {"anchor [MatMul,Add]", "anchor [MatMul,Mul]"}) {
    size_t at = described.find(group);
    ASSERT_NE(at, std::string::npos) << described;
    std::string line = described.substr(at, described.find('\n', at) - at);
    EXPECT_NE(line.find("1/1 chain nodes as post-ops"), std::string::npos) << line;
  }
  ExpectMatchesReference(g, UnfusedPlan(g));
}

// oneDNN pools floats; a MaxPool over uint8 or with its Indices read is opaque and runs through the
// reference fallback in every plan (an integer MaxPool reached the reference's training
// BatchNormalization and crashed).
TEST(Executor, IntegerMaxPoolAndMaxPoolIndicesRunThroughTheReference) {
  for (DType dtype : {DType::kUInt8, DType::kFloat32}) {
    IrBuilder b;
    TensorId x = b.Input("x", {1, 2, 4, 4}, dtype);
    TensorId y = b.Act("y", {1, 2, 2, 2}, dtype);
    std::vector<TensorId> outputs = {y};
    if (dtype == DType::kFloat32) outputs.push_back(b.Act("idx", {1, 2, 2, 2}, DType::kInt64));
    b.Op("MaxPool", {x}, outputs,
         {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
    for (TensorId t : outputs) b.Output(t);
    Graph g = b.Build();
    SCOPED_TRACE(DTypeName(dtype));
    ExpectMatchesReference(g, UnfusedPlan(g));
    ExpectMatchesReference(g, MaxFusionPlan(g));
  }
}

// oneDNN's deconvolution extends the output past the kernels' reach when output_shape asks for
// one more element than they give (a negative end padding), as the reference does.
TEST(Executor, ConvTransposeWithOutputShapeBeyondTheKernelsMatchesTheReference) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 2, 3, 3});
  TensorId w = b.Weight("w", {2, 2, 3, 3});
  TensorId y = b.Act("y", {1, 2, 10, 8});
  b.Op("ConvTranspose", {x, w}, {y},
       {{"strides", std::vector<int64_t>{3, 2}}, {"output_shape", std::vector<int64_t>{10, 8}}});
  b.Output(y);
  Graph g = b.Build();
  ExpectMatchesReference(g, UnfusedPlan(g));
}

// Bernoulli (random draws) has neither a oneDNN form nor a reference kernel (docs/coverage.md's
// refused ops).
TEST(Executor, OpaqueOpIsUnimplementedNamingTheNode) {
  IrBuilder b;
  TensorId x = b.Input("x", {4});
  TensorId y = b.Act("y", {4});
  b.Op("Bernoulli", {x}, {y});
  b.Output(y);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 1);
  auto exec = Executor::Create(g, UnfusedPlan(g), *leaves);
  ASSERT_FALSE(exec.ok());
  EXPECT_EQ(exec.status().code(), Status::Code::kUnimplemented);
  EXPECT_NE(exec.status().message().find("node 'Bernoulli_0' (Bernoulli)"), std::string::npos)
      << exec.status().message();
}

// float16 and float64 tensors run in float32; a Cast to float16 rounds to float16 (ties to even,
// past 65504 to infinity) in the executor as in the reference; a Cast to bfloat16 is refused.
TEST(Executor, NarrowAndWideFloatsComputeInFloat32AndCastToFloat16Rounds) {
  IrBuilder b;
  TensorId x = b.Input("x", {3}, DType::kFloat64);
  TensorId r = b.Act("r", {3}, DType::kFloat64);
  TensorId h = b.Act("h", {3}, DType::kFloat16);
  b.Op("Relu", {x}, {r});
  b.Op("Cast", {r}, {h});
  b.Output(h);
  Graph g = b.Build();
  HostTensor in = HostTensor::Zeros(DType::kFloat64, {3});
  in.f = {1.0f + 0x1p-11f, 65520.f, -0.5f};
  TensorValues leaves{{x, in}};
  auto exec = Executor::Create(g, UnfusedPlan(g), leaves);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  (*exec)->Run();
  auto got = (*exec)->Read(h);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->f, (std::vector<float>{1.0f, INFINITY, 0.0f}));
  auto want = RunReference(g, leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  EXPECT_EQ(want->at(h).f, got->f);

  IrBuilder bf;
  TensorId bx = bf.Input("x", {3});
  TensorId by = bf.Act("y", {3}, DType::kBFloat16);
  bf.Op("Cast", {bx}, {by});
  bf.Output(by);
  Graph gb = bf.Build();
  auto refused = Executor::Create(gb, UnfusedPlan(gb), *RandomLeafValues(gb, 1));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kUnimplemented);
  EXPECT_NE(refused.status().message().find("Cast to bfloat16"), std::string::npos)
      << refused.status().message();
}

TEST(Executor, IllegalPlanIsRefused) {
  IrBuilder b;
  TensorId x = b.Input("x", {4});
  TensorId y = b.Act("y", {4});
  b.Op("Relu", {x}, {y});
  b.Output(y);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 1);
  auto exec = Executor::Create(g, FusionPlan{}, *leaves);
  EXPECT_FALSE(exec.ok());
}

TEST(PlanJson, RoundTripsAndRejectsUnknownKeys) {
  IrBuilder b;
  TensorId x = b.Input("x", {4});
  TensorId y = b.Act("y", {4}), z = b.Act("z", {4});
  b.Op("Relu", {x}, {y});
  b.Op("Exp", {y}, {z});
  b.Output(z);
  Graph g = b.Build();
  FusionPlan plan = OneGroup(GroupKind::kLoop, {0, 1});
  const PlanOrigin origin{CanonicalHash(g), ""};
  auto back = PlanFromJson(g, PlanToJson(plan, origin));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, plan);
  nlohmann::json bad = PlanToJson(plan, origin);
  bad["groups"][0]["fused"] = true;
  auto refused = PlanFromJson(g, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("unknown key 'fused'"), std::string::npos);
}

}  // namespace
}  // namespace fusor
