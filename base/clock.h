// Clock: the seam through which timing code reads monotonic time and waits, so that tests can run
// it on a virtual clock and assert on what it did rather than on how long a shared machine took.
// Clock::Real() is the steady clock and a real sleep; ManualClock moves only when told to (a
// sleep advances it), for unit tests. Both are safe to use from several threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace fusor {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowNs() const = 0;  // Monotonic; only differences mean anything.
  virtual void SleepFor(std::chrono::nanoseconds d) const = 0;
  static const Clock& Real();  // std::chrono::steady_clock and std::this_thread::sleep_for.
};

// A virtual clock: NowNs() changes only through Advance() and SleepFor(), which advances it by
// the time asked for and returns at once.
class ManualClock : public Clock {
 public:
  int64_t NowNs() const override { return now_ns_.load(); }
  void SleepFor(std::chrono::nanoseconds d) const override { Advance(d); }
  void Advance(std::chrono::nanoseconds d) const { now_ns_ += d.count(); }

 private:
  mutable std::atomic<int64_t> now_ns_{0};
};

}  // namespace fusor
