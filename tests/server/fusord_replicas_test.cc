// Two fusord replicas on loopback sharing one real PostgreSQL 15 (tests/db/test_postgres.h): a plan
// tuned at one is served by the other, identical Tunes arriving at both at once search once, a
// calibration registered at one is used by the other, a
// replica killed with SIGKILL leaves the other serving, and a PostgreSQL that goes away gives
// clear errors until it returns, when the service recovers without a restart.
#include <gtest/gtest.h>

#include <thread>

#include "client/remote_tuner.h"
#include "tests/db/test_postgres.h"
#include "tests/server/fusord_process.h"
#include "tests/server/test_graphs.h"
#include "tests/server/test_tokens.h"

namespace fusor::testing {
namespace {

using db::testing::TestPostgres;

class FusordReplicas : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("fusord-replicas");
    tokens_ = WriteTokenFile(dir_);
    auto server = TestPostgres::Start();
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    postgres_ = std::move(server).value();
    auto uri = postgres_->CreateDatabase("fusor");
    ASSERT_TRUE(uri.ok()) << uri.status().ToString();
    uri_ = *uri;
  }
  void TearDown() override {
    for (size_t i = 0; HasFailure() && i < replicas_.size(); ++i) {
      if (replicas_[i]) std::cerr << "replica " << i << " log:\n" << replicas_[i]->Log();
    }
    replicas_.clear();
    postgres_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Starts one more fusord on the shared database; small budgets keep a tune to about a second.
  FusordProcess* StartReplica() {
    std::vector<std::string> args = {"--db",
                                     uri_,
                                     "--token-file",
                                     tokens_,
                                     "--default-measure-budget",
                                     "1",
                                     "--measure-threads",
                                     "1",
                                     "--default-time-limit",
                                     "20",
                                     "--shutdown-grace",
                                     "2"};
    std::string log = "fusord" + std::to_string(replicas_.size()) + ".log";
    auto p = FusordProcess::Start(args, dir_ / log);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return nullptr;
    replicas_.push_back(std::move(p).value());
    return replicas_.back().get();
  }

  static RemoteTuner Client(const FusordProcess& replica, const std::string& token) {
    RemoteTunerOptions o;
    o.address = replica.address();
    o.token = token;
    return RemoteTuner(o);
  }

  static StatusOr<v1::TuneEvent::Result> Tune(const FusordProcess& replica,
                                              const v1::TuneRequest& request) {
    v1::TuneEvent::Result result;
    Status s = Client(replica, kReadTuneToken)
                   .Tune(
                       request,
                       [&](const v1::TuneEvent& e) {
                         if (e.has_result()) result = e.result();
                       },
                       nullptr);
    if (!s.ok()) return s;
    return result;
  }

  static StatusOr<v1::GetPlanResponse> GetPlan(const FusordProcess& replica, const v1::Plan& plan) {
    v1::GetPlanRequest get;
    get.set_graph_hash(plan.graph_hash());
    get.set_target_id(plan.target_id());
    return Client(replica, kReadToken).GetPlan(get);
  }

  std::string Count(const std::string& sql) const { return TestPostgres::Query(uri_, sql); }

  std::filesystem::path dir_;
  std::string tokens_;
  std::unique_ptr<TestPostgres> postgres_;
  std::string uri_;
  std::vector<std::unique_ptr<FusordProcess>> replicas_;
};

TEST_F(FusordReplicas, IdenticalTunesAtTwoReplicasSearchOnceAndEitherServesThePlan) {
  FusordProcess* a = StartReplica();
  FusordProcess* b = StartReplica();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  v1::TuneRequest request = TuneRequestFor(ChainGraph(8, 256, "chain8"));
  StatusOr<v1::TuneEvent::Result> at_a = Status::Internal("not run");
  StatusOr<v1::TuneEvent::Result> at_b = Status::Internal("not run");
  std::thread ta([&] { at_a = Tune(*a, request); });
  std::thread tb([&] { at_b = Tune(*b, request); });
  ta.join();
  tb.join();
  ASSERT_TRUE(at_a.ok()) << at_a.status().ToString();
  ASSERT_TRUE(at_b.ok()) << at_b.status().ToString();
  // One replica searched and stored; the other answered with that stored plan.
  EXPECT_NE(at_a->cache_hit(), at_b->cache_hit());
  EXPECT_EQ(at_a->plan().SerializeAsString(), at_b->plan().SerializeAsString());
  EXPECT_EQ(Count("SELECT count(*) FROM tuning_history WHERE event = 'stored'"), "1");
  EXPECT_EQ(Count("SELECT count(*) FROM plans"), "1");

  const v1::Plan& plan = at_a->plan();
  for (FusordProcess* replica : {a, b}) {
    auto got = GetPlan(*replica, plan);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->plan().SerializeAsString(), plan.SerializeAsString());
  }
  v1::QueryPlansRequest query;
  query.set_model_name("chain8");
  auto listed = Client(*b, kReadToken).QueryPlans(query);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->plans_size(), 1);

  // A replica that dies leaves the other serving, reads and tunes.
  a->Kill();
  auto got = GetPlan(*b, plan);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->plan().SerializeAsString(), plan.SerializeAsString());
  auto tuned = Tune(*b, TuneRequestFor(ChainGraph(5, 128, "chain5")));
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_FALSE(tuned->cache_hit());
  EXPECT_EQ(Count("SELECT count(*) FROM plans"), "2");
}

