// Concurrency on one file: several threads of one process and several processes write and read at
// once. Every call must succeed (no SQLITE_BUSY, nor the Unavailable it would become, reaches a
// caller) and the counts must add up.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include "db/sqlite_plan_store.h"
#include "tests/db/test_db.h"

namespace fusor::db {
namespace {

using testing::Graph;
using testing::GraphHash;
using testing::Plan;
using testing::Profile;

constexpr int kProcesses = 3;
constexpr int kThreads = 4;
constexpr int kPlansEach = 40;

// Writes kPlansEach plans numbered from first, reading one back after each; "" or the first error.
std::string WriteAndReadBack(PlanStore& store, uint64_t first) {
  for (uint64_t n = first; n < first + kPlansEach; ++n) {
    std::vector<Measurement> m(1);
    m[0].samples_ns = {10, 11, 12};
    Status s = store.PutPlan(Plan({.graph_hash = GraphHash(n)}), Graph("m", 6), m);
    if (!s.ok()) return s.ToString();
    StatusOr<StoredPlan> back = store.BestPlan(GraphHash(n), "target-a", "cm1");
    if (!back.ok()) return back.status().ToString();
  }
  return "";
}

// Queries, pages and counts until stop; "" or the first error.
std::string ReadUntil(PlanStore& store, const std::atomic<bool>& stop) {
  while (!stop.load()) {
    PlanQuery query;
    query.page_size = 25;
    StatusOr<PlanPage> page = store.QueryPlans(query);
    if (!page.ok()) return page.status().ToString();
    StatusOr<std::vector<DatabaseStats>> stats = store.Stats("cm1");
    if (!stats.ok()) return stats.status().ToString();
    StatusOr<StoredPlan> best = store.BestPlan(GraphHash(1), "target-a", "cm1");
    if (!best.ok() && best.status().code() != Status::Code::kNotFound) {
      return best.status().ToString();
    }
  }
  return "";
}

// Forks a child that opens its own store on path and runs WriteAndReadBack.
pid_t ForkWriter(const std::string& path, uint64_t first) {
  pid_t child = fork();
  if (child != 0) return child;
  StatusOr<std::unique_ptr<SqlitePlanStore>> store = SqlitePlanStore::Open(path, {});
  std::string error = store.ok() ? WriteAndReadBack(**store, first) : store.status().ToString();
  if (!error.empty()) std::cerr << "child writer: " << error << std::endl;
  _exit(error.empty() ? 0 : 1);
}

TEST(DbConcurrency, ThreadsAndProcessesWriteAndReadAtOnce) {
  testing::TempDir dir;
  std::string path = dir.File("tuning.db");
  ASSERT_TRUE(testing::OpenWritable(path)->PutTarget(Profile("target-a", "cm1", 1)).ok());
  // Children first, so no thread of this process exists when it forks.
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) children.push_back(ForkWriter(path, 1000 * (p + 1)));

  std::unique_ptr<SqlitePlanStore> store = testing::OpenWritable(path);
  ASSERT_NE(store, nullptr);
  std::mutex errors_mu;
  std::vector<std::string> errors;  // Guarded by errors_mu.
  auto note = [&](const std::string& error) {
    std::lock_guard<std::mutex> lock(errors_mu);
    if (!error.empty()) errors.push_back(error);
  };
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers, writers;
  for (int r = 0; r < 2; ++r) readers.emplace_back([&] { note(ReadUntil(*store, stop)); });
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] { note(WriteAndReadBack(*store, 100'000 * (t + 1))); });
  }
  for (std::thread& w : writers) w.join();
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a child writer failed";
  }
  stop = true;
  for (std::thread& r : readers) r.join();
  EXPECT_TRUE(errors.empty()) << errors.size() << " errors, first: " << errors.front();

  StatusOr<std::vector<DatabaseStats>> stats = store->Stats("cm1");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->front().plans, (kProcesses + kThreads) * kPlansEach);
  EXPECT_EQ(stats->front().measurements, (kProcesses + kThreads) * kPlansEach);
  EXPECT_EQ(stats->front().stale_plans, 0);
  EXPECT_EQ(testing::RawQuery(path, "PRAGMA integrity_check"), "ok");
}

TEST(DbConcurrency, ProcessesCreatingOneNewFileAtOnceAllSucceed) {
  testing::TempDir dir;
  std::string path = dir.File("fresh.db");
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < 4; ++p) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(gate[1]);
      char byte;
      (void)!read(gate[0], &byte, 1);  // Returns at EOF, when the parent opens the gate.
      StatusOr<std::unique_ptr<SqlitePlanStore>> store = SqlitePlanStore::Open(path, {});
      Status s = store.ok() ? (*store)->PutTarget(Profile("target-a", "cm1", 1)) : store.status();
      if (s.ok()) s = (*store)->PutPlan(Plan({.graph_hash = GraphHash(p)}), Graph("m", 2), {});
      if (!s.ok()) std::cerr << "child " << p << ": " << s.ToString() << std::endl;
      _exit(s.ok() ? 0 : 1);
    }
    children.push_back(child);
  }
  close(gate[0]);
  close(gate[1]);
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(testing::RawQuery(path, "PRAGMA user_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(testing::RawQuery(path, "SELECT count(*) FROM plans"), "4");
}

}  // namespace
}  // namespace fusor::db
