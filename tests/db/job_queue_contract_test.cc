// The MeasurementQueue contract (agents and their job queue), run against every backend
// (plan_store_contract.h): agents live while heard from, one lease per job at a time (also with
// leasers racing), an expired lease taken by another agent and refused to the first, results
// kept with the agent that measured, cancellation, and what is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "tests/db/plan_store_contract.h"
#include "tests/db/test_db.h"

namespace fusor::db {
namespace {

using testing::Graph;
using testing::GraphHash;
using testing::Plan;

constexpr int64_t kLongLeaseMs = 600'000;

v1::MeasurementJob Job(const std::string& target = "target-a", uint64_t graph = 1, int plans = 2) {
  v1::MeasurementJob job;
  job.set_target_id(target);
  job.set_graph_hash(GraphHash(graph));
  *job.mutable_graph() = Graph("m", 4);
  for (int i = 0; i < plans; ++i) {
    *job.add_plans() = Plan({.graph_hash = GraphHash(graph), .predicted_ns = 1000.0 + i});
  }
  job.set_min_measure_ms(30);
  return job;
}

v1::MeasurementResult Result(std::initializer_list<double> medians) {
  v1::MeasurementResult result;
  for (double m : medians) {
    v1::PlanTiming* t = result.add_timings();
    t->set_median_ns(m);
    t->add_samples_ns(m);
  }
  return result;
}

// Long enough for a lease of 1 ms to have expired on any clock the store reads.
void LetShortLeasesExpire() { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }

std::optional<MeasurementJobRow> Lease(MeasurementQueue& store, const std::string& agent,
                                       int64_t lease_ms = kLongLeaseMs,
                                       const std::string& target = "target-a") {
  auto leased = store.LeaseJob(target, agent, lease_ms);
  EXPECT_TRUE(leased.ok()) << leased.status().ToString();
  return leased.ok() ? *leased : std::nullopt;
}

int64_t Enqueue(MeasurementQueue& store, const v1::MeasurementJob& job = Job()) {
  StatusOr<int64_t> id = store.EnqueueJob(job);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  return id.ok() ? *id : -1;
}

TEST_P(JobQueueContract, AgentsAreLiveWhileHeardFrom) {
  StatusOr<int64_t> live = store_->CountLiveAgents("target-a", 60'000);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_EQ(*live, 2);
  EXPECT_EQ(*store_->CountLiveAgents("target-b", 60'000), 0);
  LetShortLeasesExpire();
  EXPECT_EQ(*store_->CountLiveAgents("target-a", 1), 0);
  StatusOr<AgentRecord> a1 = store_->TouchAgent("a1");
  ASSERT_TRUE(a1.ok()) << a1.status().ToString();
  EXPECT_EQ(a1->target_id, "target-a");
  EXPECT_EQ(a1->name, "a1-host");
  // Heard from now, at least the wait after it registered.
  EXPECT_GE(a1->last_seen_unix_ms - a1->registered_unix_ms, 30);
  EXPECT_EQ(*store_->CountLiveAgents("target-a", 60'000), 2);

  StatusOr<AgentRecord> unknown = store_->TouchAgent("nobody");
  EXPECT_EQ(unknown.status().code(), Status::Code::kNotFound);
  EXPECT_NE(unknown.status().message().find("'nobody'"), std::string::npos);
  EXPECT_EQ(store_->PutAgent({"a3", "no-such-target", "h", 0, 0}).code(),
            Status::Code::kFailedPrecondition);
}

// What `fusor agents list` and `fusor jobs list` read: every agent, and the open jobs oldest
// first (with include_finished, the finished ones too), with the store's clock.
TEST_P(JobQueueContract, ListsShowEveryAgentAndTheOpenJobsOldestFirst) {
  StatusOr<AgentListing> agents = store_->ListAgents();
  ASSERT_TRUE(agents.ok()) << agents.status().ToString();
  ASSERT_EQ(agents->agents.size(), 2u);
  EXPECT_EQ(agents->agents[0].target_id, "target-a");
  EXPECT_GE(agents->now_unix_ms, agents->agents[0].last_seen_unix_ms);

  int64_t first = Enqueue(*store_, Job("target-a", 1));
  int64_t second = Enqueue(*store_, Job("target-a", 2, 3));
  ASSERT_TRUE(Lease(*store_, "a1").has_value());
  ASSERT_TRUE(store_->CancelJob(second).ok());
  StatusOr<JobListing> open = store_->ListJobs(/*include_finished=*/false);
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  ASSERT_EQ(open->jobs.size(), 1u);
  EXPECT_EQ(open->jobs[0].job_id, first);
  EXPECT_EQ(open->jobs[0].state, kJobLeased);
  EXPECT_EQ(open->jobs[0].agent_id, "a1");
  EXPECT_GT(open->jobs[0].lease_expires_unix_ms, open->now_unix_ms);
  StatusOr<JobListing> all = store_->ListJobs(/*include_finished=*/true);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->jobs.size(), 2u);
  EXPECT_EQ(all->jobs[1].job_id, second);
  EXPECT_EQ(all->jobs[1].state, kJobCancelled);
  EXPECT_EQ(all->jobs[1].job.plans_size(), 3);
}

TEST_P(JobQueueContract, AJobIsLeasedToOneAgentAtATimeOldestFirst) {
  int64_t first = Enqueue(*store_, Job("target-a", 1));
  int64_t second = Enqueue(*store_, Job("target-a", 2));
  EXPECT_LT(first, second);
  EXPECT_FALSE(Lease(*store_, "a1", kLongLeaseMs, "target-b").has_value());

  std::optional<MeasurementJobRow> got = Lease(*store_, "a1");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->job_id, first);
  EXPECT_EQ(got->state, kJobLeased);
  EXPECT_EQ(got->agent_id, "a1");
  EXPECT_EQ(got->lease, 1);
  EXPECT_EQ(got->job.job_id(), first);
  EXPECT_EQ(got->job.lease(), 1);
  EXPECT_EQ(got->job.graph_hash(), GraphHash(1));
  EXPECT_EQ(got->job.plans_size(), 2);
  EXPECT_EQ(got->job.plans(1).SerializeAsString(), Job().plans(1).SerializeAsString());
  EXPECT_GT(got->lease_expires_unix_ms, got->created_unix_ms);

  std::optional<MeasurementJobRow> next = Lease(*store_, "a2");
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->job_id, second);
  EXPECT_FALSE(Lease(*store_, "a2").has_value());  // Both held.
}

TEST_P(JobQueueContract, AnExpiredLeaseGoesToAnotherAgentAndTheFirstNoLongerHoldsIt) {
  int64_t id = Enqueue(*store_);
  ASSERT_TRUE(Lease(*store_, "a1", 1).has_value());
  LetShortLeasesExpire();
  std::optional<MeasurementJobRow> again = Lease(*store_, "a2");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->job_id, id);
  EXPECT_EQ(again->lease, 2);

  Status late = store_->FinishJob({id, "a1", 1}, Result({100, 200}));
  EXPECT_EQ(late.code(), Status::Code::kFailedPrecondition) << late.ToString();
  EXPECT_NE(late.message().find("leased to agent 'a2'"), std::string::npos) << late.ToString();
  EXPECT_EQ(store_->RenewLease({id, "a1", 1}, kLongLeaseMs).status().code(),
            Status::Code::kFailedPrecondition);

  StatusOr<int64_t> renewed = store_->RenewLease({id, "a2", 2}, kLongLeaseMs);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  Status done = store_->FinishJob({id, "a2", 2}, Result({100, 200}));
  ASSERT_TRUE(done.ok()) << done.ToString();
  StatusOr<MeasurementJobRow> row = store_->GetJob(id);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  EXPECT_EQ(row->state, kJobDone);
  EXPECT_EQ(row->agent_id, "a2");
  EXPECT_EQ(row->result.SerializeAsString(), Result({100, 200}).SerializeAsString());
  EXPECT_GT(row->finished_unix_ms, 0);
  EXPECT_FALSE(Lease(*store_, "a1", 1).has_value());  // Done jobs are never leased again.
  EXPECT_EQ(store_->FinishJob({id, "a2", 2}, Result({1, 2})).code(),
            Status::Code::kFailedPrecondition);
}

TEST_P(JobQueueContract, AnExpiredLeaseNobodyTookStillReports) {
  int64_t id = Enqueue(*store_);
  ASSERT_TRUE(Lease(*store_, "a1", 1).has_value());
  LetShortLeasesExpire();
  Status done = store_->FinishJob({id, "a1", 1}, Result({5, 6}));
  EXPECT_TRUE(done.ok()) << done.ToString();
  EXPECT_EQ(store_->GetJob(id)->state, kJobDone);
}

TEST_P(JobQueueContract, RacingLeasersNeverShareAJob) {
  constexpr int kJobs = 8;
  for (int i = 0; i < kJobs; ++i) Enqueue(*store_, Job("target-a", static_cast<uint64_t>(i + 1)));
  std::mutex mu;
  std::vector<int64_t> leased;  // Guarded by mu.
  std::vector<std::thread> threads;
  for (const char* agent : {"a1", "a2", "a1", "a2"}) {
    threads.emplace_back([&, agent] {
      for (;;) {
        auto job = store_->LeaseJob("target-a", agent, kLongLeaseMs);
        ASSERT_TRUE(job.ok()) << job.status().ToString();
        if (!*job) return;
        std::lock_guard<std::mutex> lock(mu);
        leased.push_back((*job)->job_id);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<int64_t> distinct(leased.begin(), leased.end());
  EXPECT_EQ(leased.size(), static_cast<size_t>(kJobs));
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kJobs));
}

TEST_P(JobQueueContract, ACancelledJobIsNotLeasedAndRefusesItsReport) {
  int64_t id = Enqueue(*store_);
  ASSERT_TRUE(Lease(*store_, "a1").has_value());
  ASSERT_TRUE(store_->CancelJob(id).ok());
  Status late = store_->FinishJob({id, "a1", 1}, Result({1, 2}));
  EXPECT_EQ(late.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(late.message().find("cancelled"), std::string::npos) << late.ToString();
  EXPECT_FALSE(Lease(*store_, "a2", 1).has_value());
  EXPECT_EQ(store_->CancelJob(id + 100).code(), Status::Code::kNotFound);
  EXPECT_EQ(store_->GetJob(id + 100).status().code(), Status::Code::kNotFound);

  int64_t finished = Enqueue(*store_);
  ASSERT_TRUE(Lease(*store_, "a1").has_value());
  ASSERT_TRUE(store_->FinishJob({finished, "a1", 1}, Result({1, 2})).ok());
  ASSERT_TRUE(store_->CancelJob(finished).ok());
  EXPECT_EQ(store_->GetJob(finished)->state, kJobDone);  // Done stays done.
}

TEST_P(JobQueueContract, PruningDeletesOnlyJobsFinishedLongerAgoThanTheAge) {
  int64_t done = Enqueue(*store_, Job("target-a", 1));
  int64_t cancelled = Enqueue(*store_, Job("target-a", 2));
  int64_t leased = Enqueue(*store_, Job("target-a", 3));
  int64_t queued = Enqueue(*store_, Job("target-a", 4));
  std::optional<MeasurementJobRow> first = Lease(*store_, "a1");
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->job_id, done);
  ASSERT_TRUE(store_->FinishJob({done, "a1", 1}, Result({1, 2})).ok());
  ASSERT_TRUE(store_->CancelJob(cancelled).ok());
  std::optional<MeasurementJobRow> held = Lease(*store_, "a2");
  ASSERT_TRUE(held.has_value());
  ASSERT_EQ(held->job_id, leased);

  // Finished just now: younger than a minute, so kept.
  StatusOr<int64_t> pruned = store_->PruneJobs(60'000);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(*pruned, 0);
  EXPECT_EQ(store_->GetJob(done)->state, kJobDone);

  LetShortLeasesExpire();
  pruned = store_->PruneJobs(1);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(*pruned, 2);
  EXPECT_EQ(store_->GetJob(done).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(store_->GetJob(cancelled).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(store_->GetJob(leased)->state, kJobLeased);
  EXPECT_EQ(store_->GetJob(queued)->state, kJobQueued);
  // The jobs left still go through the queue.
  ASSERT_TRUE(store_->FinishJob({leased, "a2", 1}, Result({3, 4})).ok());
  std::optional<MeasurementJobRow> next = Lease(*store_, "a1");
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->job_id, queued);
  LetShortLeasesExpire();
  EXPECT_EQ(*store_->PruneJobs(1), 1);  // The job a2 finished.

  StatusOr<int64_t> negative = store_->PruneJobs(-1);
  EXPECT_EQ(negative.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(negative.status().message().find("-1 ms"), std::string::npos)
      << negative.status().ToString();
}

TEST_P(JobQueueContract, BadJobsAndLeasesAreRefusedNamingWhatIsWrong) {
  EXPECT_EQ(store_->EnqueueJob(Job("no-such-target")).status().code(),
            Status::Code::kFailedPrecondition);
  EXPECT_EQ(store_->EnqueueJob(Job("target-a", 1, 0)).status().code(),
            Status::Code::kInvalidArgument);
  v1::MeasurementJob short_hash = Job();
  short_hash.set_graph_hash("abc");
  EXPECT_EQ(store_->EnqueueJob(short_hash).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(store_->LeaseJob("target-a", "a1", 0).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(store_->RenewLease({1, "a1", 0}, kLongLeaseMs).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(store_->FinishJob({12345, "a1", 1}, Result({1})).code(), Status::Code::kNotFound);
}

TEST_P(JobQueueContract, MeasurementsKeepTheAgentThatTookThem) {
  v1::Plan plan = Plan({.graph_hash = GraphHash(3), .measured_ns = 300});
  std::vector<Measurement> measurements(2);
  measurements[0].samples_ns = {300};
  measurements[0].agent_id = "a1";
  measurements[1].group_id = 0;
  measurements[1].samples_ns = {100};
  ASSERT_TRUE(store_->PutPlan(plan, Graph("m", 4), measurements).ok());
  StatusOr<std::vector<Measurement>> got = store_->GetMeasurements(PlanKey::Of(plan));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].agent_id, "a1");
  EXPECT_EQ((*got)[1].agent_id, "");
}

}  // namespace
}  // namespace fusor::db
