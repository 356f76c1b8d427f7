// ExpectPlanMatches: builds `plan` for `g` with the executor, runs it once on `leaves` and checks
// every tensor of `want` (the reference interpreter's values) within Compare's tolerance. `what`
// names the plan in failures. For the tests that hold plans to the reference.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "runtime/executor.h"
#include "runtime/reference.h"

namespace fusor::testing {

inline void ExpectPlanMatches(const Graph& g, const TensorValues& leaves, const TensorValues& want,
                              const FusionPlan& plan, const std::string& what,
                              const ExecutorOptions& options = {}) {
  auto exec = Executor::Create(g, plan, leaves, options);
  ASSERT_TRUE(exec.ok()) << what << ": " << exec.status().ToString();
  (*exec)->Run();
  for (const auto& [t, value] : want) {
    auto got = (*exec)->Read(t);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    auto c = Compare(value, *got);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_LE(c->worst_ratio, 1.0)
        << what << " output '" << g.tensor(t).name << "': " << c->ToString();
  }
}

}  // namespace fusor::testing
