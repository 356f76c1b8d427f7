#include "server/fusord_config.h"

#include "server/metrics_http.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace fusor {
namespace {

struct Parsed {
  CLI::App app{"fusord"};
  FusordConfig config;
  explicit Parsed(std::vector<std::string> args) {
    AddFusordFlags(&app, &config);
    std::reverse(args.begin(), args.end());
    app.parse(args);
  }
};

TEST(FusordConfig, FileSetsEveryKeyTheFlagsLeaveAlone) {
  Parsed p({"--queue-size", "3"});
  Status s = ApplyConfigJson(R"({"listen": "127.0.0.1:9999", "queue_size": 40,
      "worker_threads": 2, "max_nodes": 5000, "allow_insecure_remote": true,
      "shutdown_grace_s": 1.5, "db_path": "/tmp/x.db", "log_level": "debug"})",
                             "fusord.json", p.app, &p.config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(p.config.server.listen, "127.0.0.1:9999");
  EXPECT_EQ(p.config.server.queue_size, 3) << "the flag wins";
  EXPECT_EQ(p.config.server.worker_threads, 2);
  EXPECT_EQ(p.config.server.limits.max_nodes, 5000);
  EXPECT_TRUE(p.config.server.allow_insecure_remote);
  EXPECT_DOUBLE_EQ(p.config.shutdown_grace_s, 1.5);
  EXPECT_EQ(p.config.tuning.db_location, "/tmp/x.db");
  EXPECT_EQ(p.config.log_level, "debug");
}

TEST(FusordConfig, TheLearnedResidualIsOffUnlessTheKeyOrTheFlagTurnsItOn) {
  Parsed off({});
  ASSERT_TRUE(ApplyConfigJson("{}", "f.json", off.app, &off.config).ok());
  EXPECT_FALSE(off.config.tuning.learned_residual);
  EXPECT_EQ(off.config.tuning.residual_refit_every, 32);

  Parsed file({});
  Status s = ApplyConfigJson(R"({"learned_residual": true, "residual_refit_every": 5})", "f.json",
                             file.app, &file.config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(file.config.tuning.learned_residual);
  EXPECT_EQ(file.config.tuning.residual_refit_every, 5);

  Parsed flag({"--learned-residual"});
  s = ApplyConfigJson(R"({"learned_residual": false})", "f.json", flag.app, &flag.config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(flag.config.tuning.learned_residual) << "the flag wins";

  Parsed zero({"--residual-refit-every", "0"});
  s = ApplyConfigFile(zero.app, &zero.config);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("residual_refit_every"), std::string::npos) << s.message();
}

TEST(FusordConfig, UnknownKeyIsAnErrorNamingIt) {
  Parsed p({});
  Status s = ApplyConfigJson(R"({"listen": "127.0.0.1:1", "queue_sise": 4})", "fusord.json", p.app,
                             &p.config);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("fusord.json: unknown key 'queue_sise'"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("queue_size"), std::string::npos) << "lists the known keys";
}

TEST(FusordConfig, WrongTypeAndBadJsonAreErrors) {
  Parsed p({});
  Status s = ApplyConfigJson(R"({"queue_size": "many"})", "f.json", p.app, &p.config);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("queue_size"), std::string::npos) << s.message();
  EXPECT_FALSE(ApplyConfigJson(R"({"queue_size": 1.5})", "f.json", p.app, &p.config).ok());
  EXPECT_FALSE(ApplyConfigJson("{not json", "f.json", p.app, &p.config).ok());
  EXPECT_FALSE(ApplyConfigJson("[1, 2]", "f.json", p.app, &p.config).ok());
}

// Found by tests/fuzz (fusord_config): integers were converted with wrap-around, so
// max_message_bytes 4294968320 became 1024 and max_rpc_threads -2^63 became 0.
TEST(FusordConfig, IntegerOutOfRangeIsAnErrorNotWrapped) {
  Parsed p({});
  Status s = ApplyConfigJson(R"({"max_message_bytes": 4294968320})", "f.json", p.app, &p.config);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(
      s.message().find("'max_message_bytes' is 4294968320, outside [-2147483648, 2147483647]"),
      std::string::npos)
      << s.message();
  EXPECT_EQ(p.config.server.max_message_bytes, 8 << 20) << "left at its default";
  EXPECT_FALSE(
      ApplyConfigJson(R"({"max_rpc_threads": -9223372036854775808})", "f.json", p.app, &p.config)
          .ok());
  EXPECT_FALSE(
      ApplyConfigJson(R"({"max_nodes": 9223372036854775808})", "f.json", p.app, &p.config).ok());
  Status edge = ApplyConfigJson(R"({"max_nodes": 9223372036854775807, "queue_size": 2147483647})",
                                "f.json", p.app, &p.config);
  ASSERT_TRUE(edge.ok()) << edge.ToString();
  EXPECT_EQ(p.config.server.limits.max_nodes, INT64_MAX);
  EXPECT_EQ(p.config.server.queue_size, INT32_MAX);
}

