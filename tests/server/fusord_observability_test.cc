// fusord's metrics and JSON logs end to end: the real binary on loopback with --metrics-listen
// and --log-format json, driven by the C++ client and the `fusor` CLI; /metrics is scraped over
// HTTP and read with a strict exposition parser, and the log lines are parsed as JSON.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "client/remote_tuner.h"
#include "tests/base/prometheus_text.h"
#include "tests/server/fusord_process.h"
#include "tests/server/test_graphs.h"
#include "tests/server/test_tokens.h"

namespace fusor::testing {
namespace {

using namespace std::chrono_literals;

class FusordObservability : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("fusord-obs");
    tokens_ = WriteTokenFile(dir_);
    auto p = FusordProcess::Start(
        {"--db", (dir_ / "tuning.db").string(), "--token-file", tokens_, "--metrics-listen",
         "127.0.0.1:0", "--log-format", "json", "--default-measure-budget", "1",
         "--measure-threads", "1", "--default-time-limit", "20"},
        dir_ / "fusord.log");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    fusord_ = std::move(p).value();
    std::smatch m;
    std::string log = fusord_->Log();
    ASSERT_TRUE(std::regex_search(log, m, std::regex("metrics=http://127\\.0\\.0\\.1:([0-9]+)")))
        << log;
    metrics_port_ = std::stoi(m[1]);
  }
  void TearDown() override {
    if (HasFailure() && fusord_) std::cerr << "fusord log:\n" << fusord_->Log();
    fusord_.reset();
    std::filesystem::remove_all(dir_);
  }

  RemoteTuner Client(const std::string& token) const {
    RemoteTunerOptions o;
    o.address = fusord_->address();
    o.token = token;
    return RemoteTuner(o);
  }

  Exposition Scrape() const {
    httplib::Client http("127.0.0.1", metrics_port_);
    auto response = http.Get("/metrics");
    EXPECT_TRUE(response) << "no answer from /metrics";
    if (!response) return {};
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->get_header_value("Content-Type"),
              "text/plain; version=0.0.4; charset=utf-8");
    auto parsed = ParseExposition(response->body);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    return parsed.ok() ? *parsed : Exposition();
  }

  std::filesystem::path dir_;
  std::string tokens_;
  std::unique_ptr<FusordProcess> fusord_;
  int metrics_port_ = 0;
};

// Sums every series of `family` whose text contains `part` (a label, for instance).
double Sum(const Exposition& e, const std::string& family, const std::string& part = "") {
  double total = 0;
  for (const auto& [series, value] : e.samples) {
    if (series.rfind(family, 0) == 0 && series.find(part) != std::string::npos) total += value;
  }
  return total;
}

std::string Rpcs(const std::string& method, const std::string& code) {
  return "fusor_rpc_requests_total{code=\"" + code + "\",method=\"" + method + "\"}";
}

