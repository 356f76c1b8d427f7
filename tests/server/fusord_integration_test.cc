// fusord end to end: the real binary with the real TuningService and a SQLite file in a temporary
// directory, on a loopback port, driven by the C++ client (RemoteTuner) and the `fusor` CLI.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "client/exit_codes.h"
#include "client/remote_tuner.h"
#include "costmodel/hardware_profile.h"
#include "graph/graph_proto.h"
#include "graph/onnx_import.h"
#include "tests/db/test_db.h"
#include "tests/server/fusord_process.h"
#include "tests/server/test_graphs.h"
#include "tests/server/test_tokens.h"
#include "tests/server/wire.h"

namespace fusor::testing {
namespace {

using namespace std::chrono_literals;

class Fusord : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("fusord-it");
    tokens_ = WriteTokenFile(dir_);
    db_ = (dir_ / "tuning.db").string();
  }
  void TearDown() override {
    if (HasFailure() && fusord_) std::cerr << "fusord log:\n" << fusord_->Log();
    fusord_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Small budgets keep each tune to about a second on a two-core machine.
  void StartFusord(std::vector<std::string> extra = {}, const std::string& grace_s = "2") {
    std::vector<std::string> args = {"--db",
                                     db_,
                                     "--token-file",
                                     tokens_,
                                     "--default-measure-budget",
                                     "1",
                                     "--measure-threads",
                                     "1",
                                     "--default-time-limit",
                                     "20",
                                     "--shutdown-grace",
                                     grace_s};
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = FusordProcess::Start(args, dir_ / ("fusord" + std::to_string(starts_++) + ".log"));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    fusord_ = std::move(p).value();
  }

  RemoteTuner Client(const std::string& token) const {
    RemoteTunerOptions o;
    o.address = fusord_->address();
    o.token = token;
    return RemoteTuner(o);
  }

  StatusOr<v1::TuneEvent::Result> Tune(const v1::TuneRequest& request,
                                       const std::string& token = kReadTuneToken) {
    v1::TuneEvent::Result result;
    Status s = Client(token).Tune(
        request,
        [&](const v1::TuneEvent& e) {
          if (e.has_result()) result = e.result();
        },
        nullptr);
    if (!s.ok()) return s;
    return result;
  }

  std::filesystem::path dir_;
  std::string tokens_;
  std::string db_;
  std::unique_ptr<FusordProcess> fusord_;
  int starts_ = 0;
};

TEST_F(Fusord, TuneThenCacheHitThenGetPlanThenQueryPlans) {
  StartFusord();
  v1::TuneRequest request = TuneRequestFor(ChainGraph(6, 256, "chain6"));
  auto first = Tune(request);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->cache_hit());
  const v1::Plan& plan = first->plan();
  ASSERT_EQ(plan.graph_hash().size(), 64u);
  EXPECT_GT(plan.groups_size(), 0);

  auto second = Tune(request);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second->cache_hit());
  EXPECT_EQ(second->plan().graph_hash(), plan.graph_hash());
  EXPECT_EQ(second->plan().created_unix_ms(), plan.created_unix_ms());

  v1::GetPlanRequest get;
  get.set_graph_hash(plan.graph_hash());
  get.set_target_id(plan.target_id());
  auto got = Client(kReadToken).GetPlan(get);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got->stale());
  EXPECT_EQ(got->plan().graph_hash(), plan.graph_hash());
  EXPECT_EQ(got->plan().groups_size(), plan.groups_size());

  v1::QueryPlansRequest query;
  query.set_model_name("chain6");
  auto listed = Client(kReadToken).QueryPlans(query);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->plans_size(), 1);
  EXPECT_EQ(listed->plans(0).graph_hash(), plan.graph_hash());
  ASSERT_EQ(listed->statuses_size(), 1);
  EXPECT_EQ(listed->statuses(0).model_name(), "chain6");
  EXPECT_FALSE(listed->statuses(0).stale()) << listed->statuses(0).stale_reason();

  get.set_graph_hash(std::string(64, '0'));
  EXPECT_EQ(Client(kReadToken).GetPlan(get).status().code(), Status::Code::kNotFound);
}