TEST(FusordConfig, CapsMustHoldTheirDefaults) {
  Parsed p({"--max-time-limit", "10"});  // Below default_time_limit_s (120).
  Status s = ApplyConfigFile(p.app, &p.config);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("max_time_limit_s"), std::string::npos) << s.message();
  Parsed grace({"--shutdown-grace", "1e300"});
  EXPECT_FALSE(ApplyConfigFile(grace.app, &grace.config).ok());
  Parsed fine({"--max-measure-budget", "20", "--max-jobs-per-principal", "2"});
  ASSERT_TRUE(ApplyConfigFile(fine.app, &fine.config).ok());
  EXPECT_EQ(fine.config.tuning.max_measure_budget, 20);
  EXPECT_EQ(fine.config.server.max_jobs_per_principal, 2);
}

TEST(FusordConfig, ValuesAreChecked) {
  Parsed p({"--log-level", "loud"});
  EXPECT_FALSE(ApplyConfigFile(p.app, &p.config).ok());
  Parsed missing({"--config", "/nonexistent/fusord.json"});
  Status s = ApplyConfigFile(missing.app, &missing.config);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/fusord.json"), std::string::npos);
}

TEST(FusordConfig, TheExampleConfigParses) {
  std::ifstream in(std::string(FUSOR_MODELS_DIR) + "/../deploy/fusord.example.json");
  ASSERT_TRUE(in) << "deploy/fusord.example.json is missing";
  std::stringstream text;
  text << in.rdbuf();
  Parsed p({});
  Status s = ApplyConfigJson(text.str(), "fusord.example.json", p.app, &p.config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(p.config.server.token_file, "/etc/fusor/tokens");
  EXPECT_EQ(p.config.server.limits.max_tensor_elements, int64_t{1} << 32);
  EXPECT_TRUE(CheckTunerServerOptions(p.config.server).ok());
  EXPECT_EQ(p.config.metrics_listen, "127.0.0.1:9464");
  EXPECT_EQ(p.config.log_format, "json");
}

// The metrics endpoint has no tokens or TLS: like the gRPC port without tokens, it stays on
// loopback unless allow_insecure_remote says otherwise. The config accepts the address (its form
// is a usage question); the listener refuses it at start, as the gRPC listen rule does (exit 1).
TEST(FusordConfig, MetricsBeyondLoopbackNeedAllowInsecureRemote) {
  Parsed remote({"--metrics-listen", "0.0.0.0:9464"});
  EXPECT_TRUE(ApplyConfigFile(remote.app, &remote.config).ok());
  Status s = CheckMetricsListen("0.0.0.0:9464", false).status();
  ASSERT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("0.0.0.0:9464"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--allow-insecure-remote"), std::string::npos) << s.message();
  Parsed allowed({"--metrics-listen", "0.0.0.0:9464", "--allow-insecure-remote"});
  EXPECT_TRUE(ApplyConfigFile(allowed.app, &allowed.config).ok());
  Parsed bare_port({"--metrics-listen", "9464"});
  EXPECT_TRUE(ApplyConfigFile(bare_port.app, &bare_port.config).ok());
  EXPECT_EQ(*CheckMetricsListen("9464", false), "127.0.0.1:9464");
  EXPECT_EQ(*CheckMetricsListen("[::1]:9464", false), "[::1]:9464");
  EXPECT_EQ(CheckMetricsListen("127.0.0.1:99999", false).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(CheckMetricsListen("unix:/tmp/m.sock", false).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(CheckMetricsListen(":9464", false).status().code(), Status::Code::kInvalidArgument);
}

TEST(FusordConfig, LogFormatIsTextOrJson) {
  Parsed json({"--log-format", "json"});
  EXPECT_TRUE(ApplyConfigFile(json.app, &json.config).ok());
  Parsed xml({"--log-format", "xml"});
  Status s = ApplyConfigFile(xml.app, &xml.config);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("log_format 'xml'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace fusor