TEST_F(FusordObservability, CountersMoveByTheRpcsMadeAndTheExpositionParses) {
  const Exposition before = Scrape();
  for (const char* family :
       {"fusor_rpc_requests_total", "fusor_rpc_duration_seconds", "fusor_plan_cache_lookups_total",
        "fusor_tune_joins_total", "fusor_tune_jobs_queued", "fusor_tune_jobs_running",
        "fusor_search_duration_seconds", "fusor_measure_duration_seconds",
        "fusor_db_operation_duration_seconds", "fusor_target_calibration_age_seconds"}) {
    EXPECT_EQ(before.types.count(family), 1u) << family;
  }
  EXPECT_EQ(before.types.at("fusor_rpc_duration_seconds"), "histogram");

  auto targets = Client(kReadToken).ListTargets({});
  ASSERT_TRUE(targets.ok()) << targets.status().ToString();
  ASSERT_GE(targets->profiles_size(), 1);
  // From start-up, a target never calibrated has an age, +Inf: an alert on the age fires for it.
  const std::string never =
      "fusor_target_calibration_age_seconds{target=\"" + targets->profiles(0).target().id() + "\"}";
  ASSERT_EQ(targets->profiles(0).calibrated_unix_ms(), 0);
  ASSERT_EQ(before.samples.count(never), 1u) << "no calibration age for a never-calibrated target";
  EXPECT_TRUE(std::isinf(before.Value(never)) && before.Value(never) > 0) << before.Value(never);
  v1::RegisterTargetRequest reg;
  *reg.mutable_profile() = targets->profiles(0);
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  reg.mutable_profile()->set_calibrated_unix_ms(now_ms - 100'000);  // 100 s ago.
  ASSERT_TRUE(Client(kAdminToken).RegisterTarget(reg).ok());
  v1::GetPlanRequest get;
  get.set_graph_hash(std::string(64, 'a'));
  EXPECT_EQ(Client(kReadToken).GetPlan(get).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(Client("wrong-token-0123456789").ListTargets({}).status().code(),
            Status::Code::kUnauthenticated);
  v1::TuneRequest tune = TuneRequestFor(ChainGraph(4, 64, "observed"));
  for (int i = 0; i < 2; ++i) {
    Status s = Client(kTuneToken)
                   .Tune(
                       tune, [](const v1::TuneEvent&) {}, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  const Exposition after = Scrape();
  auto delta = [&](const std::string& series) {
    return after.Value(series) - before.Value(series);
  };
  EXPECT_EQ(delta(Rpcs("ListTargets", "OK")), 1);
  EXPECT_EQ(delta(Rpcs("ListTargets", "UNAUTHENTICATED")), 1);
  EXPECT_EQ(delta(Rpcs("RegisterTarget", "OK")), 1);
  EXPECT_EQ(delta(Rpcs("GetPlan", "NOT_FOUND")), 1);
  EXPECT_EQ(delta(Rpcs("Tune", "OK")), 2);
  EXPECT_EQ(Sum(after, "fusor_rpc_requests_total") - Sum(before, "fusor_rpc_requests_total"), 6);
  EXPECT_EQ(delta("fusor_rpc_duration_seconds_count{code=\"NOT_FOUND\",method=\"GetPlan\"}"), 1);
  EXPECT_EQ(delta("fusor_rpc_duration_seconds_bucket{code=\"OK\",le=\"+Inf\",method=\"Tune\"}"), 2);
  EXPECT_EQ(delta("fusor_plan_cache_lookups_total{result=\"miss\",rpc=\"GetPlan\"}"), 1);
  EXPECT_EQ(delta("fusor_plan_cache_lookups_total{result=\"miss\",rpc=\"Tune\"}"), 1);
  EXPECT_EQ(delta("fusor_plan_cache_lookups_total{result=\"hit\",rpc=\"Tune\"}"), 1);
  EXPECT_EQ(Sum(after, "fusor_search_duration_seconds_count") -
                Sum(before, "fusor_search_duration_seconds_count"),
            1);
  EXPECT_EQ(delta("fusor_measure_duration_seconds_count"), 1);
  EXPECT_GT(delta("fusor_measure_duration_seconds_sum"), 0);
  EXPECT_EQ(delta("fusor_db_operation_duration_seconds_count{operation=\"put_plan\"}"), 1);
  EXPECT_EQ(delta("fusor_db_operation_duration_seconds_count{operation=\"best_plan\"}"), 1);
  // The job queue is timed as the plans are: the agents' gauges read it at every scrape.
  EXPECT_GE(delta("fusor_db_operation_duration_seconds_count{operation=\"list_agents\"}"), 1);
  EXPECT_EQ(delta("fusor_tune_joins_total"), 0);
  EXPECT_EQ(after.Value("fusor_tune_jobs_queued"), 0);
  EXPECT_EQ(after.Value("fusor_tune_jobs_running"), 0);
  const std::string age =
      "fusor_target_calibration_age_seconds{target=\"" + reg.profile().target().id() + "\"}";
  ASSERT_EQ(after.samples.count(age), 1u) << "no calibration age for the registered target";
  EXPECT_GE(after.Value(age), 100);

  httplib::Client http("127.0.0.1", metrics_port_);
  auto other = http.Get("/");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
}

// Every log line is a JSON object; the request log's line for a refused call carries the request
// id the client was told, and so does the CLI's error message.
TEST_F(FusordObservability, JsonLogLinesCarryTheRequestIdTheClientSaw) {
  v1::GetPlanRequest get;
  get.set_graph_hash(std::string(64, 'b'));
  Status missing = Client(kReadToken).GetPlan(get).status();
  ASSERT_EQ(missing.code(), Status::Code::kNotFound);
  std::smatch m;
  const std::string message = missing.message();
  ASSERT_TRUE(std::regex_search(message, m, std::regex("request id ([0-9]+)"))) << message;
  const int64_t client_id = std::stoll(m[1]);

  CommandResult cli = RunCommand({FusorBinary(), "targets", "list", "--server", fusord_->address(),
                                  "--token", "wrong-token-0123456789"});
  EXPECT_NE(cli.exit_code, 0);
  ASSERT_TRUE(std::regex_search(cli.output, m, std::regex("request id ([0-9]+)"))) << cli.output;
  const int64_t cli_id = std::stoll(m[1]);

  ASSERT_EQ(fusord_->Terminate(20s), 0);  // Flushes the log.
  std::istringstream log(fusord_->Log());
  std::string line;
  int lines = 0;
  bool found_client = false, found_cli = false;
  while (std::getline(log, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << "not a JSON object: " << line;
    ASSERT_TRUE(j.contains("time") && j.contains("level") && j.contains("message")) << line;
    ++lines;
    if (!j.contains("request_id")) continue;
    if (j["request_id"] == client_id) {
      found_client = true;
      EXPECT_EQ(j["method"], "GetPlan");
      EXPECT_EQ(j["grpc_code"], "NOT_FOUND");
      EXPECT_EQ(j["principal"], "reader");
      EXPECT_EQ(j["level"], "warning");
      EXPECT_TRUE(j["duration_ms"].is_number());
    }
    if (j["request_id"] == cli_id) {
      found_cli = true;
      EXPECT_EQ(j["method"], "ListTargets");
      EXPECT_EQ(j["grpc_code"], "UNAUTHENTICATED");
    }
  }
  EXPECT_GE(lines, 3);
  EXPECT_TRUE(found_client) << "no log line with request_id " << client_id;
  EXPECT_TRUE(found_cli) << "no log line with request_id " << cli_id;
}

}  // namespace
}  // namespace fusor::testing
