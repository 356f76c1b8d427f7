// PeriodicTask: ticks until its function says stop, and its destructor stops a task that would
// otherwise wait for an hour (a hang here fails the test by ctest's timeout).
#include "base/periodic.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace fusor {
namespace {

TEST(PeriodicTask, TicksUntilTheFunctionReturnsFalse) {
  std::atomic<int> ticks{0};
  {
    PeriodicTask task(std::chrono::milliseconds(1), [&ticks] { return ++ticks < 3; });
    while (ticks.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // Stopped by its own function: no fourth tick however long it lives.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(ticks.load(), 3);
}

TEST(PeriodicTask, DestroyingItWakesItAndNeverTicksAgain) {
  std::atomic<int> ticks{0};
  {
    PeriodicTask task(std::chrono::hours(1), [&ticks] {
      ++ticks;
      return true;
    });
  }
  EXPECT_EQ(ticks.load(), 0);
}

}  // namespace
}  // namespace fusor
