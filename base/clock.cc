#include "base/clock.h"

#include <thread>

namespace fusor {
namespace {

class SteadyClock : public Clock {
 public:
  int64_t NowNs() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void SleepFor(std::chrono::nanoseconds d) const override { std::this_thread::sleep_for(d); }
};

}  // namespace

const Clock& Clock::Real() {
  static const SteadyClock clock;
  return clock;
}

}  // namespace fusor
