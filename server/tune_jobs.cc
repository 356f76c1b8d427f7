#include "server/tune_jobs.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "server/service_metrics.h"

namespace fusor {

// A job's state lives under TuneJobQueue::mu_: events arrive from a worker and are read by every
// subscriber's RPC thread, and one lock keeps "last subscriber left" and "worker picked the job"
// from racing.
struct TuneJob {
  std::string key;
  std::string principal;  // Who started it; holds one of their job slots until it ends.
  bool holds_slot = true;
  v1::TuneRequest request;
  std::vector<v1::TuneEvent> events;
  std::condition_variable changed;
  int subscribers = 0;
  bool done = false;
  Status status;
  std::atomic<bool> cancelled{false};
};

TuneSubscription::TuneSubscription(TuneJobQueue* queue, std::shared_ptr<TuneJob> job, bool joined)
    : queue_(queue), job_(std::move(job)), joined_(joined) {
  // A late joiner starts at the latest event: the progress so far, or the result.
  next_event_ = job_->events.empty() ? 0 : job_->events.size() - 1;
}

TuneSubscription::~TuneSubscription() { queue_->Leave(job_); }

TuneSubscription::Next TuneSubscription::Wait(std::chrono::milliseconds timeout,
                                              v1::TuneEvent* event, Status* status) {
  std::unique_lock<std::mutex> lock(queue_->mu_);
  bool ready = job_->changed.wait_for(
      lock, timeout, [&] { return next_event_ < job_->events.size() || job_->done; });
  if (!ready) return Next::kTimeout;
  if (next_event_ < job_->events.size()) {
    *event = job_->events[next_event_++];
    return Next::kEvent;
  }
  *status = job_->status;
  return Next::kDone;
}

TuneJobQueue::TuneJobQueue(TunerApi* tuner, const TuneJobQueueOptions& options)
    : tuner_(tuner), options_(options) {
  int workers = std::max(1, options_.workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

TuneJobQueue::~TuneJobQueue() { Stop(); }

StatusOr<std::unique_ptr<TuneSubscription>> TuneJobQueue::Submit(const std::string& key,
                                                                 const v1::TuneRequest& request,
                                                                 const std::string& principal) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!accepting_) {
    return Status::Unavailable("fusord is shutting down and takes no new tuning jobs; retry");
  }
  if (auto it = live_.find(key); it != live_.end()) {
    if (it->second->subscribers >= options_.max_subscribers_per_job) {
      return Status::ResourceExhausted(
          "an identical tuning job already has " + std::to_string(it->second->subscribers) +
          " callers waiting on it; retry later, or fetch its plan with GetPlan once it is done");
    }
    ++it->second->subscribers;
    ++subscribers_;
    Metrics().tune_joins.With({}).Increment();
    return std::make_unique<TuneSubscription>(this, it->second, /*joined=*/true);
  }
  // Idle workers take jobs at once, so they add to what may be queued for a moment.
  int idle = std::max(0, std::max(1, options_.workers) - running_);
  if (static_cast<int>(queued_.size()) >= options_.max_queued + idle) {
    return Status::ResourceExhausted("tuning queue is full (" + std::to_string(queued_.size()) +
                                     " jobs waiting, " + std::to_string(running_) +
                                     " running); retry later or raise fusord's queue_size");
  }
  if (int& mine = jobs_by_principal_[principal]; mine >= options_.max_jobs_per_principal) {
    return Status::ResourceExhausted("'" + principal + "' already has " + std::to_string(mine) +
                                     " tuning jobs queued or running (this server's limit); "
                                     "wait for one to finish");
  } else {
    ++mine;
  }
  auto job = std::make_shared<TuneJob>();
  job->key = key;
  job->principal = principal;
  job->request = request;
  job->subscribers = 1;
  ++subscribers_;
  live_.emplace(key, job);
  queued_.push_back(job);
  work_ready_.notify_one();
  return std::make_unique<TuneSubscription>(this, job, /*joined=*/false);
}

void TuneJobQueue::StopAccepting() {
  std::lock_guard<std::mutex> lock(mu_);
  accepting_ = false;
}

void TuneJobQueue::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && workers_.empty()) return;
    accepting_ = false;
    stopping_ = true;
    for (auto& job : queued_) {
      ReleasePrincipalSlot(job.get());
      job->done = true;
      job->status = Status::Unavailable("fusord stopped before this tuning job started; retry");
      job->changed.notify_all();
    }
    queued_.clear();
    for (auto& [key, job] : live_) job->cancelled = true;
    live_.clear();
    work_ready_.notify_all();
  }
  for (auto& t : workers_) t.join();
  workers_.clear();
}

TuneJobQueue::Counts TuneJobQueue::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {static_cast<int>(queued_.size()), running_, subscribers_};
}

void TuneJobQueue::WorkerLoop() {
  while (std::shared_ptr<TuneJob> job = NextJob()) {
    RunJob(job);
  }
}

std::shared_ptr<TuneJob> TuneJobQueue::NextJob() {
  std::unique_lock<std::mutex> lock(mu_);
  work_ready_.wait(lock, [&] { return stopping_ || !queued_.empty(); });
  if (stopping_) return nullptr;
  std::shared_ptr<TuneJob> job = std::move(queued_.front());
  queued_.pop_front();
  ++running_;
  return job;
}

void TuneJobQueue::RunJob(const std::shared_ptr<TuneJob>& job) {
  auto on_event = [&](const v1::TuneEvent& e) {
    std::lock_guard<std::mutex> lock(mu_);
    job->events.push_back(e);
    job->changed.notify_all();
  };
  Status s = tuner_->Tune(job->request, on_event, &job->cancelled);
  if (s.ok() && (job->events.empty() || !job->events.back().has_result())) {
    s = Status::Internal("the tuning service returned no result");
  }
  Finish(job, s);
}

void TuneJobQueue::Finish(const std::shared_ptr<TuneJob>& job, const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  --running_;
  ReleasePrincipalSlot(job.get());
  job->done = true;
  job->status = status;
  if (auto it = live_.find(job->key); it != live_.end() && it->second == job) live_.erase(it);
  job->changed.notify_all();
}

// The last subscriber to leave cancels the job: nobody is waiting for its result. A cancelled job
// leaves live_ at once, so an identical request arriving later starts afresh instead of joining a
// job that is winding down.
void TuneJobQueue::Leave(const std::shared_ptr<TuneJob>& job) {
  std::lock_guard<std::mutex> lock(mu_);
  --subscribers_;
  if (--job->subscribers > 0 || job->done) return;
  job->cancelled = true;
  if (auto it = live_.find(job->key); it != live_.end() && it->second == job) live_.erase(it);
  auto queued = std::find(queued_.begin(), queued_.end(), job);
  if (queued == queued_.end()) return;
  queued_.erase(queued);
  ReleasePrincipalSlot(job.get());
  job->done = true;
  job->status = Status::Cancelled("every caller left before the job started");
  spdlog::debug("tune job dropped before start: key={}", job->key.substr(0, 16));
}

void TuneJobQueue::ReleasePrincipalSlot(TuneJob* job) {
  if (!job->holds_slot) return;
  job->holds_slot = false;
  auto it = jobs_by_principal_.find(job->principal);
  if (it != jobs_by_principal_.end() && --it->second <= 0) jobs_by_principal_.erase(it);
}

}  // namespace fusor
