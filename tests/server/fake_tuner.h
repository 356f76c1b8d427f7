// FakeTuner: a TunerApi for the gRPC layer's unit tests only (integration tests run the real
// TuningService). Tune sends one progress event, then, while held, waits until released or
// cancelled; it counts calls and cancellations so tests can see what reached the core.
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "server/tuner_api.h"

namespace fusor::testing {

inline constexpr char kFakeDbPath[] = "/srv/secret-dir/tuning.db";

class FakeTuner final : public TunerApi {
 public:
  std::atomic<int> tune_calls{0};
  std::atomic<int> tune_cancelled{0};
  std::atomic<int> calls{0};           // Every RPC.
  std::atomic<bool> fail_tune{false};  // Tune fails at once, sending nothing.

  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
    released_.notify_all();
  }

  // Waits until `counter` reaches `n`; false after `timeout`.
  static bool WaitFor(const std::atomic<int>& counter, int n,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (counter.load() < n) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  Status Tune(const v1::TuneRequest& request, const EventSink& on_event,
              const std::atomic<bool>* cancelled) override {
    ++calls;
    ++tune_calls;
    if (fail_tune) return Status::FailedPrecondition("the fake was told to fail");
    v1::TuneEvent progress;
    progress.mutable_progress()->set_stage("search");
    on_event(progress);
    if (!WaitWhileHeld(cancelled)) {
      ++tune_cancelled;
      return Status::Cancelled("tuning was cancelled");
    }
    v1::TuneEvent result;
    result.mutable_result()->mutable_plan()->set_graph_hash("fake-" + request.graph().model_name());
    result.mutable_result()->mutable_plan()->set_created_unix_ms(++results_);
    on_event(result);
    return Status::Ok();
  }
  StatusOr<v1::GetPlanResponse> GetPlan(const v1::GetPlanRequest& request) override {
    ++calls;
    if (request.graph_hash() == "missing") return Status::NotFound("no plan for graph missing");
    // Errors that name the server's files, as a real store's do.
    if (request.graph_hash() == "elsewhere") {
      return Status::NotFound("graph elsewhere is not in database '" + std::string(kFakeDbPath) +
                              "'");
    }
    if (request.graph_hash() == "disk-error") {
      return Status::IOError("database '" + std::string(kFakeDbPath) + "': disk I/O error");
    }
    v1::GetPlanResponse r;
    r.mutable_plan()->set_graph_hash(request.graph_hash());
    return r;
  }
  StatusOr<v1::QueryPlansResponse> QueryPlans(const v1::QueryPlansRequest&) override {
    ++calls;
    return v1::QueryPlansResponse{};
  }
  StatusOr<v1::RegisterTargetResponse> RegisterTarget(
      const v1::RegisterTargetRequest& request) override {
    ++calls;
    v1::RegisterTargetResponse r;
    r.set_target_id(request.profile().target().id());
    return r;
  }
  StatusOr<v1::ListTargetsResponse> ListTargets(const v1::ListTargetsRequest&) override {
    ++calls;
    return v1::ListTargetsResponse{};
  }
  using TunerApi::Calibrate;
  StatusOr<v1::CalibrateResponse> Calibrate(const v1::CalibrateRequest&,
                                            const std::atomic<bool>*) override {
    ++calls;
    return v1::CalibrateResponse{};
  }

 private:
  // True when released, false when cancelled.
  bool WaitWhileHeld(const std::atomic<bool>* cancelled) {
    std::unique_lock<std::mutex> lock(mu_);
    while (held_) {
      if (cancelled && cancelled->load()) return false;
      released_.wait_for(lock, std::chrono::milliseconds(5));
    }
    return !(cancelled && cancelled->load());
  }

  std::mutex mu_;
  std::condition_variable released_;
  bool held_ = false;  // Guarded by mu_.
  std::atomic<int64_t> results_{0};
};

}  // namespace fusor::testing