TEST_F(Fusord, RolesAndTokens) {
  StartFusord();
  v1::TuneRequest request = TuneRequestFor(ChainGraph(2, 16));
  EXPECT_EQ(Tune(request, kReadToken).status().code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(Tune(request, "").status().code(), Status::Code::kUnauthenticated);
  EXPECT_EQ(Tune(request, "wrong-token-0123456789").status().code(),
            Status::Code::kUnauthenticated);
  EXPECT_TRUE(Tune(request, kTuneToken).ok());
  EXPECT_EQ(Client(kTuneToken).ListTargets({}).status().code(), Status::Code::kPermissionDenied);
  auto targets = Client(kReadToken).ListTargets({});
  ASSERT_TRUE(targets.ok()) << targets.status().ToString();
  ASSERT_GE(targets->profiles_size(), 1);
  v1::RegisterTargetRequest reg;
  *reg.mutable_profile() = targets->profiles(0);
  EXPECT_EQ(Client(kReadTuneToken).RegisterTarget(reg).status().code(),
            Status::Code::kPermissionDenied);
  auto registered = Client(kAdminToken).RegisterTarget(reg);
  EXPECT_TRUE(registered.ok()) << registered.status().ToString();
  EXPECT_EQ(Client(kReadTuneToken).Calibrate({}).status().code(), Status::Code::kPermissionDenied);
}

TEST_F(Fusord, TenConcurrentIdenticalTunesRunOneJob) {
  StartFusord();
  v1::TuneRequest request = TuneRequestFor(ChainGraph(8, 512, "shared"));
  std::vector<StatusOr<v1::TuneEvent::Result>> results(10, Status::Internal("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < 10; ++i) threads.emplace_back([&, i] { results[i] = Tune(request); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status().ToString();
    // One plan, made once: every answer carries it.
    EXPECT_EQ(results[i]->plan().created_unix_ms(), results[0]->plan().created_unix_ms()) << i;
  }
  ASSERT_EQ(fusord_->Terminate(10s), 0);
  std::string log = fusord_->Log();
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  };
  // One search ran. A request that arrived after that job had finished (the tune takes tens of
  // ms) started a job of its own, which found the plan in the cache; the rest joined a job.
  const size_t hits = count(" cache hit"), joined = count("joined=1");
  EXPECT_EQ(count("tune: graph=") - hits, 1u) << log;
  EXPECT_EQ(10 - joined, 1 + hits) << log;  // Each job searched or hit the cache.
  EXPECT_GE(joined, 1u) << log;             // One worker alone would make them all cache hits.
}

TEST_F(Fusord, LimitsAndBadRequests) {
  StartFusord(
      {"--max-nodes", "8", "--max-tensor-elements", "100000", "--max-message-bytes", "65536"});
  EXPECT_EQ(Tune(TuneRequestFor(ChainGraph(9, 16))).status().code(),
            Status::Code::kInvalidArgument);
  auto big_tensor = Tune(TuneRequestFor(ChainGraph(2, 200000)));
  EXPECT_EQ(big_tensor.status().code(), Status::Code::kInvalidArgument);
  v1::TuneRequest huge = TuneRequestFor(ChainGraph(2, 16));
  (*huge.mutable_graph()->mutable_metadata())["padding"] = std::string(100000, 'x');
  EXPECT_EQ(Tune(huge).status().code(), Status::Code::kResourceExhausted);
  v1::GetPlanRequest get;
  get.set_graph_hash("not-a-hash");
  auto bad = Client(kReadToken).GetPlan(get);
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("graph_hash"), std::string::npos);
  v1::TuneRequest bad_algorithm = TuneRequestFor(ChainGraph(2, 16));
  bad_algorithm.mutable_options()->set_algorithm("quantum");
  EXPECT_EQ(Tune(bad_algorithm).status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Tune(TuneRequestFor(ChainGraph(8, 16))).ok());
}

