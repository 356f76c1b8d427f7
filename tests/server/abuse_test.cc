// What a caller without a token, or with one, can make fusord do beyond its role: nothing a
// request carries reaches the log before authentication, and after it only escaped and capped;
// refusals are logged at a bounded rate; the server's faults and file paths never reach a client;
// one principal cannot fill the tuning queue, and one job's callers are bounded.
#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include "server/request_log.h"
#include "tests/server/captured_log.h"
#include "tests/server/test_graphs.h"
#include "tests/server/test_server.h"

namespace fusor::testing {
namespace {

using grpc::StatusCode;
using namespace std::chrono_literals;

grpc::Status GetPlan(TestServer& t, const std::string& token, const std::string& hash,
                     v1::GetPlanResponse* response = nullptr) {
  grpc::ClientContext ctx;
  SetToken(&ctx, token);
  v1::GetPlanRequest request;
  request.set_graph_hash(hash);
  request.set_target_id(hash);
  v1::GetPlanResponse ignored;
  return t.stub->GetPlan(&ctx, request, response ? response : &ignored);
}

TEST(LogField, EscapesWhatCouldForgeALineAndCapsTheLength) {
  EXPECT_EQ(LogField("resnet18-3f2a"), "resnet18-3f2a");
  EXPECT_EQ(LogField(""), "-");
  EXPECT_EQ(LogField("a b\nrpc id=1"), "a\\x20b\\x0arpc\\x20id\\x3d1");
  EXPECT_EQ(LogField(std::string(300, 'x'), 8), "xxxxxxxx...(+292B)");
  EXPECT_EQ(LogQuoted("no plan for 'g'\n"), "\"no plan for 'g'\\x0a\"");
  EXPECT_EQ(LogQuoted("say \"hi\""), "\"say \\x22hi\\x22\"");
}

TEST(RefusalLogLimiter, LetsAFewLinesASecondThroughAndCountsTheRest) {
  ManualClock clock;
  RefusalLogLimiter limiter(2, &clock);
  EXPECT_EQ(limiter.Admit(), 0);
  EXPECT_EQ(limiter.Admit(), 0);
  EXPECT_EQ(limiter.Admit(), -1);
  EXPECT_EQ(limiter.Admit(), -1);
  clock.Advance(1s);
  EXPECT_EQ(limiter.Admit(), 2) << "the next line says how many were left out";
  EXPECT_EQ(limiter.Admit(), 0);
}

// The audit's attack: a call with no token whose graph hash holds a complete log line, and one
// whose field is megabytes long.
TEST(Abuse, NothingARequestCarriesIsLoggedBeforeAuthentication) {
  TestServer t;
  CapturedLog log;
  const std::string forged = "x\nrpc id=999 method=GetPlan principal=operator status=OK forged=1";
  EXPECT_EQ(GetPlan(t, "", forged).error_code(), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetPlan(t, "wrong-token-0123456789", std::string(1 << 20, 'y')).error_code(),
            StatusCode::UNAUTHENTICATED);
  const std::string text = log.text();
  EXPECT_EQ(text.find("forged"), std::string::npos) << text;
  EXPECT_EQ(text.find("yyyy"), std::string::npos) << "the field is not logged at all";
  EXPECT_LT(text.size(), 2000u) << text;
  for (const std::string& line : log.lines()) EXPECT_EQ(line.rfind("rpc id=", 0), 0u) << line;
}

TEST(Abuse, AfterAuthenticationRequestFieldsAreLoggedEscapedAndCapped) {
  TestServer t;
  CapturedLog log;
  const std::string forged = "x\nrpc id=999 forged=1" + std::string(1 << 20, 'z');
  EXPECT_TRUE(GetPlan(t, kReadToken, forged).ok());
  std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 1u) << log.text();
  EXPECT_NE(lines[0].find("graph=x\\x0arpc\\x20id\\x3d999"), std::string::npos) << lines[0];
  EXPECT_LT(lines[0].size(), 1000u);
}

TEST(Abuse, RefusedCallsAreLoggedAtABoundedRate) {
  TestServer t;
  CapturedLog log;
  for (int i = 0; i < 200; ++i) GetPlan(t, "", "g");
  // However fast the calls came, a second of them holds at most a few lines per second elapsed.
  EXPECT_LT(log.lines().size(), 100u);
  EXPECT_GE(log.lines().size(), 1u);
}

TEST(Abuse, ServerFaultsAndPathsNeverReachTheClient) {
  TestServer t(true, [](TunerServerOptions* o) {
    o->private_strings = {kFakeDbPath, "/srv/secret-dir"};
  });
  CapturedLog log;
  grpc::Status fault = GetPlan(t, kReadToken, "disk-error");
  EXPECT_EQ(fault.error_code(), StatusCode::INTERNAL);
  EXPECT_EQ(fault.error_message().find("secret"), std::string::npos) << fault.error_message();
  EXPECT_NE(fault.error_message().find("request id"), std::string::npos) << fault.error_message();
  EXPECT_NE(log.text().find("disk I/O error"), std::string::npos) << "the log keeps the detail";

  grpc::Status missing = GetPlan(t, kReadToken, "elsewhere");
  EXPECT_EQ(missing.error_code(), StatusCode::NOT_FOUND);
  EXPECT_EQ(missing.error_message().find("secret"), std::string::npos) << missing.error_message();
  EXPECT_NE(missing.error_message().find("graph elsewhere is not in database"), std::string::npos);
}

TEST(Abuse, APrivatePathIsHiddenOnlyWhereItStandsAsAPath) {
  const std::vector<std::string> secrets = {"tok", "/srv/fusor/plans.db", "/srv/fusor"};
  auto sent = [&](const std::string& message) {
    return ClientStatus(Status::NotFound(message), 7, secrets).error_message();
  };
  EXPECT_EQ(sent("unknown token; see tok"), "unknown token; see <server path>");
  EXPECT_EQ(sent("cannot read 'tok.bak'"), "cannot read '<server path>.bak'");
  EXPECT_EQ(sent("stock tokens"), "stock tokens");
  EXPECT_EQ(sent("disk full writing /srv/fusor/plans.db-wal"),
            "disk full writing <server path>-wal");
  EXPECT_EQ(sent("no space in /srv/fusor/tmp"), "no space in <server path>/tmp");
  EXPECT_EQ(sent("/srv/fusorx is fine"), "/srv/fusorx is fine");
}

TEST(Quota, OnePrincipalCannotFillTheTuningQueue) {
  TestServer t(true, [](TunerServerOptions* o) {
    o->queue_size = 8;
    o->max_jobs_per_principal = 1;
  });
  t.tuner.Hold();
  grpc::Status first, other;
  std::thread a([&] { first = RunTune(t.stub.get(), TuneRequestFor(ChainGraph(2)), kTuneToken); });
  WaitUntil([&] { return t.tuner.tune_calls.load() == 1; });
  grpc::Status second = RunTune(t.stub.get(), TuneRequestFor(ChainGraph(3)), kTuneToken);
  EXPECT_EQ(second.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(second.error_message().find("'tuner' already has 1 tuning jobs"), std::string::npos)
      << second.error_message();
  // Another principal still gets in, and joining the first's job is free.
  std::thread b([&] { other = RunTune(t.stub.get(), TuneRequestFor(ChainGraph(3)), kAdminToken); });
  WaitUntil([&] { return t.server->job_counts().queued == 1; });
  grpc::Status join;
  std::thread c([&] { join = RunTune(t.stub.get(), TuneRequestFor(ChainGraph(2)), kTuneToken); });
  WaitUntil([&] { return t.server->job_counts().subscribers == 3; });
  t.tuner.Release();
  a.join();
  b.join();
  c.join();
  EXPECT_TRUE(first.ok() && other.ok() && join.ok());
  // The slot comes back when the job ends.
  EXPECT_TRUE(RunTune(t.stub.get(), TuneRequestFor(ChainGraph(4)), kTuneToken).ok());
}

TEST(Quota, CallersSharingOneJobAreBounded) {
  TestServer t(true, [](TunerServerOptions* o) { o->max_joiners_per_job = 2; });
  t.tuner.Hold();
  grpc::Status a, b;
  std::thread ta([&] { a = RunTune(t.stub.get(), TuneRequestFor(ChainGraph(2)), kTuneToken); });
  std::thread tb([&] { b = RunTune(t.stub.get(), TuneRequestFor(ChainGraph(2)), kTuneToken); });
  WaitUntil([&] { return t.server->job_counts().subscribers == 2; });
  grpc::Status third = RunTune(t.stub.get(), TuneRequestFor(ChainGraph(2)), kTuneToken);
  EXPECT_EQ(third.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(third.error_message().find("2 callers waiting"), std::string::npos)
      << third.error_message();
  t.tuner.Release();
  ta.join();
  tb.join();
  EXPECT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(t.tuner.tune_calls.load(), 1);
}

}  // namespace
}  // namespace fusor::testing
