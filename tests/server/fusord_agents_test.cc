// Measurement agents with the real parts: the real fusord on loopback over a real PostgreSQL 15
// (tests/db/test_postgres.h) or a real SQLite file, real `fusor agent` processes (and the same
// agent code in process), real oneDNN runs. A Tune for a target with a live agent is measured on
// the agent and records it; an agent killed with SIGKILL mid-job leaves its job to another agent
// once its lease expires, and the plan is stored; a report for a job the agent no longer holds is
// refused; a target with no live agent gets the prediction, saying so; wrong roles and unknown
// agents get clear errors. fusord runs with --measure-on-agents, so this host's agents measure
// for this host's CPU, and with short leases; waits poll with generous bounds that only fail on
// a hang.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <mutex>
#include <regex>
#include <thread>

#include "client/measurement_agent.h"
#include "client/remote_tuner.h"
#include "costmodel/hardware_profile.h"
#include "db/sqlite_plan_store.h"
#include "search/plan_choice.h"
#include "tests/db/test_postgres.h"
#include "tests/server/fusord_process.h"
#include "tests/server/test_graphs.h"
#include "tests/server/test_tokens.h"

namespace fusor::testing {
namespace {

using db::testing::TestPostgres;
using namespace std::chrono_literals;

constexpr char kAgentToken[] = "agent-token-0123456789";

// Polls `done` every 50 ms until it holds; false after `bound` (a hang, not a slow host).
bool Eventually(const std::function<bool()>& done, std::chrono::seconds bound = 120s) {
  auto end = std::chrono::steady_clock::now() + bound;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

class FusordAgents : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("fusord-agents");
    tokens_ = WriteTokenFile(dir_);
    std::ofstream(tokens_, std::ios::app) << kAgentToken << " agent farm-agent\n";
    agent_token_file_ = (dir_ / "agent-token").string();
    std::ofstream(agent_token_file_) << kAgentToken << "\n";
  }
  void TearDown() override {
    if (HasFailure()) {
      if (fusord_) std::cerr << "fusord log:\n" << fusord_->Log();
      for (auto& [name, agent] : agents_) std::cerr << name << " log:\n" << agent->Log();
    }
    agents_.clear();
    fusord_.reset();
    postgres_.reset();
    std::filesystem::remove_all(dir_);
  }

  void StartPostgres() {
    auto server = TestPostgres::Start();
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    postgres_ = std::move(server).value();
    auto uri = postgres_->CreateDatabase("fusor");
    ASSERT_TRUE(uri.ok()) << uri.status().ToString();
    db_ = *uri;
  }

  // fusord on db_ with agents measuring this CPU, leases of `lease_s`.
  void StartFusord(double lease_s, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--db",
                                     db_,
                                     "--token-file",
                                     tokens_,
                                     "--measure-on-agents",
                                     "--agent-lease",
                                     std::to_string(lease_s),
                                     "--agent-poll",
                                     "1",
                                     "--measure-threads",
                                     "1",
                                     "--default-time-limit",
                                     "120",
                                     "--shutdown-grace",
                                     "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = FusordProcess::Start(args, dir_ / "fusord.log");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    fusord_ = std::move(p).value();
  }

  RemoteTuner Client(const std::string& token) const {
    RemoteTunerOptions o;
    o.address = fusord_->address();
    o.token = token;
    return RemoteTuner(o);
  }

  // An agent of the tests: one measuring thread, polls of a second.
  static MeasurementAgentOptions OneThreadAgent() {
    MeasurementAgentOptions options;
    options.measure_threads = 1;
    options.poll_s = 1;
    return options;
  }

  // This CPU's profile as fusord stored it, marked calibrated now: what an agent of this machine
  // registers (the agents here reuse it rather than calibrate for a minute).
  v1::HardwareProfile CalibratedProfile() const {
    auto targets = Client(kAdminToken).ListTargets({});
    EXPECT_TRUE(targets.ok()) << targets.status().ToString();
    EXPECT_EQ(targets->profiles_size(), 1);
    v1::HardwareProfile p = targets->profiles(0);
    p.set_calibrated_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
    return p;
  }

