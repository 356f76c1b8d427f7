// PeriodicTask: calls a function on a thread of its own every `period` until the function returns
// false or the task is destroyed (the destructor wakes the thread and joins it, so the function
// never runs after it returns). Used to renew a lease while a job runs and to watch a flag for a
// call's cancellation. The function runs on the task's thread only; it must be safe to call from
// there. Not copyable or movable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace fusor {

class PeriodicTask {
 public:
  // `tick` first runs one `period` after construction.
  PeriodicTask(std::chrono::milliseconds period, std::function<bool()> tick)
      : thread_([this, period, tick = std::move(tick)] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!wake_.wait_for(lock, period, [this] { return done_; })) {
            if (!tick()) return;
          }
        }) {}
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;
  ~PeriodicTask() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable wake_;
  bool done_ = false;   // Guarded by mu_.
  std::thread thread_;  // Last: starts once the members above exist.
};

}  // namespace fusor
