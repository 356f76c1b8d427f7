// The executor's profiled run: it computes what Run computes and gives every group its share.
#include "runtime/executor.h"

#include <gtest/gtest.h>

#include <numeric>

#include "graph/graph_builder.h"
#include "graph/plan.h"
#include "runtime/host_tensor.h"

namespace fusor {
namespace {

TEST(Executor, AProfiledRunComputesWhatARunDoesAndTimesEveryGroup) {
  GraphBuilder b;
  const Shape dims = {1, 16, 8, 8};
  TensorId x = b.Input(dims);
  TensorId c = b.Op("Conv", {x, b.Weight({16, 16, 3, 3})}, dims,
                    {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  TensorId r = b.Op("Relu", {c}, dims);
  TensorId y = b.Op("Add", {r, x}, dims);
  b.Output(y);
  const Graph& g = b.Linked();
  auto leaves = RandomLeafValues(g, 3);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  auto exec = Executor::Create(g, UnfusedPlan(g), *leaves);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  (*exec)->Run();
  auto want = (*exec)->Read(y);
  ASSERT_TRUE(want.ok());
  // Overwrite the output so the profiled run must write it again.
  auto other = RandomLeafValues(g, 4);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*exec)->SetInput(x, other->at(x)).ok());
  (*exec)->Run();
  ASSERT_TRUE((*exec)->SetInput(x, leaves->at(x)).ok());
  std::vector<double> seconds;
  (*exec)->RunProfiled(&seconds);
  auto got = (*exec)->Read(y);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->f, want->f);
  ASSERT_EQ(seconds.size(), (*exec)->num_groups());
  for (double s : seconds) EXPECT_GE(s, 0.0);
  EXPECT_GT(std::accumulate(seconds.begin(), seconds.end(), 0.0), 0.0);
}

}  // namespace
}  // namespace fusor
