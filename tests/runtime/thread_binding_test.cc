// The thread that calls into the runtime is the application's: it is bound to a core only while
// Fusor runs on it and gets its own CPU set back afterwards.
#include "runtime/thread_binding.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <thread>

#include "runtime/executor.h"
#include "runtime/measurer.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::IrBuilder;

cpu_set_t ThisThreadsSet() {
  cpu_set_t s;
  CPU_ZERO(&s);
  EXPECT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(s), &s), 0);
  return s;
}

Graph SmallGraph() {
  IrBuilder b;
  TensorId x = b.Input("x", {64, 256});
  TensorId a = b.Act("a", {64, 256}), y = b.Act("y", {64, 256});
  b.Op("Relu", {x}, {a});
  b.Op("Exp", {a}, {y});
  b.Output(y);
  return b.Build();
}

TEST(ThreadBinding, TheCallingThreadGetsItsCpuSetBackAfterEveryEntryPoint) {
  const cpu_set_t mine = ThisThreadsSet();
  if (CPU_COUNT(&mine) < 2) GTEST_SKIP() << "one usable core: nothing is bound";
  // A fresh thread, as an application's worker would call the engine from.
  std::thread caller([] {
    const cpu_set_t before = ThisThreadsSet();
    ASSERT_GE(CPU_COUNT(&before), 2);
    Graph g = SmallGraph();
    auto leaves = RandomLeafValues(g, 1);
    ASSERT_TRUE(leaves.ok());
    auto exec = Executor::Create(g, UnfusedPlan(g), *leaves);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    cpu_set_t now = ThisThreadsSet();
    EXPECT_TRUE(CPU_EQUAL(&now, &before)) << "after Create";
    (*exec)->Run();
    now = ThisThreadsSet();
    EXPECT_TRUE(CPU_EQUAL(&now, &before)) << "after Run";
    (*exec)->RunGroup(0);
    now = ThisThreadsSet();
    EXPECT_TRUE(CPU_EQUAL(&now, &before)) << "after RunGroup";
    TimingOptions t;
    t.min_repeats = 2;
    t.min_total_ns = 0;
    TimeRepeated([&] { (*exec)->Run(); }, t);
    now = ThisThreadsSet();
    EXPECT_TRUE(CPU_EQUAL(&now, &before)) << "after a timing series";
  });
  caller.join();
}

TEST(ThreadBinding, InsideAScopeTheCallerRunsOnOneCoreOfItsOwnSet) {
  const cpu_set_t mine = ThisThreadsSet();
  if (CPU_COUNT(&mine) < 2) GTEST_SKIP() << "one usable core: nothing is bound";
  std::thread caller([] {
    const cpu_set_t before = ThisThreadsSet();
    {
      ScopedCallerBinding outer;
      cpu_set_t inside = ThisThreadsSet();
      EXPECT_EQ(CPU_COUNT(&inside), 1);
      {
        ScopedCallerBinding inner;  // Nested: changes nothing, restores nothing.
      }
      cpu_set_t still = ThisThreadsSet();
      EXPECT_TRUE(CPU_EQUAL(&inside, &still));
    }
    cpu_set_t after = ThisThreadsSet();
    EXPECT_TRUE(CPU_EQUAL(&after, &before));
  });
  caller.join();
}

}  // namespace
}  // namespace fusor
