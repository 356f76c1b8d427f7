// The lowering's group records against the kernels the runtime builds from them: over every group
// of every bundled model under several plans, BuildGroupKernels (what the executor runs) builds the
// form the record names, and the alternative it names; an elementwise loop has a primitive-chain
// form and a Conv a residual-sum form exactly when oneDNN builds one (so the record misses none).
// A mismatch is a failure naming the group and what was built.
#include "lowering/group_lowering.h"

#include <gtest/gtest.h>

#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "graph/graph_builder.h"
#include "lowering/kernel_form.h"
#include "runtime/group_builder.h"
#include "runtime/group_kernel.h"
#include "tests/lowering/bundled_models.h"

namespace fusor {
namespace {

using testing::GroupText;

class KernelFormsOfEveryModel : public ::testing::TestWithParam<std::string> {};

TEST_P(KernelFormsOfEveryModel, TheRuntimeBuildsEveryGroupAsItsLoweringRecordNamesIt) {
  auto g = testing::ImportBundledModel(GetParam());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  // Anchors need their weights' values: seeded random ones, as every measurement uses.
  auto leaves = RandomLeafValues(*g, /*seed=*/1);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  KernelContext ctx;
  ctx.g = &*g;
  ctx.engine = &engine;
  ctx.stream = &stream;
  ctx.known = [&](TensorId t) -> const HostTensor* {
    auto it = leaves->find(t);
    bool leaf = it != leaves->end() && g->tensor(t).kind != TensorKind::kGraphInput;
    return leaf ? &it->second : nullptr;
  };
  int groups = 0, chains = 0, sums = 0;
  for (const FusionPlan& plan : testing::PlansToCheck(*g)) {
    const auto materialized = AllMaterializedOutputs(*g, plan);
    for (size_t i = 0; i < plan.groups.size(); ++i) {
      const FusionGroup& group = plan.groups[i];
      ctx.outputs = materialized[i];
      const GroupLowering record = LowerGroup(*g, group, materialized[i]);
      auto built = BuildGroupKernels(ctx, record);
      ASSERT_TRUE(built.ok()) << GroupText(*g, group) << ": " << built.status().ToString();
      EXPECT_EQ(KernelFormName(built->form), KernelFormName(record.form))
          << GroupText(*g, group) << ": " << built->kernel->Describe();
      EXPECT_EQ(KernelAlternativeName(built->built_alternative),
                KernelAlternativeName(record.alternative))
          << GroupText(*g, group) << ": " << built->kernel->Describe();
      ++groups;
      chains += record.alternative == KernelAlternative::kPrimitiveChain ? 1 : 0;
      sums += record.alternative == KernelAlternative::kResidualSum ? 1 : 0;
      // Where the record names no alternative, oneDNN has none to build either.
      if (record.alternative != KernelAlternative::kNone) continue;
      if (record.form == KernelForm::kFusedLoop) {
        auto chain = BuildChainPrimitiveKernel(ctx, group.nodes);
        EXPECT_FALSE(chain.ok()) << GroupText(*g, group)
                                 << " has a primitive-chain form: " << (*chain)->Describe();
      }
      if (record.form == KernelForm::kAnchorPrimitive) {
        auto sum = BuildResidualSumKernel(ctx, record.center, record.after);
        EXPECT_FALSE(sum.ok()) << GroupText(*g, group)
                               << " has a residual-sum form: " << (*sum)->Describe();
      }
    }
  }
  EXPECT_GT(groups, 0);
  RecordProperty("groups", groups);
  RecordProperty("primitive_chains", chains);
  RecordProperty("residual_sums", sums);
}

INSTANTIATE_TEST_SUITE_P(Lowering, KernelFormsOfEveryModel,
                         ::testing::ValuesIn(testing::BundledModels()),
                         [](const auto& info) { return info.param; });

TEST(GroupLowering, AConvFollowedByAnAddOfAComputedTensorHasTheResidualSumForm) {
  // x -> Conv -> BatchNormalization -> Add(y, .), y a graph input of the conv's shape.
  GraphBuilder b;
  const Shape dims = {1, 16, 8, 8};
  TensorId x = b.Input(dims), y = b.Input(dims);
  TensorId c = b.Op("Conv", {x, b.Weight({16, 16, 3, 3})}, dims,
                    {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  TensorId n = b.Op("BatchNormalization",
                    {c, b.Weight({16}), b.Weight({16}), b.Weight({16}), b.Weight({16})}, dims);
  TensorId s = b.Op("Add", {y, n}, dims);
  b.Output(s);
  const Graph& g = b.Linked();
  GroupLowering r = LowerGroup(g, FusionGroup{GroupKind::kAnchor, {0, 1, 2}, {}}, {s});
  EXPECT_EQ(r.form, KernelForm::kAnchorPrimitive);
  EXPECT_EQ(r.center, 0);
  EXPECT_EQ(r.after, (std::vector<NodeId>{1, 2}));
  EXPECT_EQ(r.alternative, KernelAlternative::kResidualSum);
  EXPECT_EQ(r.primitives, 1);
  EXPECT_EQ(r.loops, 0);
  // Without the Add the group has no residual to sum.
  GroupLowering two = LowerGroup(g, FusionGroup{GroupKind::kAnchor, {0, 1}, {}}, {n});
  EXPECT_EQ(two.alternative, KernelAlternative::kNone);
}

}  // namespace
}  // namespace fusor