TEST_F(Fusord, GarbageOnThePortAndMalformedProtosDoNotTakeItDown) {
  StartFusord({"--allow-insecure-remote"});
  std::mt19937 rng(3);
  std::string noise(32 << 10, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  EXPECT_TRUE(SendRawBytes(fusord_->port(), noise));
  EXPECT_TRUE(SendRawBytes(fusord_->port(), "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + noise));
  auto channel = grpc::CreateChannel(fusord_->address(), grpc::InsecureChannelCredentials());
  std::string valid = TuneRequestFor(ChainGraph(3, 16)).SerializeAsString();
  for (int i = 0; i < 50; ++i) {
    std::string payload = valid;
    payload[rng() % payload.size()] = static_cast<char>(rng());
    RawUnaryCall(channel, "/fusor.v1.FusionTuner/GetPlan", payload);
  }
  EXPECT_FALSE(RawUnaryCall(channel, "/fusor.v1.FusionTuner/Tune", "\xff\xff\xff").ok());
  EXPECT_TRUE(fusord_->running());
  EXPECT_EQ(HealthStatus(channel), 1);
  EXPECT_NE(ReflectionListing(channel).find("fusor.v1.FusionTuner"), std::string::npos);
  EXPECT_TRUE(Client(kReadToken).ListTargets({}).ok());
}

// Tunes a small graph to completion, starts tuning SqueezeNet, sends SIGTERM once that job runs,
// and checks fusord exits cleanly; returns how the in-flight call ended and the committed plan.
struct SigtermOutcome {
  Status in_flight;
  v1::Plan committed;
  std::string in_flight_model;
};

class FusordSigterm : public Fusord {
 protected:
  SigtermOutcome TuneThenSigterm(const std::string& grace_s) {
    SigtermOutcome out;
    StartFusord({}, grace_s);
    auto committed = Tune(TuneRequestFor(ChainGraph(4, 64, "committed")));
    EXPECT_TRUE(committed.ok()) << committed.status().ToString();
    if (committed.ok()) out.committed = committed->plan();
    auto squeezenet = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/squeezenet1_1.onnx");
    EXPECT_TRUE(squeezenet.ok()) << squeezenet.status().ToString();
    v1::TuneRequest request = TuneRequestFor(ToProto(*squeezenet));
    request.mutable_options()->set_measure_budget(4);
    out.in_flight_model = request.graph().model_name();
    std::atomic<bool> running{false};
    std::thread th([&] {
      out.in_flight =
          Client(kTuneToken)
              .Tune(
                  request, [&](const v1::TuneEvent& e) { running = running || e.has_progress(); },
                  nullptr);
    });
    auto until = std::chrono::steady_clock::now() + 20s;
    while (!running && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
    EXPECT_TRUE(running);
    EXPECT_EQ(fusord_->Terminate(30s), 0) << "fusord exits cleanly";
    th.join();
    EXPECT_NE(fusord_->Log().find("database " + db_ + " closed"), std::string::npos);
    return out;
  }

  // Restarts fusord on the same database and counts the plans stored for `model`.
  int PlansAfterRestart(const std::string& model) {
    StartFusord();
    v1::QueryPlansRequest q;
    q.set_model_name(model);
    auto stored = Client(kReadToken).QueryPlans(q);
    EXPECT_TRUE(stored.ok()) << stored.status().ToString();
    return stored.ok() ? stored->plans_size() : -1;
  }

  void ExpectIntactDatabase() {
    fusord_->Terminate(10s);
    if (!std::filesystem::exists("/usr/bin/sqlite3")) return;
    CommandResult check = RunCommand({"/usr/bin/sqlite3", db_, "PRAGMA integrity_check;"});
    EXPECT_EQ(check.output, "ok\n");
  }
};

TEST_F(FusordSigterm, InFlightTuneIsCancelledAndNoCommittedPlanIsLost) {
  SigtermOutcome out = TuneThenSigterm("0");
  EXPECT_FALSE(out.in_flight.ok()) << "no grace: the job is cancelled";
  EXPECT_EQ(ExitCodeFor(out.in_flight), kExitUnavailable) << out.in_flight.ToString();
  EXPECT_EQ(PlansAfterRestart("committed"), 1);
  v1::GetPlanRequest get;
  get.set_graph_hash(out.committed.graph_hash());
  auto again = Client(kReadToken).GetPlan(get);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->plan().created_unix_ms(), out.committed.created_unix_ms());
  ExpectIntactDatabase();
}

TEST_F(FusordSigterm, InFlightTuneFinishesWithinTheGraceAndIsStored) {
  SigtermOutcome out = TuneThenSigterm("30");
  EXPECT_TRUE(out.in_flight.ok()) << out.in_flight.ToString();
  EXPECT_EQ(PlansAfterRestart(out.in_flight_model), 1);
  EXPECT_EQ(PlansAfterRestart("committed"), 1);
  ExpectIntactDatabase();
}

// fusord SIGKILLed at random points while clients tune and store: every plan a client was told
// about survives, the database passes SQLite's integrity check, and the restarted server answers.
// FUSOR_KILLS sets the number of kills (default 25; docs/reliability.md gives a longer run).
TEST_F(Fusord, KilledAtRandomPointsNeverLosesAnAcknowledgedPlan) {
  const char* env = std::getenv("FUSOR_KILLS");
  const int kills = env != nullptr ? std::atoi(env) : 25;
  std::mt19937 rng(20261126);
  std::mutex mu;
  std::vector<std::string> acknowledged;  // Graph hashes whose Tune returned a plan; guarded by mu.
  std::atomic<int> next_graph{0};
  for (int k = 0; k < kills; ++k) {
    // Prediction only (no measurement), so plans are stored many times a second.
    auto p = FusordProcess::Start(
        {"--db", db_, "--token-file", tokens_, "--default-measure-budget", "0"},
        dir_ / ("killed" + std::to_string(k) + ".log"));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    fusord_ = std::move(p).value();
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int c = 0; c < 3; ++c) {
      clients.emplace_back([&] {
        while (!stop) {
          v1::TuneRequest request = TuneRequestFor(ChainGraph(4, 16 + next_graph++));
          request.mutable_options()->set_measure_budget(0);
          auto r = Tune(request);
          if (r.ok()) {
            std::lock_guard<std::mutex> lock(mu);
            acknowledged.push_back(r->plan().graph_hash());
          }
        }
      });
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<>(20, 400)(rng)));
    fusord_->Kill();
    stop = true;
    for (auto& t : clients) t.join();
  }
  ASSERT_GT(acknowledged.size(), static_cast<size_t>(kills)) << "the clients stored plans";
  CommandResult check = RunCommand({"/usr/bin/sqlite3", db_, "PRAGMA integrity_check"}, {}, 60s);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_EQ(check.output, "ok\n");
  StartFusord();
  RemoteTuner reader = Client(kReadToken);
  for (const std::string& hash : acknowledged) {
    v1::GetPlanRequest get;
    get.set_graph_hash(hash);
    EXPECT_TRUE(reader.GetPlan(get).ok()) << "acknowledged plan " << hash << " was lost";
  }
  std::printf("%d kills, %zu acknowledged plans, all found\n", kills, acknowledged.size());
}

TEST_F(Fusord, RefusesToListenBeyondLoopbackWithoutTokens) {
  CommandResult r = RunCommand({FusordBinary(), "--listen", "0.0.0.0:0", "--db", db_}, {}, 20s);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--allow-insecure-remote"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(db_)) << "refused before opening the database";
  CommandResult plaintext = RunCommand(
      {FusordBinary(), "--listen", "0.0.0.0:0", "--db", db_, "--token-file", tokens_}, {}, 20s);
  EXPECT_EQ(plaintext.exit_code, 1);
  EXPECT_NE(plaintext.output.find("refusing to take bearer tokens in plaintext"), std::string::npos)
      << plaintext.output;
  CommandResult bad_config = RunCommand({FusordBinary(), "--config", tokens_}, {}, 20s);
  EXPECT_EQ(bad_config.exit_code, 2) << bad_config.output;
}

// The first line of `text` containing `part`, without its newline and trailing blanks.
std::string LineWith(const std::string& text, const std::string& part) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(part) == std::string::npos) continue;
    return line.substr(0, line.find_last_not_of(' ') + 1);
  }
  return "";
}