TEST_F(FusordReplicas, ACalibrationRegisteredAtOneReplicaIsUsedByTheOther) {
  FusordProcess* a = StartReplica();
  FusordProcess* b = StartReplica();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  v1::TuneRequest request = TuneRequestFor(ChainGraph(6, 256, "chain6"));
  request.mutable_options()->set_measure_budget(0);  // Compare predictions only.
  auto before = Tune(*b, request);
  ASSERT_TRUE(before.ok()) << before.status().ToString();

  // The same CPU recalibrated through replica a: a newer profile with dearer kernel launches.
  auto targets = Client(*a, kReadToken).ListTargets(v1::ListTargetsRequest());
  ASSERT_TRUE(targets.ok()) << targets.status().ToString();
  v1::RegisterTargetRequest registration;
  for (const v1::HardwareProfile& p : targets->profiles()) {
    if (p.target().id() == before->plan().target_id()) *registration.mutable_profile() = p;
  }
  v1::HardwareProfile* profile = registration.mutable_profile();
  ASSERT_EQ(profile->target().id(), before->plan().target_id());
  profile->set_calibrated_unix_ms(before->plan().created_unix_ms() + 1);
  profile->mutable_dispatch_ns()->set_value(profile->dispatch_ns().value() + 4e5);
  profile->mutable_loop_dispatch_ns()->set_value(profile->loop_dispatch_ns().value() + 4e5);
  auto registered = Client(*a, kAdminToken).RegisterTarget(registration);
  ASSERT_TRUE(registered.ok()) << registered.status().ToString();

  // Replica b's plan is stale now, and b retunes it with the profile a registered.
  auto after = Tune(*b, request);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_FALSE(after->cache_hit());
  // At least one kernel launch, 0.4 ms dearer now.
  EXPECT_GE(after->plan().predicted_ns(), before->plan().predicted_ns() + 4e5);
}

TEST_F(FusordReplicas, PostgresGoingAwayGivesClearErrorsAndTheServiceRecovers) {
  FusordProcess* replica = StartReplica();
  ASSERT_NE(replica, nullptr);
  auto tuned = Tune(*replica, TuneRequestFor(ChainGraph(6, 256, "chain6")));
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();

  ASSERT_TRUE(postgres_->Stop().ok());
  auto got = GetPlan(*replica, tuned->plan());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kUnavailable) << got.status().ToString();
  EXPECT_NE(got.status().message().find("PostgreSQL database 'postgresql:///fusor?"),
            std::string::npos)
      << got.status().ToString();
  auto refused = Tune(*replica, TuneRequestFor(ChainGraph(4, 64, "chain4")));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kUnavailable) << refused.status().ToString();
  EXPECT_TRUE(replica->running());

  Status restarted = postgres_->Restart();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
  got = GetPlan(*replica, tuned->plan());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->plan().SerializeAsString(), tuned->plan().SerializeAsString());
  auto again = Tune(*replica, TuneRequestFor(ChainGraph(4, 64, "chain4")));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->cache_hit());
}

TEST_F(FusordReplicas, UnreachablePostgresStopsFusordAtStartNamingTheDatabase) {
  std::string uri = "postgresql://fusor:s3cret-pw@/nowhere?host=/nonexistent-dir&port=5999";
  auto p = FusordProcess::Start({"--db", uri, "--token-file", tokens_}, dir_ / "refused.log");
  ASSERT_FALSE(p.ok());
  std::string message = p.status().ToString();
  EXPECT_NE(message.find("nowhere"), std::string::npos) << message;
  EXPECT_EQ(message.find("s3cret-pw"), std::string::npos) << message;
}

}  // namespace
}  // namespace fusor::testing
