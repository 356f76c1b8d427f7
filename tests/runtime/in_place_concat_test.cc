// In-place concat (lowering/concat_in_place.h) against the reference interpreter: where the
// lowering says a Concat runs in place, its inputs have no buffer of their own (they live in their
// slices of its output) and the plan computes what the reference computes; where it says not (a
// graph input, a strided slice, an input another Concat holds), the Concat copies and still does.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "graph/graph_builder.h"
#include "graph/plan.h"
#include "lowering/concat_in_place.h"
#include "lowering/group_lowering.h"
#include "lowering/layout.h"
#include "lowering/plan_legality.h"
#include "runtime/executor.h"
#include "runtime/onednn_info.h"
#include "runtime/reference.h"
#include "tests/lowering/concat_module.h"
#include "tests/runtime/expect_plan_matches.h"

namespace fusor {
namespace {

using testing::BuildConcatModule;
using testing::ConcatModule;
using testing::Extra;

const std::vector<int64_t> kPads = {1, 1, 1, 1};

Attribute Axis(int64_t axis) { return {"axis", axis}; }

// A plan of the groups `nodes` lists, each's kind inferred.
FusionPlan PlanOf(const Graph& g, const std::vector<std::vector<NodeId>>& nodes) {
  FusionPlan plan;
  for (const auto& group : nodes) {
    auto kind = InferGroupKind(g, group);
    EXPECT_TRUE(kind.ok()) << kind.status().ToString();
    plan.groups.push_back({kind.ok() ? *kind : GroupKind::kLoop, group, {}});
  }
  return plan;
}

NodeId ProducerOf(const Graph& g, TensorId t) { return g.tensor(t).producer; }

// Whether `t` has a buffer of its own in the executor's memory plan.
bool HasOwnBuffer(const Executor& e, TensorId t) {
  const auto& buffers = e.memory().buffers;
  return std::any_of(buffers.begin(), buffers.end(),
                     [t](const BufferLifetime& b) { return b.tensor == t; });
}

// The in-place flags of the plan's groups, by the lowering.
std::vector<bool> InPlaceGroups(const Graph& g, const FusionPlan& plan) {
  std::vector<bool> out;
  const auto materialized = AllMaterializedOutputs(g, plan);
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    out.push_back(LowerGroup(g, plan.groups[i], materialized[i]).form ==
                  KernelForm::kInPlaceConcat);
  }
  return out;
}

// Runs `plan` against the reference and returns the executor for the caller's further checks.
std::unique_ptr<Executor> ExpectMatchesReference(const Graph& g, const FusionPlan& plan,
                                                 const std::string& what) {
  auto leaves = RandomLeafValues(g, 7);
  EXPECT_TRUE(leaves.ok()) << leaves.status().ToString();
  if (!leaves.ok()) return nullptr;
  auto want = RunReference(g, *leaves);
  EXPECT_TRUE(want.ok()) << want.status().ToString();
  if (!want.ok()) return nullptr;
  testing::ExpectPlanMatches(g, *leaves, *want, plan, what);
  auto exec = Executor::Create(g, plan, *leaves);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  if (!exec.ok()) return nullptr;
  return std::move(exec).value();
}

struct TwoConvs {
  GraphBuilder b;
  TensorId x, a, b_out, c, y;
};

// x -> Conv+Relu -> a, x -> Conv -> b; Concat(a, b) over channels -> c -> Relu -> y.
void BuildTwoConvs(TwoConvs* m, const Shape& in, bool concat_is_output) {
  GraphBuilder& b = m->b;
  const int64_t n = in[0], h = in[2], w = in[3];
  m->x = b.Input(in);
  TensorId conv1 =
      b.Op("Conv", {m->x, b.Weight({16, in[1], 3, 3})}, {n, 16, h, w}, {{"pads", kPads}});
  m->a = b.Op("Relu", {conv1}, {n, 16, h, w});
  m->b_out = b.Op("Conv", {m->x, b.Weight({8, in[1], 1, 1})}, {n, 8, h, w});
  m->c = b.Op("Concat", {m->a, m->b_out}, {n, 24, h, w}, {Axis(1)});
  if (concat_is_output) {
    b.Output(m->c);
    m->y = m->c;
  } else {
    m->y = b.Op("Relu", {m->c}, {n, 24, h, w});
    b.Output(m->y);
  }
}

TEST(InPlaceConcat, ConvOutputsAreWrittenIntoTheirSlicesAndTheConcatRunsNothing) {
  TwoConvs m;
  BuildTwoConvs(&m, {1, 8, 10, 10}, false);
  const Graph& g = m.b.Linked();
  // [conv1, relu] [conv2] [concat] [relu]
  const FusionPlan plan = PlanOf(g, {{0, 1}, {2}, {3}, {4}});
  EXPECT_EQ(InPlaceGroups(g, plan), (std::vector<bool>{false, false, true, false}));
  auto e = ExpectMatchesReference(g, plan, "conv outputs");
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(HasOwnBuffer(*e, m.a));
  EXPECT_FALSE(HasOwnBuffer(*e, m.b_out));
  EXPECT_TRUE(HasOwnBuffer(*e, m.c));
  EXPECT_NE(e->DescribeGroup(2).find("in place"), std::string::npos) << e->DescribeGroup(2);
  // Every node alone too: the same Concat, its inputs written by lone Conv and Relu groups.
  auto unfused = ExpectMatchesReference(g, UnfusedPlan(g), "unfused");
  ASSERT_NE(unfused, nullptr);
  EXPECT_FALSE(HasOwnBuffer(*unfused, m.a));
}

TEST(InPlaceConcat, AConcatWhoseOutputIsAGraphOutputIsReadBackWhole) {
  TwoConvs m;
  BuildTwoConvs(&m, {1, 8, 6, 6}, true);
  const Graph& g = m.b.Linked();
  const FusionPlan plan = PlanOf(g, {{0, 1}, {2}, {3}});
  EXPECT_EQ(InPlaceGroups(g, plan), (std::vector<bool>{false, false, true}));
  ExpectMatchesReference(g, plan, "concat output is a graph output");
}

TEST(InPlaceConcat, LoopOutputsAreWrittenIntoTheirSlices) {
  GraphBuilder b;
  const Shape dims = {1, 5, 7, 9};
  TensorId x = b.Input(dims);
  TensorId r = b.Op("Relu", {x}, dims);
  TensorId s = b.Op("Sigmoid", {x}, dims);
  TensorId t = b.Op("Tanh", {b.Op("Mul", {x, x}, dims)}, dims);
  TensorId c = b.Op("Concat", {r, s, t}, {1, 15, 7, 9}, {Axis(1)});
  b.Output(b.Op("Neg", {c}, {1, 15, 7, 9}));
  const Graph& g = b.Linked();
  const FusionPlan apart = PlanOf(g, {{0}, {1}, {2, 3}, {4}, {5}});
  EXPECT_EQ(InPlaceGroups(g, apart), (std::vector<bool>{false, false, false, true, false}));
  auto e = ExpectMatchesReference(g, apart, "loop outputs");
  ASSERT_NE(e, nullptr);
  for (TensorId part : {r, s, t}) EXPECT_FALSE(HasOwnBuffer(*e, part));
  // The Concat fused into one loop with its producers copies as before.
  const FusionPlan fused = PlanOf(g, {{0, 1, 2, 3, 4}, {5}});
  EXPECT_EQ(InPlaceGroups(g, fused), (std::vector<bool>{false, false}));
  ExpectMatchesReference(g, fused, "one loop");
}

TEST(InPlaceConcat, AGraphInputIsNeverWrittenInPlace) {
  GraphBuilder b;
  const Shape dims = {1, 4, 6, 6};
  TensorId x = b.Input(dims);
  TensorId r = b.Op("Relu", {x}, dims);
  TensorId c = b.Op("Concat", {x, r}, {1, 8, 6, 6}, {Axis(1)});
  b.Output(b.Op("Sigmoid", {c}, {1, 8, 6, 6}));
  const Graph& g = b.Linked();
  const FusionPlan plan = UnfusedPlan(g);
  EXPECT_EQ(InPlaceGroups(g, plan), (std::vector<bool>{false, false, false}));
  auto e = ExpectMatchesReference(g, plan, "graph input");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(HasOwnBuffer(*e, r));
}

TEST(InPlaceConcat, AProducerWithASecondReaderIsReadFromItsSlice) {
  GraphBuilder b;
  const Shape dims = {1, 8, 6, 6};
  TensorId x = b.Input(dims);
  TensorId a = b.Op("Conv", {x, b.Weight({8, 8, 3, 3})}, dims, {{"pads", kPads}});
  TensorId d = b.Op("Relu", {x}, dims);
  TensorId c = b.Op("Concat", {a, d}, {1, 16, 6, 6}, {Axis(1)});
  TensorId other = b.Op("Conv", {a, b.Weight({8, 8, 1, 1})}, dims);  // A second reader of a.
  b.Output(b.Op("Sigmoid", {c}, {1, 16, 6, 6}));
  b.Output(b.Op("Add", {other, a}, dims));
  b.Output(a);  // And a graph output: read back from the slice.
  const Graph& g = b.Linked();
  const FusionPlan plan = UnfusedPlan(g);
  EXPECT_TRUE(InPlaceGroups(g, plan)[ProducerOf(g, c)]);
  auto e = ExpectMatchesReference(g, plan, "second reader");
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(HasOwnBuffer(*e, a));
}

TEST(InPlaceConcat, NestedConcatsShareTheOutermostBuffer) {
  GraphBuilder b;
  const Shape dims = {1, 3, 5, 5};
  TensorId x = b.Input(dims);
  TensorId p = b.Op("Relu", {x}, dims);
  TensorId q = b.Op("Sigmoid", {x}, dims);
  TensorId inner = b.Op("Concat", {p, q}, {1, 6, 5, 5}, {Axis(1)});
  TensorId r = b.Op("Tanh", {x}, dims);
  TensorId outer = b.Op("Concat", {r, inner}, {1, 9, 5, 5}, {Axis(-3)});
  b.Output(b.Op("Neg", {outer}, {1, 9, 5, 5}));
  b.Output(b.Op("Abs", {inner}, {1, 6, 5, 5}));  // The inner whole has a reader of its own.
  const Graph& g = b.Linked();
  const FusionPlan plan = UnfusedPlan(g);
  EXPECT_EQ(InPlaceGroups(g, plan),
            (std::vector<bool>{false, false, true, false, true, false, false}));
  const auto slices = InPlaceConcatSlices(g, plan);
  ASSERT_EQ(slices.size(), 4u);
  for (const ConcatSlice& s : slices) {
    EXPECT_EQ(s.whole, outer) << g.tensor(s.part).name;
    const int64_t want = s.part == r ? 0 : s.part == inner || s.part == p ? 75 : 150;
    EXPECT_EQ(s.offset, want) << g.tensor(s.part).name;
  }
  auto e = ExpectMatchesReference(g, plan, "nested");
  ASSERT_NE(e, nullptr);
  for (TensorId part : {p, q, r, inner}) EXPECT_FALSE(HasOwnBuffer(*e, part));
}

TEST(InPlaceConcat, ChannelsOfABatchOfTwoAreStridedAndCopied) {
  TwoConvs m;
  BuildTwoConvs(&m, {2, 8, 6, 6}, false);
  const Graph& g = m.b.Linked();
  const FusionPlan plan = PlanOf(g, {{0, 1}, {2}, {3}, {4}});
  EXPECT_EQ(InPlaceGroups(g, plan), (std::vector<bool>{false, false, false, false}));
  auto e = ExpectMatchesReference(g, plan, "batch 2");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(HasOwnBuffer(*e, m.a));
}

TEST(InPlaceConcat, ABatchOfTwoConcatenatedOverTheBatchIsContiguous) {
  GraphBuilder b;
  const Shape dims = {2, 4, 3, 3};
  TensorId x = b.Input(dims);
  TensorId r = b.Op("Relu", {x}, dims);
  TensorId s = b.Op("Sigmoid", {x}, dims);
  TensorId c = b.Op("Concat", {r, s}, {4, 4, 3, 3}, {Axis(0)});
  b.Output(b.Op("Neg", {c}, {4, 4, 3, 3}));
  const Graph& g = b.Linked();
  const FusionPlan plan = UnfusedPlan(g);
  EXPECT_EQ(InPlaceGroups(g, plan), (std::vector<bool>{false, false, true, false}));
  ExpectMatchesReference(g, plan, "batch axis");
}

TEST(InPlaceConcat, OfTwoConcatsReadingOneTensorOnlyTheFirstHoldsIt) {
  GraphBuilder b;
  const Shape dims = {1, 4, 3, 3};
  TensorId x = b.Input(dims);
  TensorId shared = b.Op("Relu", {x}, dims);
  TensorId s = b.Op("Sigmoid", {x}, dims);
  TensorId t = b.Op("Tanh", {x}, dims);
  TensorId first = b.Op("Concat", {shared, s}, {1, 8, 3, 3}, {Axis(1)});
  TensorId second = b.Op("Concat", {t, shared}, {1, 8, 3, 3}, {Axis(1)});
  b.Output(b.Op("Add", {first, second}, {1, 8, 3, 3}));
  const Graph& g = b.Linked();
  const FusionPlan plan = UnfusedPlan(g);
  EXPECT_EQ(InPlaceGroups(g, plan), (std::vector<bool>{false, false, false, true, false, false}));
  ExpectMatchesReference(g, plan, "two concats");
}

TEST(InPlaceConcat, ABlockedConcatMatchesTheReferenceWithoutReorders) {
  ConcatModule m;
  BuildConcatModule(&m, 1, 16, 32, Extra::kNone);
  const Graph& g = m.b.Linked();
  // [conv1, relu] [conv2] [concat] [relu] [conv]
  const FusionPlan plan = PlanOf(g, {{0, 1}, {2}, {3}, {4}, {5}});
  EXPECT_EQ(InPlaceGroups(g, plan), (std::vector<bool>{false, false, true, false, false}));
  auto e = ExpectMatchesReference(g, plan, "blocked concat");
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(HasOwnBuffer(*e, m.a));
  EXPECT_FALSE(HasOwnBuffer(*e, m.b_out));
  if (ChannelBlockForIsa(OneDnnIsa()) == 0) return;
  for (size_t i : {0, 1}) {
    EXPECT_EQ(e->DescribeGroup(i).find("reorder out"), std::string::npos) << e->DescribeGroup(i);
  }
  EXPECT_NE(e->DescribeGroup(2).find("channel-blocked"), std::string::npos) << e->DescribeGroup(2);
  EXPECT_EQ(e->DescribeGroup(2).find("reordered"), std::string::npos) << e->DescribeGroup(2);
  EXPECT_EQ(e->DescribeGroup(4).find("reorder in"), std::string::npos) << e->DescribeGroup(4);
  // Every node alone, and the Concat fused with the Relu after it (no longer in place: the loop
  // reads plain copies of the blocked parts): the same values.
  ExpectMatchesReference(g, UnfusedPlan(g), "unfused");
  const FusionPlan fused = PlanOf(g, {{0, 1}, {2}, {3, 4}, {5}});
  EXPECT_EQ(InPlaceGroups(g, fused), (std::vector<bool>{false, false, false, false}));
  ExpectMatchesReference(g, fused, "concat fused with its reader");
}

TEST(InPlaceConcat, APartItsProducerWrotePlainIsReorderedInItsSlice) {
  // The runtime stores what each kernel wrote; where a producer wrote a part plain while the rule
  // keeps it blocked, the Concat puts that slice in the blocked layout when it runs. Part a (16
  // channels) arrives blocked, part b (32) plain; afterwards the whole is blocked.
  const LayoutTarget target = LayoutTargetForIsa(OneDnnIsa());
  const int64_t block = target.block;
  if (block == 0) GTEST_SKIP() << "oneDNN runs no blocked layout on this CPU";
  ConcatModule m;
  BuildConcatModule(&m, 1, 16, 32, Extra::kNone);
  const Graph& g = m.b.Linked();
  ASSERT_TRUE(AllPartsKept(m, target));
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const auto tag =
      block == 16 ? dnnl::memory::format_tag::nChw16c : dnnl::memory::format_tag::nChw8c;
  const dnnl::memory::desc a_blocked({1, 16, 8, 8}, dnnl::memory::data_type::f32, tag);
  KernelContext ctx;
  ctx.g = &g;
  ctx.engine = &engine;
  ctx.stream = &stream;
  ctx.stored = [&](TensorId t) -> const dnnl::memory::desc* {
    return t == m.a ? &a_blocked : nullptr;
  };
  ctx.layout = target;
  auto kernel = BuildInPlaceConcatKernel(ctx, g.tensor(m.c).producer);
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
  EXPECT_NE((*kernel)->Describe().find("1 reordered in their slice"), std::string::npos)
      << (*kernel)->Describe();
  ASSERT_EQ((*kernel)->BlockedOutputs().size(), 1u);
  // Value of channel c at pixel p of the whole; where it sits blocked and plain.
  const int64_t hw = 64, channels = 48;
  auto value = [](int64_t c, int64_t p) { return static_cast<float>(c * 1000 + p); };
  auto blocked_at = [&](int64_t c, int64_t p) {
    return (c / block) * hw * block + p * block + c % block;
  };
  std::vector<float> whole(channels * hw, -1.0f);
  for (int64_t p = 0; p < hw; ++p) {
    for (int64_t c = 0; c < 16; ++c) whole[blocked_at(c, p)] = value(c, p);   // a, blocked.
    for (int64_t c = 16; c < channels; ++c) whole[c * hw + p] = value(c, p);  // b, plain.
  }
  std::vector<char> scratch((*kernel)->scratch_bytes());
  auto buffer = [&](TensorId t) -> void* {
    if (t == m.c || t == m.a) return whole.data();
    return t == m.b_out ? whole.data() + 16 * hw : nullptr;
  };
  ASSERT_TRUE((*kernel)->Bind(buffer, scratch.data()).ok());
  (*kernel)->Run();
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t p = 0; p < hw; ++p) {
      ASSERT_EQ(whole[blocked_at(c, p)], value(c, p)) << "channel " << c << " pixel " << p;
    }
  }
}

}  // namespace
}  // namespace fusor