  // A `fusor agent` process whose own database holds this machine's calibration.
  FusordProcess* StartAgent(const std::string& name, const std::vector<std::string>& extra = {}) {
    std::string local_db = (dir_ / (name + ".db")).string();
    {
      auto store = db::SqlitePlanStore::Open(local_db, {});
      EXPECT_TRUE(store.ok()) << store.status().ToString();
      if (!store.ok()) return nullptr;
      Status s = (*store)->PutTarget(CalibratedProfile());
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    std::vector<std::string> argv = {FusorBinary(),
                                     "agent",
                                     "--server",
                                     fusord_->address(),
                                     "--token-file",
                                     agent_token_file_,
                                     "--local-db",
                                     local_db,
                                     "--name",
                                     name,
                                     "--measure-threads",
                                     "1",
                                     "--poll",
                                     "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = FusordProcess::StartProgram(argv, dir_ / (name + ".log"));
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return nullptr;
    agents_.emplace_back(name, std::move(p).value());
    return agents_.back().second.get();
  }

  std::string Sql(const std::string& sql) const { return TestPostgres::Query(db_, sql); }

  StatusOr<v1::TuneEvent::Result> Tune(const v1::TuneRequest& request) const {
    v1::TuneEvent::Result result;
    Status s = Client(kReadTuneToken)
                   .Tune(
                       request,
                       [&](const v1::TuneEvent& e) {
                         if (e.has_result()) result = e.result();
                       },
                       nullptr);
    if (!s.ok()) return s;
    return result;
  }

  static v1::TuneRequest Request(const v1::Graph& graph, int budget = 3) {
    v1::TuneRequest r = TuneRequestFor(graph);
    r.mutable_options()->set_measure_budget(budget);
    r.mutable_options()->set_time_limit_s(300);
    return r;
  }

  std::filesystem::path dir_;
  std::string tokens_;
  std::string agent_token_file_;
  std::unique_ptr<TestPostgres> postgres_;
  std::string db_;
  std::unique_ptr<FusordProcess> fusord_;
  std::vector<std::pair<std::string, std::unique_ptr<FusordProcess>>> agents_;
};

TEST_F(FusordAgents, ATuneIsMeasuredOnALiveAgentAndTheMeasurementNamesIt) {
  ASSERT_NO_FATAL_FAILURE(StartPostgres());
  ASSERT_NO_FATAL_FAILURE(StartFusord(30));
  ASSERT_NE(StartAgent("agent-a"), nullptr);
  ASSERT_TRUE(Eventually([&] { return Sql("SELECT count(*) FROM agents") == "1"; }));

  auto tuned = Tune(Request(ChainGraph(6, 4096, "chain6")));
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_EQ(tuned->measured_by().rfind("agent-a-", 0), 0u) << tuned->measured_by();
  EXPECT_EQ(tuned->unmeasured_reason(), "");
  EXPECT_GT(tuned->plan().measured_ns(), 0);
  // The agent ran the measurement protocol (search/plan_choice.h): rounds, and a decision.
  const v1::MeasuredConfidence& c = tuned->plan().confidence();
  EXPECT_GE(c.rounds(), ChoiceOptions().min_rounds);
  EXPECT_LE(c.rounds(), ChoiceOptions().max_rounds);
  EXPECT_TRUE(c.decision() == kChosenByMeasurement || c.decision() == kChosenByPrediction)
      << c.decision();
  EXPECT_EQ(c.measured_by(), tuned->measured_by());
  EXPECT_EQ(Sql("SELECT agent_id FROM measurements"), tuned->measured_by());
  EXPECT_EQ(Sql("SELECT state || ' ' || agent_id || ' ' || lease FROM measurement_jobs"),
            "done " + tuned->measured_by() + " 1");

  // The same request again is served from the store.
  auto again = Tune(Request(ChainGraph(6, 4096, "chain6")));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->cache_hit());
  EXPECT_EQ(Sql("SELECT count(*) FROM measurement_jobs"), "1");
}

TEST_F(FusordAgents, AnAgentKilledMidJobLeavesTheJobToAnotherAndThePlanIsStored) {
  ASSERT_NO_FATAL_FAILURE(StartPostgres());
  ASSERT_NO_FATAL_FAILURE(StartFusord(2));
  // Agent a times each plan for as long as its repeat cap allows (seconds on a megabyte-wide
  // chain), so it is still measuring when killed.
  FusordProcess* slow = StartAgent("agent-a", {"--min-measure-ms", "600000"});
  ASSERT_NE(slow, nullptr);
  ASSERT_TRUE(Eventually([&] { return Sql("SELECT count(*) FROM agents") == "1"; }));

  StatusOr<v1::TuneEvent::Result> tuned = Status::Internal("not run");
  std::thread tune([&] { tuned = Tune(Request(ChainGraph(8, 1 << 20, "wide8"))); });
  bool leased = Eventually([&] {
    return Sql("SELECT agent_id FROM measurement_jobs WHERE state = 'leased'")
               .rfind("agent-a-", 0) == 0;
  });
  EXPECT_TRUE(leased);
  slow->Kill();
  EXPECT_EQ(Sql("SELECT state FROM measurement_jobs"), "leased");  // a died holding it.
  ASSERT_NE(StartAgent("agent-b"), nullptr);
  tune.join();

  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_EQ(tuned->measured_by().rfind("agent-b-", 0), 0u) << tuned->measured_by();
  EXPECT_GT(tuned->plan().measured_ns(), 0);
  EXPECT_EQ(Sql("SELECT state || ' ' || lease FROM measurement_jobs"), "done 2");
  EXPECT_EQ(Sql("SELECT count(*) FROM plans"), "1");
  EXPECT_EQ(Sql("SELECT agent_id FROM measurements"), tuned->measured_by());
}

// The agent code in process, against fusord on a SQLite file.
class FusordAgentsOnSqlite : public FusordAgents {
 protected:
  void SetUp() override {
    FusordAgents::SetUp();
    db_ = (dir_ / "tuning.db").string();
  }