// A farm's CI gate reads staleness from `fusor db query --server`: it must be the database's.
TEST_F(Fusord, DbQueryServerShowsEachPlansModelAndStaleness) {
  {
    std::unique_ptr<db::SqlitePlanStore> store = db::testing::OpenWritable(db_);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store
                    ->PutTarget(db::testing::Profile("target-a", kCostModelVersion,
                                                     db::testing::kCalibrated))
                    .ok());
    auto put = [&](int n, const std::string& version, const std::string& model) {
      v1::Plan plan = db::testing::Plan({.graph_hash = db::testing::GraphHash(n),
                                         .cost_model_version = version,
                                         .created_unix_ms = db::testing::kCalibrated + n});
      ASSERT_TRUE(store->PutPlan(plan, db::testing::Graph(model, 4), {}).ok());
    };
    put(2, kCostModelVersion, "current_model");
    put(1, "analytical-0", "stale_model");
  }
  StartFusord();
  CommandResult json = RunCommand({FusorBinary(), "db", "query", "--json", "--server",
                                   fusord_->address(), "--token", kReadToken},
                                  {}, 30s);
  ASSERT_EQ(json.exit_code, 0) << json.output;
  auto j = nlohmann::json::parse(json.output, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object() && j["plans"].size() == 2) << json.output;
  EXPECT_EQ(j["plans"][0]["model_name"], "current_model");
  EXPECT_EQ(j["plans"][0]["stale"], false);
  EXPECT_EQ(j["plans"][1]["model_name"], "stale_model");
  EXPECT_EQ(j["plans"][1]["stale"], true);
  EXPECT_NE(j["plans"][1]["stale_reason"].get<std::string>().find("analytical-0"),
            std::string::npos)
      << json.output;
  CommandResult table = RunCommand(
      {FusorBinary(), "db", "query", "--server", fusord_->address(), "--token", kReadToken}, {},
      30s);
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_EQ(LineWith(table.output, "current_model").rfind(" current"),
            LineWith(table.output, "current_model").size() - 8)
      << table.output;
  EXPECT_EQ(LineWith(table.output, "stale_model").rfind(" stale"),
            LineWith(table.output, "stale_model").size() - 6)
      << table.output;
}

