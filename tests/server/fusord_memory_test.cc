// What fusord's memory costs a caller, with the real fusord on loopback: the memory-cost probe
// of docs/reliability.md. A call without a valid token is refused from its metadata, before its
// request is read, so 64 of them at once, each of the largest size fusord accepts, raise fusord's
// peak resident memory by less than 64 MB; an authenticated request that would parse into more
// than the parse budget is refused before it is parsed. Memory, not time, is asserted.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/server/fusord_process.h"
#include "tests/server/memory_probe.h"
#include "tests/server/test_tokens.h"

namespace fusor::testing {
namespace {

constexpr int kMessageBytes = 8 << 20;  // fusord's default max_message_bytes.
constexpr int64_t kMaxGrowthBytes = int64_t{64} << 20;

class FusordMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("fusord-memory");
    auto p = FusordProcess::Start({"--db", (dir_ / "tuning.db").string(), "--token-file",
                                   WriteTokenFile(dir_), "--shutdown-grace", "1"},
                                  dir_ / "fusord.log");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    fusord_ = std::move(p).value();
  }
  void TearDown() override {
    if (HasFailure() && fusord_) std::cerr << "fusord log:\n" << fusord_->Log();
    fusord_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_;
  std::unique_ptr<FusordProcess> fusord_;
};

TEST_F(FusordMemory, SixtyFourUnauthenticatedMaximumSizeCallsCostLessThan64MB) {
  const std::string request = EmptyNodesTuneRequest(kMessageBytes);
  for (const std::string& token : {std::string(), std::string("wrong-token-0123456789")}) {
    auto probe = ProbeTuneMemory(fusord_->address(), fusord_->pid(), 64, request, token);
    ASSERT_TRUE(probe.ok()) << probe.status().ToString();
    for (const grpc::Status& s : probe->statuses) {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    }
    const int64_t growth = probe->peak_after_bytes - probe->peak_before_bytes;
    std::cout << "token '" << token << "': VmHWM " << (probe->peak_before_bytes >> 20) << " -> "
              << (probe->peak_after_bytes >> 20) << " MiB\n";
    EXPECT_LT(growth, kMaxGrowthBytes) << "peak RSS grew by " << (growth >> 20) << " MiB";
  }
  EXPECT_TRUE(fusord_->running());
}

TEST_F(FusordMemory, AnAuthenticatedRequestBeyondTheParseBudgetIsRefusedBeforeItIsParsed) {
  const std::string request = EmptyNodesTuneRequest(kMessageBytes);
  auto probe = ProbeTuneMemory(fusord_->address(), fusord_->pid(), 4, request, kTuneToken);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  for (const grpc::Status& s : probe->statuses) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_NE(s.error_message().find("parse budget"), std::string::npos) << s.error_message();
  }
  const int64_t growth = probe->peak_after_bytes - probe->peak_before_bytes;
  std::cout << "4 authenticated: VmHWM " << (probe->peak_before_bytes >> 20) << " -> "
            << (probe->peak_after_bytes >> 20) << " MiB\n";
  // Four requests of 8 MiB are read (and priced) at once; none is parsed.
  EXPECT_LT(growth, kMaxGrowthBytes) << "peak RSS grew by " << (growth >> 20) << " MiB";
}

}  // namespace
}  // namespace fusor::testing
