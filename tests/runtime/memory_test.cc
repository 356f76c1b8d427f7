// Memory planning: lifetimes in plan order, arena sharing, and refusal over budget before any
// allocation.
#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runtime/cache_line_vector.h"
#include "runtime/executor.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::IrBuilder;

// x -> a -> b -> c -> y, each 1 MiB of float32.
Graph Chain() {
  IrBuilder b;
  Shape s = {256, 1024};
  TensorId x = b.Input("x", s);
  TensorId a = b.Act("a", s), bb = b.Act("b", s), c = b.Act("c", s), y = b.Act("y", s);
  b.Op("Relu", {x}, {a});
  b.Op("Exp", {a}, {bb});
  b.Op("Sqrt", {bb}, {c});
  b.Op("Tanh", {c}, {y});
  b.Output(y);
  return b.Build();
}

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(MemoryPlan, UnfusedChainReusesDeadBuffers) {
  Graph g = Chain();
  MemoryPlan m = EstimatePlanMemory(g, UnfusedPlan(g));
  // Live at once: the input (whole run) and two neighbours of the chain: 3 MiB, where separate
  // buffers would take 5.
  EXPECT_EQ(m.peak_live_bytes, 3 * kMiB);
  EXPECT_EQ(m.arena_bytes, 3 * kMiB);
}

TEST(MemoryPlan, FusedChainNeedsOnlyInputAndOutput) {
  Graph g = Chain();
  FusionPlan fused{{FusionGroup{GroupKind::kLoop, {0, 1, 2, 3}, {}}}};
  EXPECT_EQ(EstimatePlanMemory(g, fused).arena_bytes, 2 * kMiB);
}

TEST(MemoryPlan, OffsetsNeverOverlapWhileLive) {
  std::vector<BufferLifetime> buffers = {
      {1, 100, 0, 2}, {2, 300, 1, 1}, {3, 200, 2, 3}, {4, 50, 0, 0}, {kNoId, 70, 3, 3}};
  MemoryPlan m = AssignOffsets(buffers, 0);
  for (size_t i = 0; i < buffers.size(); ++i) {
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      bool live_together =
          buffers[i].first <= buffers[j].last && buffers[j].first <= buffers[i].last;
      bool disjoint = m.offsets[i] + buffers[i].bytes <= m.offsets[j] ||
                      m.offsets[j] + buffers[j].bytes <= m.offsets[i];
      EXPECT_TRUE(!live_together || disjoint) << i << " and " << j;
    }
  }
  EXPECT_GE(m.arena_bytes, m.peak_live_bytes);
}

TEST(MemoryPlan, ExecutorRefusesPlanOverBudgetNamingPeakAndBudget) {
  Graph g = Chain();
  auto leaves = RandomLeafValues(g, 1);
  ExecutorOptions options;
  options.memory_budget_bytes = 5 * kMiB / 2;
  auto exec = Executor::Create(g, UnfusedPlan(g), *leaves, options);
  ASSERT_FALSE(exec.ok());
  EXPECT_EQ(exec.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(exec.status().message().find("over the memory budget of 2621440 bytes"),
            std::string::npos)
      << exec.status().message();
  // The fused plan fits the same budget.
  FusionPlan fused{{FusionGroup{GroupKind::kLoop, {0, 1, 2, 3}, {}}}};
  auto ok = Executor::Create(g, fused, *leaves, options);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_LE((*ok)->memory().total_bytes(), 5 * kMiB / 2);
}

TEST(MemoryPlan, WeightsBeyondTheHostsMemoryAreRefusedBeforeAnyAllocation) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 4096});
  TensorId w = b.Weight("w", {4096, int64_t{1} << 30});  // 16 TiB of float32.
  TensorId y = b.Act("y", {1, int64_t{1} << 30});
  b.Op("MatMul", {x, w}, {y});
  b.Output(y);
  Graph g = b.Build();
  g.model_name = "huge";
  auto leaves = RandomLeafValues(g, 1);
  ASSERT_FALSE(leaves.ok());
  EXPECT_EQ(leaves.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(leaves.status().message().find("model 'huge': its inputs, weights and constants needs"),
            std::string::npos)
      << leaves.status().message();
}

bool OnACacheLine(const float* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }

// The recurrence loop's panels (runtime/rnn_loop.cc) were a std::vector<float>, which malloc
// starts 16, 32 or 48 bytes past a cache line: every AVX-512 load of them read two lines, and how
// many of them did changed with what each executor had allocated before.
TEST(CacheLineVector, StartsOnACacheLineWhereMallocPutsAStdVectorOffOne) {
  std::vector<std::vector<float>> plain;
  std::vector<CacheLineVector<float>> lined;
  bool plain_off_a_line = false;
  for (size_t n : {1, 3, 5, 17, 100, 4099, 196608, 393216, 1 << 20}) {
    plain.emplace_back(n, 1.0f);
    lined.emplace_back(n, 1.0f);
    plain_off_a_line |= !OnACacheLine(plain.back().data());
    EXPECT_TRUE(OnACacheLine(lined.back().data())) << n << " floats";
    lined.back().assign(2 * n + 1, 2.0f);
    EXPECT_TRUE(OnACacheLine(lined.back().data())) << 2 * n + 1 << " floats, reassigned";
  }
  EXPECT_TRUE(plain_off_a_line) << "every std::vector landed on a cache line: the case this guards "
                                   "against did not arise";
}

}  // namespace
}  // namespace fusor
