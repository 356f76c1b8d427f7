// The lowering's kernel forms against the kernels the runtime builds: over every group of every
// bundled model under several plans, an elementwise loop has a oneDNN primitive-chain form exactly
// when the runtime builds that primitive for it, and a reduction group the lowering runs as our
// row reduction builds as one. A form the runtime declines is a failure naming the group and why.
#include "lowering/kernel_form.h"

#include <gtest/gtest.h>

#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/group_kernel.h"
#include "tests/lowering/bundled_models.h"

namespace fusor {
namespace {

using testing::GroupText;

class KernelFormsOfEveryModel : public ::testing::TestWithParam<std::string> {};

TEST_P(KernelFormsOfEveryModel, TheRuntimeBuildsTheKernelFormTheLoweringNames) {
  auto g = testing::ImportBundledModel(GetParam());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ConstantValues constants(*g);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  KernelContext ctx;
  ctx.g = &*g;
  ctx.engine = &engine;
  ctx.stream = &stream;
  ctx.known = [&](TensorId t) { return constants(t); };
  int loops = 0, chains = 0, rows = 0;
  for (const FusionPlan& plan : testing::PlansToCheck(*g)) {
    const auto materialized = AllMaterializedOutputs(*g, plan);
    for (size_t i = 0; i < plan.groups.size(); ++i) {
      const FusionGroup& group = plan.groups[i];
      ctx.outputs = materialized[i];
      if (testing::PlainLoop(*g, group)) {
        const bool form = HasPrimitiveChainForm(*g, group.nodes, materialized[i]);
        auto built = BuildChainPrimitiveKernel(ctx, group.nodes);
        std::string operands;
        for (TensorId t : g->node(group.nodes[0]).inputs) {
          if (t != kNoId) operands += " " + ShapeString(g->tensor(t).dims);
        }
        EXPECT_EQ(built.ok(), form)
            << GroupText(*g, group) << " (head operands" << operands
            << "): " << (built.ok() ? (*built)->Describe() : built.status().ToString());
        ++loops;
        chains += form ? 1 : 0;
        continue;
      }
      if (!RunsAsRowReduction(*g, group)) continue;
      std::vector<NodeId> prologue, epilogue;
      NodeId reduction = kNoId;
      for (NodeId id : group.nodes) {
        if (reduction == kNoId && ClassifyNode(*g, g->node(id)) == OpClass::kReduction) {
          reduction = id;
        } else {
          (reduction == kNoId ? prologue : epilogue).push_back(id);
        }
      }
      auto built = BuildRowReductionKernel(ctx, prologue, reduction, epilogue);
      EXPECT_TRUE(built.ok()) << GroupText(*g, group) << ": " << built.status().ToString();
      ++rows;
    }
  }
  EXPECT_GT(loops, 0) << "no loop group in any plan of " << GetParam();
  RecordProperty("loops", loops);
  RecordProperty("primitive_chains", chains);
  RecordProperty("row_reductions", rows);
}

INSTANTIATE_TEST_SUITE_P(Lowering, KernelFormsOfEveryModel,
                         ::testing::ValuesIn(testing::BundledModels()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace fusor
