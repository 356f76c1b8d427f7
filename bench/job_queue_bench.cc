// Measurement-job queue throughput and re-lease time, against a real tuning database (a SQLite
// file or PostgreSQL), through the MeasurementQueue calls fusord makes for agents:
//   (1) jobs/s: --jobs jobs are queued, then --agents threads (each a registered agent) lease and
//       finish them until none is left; prints jobs per second over the lease-and-finish phase;
//   (2) re-lease: a job is leased for --lease-ms and never renewed (an agent that died), while
//       another agent tries to lease every --poll-ms (fusord's lease poll); prints the time from
//       the lease to the second agent's lease, and how far past the expiry that was.
// Each phase is run --rounds times; medians are printed with every round.
//   build/bench/job_queue_bench --db postgresql:///fusor?host=/tmp/pg [--jobs 2000] [--agents 4]
//                               [--lease-ms 2000] [--poll-ms 200] [--rounds 5]
// The database is written to (a target "bench-target", agents, jobs): use a scratch one.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "db/open_plan_store.h"
#include "db/tuning_database.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string db;
  int jobs = 2000;
  int agents = 4;
  int64_t lease_ms = 2000;
  int64_t poll_ms = 200;
  int rounds = 5;
};

constexpr char kTarget[] = "bench-target";

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

fusor::v1::MeasurementJob Job(int i) {
  fusor::v1::MeasurementJob job;
  job.set_target_id(kTarget);
  char hash[65];
  std::snprintf(hash, sizeof hash, "%064x", static_cast<unsigned>(i + 1));
  job.set_graph_hash(hash);
  fusor::v1::Plan* plan = job.add_plans();
  plan->add_groups()->add_nodes(0);
  job.set_min_measure_ms(30);
  return job;
}

fusor::Status Setup(fusor::db::TuningDatabase& store, int agents) {
  fusor::v1::HardwareProfile profile;
  profile.mutable_target()->set_id(kTarget);
  profile.set_cost_model_version("bench");
  profile.set_calibrated_unix_ms(1);
  FUSOR_RETURN_IF_ERROR(store.PutTarget(profile));
  for (int a = 0; a <= agents; ++a) {
    FUSOR_RETURN_IF_ERROR(
        store.PutAgent({"bench-agent-" + std::to_string(a), kTarget, "bench", 0, 0}));
  }
  return fusor::Status::Ok();
}

// Phase 1: seconds to lease and finish `jobs` jobs with `agents` threads.
fusor::StatusOr<double> DrainSeconds(fusor::db::TuningDatabase& store, const Options& o) {
  for (int i = 0; i < o.jobs; ++i) FUSOR_RETURN_IF_ERROR(store.EnqueueJob(Job(i)).status());
  fusor::v1::MeasurementResult result;
  result.add_timings()->set_median_ns(1000);
  std::atomic<int> done{0};
  std::atomic<bool> failed{false};
  auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int a = 0; a < o.agents; ++a) {
    threads.emplace_back([&, a] {
      std::string agent = "bench-agent-" + std::to_string(a);
      for (;;) {
        auto job = store.LeaseJob(kTarget, agent, 600'000);
        if (!job.ok()) {
          std::fprintf(stderr, "lease: %s\n", job.status().ToString().c_str());
          failed = true;
          return;
        }
        if (!*job) return;
        fusor::Status s = store.FinishJob({(*job)->job_id, agent, (*job)->lease}, result);
        if (!s.ok()) {
          std::fprintf(stderr, "finish: %s\n", s.ToString().c_str());
          failed = true;
          return;
        }
        ++done;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (failed || done != o.jobs) return fusor::Status::Internal("the drain failed");
  return seconds;
}

// Phase 2: ms from a lease that is never renewed to another agent's lease of the job.
fusor::StatusOr<double> ReleaseMs(fusor::db::TuningDatabase& store, const Options& o) {
  FUSOR_RETURN_IF_ERROR(store.EnqueueJob(Job(-1)).status());
  const std::string dead = "bench-agent-" + std::to_string(o.agents);
  auto start = Clock::now();
  FUSOR_ASSIGN_OR_RETURN(auto first, store.LeaseJob(kTarget, dead, o.lease_ms));
  if (!first) return fusor::Status::Internal("nothing to lease");
  for (;;) {
    FUSOR_ASSIGN_OR_RETURN(auto again, store.LeaseJob(kTarget, "bench-agent-0", 600'000));
    if (again) {
      FUSOR_RETURN_IF_ERROR(store.FinishJob({again->job_id, "bench-agent-0", again->lease},
                                            fusor::v1::MeasurementResult()));
      return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Measurement-job queue throughput and re-lease time"};
  Options o;
  app.add_option("--db", o.db, "Scratch tuning database (SQLite file or postgresql://...)")
      ->required();
  app.add_option("--jobs", o.jobs, "Jobs per drain round");
  app.add_option("--agents", o.agents, "Leasing threads");
  app.add_option("--lease-ms", o.lease_ms, "Lease of the agent that dies");
  app.add_option("--poll-ms", o.poll_ms, "How often the other agent tries to lease");
  app.add_option("--rounds", o.rounds, "Rounds of each phase");
  CLI11_PARSE(app, argc, argv);
  auto store = fusor::db::OpenTuningDatabase(o.db);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  if (fusor::Status s = Setup(**store, o.agents); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::vector<double> rates, releases;
  for (int r = 0; r < o.rounds; ++r) {
    auto seconds = DrainSeconds(**store, o);
    auto ms = ReleaseMs(**store, o);
    if (!seconds.ok() || !ms.ok()) {
      std::fprintf(stderr, "%s\n",
                   (!seconds.ok() ? seconds.status() : ms.status()).ToString().c_str());
      return 1;
    }
    rates.push_back(o.jobs / *seconds);
    releases.push_back(*ms);
    std::printf(
        "round %d: %.0f jobs/s (%d jobs, %d agents); re-leased after %.0f ms (lease %lld "
        "ms, poll %lld ms)\n",
        r, rates.back(), o.jobs, o.agents, releases.back(), static_cast<long long>(o.lease_ms),
        static_cast<long long>(o.poll_ms));
  }
  std::printf("median: %.0f jobs/s; re-lease %.0f ms after the lease (%.0f ms past its expiry)\n",
              Median(rates), Median(releases), Median(releases) - static_cast<double>(o.lease_ms));
  return 0;
}