  // Starts a Tune of a 4-node chain (measure budget 2) on *tune and leases its measurement job
  // with `agent` into *job; the Tune's result lands in *tuned.
  void TuneAndLease(MeasurementAgent& agent, std::thread* tune,
                    StatusOr<v1::TuneEvent::Result>* tuned,
                    std::optional<v1::MeasurementJob>* job) {
    *tune =
        std::thread([this, tuned] { *tuned = Tune(Request(ChainGraph(4, 1024, "chain4"), 2)); });
    ASSERT_TRUE(Eventually([&] {
      auto leased = agent.Lease(nullptr);
      *job = leased.ok() ? *leased : std::optional<v1::MeasurementJob>();
      return job->has_value();
    }));
  }
};

// A farm operator's view: `fusor agents list` and `fusor jobs list` with a read token, and
// /metrics, say which agents are alive, which jobs wait, who holds which and which was taken over
// after a lease expired; the waiting Tune says what it waits for and until when.
TEST_F(FusordAgentsOnSqlite, AnOperatorSeesAgentsQueueLeasesAndReleasesFromTheCliAndMetrics) {
  ASSERT_NO_FATAL_FAILURE(StartFusord(2, {"--metrics-listen", "127.0.0.1:0"}));
  std::smatch m;
  const std::string started = fusord_->Log();
  ASSERT_TRUE(std::regex_search(started, m, std::regex("metrics=http://127\\.0\\.0\\.1:([0-9]+)")));
  const int metrics_port = std::stoi(m[1]);
  auto scrape = [&] {
    httplib::Client http("127.0.0.1", metrics_port);
    auto response = http.Get("/metrics");
    return response ? response->body : std::string("no answer");
  };
  auto cli = [&](std::vector<std::string> args, const std::string& token = kReadToken) {
    args.insert(args.begin(), FusorBinary());
    for (const std::string& a :
         {std::string("--server"), fusord_->address(), std::string("--token"), token}) {
      args.push_back(a);
    }
    return RunCommand(args);
  };
  RemoteTuner connection = Client(kAgentToken);
  MeasurementAgentOptions options = OneThreadAgent();
  MeasurementAgent first(&connection, options);
  ASSERT_TRUE(first.Register(CalibratedProfile()).ok());
  const std::string target = first.target_id();

  std::vector<std::string> progress;
  std::mutex progress_mu;
  StatusOr<v1::TuneEvent::Result> tuned = Status::Internal("not run");
  std::thread tune([&] {
    v1::TuneEvent::Result result;
    Status s = Client(kReadTuneToken)
                   .Tune(
                       Request(ChainGraph(4, 1024, "chain4"), 2),
                       [&](const v1::TuneEvent& e) {
                         if (e.has_result()) result = e.result();
                         std::lock_guard lock(progress_mu);
                         if (e.has_progress()) progress.push_back(e.progress().detail());
                       },
                       nullptr);
    tuned = s.ok() ? StatusOr<v1::TuneEvent::Result>(result) : StatusOr<v1::TuneEvent::Result>(s);
  });
  // Queued: the job waits, the agent is live.
  ASSERT_TRUE(Eventually([&] {
    return cli({"jobs", "list"}).output.find("queued") != std::string::npos;
  }));
  CommandResult agents = cli({"agents", "list"});
  EXPECT_EQ(agents.exit_code, 0) << agents.output;
  EXPECT_NE(agents.output.find(first.agent_id()), std::string::npos) << agents.output;
  EXPECT_NE(agents.output.find("live"), std::string::npos) << agents.output;
  // A sample of `family` for this target: labels after the target's, then the value's start.
  auto has_series = [&](const std::string& text, const std::string& family,
                        const std::string& rest) {
    return text.find(family + "{target=\"" + target + "\"" + rest) != std::string::npos;
  };
  const std::string queued = scrape();
  EXPECT_TRUE(has_series(queued, "fusor_measurement_jobs", ",state=\"queued\"} 1")) << queued;
  EXPECT_TRUE(has_series(queued, "fusor_measurement_agents_live", "} 1")) << queued;
  EXPECT_TRUE(has_series(queued, "fusor_measurement_job_oldest_age_seconds", "} ")) << queued;

  // Leased to the first agent, which then goes quiet: its lease expires.
  std::optional<v1::MeasurementJob> job;
  ASSERT_TRUE(Eventually([&] {
    auto leased = first.Lease(nullptr);
    job = leased.ok() ? *leased : std::optional<v1::MeasurementJob>();
    return job.has_value();
  }));
  CommandResult held = cli({"jobs", "list"});
  EXPECT_NE(held.output.find("leased to " + first.agent_id()), std::string::npos) << held.output;
  ASSERT_TRUE(Eventually([&] {
    return cli({"jobs", "list"}).output.find("lease of " + first.agent_id() + " expired") !=
           std::string::npos;
  }));
  EXPECT_TRUE(has_series(scrape(), "fusor_measurement_jobs", ",state=\"lease_expired\"} 1"));
  auto told = [&](const std::string& part) {
    std::lock_guard lock(progress_mu);
    for (const std::string& line : progress) {
      if (line.find(part) != std::string::npos) return true;
    }
    return false;
  };
  // The waiting Tune hears of it (within one poll of the job) before another agent takes over.
  EXPECT_TRUE(Eventually([&] { return told("waits for a new lease until"); }));

  // A second agent takes the job over: a re-lease.
  options.max_jobs = 1;
  MeasurementAgent second(&connection, options);
  ASSERT_TRUE(second.Register(CalibratedProfile()).ok());
  ASSERT_TRUE(second.Run(nullptr).ok());
  tune.join();
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_EQ(tuned->measured_by(), second.agent_id());
  const std::string after = scrape();
  EXPECT_TRUE(has_series(after, "fusor_measurement_leases_total", "} 2")) << after;
  EXPECT_TRUE(has_series(after, "fusor_measurement_releases_total", "} 1")) << after;
  CommandResult all = cli({"jobs", "list", "--all", "--json"});
  EXPECT_EQ(all.exit_code, 0) << all.output;
  EXPECT_NE(all.output.find("\"agent_id\": \"" + second.agent_id() + "\""), std::string::npos)
      << all.output;
  EXPECT_NE(all.output.find("\"lease\": \"2\""), std::string::npos) << all.output;

  // What else the waiting Tune was told: a lease awaited, the first agent measuring.
  EXPECT_TRUE(told("waits for a lease until"));
  EXPECT_TRUE(told("measuring on agent " + first.agent_id()));

  // The lists are for the read role; an agent's token is not enough.
  CommandResult refused = cli({"agents", "list"}, kAgentToken);
  EXPECT_EQ(refused.exit_code, 5) << refused.output;
}

TEST_F(FusordAgentsOnSqlite, AReportForAJobTheAgentNoLongerHoldsIsRefused) {
  ASSERT_NO_FATAL_FAILURE(StartFusord(1));
  RemoteTuner connection = Client(kAgentToken);
  MeasurementAgentOptions options = OneThreadAgent();
  MeasurementAgent first(&connection, options);
  ASSERT_TRUE(first.Register(CalibratedProfile()).ok());

  StatusOr<v1::TuneEvent::Result> tuned = Status::Internal("not run");
  std::thread tune([&] { tuned = Tune(Request(ChainGraph(4, 1024, "chain4"), 2)); });
  std::optional<v1::MeasurementJob> job;
  ASSERT_TRUE(Eventually([&] {
    auto leased = first.Lease(nullptr);
    EXPECT_TRUE(leased.ok()) << leased.status().ToString();
    job = leased.ok() ? *leased : std::optional<v1::MeasurementJob>();
    return job.has_value();
  }));
  EXPECT_EQ(job->lease(), 1);
  // The first agent goes quiet; its lease expires and the second agent takes the job.
  options.max_jobs = 1;
  MeasurementAgent second(&connection, options);
  ASSERT_TRUE(second.Register(CalibratedProfile()).ok());
  Status ran = second.Run(nullptr);
  EXPECT_TRUE(ran.ok()) << ran.ToString();
  tune.join();
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_EQ(tuned->measured_by(), second.agent_id());

  Status late = first.Report(*job, first.Measure(*job));
  EXPECT_EQ(late.code(), Status::Code::kFailedPrecondition) << late.ToString();
  EXPECT_NE(late.message().find("no longer holds measurement job"), std::string::npos)
      << late.ToString();
  EXPECT_NE(late.message().find(second.agent_id()), std::string::npos) << late.ToString();
}

// The audit's hole: an agent's error text went raw and whole into fusord's log, the database and
// the Tune result of whoever asked, so a newline forged a log line and a megabyte made one.
TEST_F(FusordAgentsOnSqlite, AnAgentsErrorTextIsEscapedAndCappedBeforeAnyoneSeesIt) {
  ASSERT_NO_FATAL_FAILURE(StartFusord(30));
  RemoteTuner connection = Client(kAgentToken);
  MeasurementAgentOptions options;
  options.measure_threads = 1;
  MeasurementAgent agent(&connection, options);
  ASSERT_TRUE(agent.Register(CalibratedProfile()).ok());

  StatusOr<v1::TuneEvent::Result> tuned = Status::Internal("not run");
  std::thread tune;
  std::optional<v1::MeasurementJob> job;
  ASSERT_NO_FATAL_FAILURE(TuneAndLease(agent, &tune, &tuned, &job));
  v1::MeasurementResult failed;
  failed.set_error("oneDNN failed\nrpc id=999 method=Tune principal=operator status=OK forged=1 " +
                   std::string(1 << 20, 'x'));
  Status reported = agent.Report(*job, failed);
  EXPECT_TRUE(reported.ok()) << reported.ToString();
  tune.join();
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  const std::string& reason = tuned->unmeasured_reason();
  EXPECT_NE(reason.find("oneDNN failed\\x0arpc id=999"), std::string::npos) << reason;
  EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;
  EXPECT_LT(reason.size(), 2048u) << "the megabyte is capped";

  const std::string log = fusord_->Log();
  EXPECT_EQ(log.find("\nrpc id=999"), std::string::npos) << "no forged line";
  size_t longest = 0;
  for (size_t at = 0, end; at < log.size(); at = end + 1) {
    end = log.find('\n', at);
    if (end == std::string::npos) end = log.size();
    longest = std::max(longest, end - at);
  }
  EXPECT_LT(longest, 4096u) << "no line holds the megabyte";
}

// The rounds an agent reports decide the plan (search/plan_choice.h), so each must be a time: a
// round that is not is refused by name, and the agent's correct report is then taken.
TEST_F(FusordAgentsOnSqlite, ARoundTimeThatIsNotAPositiveNumberIsRefused) {
  ASSERT_NO_FATAL_FAILURE(StartFusord(30));
  RemoteTuner connection = Client(kAgentToken);
  MeasurementAgentOptions options = OneThreadAgent();
  MeasurementAgent agent(&connection, options);
  ASSERT_TRUE(agent.Register(CalibratedProfile()).ok());
  StatusOr<v1::TuneEvent::Result> tuned = Status::Internal("not run");
  std::thread tune;
  std::optional<v1::MeasurementJob> job;
  ASSERT_NO_FATAL_FAILURE(TuneAndLease(agent, &tune, &tuned, &job));
  const v1::MeasurementResult result = agent.Measure(*job);
  ASSERT_EQ(result.error(), "");
  ASSERT_GE(result.timings(0).round_ns_size(), ChoiceOptions().min_rounds);
  v1::MeasurementResult broken = result;
  broken.mutable_timings(1)->set_round_ns(1, std::nan(""));
  Status refused = agent.Report(*job, broken);
  EXPECT_EQ(refused.code(), Status::Code::kInvalidArgument) << refused.ToString();
  EXPECT_NE(refused.message().find("timing 1 has round_ns[1] nan"), std::string::npos)
      << refused.ToString();
  Status reported = agent.Report(*job, result);
  EXPECT_TRUE(reported.ok()) << reported.ToString();
  tune.join();
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_EQ(tuned->measured_by(), agent.agent_id());
  EXPECT_EQ(tuned->plan().confidence().rounds(), result.timings(0).round_ns_size());
}

TEST_F(FusordAgentsOnSqlite, ATargetWithNoLiveAgentGetsThePredictionAndSaysSo) {
  ASSERT_NO_FATAL_FAILURE(StartFusord(30));
  // Another machine's calibrated profile, registered by an operator; no agent of it runs.
  auto other = ProfileFromProto(CalibratedProfile());
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  other->target.cpu_model = "Other CPU of the farm";
  v1::RegisterTargetRequest registration;
  ProfileToProto(*other, registration.mutable_profile());
  auto registered = Client(kAdminToken).RegisterTarget(registration);
  ASSERT_TRUE(registered.ok()) << registered.status().ToString();

  v1::TuneRequest request = Request(ChainGraph(4, 1024, "chain4"));
  request.set_target_id(registered->target_id());
  auto tuned = Tune(request);
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_EQ(tuned->plan().measured_ns(), 0);
  EXPECT_EQ(tuned->measured_by(), "");
  EXPECT_NE(tuned->unmeasured_reason().find("no live measurement agent of target " +
                                            registered->target_id()),
            std::string::npos)
      << tuned->unmeasured_reason();
}

TEST_F(FusordAgentsOnSqlite, WrongRolesAndUnknownAgentsGetClearErrors) {
  ASSERT_NO_FATAL_FAILURE(StartFusord(30));
  v1::RegisterAgentRequest registration;
  *registration.mutable_profile() = CalibratedProfile();
  auto refused = Client(kReadTuneToken).RegisterAgent(registration);
  EXPECT_EQ(refused.status().code(), Status::Code::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("'agent' role"), std::string::npos)
      << refused.status().ToString();

  v1::LeaseMeasurementJobRequest lease;
  lease.set_agent_id("nobody-00000000");
  auto unknown = Client(kAgentToken).LeaseMeasurementJob(lease, nullptr);
  EXPECT_EQ(unknown.status().code(), Status::Code::kNotFound);
  EXPECT_NE(unknown.status().message().find("agent 'nobody-00000000' is not registered"),
            std::string::npos)
      << unknown.status().ToString();

  v1::RegisterAgentRequest uncalibrated = registration;
  uncalibrated.mutable_profile()->set_calibrated_unix_ms(0);
  auto never = Client(kAgentToken).RegisterAgent(uncalibrated);
  EXPECT_EQ(never.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(never.status().message().find("never calibrated"), std::string::npos)
      << never.status().ToString();

  // A report naming a lease the agent never had.
  auto agent = Client(kAgentToken).RegisterAgent(registration);
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  v1::ReportMeasurementRequest report;
  report.set_agent_id(agent->agent_id());
  report.set_job_id(4242);
  report.set_lease(1);
  auto nothing = Client(kAgentToken).ReportMeasurement(report);
  EXPECT_EQ(nothing.status().code(), Status::Code::kNotFound);
  EXPECT_NE(nothing.status().message().find("measurement job 4242"), std::string::npos)
      << nothing.status().ToString();
}

}  // namespace
}  // namespace fusor::testing
