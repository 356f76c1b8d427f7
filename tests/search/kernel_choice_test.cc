// The tuner's choice of each anchor group's kernel (search/kernel_choice.h) with real oneDNN
// timings: the plan records one of the implementations oneDNN offers, groups with the same region
// (in one plan or across the candidates) share one timing, and a measurer that offers none leaves
// the plan as it was.
#include "search/kernel_choice.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/executor.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::IrBuilder;

// Two MatMuls of the same shape on separate inputs, each a group of its own.
struct TwoMatMuls {
  Graph g;
  FusionPlan plan;
};

TwoMatMuls Build() {
  IrBuilder b;
  for (const char* s : {"1", "2"}) {
    TensorId a = b.Input(std::string("a") + s, {64, 128});
    TensorId y = b.Act(std::string("y") + s, {64, 256});
    b.Op("MatMul", {a, b.Weight(std::string("w") + s, {128, 256})}, {y});
    b.Output(y);
  }
  TwoMatMuls t{b.Build(), {}};
  t.plan.groups = {FusionGroup{GroupKind::kSingle, {0}}, FusionGroup{GroupKind::kSingle, {1}}};
  return t;
}

OneDnnMeasurerOptions Quick() {
  OneDnnMeasurerOptions o;
  o.timing.min_total_ns = 5'000'000;
  o.timing.min_repeats = 3;
  return o;
}

TEST(ChooseKernels, TheTunerRecordsAnOfferedImplementationOncePerDistinctRegion) {
  TwoMatMuls t = Build();
  OneDnnMeasurer measurer(Quick());
  AnalyticalCostModel model{HardwareProfile{}};
  auto offered = measurer.Implementations(t.g, t.plan);
  ASSERT_TRUE(offered.ok()) << offered.status().ToString();
  // Two candidates of one tuning, as Autotune passes its whole plans: one timing serves both.
  auto choice =
      ChooseKernels(t.g, {t.plan, t.plan}, model, &measurer, {}, [](int) { return true; });
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  const std::vector<std::string>& names = (*offered)[0].offered;
  size_t timeable = std::count_if(names.begin(), names.end(),
                                  [](const std::string& n) { return n.rfind("ref", 0) != 0; });
  if (timeable < 2) GTEST_SKIP() << "oneDNN offers one implementation here: nothing to choose";
  EXPECT_EQ(choice->regions_timed, 1);  // The second MatMul's region is the first's.
  EXPECT_EQ(choice->trials.size(), timeable);
  EXPECT_EQ(std::count_if(choice->trials.begin(), choice->trials.end(),
                          [](const KernelTrial& k) { return k.chosen; }),
            1);
  const std::string& kernel = choice->plans[0].groups[0].kernel;
  EXPECT_NE(std::find(names.begin(), names.end(), kernel), names.end()) << kernel;
  EXPECT_EQ(choice->plans[0].groups[1].kernel, kernel);
  EXPECT_EQ(choice->plans[1], choice->plans[0]);
  // And the recorded kernel is what a run builds.
  auto leaves = RandomLeafValues(t.g, 1);
  ASSERT_TRUE(leaves.ok());
  auto exec = Executor::Create(t.g, choice->plans[0], *leaves);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  EXPECT_EQ((*exec)->Implementations(1).built, kernel);
}

TEST(ChooseKernels, AMeasurerOfferingNoImplementationsLeavesThePlanUnchanged) {
  TwoMatMuls t = Build();
  RecordedMeasurer measurer;
  AnalyticalCostModel model{HardwareProfile{}};
  auto choice = ChooseKernels(t.g, {t.plan}, model, &measurer, {}, [](int) { return true; });
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  EXPECT_EQ(choice->plans[0], t.plan);
  EXPECT_EQ(choice->regions_timed, 0);
}

}  // namespace
}  // namespace fusor
