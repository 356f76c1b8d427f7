// TuneJobQueue: the bounded queue of tuning jobs behind fusord's Tune RPC. A fixed set of worker
// threads runs jobs through a TunerApi; at most `max_queued` jobs wait for a worker, and Submit
// refuses more with ResourceExhausted. Identical requests (same key: canonical graph hash, target
// and options) that arrive while a job for that key is queued or running join it instead of
// starting another, and every subscriber receives the job's events and its final status.
//
// A job is cancelled when its last subscriber leaves (the client cancelled, its deadline passed,
// or the server is stopping): the cancelled flag handed to TunerApi::Tune flips, or a job still
// waiting is dropped. Stop() cancels everything and joins the workers.
//
// The queue borrows the TunerApi, which must outlive it. Subscriptions are owned by the caller
// (one per RPC) and may outlive the queue. All methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "server/tuner_api.h"

namespace fusor {

struct TuneJobQueueOptions {
  int workers = 1;      // Jobs that run at once; tuning measures on this CPU, so 1 is usual.
  int max_queued = 16;  // Jobs that may wait for a worker; more is ResourceExhausted.
  // Jobs one principal may have queued or running at once (joining another's job is free), so
  // one caller cannot fill the queue for everyone; more is ResourceExhausted.
  int max_jobs_per_principal = 4;
  // Callers that may share one job, each holding an RPC thread; more is ResourceExhausted.
  int max_subscribers_per_job = 64;
};

struct TuneJob;
class TuneJobQueue;

// One caller's view of a job: its events in order, then the job's status.
class TuneSubscription {
 public:
  enum class Next { kEvent, kDone, kTimeout };

  // Made by TuneJobQueue::Submit, under the queue's mutex.
  TuneSubscription(TuneJobQueue* queue, std::shared_ptr<TuneJob> job, bool joined);
  ~TuneSubscription();  // Leaves the job; the last one to leave cancels it.
  TuneSubscription(const TuneSubscription&) = delete;
  TuneSubscription& operator=(const TuneSubscription&) = delete;

  // Waits up to `timeout` for the next event (kEvent, *event set) or the end of the job (kDone,
  // *status set to its result).
  Next Wait(std::chrono::milliseconds timeout, v1::TuneEvent* event, Status* status);

  // True when this caller joined a job another identical request had started.
  bool joined() const { return joined_; }

 private:
  TuneJobQueue* queue_;
  std::shared_ptr<TuneJob> job_;
  size_t next_event_;  // Guarded by the queue's mutex.
  bool joined_;
};

class TuneJobQueue {
 public:
  TuneJobQueue(TunerApi* tuner, const TuneJobQueueOptions& options);
  ~TuneJobQueue();  // Stop().

  // Subscribes to the job for `key`, starting one for `request` on behalf of `principal` unless
  // one is queued or running. ResourceExhausted when the queue is full, the principal has its
  // quota of jobs, or the job has its most subscribers; Unavailable once StopAccepting or Stop
  // was called.
  StatusOr<std::unique_ptr<TuneSubscription>> Submit(const std::string& key,
                                                     const v1::TuneRequest& request,
                                                     const std::string& principal = "");

  // New jobs are refused from now on; queued and running jobs go on.
  void StopAccepting();
  // Refuses new jobs, cancels queued and running ones, and joins the workers. Idempotent.
  void Stop();

  struct Counts {
    int queued = 0;       // Jobs waiting for a worker.
    int running = 0;      // Jobs a worker is running.
    int subscribers = 0;  // Callers waiting on queued or running jobs.
  };
  Counts counts() const;

 private:
  friend class TuneSubscription;

  void WorkerLoop();
  std::shared_ptr<TuneJob> NextJob();
  void RunJob(const std::shared_ptr<TuneJob>& job);
  void Finish(const std::shared_ptr<TuneJob>& job, const Status& status);
  void Leave(const std::shared_ptr<TuneJob>& job);
  void ReleasePrincipalSlot(TuneJob* job);  // Called under mu_ when a job ends or is dropped.

  TunerApi* const tuner_;
  const TuneJobQueueOptions options_;

  mutable std::mutex mu_;
  // Guards everything below and every TuneJob's mutable state.
  std::condition_variable work_ready_;
  std::deque<std::shared_ptr<TuneJob>> queued_;
  std::map<std::string, std::shared_ptr<TuneJob>> live_;  // Queued or running, by key.
  std::map<std::string, int> jobs_by_principal_;  // Queued or running jobs each principal started.
  int running_ = 0;
  int subscribers_ = 0;
  bool accepting_ = true;
  bool stopping_ = false;
  std::vector<std::thread> workers_;  // Written only by the constructor and Stop().
};

}  // namespace fusor
