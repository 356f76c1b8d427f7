// Crash safety: a child process storing plans (single plans and multi-plan merges) is killed with
// SIGKILL at random moments, many times, from before the file exists onwards. After every kill the
// file passes PRAGMA integrity_check and every plan whose commit had returned in the child is
// there.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <vector>

#include "db/sqlite_plan_store.h"
#include "tests/db/test_db.h"

namespace fusor::db {
namespace {

using testing::Graph;
using testing::GraphHash;
using testing::Plan;
using testing::Profile;

constexpr int kKills = 30;
constexpr int kMaxDelayMs = 100;
constexpr int kMergeSize = 10;

void Report(int fd, uint64_t first, uint64_t count) {
  std::vector<uint64_t> numbers;
  for (uint64_t n = first; n < first + count; ++n) numbers.push_back(n);
  // Under PIPE_BUF bytes, so the parent never reads half a report.
  if (write(fd, numbers.data(), numbers.size() * sizeof(uint64_t)) < 0) _exit(3);
}

// The child: stores plans numbered from `first` until it is killed, reporting each commit.
[[noreturn]] void StorePlansUntilKilled(const std::string& path, int report_fd, uint64_t first) {
  StatusOr<std::unique_ptr<SqlitePlanStore>> store = SqlitePlanStore::Open(path, {});
  v1::HardwareProfile target = Profile("target-a", "cm1", 1);
  if (!store.ok() || !(*store)->PutTarget(target).ok()) _exit(2);
  for (uint64_t n = first;;) {
    if (n % 3 == 0) {
      PlanBundle bundle;
      bundle.targets.push_back(target);
      for (int i = 0; i < kMergeSize; ++i) {
        bundle.graphs.emplace_back(GraphHash(n + i), Graph("merged", 8));
        bundle.plans.push_back({Plan({.graph_hash = GraphHash(n + i)}), {}});
      }
      if (!(*store)->Merge(bundle, "crash test", true).ok()) _exit(4);
      Report(report_fd, n, kMergeSize);
      n += kMergeSize;
    } else {
      std::vector<Measurement> m(1);
      m[0].samples_ns = {1, 2, 3};
      if (!(*store)->PutPlan(Plan({.graph_hash = GraphHash(n)}), Graph("single", 8), m).ok()) {
        _exit(5);
      }
      Report(report_fd, n, 1);
      n += 1;
    }
  }
}

// Reads the reports arriving on fd: for delay_ms, or with until_eof until the writer is gone.
void Collect(int fd, int delay_ms, bool until_eof, std::vector<uint64_t>& committed) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms);
  uint64_t buffer[512];
  for (;;) {
    int wait_ms = -1;
    if (!until_eof) {
      auto left = deadline - std::chrono::steady_clock::now();
      wait_ms =
          static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(left).count());
      if (wait_ms <= 0) return;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0) continue;
    ssize_t got = read(fd, buffer, sizeof buffer);
    if (got <= 0) return;
    committed.insert(committed.end(), buffer, buffer + got / sizeof(uint64_t));
  }
}

// Checks the file after a kill; returns how many committed plans were verified.
void ExpectIntactWithEveryCommit(const std::string& path, const std::vector<uint64_t>& committed,
                                 int kill) {
  if (!std::filesystem::exists(path)) {
    EXPECT_TRUE(committed.empty()) << "kill " << kill;
    return;
  }
  EXPECT_EQ(testing::RawQuery(path, "PRAGMA integrity_check"), "ok") << "kill " << kill;
  if (committed.empty()) return;
  std::unique_ptr<SqlitePlanStore> store = testing::OpenReadOnly(path);
  ASSERT_NE(store, nullptr) << "kill " << kill;
  for (uint64_t n : committed) {
    PlanKey key{GraphHash(n), "target-a", "cm1", ""};
    ASSERT_TRUE(store->GetPlan(key, "cm1").ok()) << "plan " << n << " lost at kill " << kill;
  }
}

TEST(DbCrashSafety, KilledWriterNeverLosesACommitOrCorruptsTheFile) {
  testing::TempDir dir;
  std::string path = dir.File("tuning.db");
  std::mt19937 random(20240501);
  std::vector<uint64_t> all_committed;
  int kills_after_commits = 0;
  for (int kill = 0; kill < kKills; ++kill) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(fds[0]);
      StorePlansUntilKilled(path, fds[1], static_cast<uint64_t>(kill + 1) * 1'000'000);
    }
    close(fds[1]);
    std::vector<uint64_t> committed;
    Collect(fds[0], static_cast<int>(random() % (kMaxDelayMs + 1)), false, committed);
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited early with " << WEXITSTATUS(status);
    Collect(fds[0], 0, true, committed);
    close(fds[0]);
    ExpectIntactWithEveryCommit(path, all_committed, kill);
    ExpectIntactWithEveryCommit(path, committed, kill);
    kills_after_commits += committed.empty() ? 0 : 1;
    all_committed.insert(all_committed.end(), committed.begin(), committed.end());
  }
  std::cout << kKills << " kills, " << all_committed.size() << " plans committed and verified, "
            << kills_after_commits << " kills after at least one commit\n";
  // The kills must have landed among commits, not only before the first one.
  EXPECT_GE(kills_after_commits, kKills / 3);
  EXPECT_GT(all_committed.size(), 100u);
}

}  // namespace
}  // namespace fusor::db