// ---- The fusor CLI against fusord ----

bool CliHasRemoteTune() {
  CommandResult r = RunCommand({FusorBinary(), "tune", "--help"}, {}, 20s);
  return r.exit_code == 0 && r.output.find("--server") != std::string::npos;
}

TEST_F(Fusord, CliTuneAgainstTheServer) {
  if (!CliHasRemoteTune()) GTEST_SKIP() << "fusor has no `tune --server` yet";
  StartFusord();
  std::string model = std::string(FUSOR_MODELS_DIR) + "/squeezenet1_1.onnx";
  std::ofstream(dir_ / "client-token") << kReadTuneToken << "\n";
  std::vector<std::string> tune = {FusorBinary(),
                                   "tune",
                                   model,
                                   "--server",
                                   fusord_->address(),
                                   "--token-file",
                                   (dir_ / "client-token").string()};
  CommandResult first = RunCommand(tune, {}, 90s);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  CommandResult second = RunCommand(tune, {}, 30s);
  ASSERT_EQ(second.exit_code, 0) << second.output;

  auto imported = ImportOnnxFile(model);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  v1::QueryPlansRequest q;
  q.set_model_name(imported->model_name);
  auto listed = Client(kReadToken).QueryPlans(q);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->plans_size(), 1);
  // The same query through the CLI's `db query --server`, and the stored plan shown and explained.
  CommandResult query =
      RunCommand({FusorBinary(), "db", "query", "--json", "--server", fusord_->address(), "--token",
                  kReadTuneToken, "--model", imported->model_name},
                 {}, 30s);
  ASSERT_EQ(query.exit_code, 0) << query.output;
  EXPECT_NE(query.output.find(listed->plans(0).graph_hash()), std::string::npos) << query.output;
  for (const char* verb : {"show", "explain"}) {
    CommandResult plan = RunCommand({FusorBinary(), "plan", verb, model, "--server",
                                     fusord_->address(), "--token", kReadTuneToken},
                                    {}, 30s);
    EXPECT_EQ(plan.exit_code, 0) << verb << ": " << plan.output;
  }

  std::vector<std::string> wrong = {FusorBinary(), "tune", model, "--server", fusord_->address()};
  EXPECT_EQ(RunCommand(wrong, {{"FUSOR_TOKEN", "wrong-token-0123456789"}}).exit_code, kExitAuth);
  EXPECT_EQ(RunCommand({FusorBinary(), "tune", model, "--server", "127.0.0.1:1"}).exit_code,
            kExitUnavailable);
  std::ofstream(dir_ / "garbage.onnx") << "this is not a model";
  EXPECT_EQ(RunCommand({FusorBinary(), "tune", (dir_ / "garbage.onnx").string(), "--server",
                        fusord_->address(), "--token", kReadTuneToken})
                .exit_code,
            kExitInvalidModel);
  ASSERT_EQ(fusord_->Terminate(10s), 0);  // Flushes the log.
  EXPECT_NE(fusord_->Log().find("cache hit"), std::string::npos) << "the second tune";
}

}  // namespace
}  // namespace fusor::testing
