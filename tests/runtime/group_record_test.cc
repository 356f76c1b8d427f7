// The reorders and post-ops the runtime builds for a group against the ones its lowering record
// lists (lowering/group_lowering.h GroupLowering::reorders, post_ops), which the cost model
// prices: over every group of the bundled models under several plans, run by the executor with
// tensors stored between groups as it stores them. A mismatch names the group, what the record
// lists and what the kernel built.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "lowering/group_lowering.h"
#include "runtime/executor.h"
#include "runtime/group_kernel.h"
#include "tests/lowering/bundled_models.h"

namespace fusor {
namespace {

std::string ReordersText(const Graph& g, std::vector<LayoutReorder> reorders) {
  auto key = [](const LayoutReorder& r) { return std::tie(r.tensor, r.kind, r.transposed); };
  std::sort(reorders.begin(), reorders.end(),
            [&](const LayoutReorder& a, const LayoutReorder& b) { return key(a) < key(b); });
  std::string s;
  for (const LayoutReorder& r : reorders) {
    s += (s.empty() ? "" : ", ") + std::string(ReorderKindName(r.kind)) + " '" +
         g.tensor(r.tensor).name + "'" + (r.transposed ? " transposed" : "");
  }
  return "[" + s + "]";
}

class GroupRecordsOfEveryModel : public ::testing::TestWithParam<std::string> {};

TEST_P(GroupRecordsOfEveryModel, EveryGroupRunsTheReordersAndPostOpsItsRecordLists) {
  auto g = testing::ImportBundledModel(GetParam());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto leaves = RandomLeafValues(*g, /*seed=*/1);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  // The record's own form, not an alternative timed against it.
  ExecutorOptions options;
  options.chain_backend = ChainBackend::kFusedLoop;
  options.residual_add = ResidualAdd::kBinary;
  int groups = 0, reorders = 0, built = 0, post_ops = 0;
  for (const FusionPlan& plan : testing::PlansToCheck(*g)) {
    auto exec = Executor::Create(*g, plan, *leaves, options);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    for (size_t i = 0; i < (*exec)->num_groups(); ++i) {
      const GroupLowering& record = (*exec)->GroupRecord(i);
      const GroupKernel& kernel = (*exec)->RunningKernel(i);
      EXPECT_EQ(ReordersText(*g, kernel.Reorders()), ReordersText(*g, record.reorders))
          << testing::GroupText(*g, plan.groups[i]) << ": " << (*exec)->DescribeGroup(i);
      EXPECT_EQ(kernel.PostOpNodes(), record.post_ops.size())
          << testing::GroupText(*g, plan.groups[i]) << ": " << (*exec)->DescribeGroup(i);
      ++groups;
      reorders += static_cast<int>(record.reorders.size());
      built += static_cast<int>(kernel.Reorders().size());
      post_ops += static_cast<int>(record.post_ops.size());
    }
  }
  EXPECT_GT(groups, 0);
  RecordProperty("groups", groups);
  RecordProperty("reorders", reorders);
  RecordProperty("built_reorders", built);
  RecordProperty("post_op_nodes", post_ops);
}

INSTANTIATE_TEST_SUITE_P(Runtime, GroupRecordsOfEveryModel,
                         ::testing::ValuesIn(testing::BundledModels()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace fusor
