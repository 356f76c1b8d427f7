// The client's remote mode (RemoteTuner, Connect) against an in-process server with a fake core:
// status codes come back as the codes the CLI turns into exit codes.
#include "client/remote_tuner.h"

#include <gtest/gtest.h>

#include <thread>

#include "client/connection.h"
#include "client/exit_codes.h"
#include "tests/server/test_graphs.h"
#include "tests/server/test_server.h"

namespace fusor::testing {
namespace {

using namespace std::chrono_literals;

RemoteTuner Remote(const TestServer& t, const std::string& token) {
  RemoteTunerOptions o;
  o.address = t.server->address();
  o.token = token;
  return RemoteTuner(o);
}

TEST(RemoteTuner, TuneStreamsEventsThenTheResult) {
  TestServer t;
  RemoteTuner remote = Remote(t, kTuneToken);
  std::vector<v1::TuneEvent> events;
  Status s = remote.Tune(
      TuneRequestFor(ChainGraph(2, 8, "m")), [&](const v1::TuneEvent& e) { events.push_back(e); },
      nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(events[0].has_progress());
  EXPECT_EQ(events[1].result().plan().graph_hash(), "fake-m");
}

TEST(RemoteTuner, AuthFailuresExitWithTheAuthCode) {
  TestServer t;
  auto wrong = Remote(t, "nobody-has-this-token").ListTargets({});
  EXPECT_EQ(wrong.status().code(), Status::Code::kUnauthenticated);
  EXPECT_EQ(ExitCodeFor(wrong.status()), kExitAuth);
  EXPECT_EQ(ExitCodeFor(Remote(t, "").ListTargets({}).status()), kExitAuth);
  Status denied = Remote(t, kReadToken)
                      .Tune(
                          TuneRequestFor(ChainGraph(2)), [](const v1::TuneEvent&) {}, nullptr);
  EXPECT_EQ(denied.code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(ExitCodeFor(denied), kExitAuth);
}

TEST(RemoteTuner, ErrorsKeepTheirCodeAndNameTheServer) {
  TestServer t;
  v1::GetPlanRequest missing;
  missing.set_graph_hash("missing");
  auto r = Remote(t, kReadToken).GetPlan(missing);
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(r.status().message().rfind("fusord at 127.0.0.1:", 0), 0u) << r.status().message();
  Status bad = Remote(t, kTuneToken)
                   .Tune(
                       TuneRequestFor(ChainGraph(5, 0)), [](const v1::TuneEvent&) {}, nullptr);
  EXPECT_EQ(ExitCodeFor(bad), kExitInvalidModel) << bad.ToString();
}

TEST(RemoteTuner, NoServerIsUnavailable) {
  RemoteTunerOptions o;
  o.address = "127.0.0.1:1";
  auto r = RemoteTuner(o).ListTargets({});
  EXPECT_EQ(r.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(ExitCodeFor(r.status()), kExitUnavailable);
}

TEST(RemoteTuner, CancelFlagStopsTheServerJob) {
  TestServer t;
  t.tuner.Hold();
  std::atomic<bool> cancelled{false};
  Status s;
  std::thread th([&] {
    s = Remote(t, kTuneToken)
            .Tune(
                TuneRequestFor(ChainGraph(2)), [](const v1::TuneEvent&) {}, &cancelled);
  });
  ASSERT_TRUE(FakeTuner::WaitFor(t.tuner.tune_calls, 1));
  cancelled = true;
  th.join();
  EXPECT_EQ(s.code(), Status::Code::kCancelled);
  EXPECT_TRUE(FakeTuner::WaitFor(t.tuner.tune_cancelled, 1));
}

TEST(RemoteTuner, DeadlineFromTimeout) {
  TestServer t;
  t.tuner.Hold();
  RemoteTunerOptions o;
  o.address = t.server->address();
  o.token = kTuneToken;
  o.timeout_s = 0.3;
  Status s = RemoteTuner(o).Tune(
      TuneRequestFor(ChainGraph(2)), [](const v1::TuneEvent&) {}, nullptr);
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(ExitCodeFor(s), kExitUnavailable);
  EXPECT_TRUE(FakeTuner::WaitFor(t.tuner.tune_cancelled, 1));
}

// ---- Connect and its flags ----

struct Flags {
  CLI::App app{"fusor"};
  ConnectionOptions options;
  Flags() { AddConnectionOptions(&app, &options); }
  void Parse(std::vector<std::string> args) {
    std::reverse(args.begin(), args.end());
    app.parse(args);
  }
};

TEST(Connect, RemoteWithTokenFile) {
  TestServer t;
  auto dir = TempDir("fusor-connect-test");
  std::ofstream(dir / "token") << "  " << kReadToken << "\n";
  Flags f;
  f.Parse({"--server", t.server->address(), "--token-file", (dir / "token").string()});
  auto api = Connect(f.options);
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  EXPECT_TRUE((*api)->ListTargets({}).ok());
  std::filesystem::remove_all(dir);
}

TEST(Connect, TokenFromTheEnvironment) {
  TestServer t;
  setenv("FUSOR_TOKEN", kReadToken, 1);
  setenv("FUSOR_SERVER", t.server->address().c_str(), 1);
  Flags f;
  f.Parse({});
  unsetenv("FUSOR_TOKEN");
  unsetenv("FUSOR_SERVER");
  ASSERT_TRUE(f.options.remote());
  auto api = Connect(f.options);
  ASSERT_TRUE(api.ok());
  EXPECT_TRUE((*api)->ListTargets({}).ok());
}

TEST(Connect, UnreadableTokenFileIsAnAuthError) {
  Flags f;
  f.Parse({"--server", "127.0.0.1:1", "--token-file", "/nonexistent/token"});
  auto api = Connect(f.options);
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(ExitCodeFor(api.status()), kExitAuth);
  EXPECT_NE(api.status().message().find("/nonexistent/token"), std::string::npos);
}

TEST(Connect, ATokenIsNeverSentInPlaintextToAnotherMachine) {
  Flags f;
  f.Parse({"--server", "10.11.12.13:7070", "--token", kReadToken});
  auto api = Connect(f.options);
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(api.status().message().find("refusing to send the bearer token in plaintext"),
            std::string::npos)
      << api.status().message();
  Flags allowed;
  allowed.Parse({"--server", "10.11.12.13:7070", "--token", kReadToken, "--allow-insecure-remote"});
  EXPECT_TRUE(Connect(allowed.options).ok());
  Flags tls;
  tls.Parse({"--server", "10.11.12.13:7070", "--token", kReadToken, "--tls"});
  EXPECT_TRUE(Connect(tls.options).ok());
  Flags loopback;
  loopback.Parse({"--server", "127.0.0.1:7070", "--token", kReadToken});
  EXPECT_TRUE(Connect(loopback.options).ok());
  Flags named_like_loopback;
  named_like_loopback.Parse({"--server", "127.example.com:7070", "--token", kReadToken});
  EXPECT_EQ(Connect(named_like_loopback.options).status().code(), Status::Code::kFailedPrecondition)
      << "a host name is not a loopback literal, whatever it starts with";
  Flags no_token;
  no_token.Parse({"--server", "10.11.12.13:7070"});
  EXPECT_TRUE(Connect(no_token.options).ok()) << "nothing secret to send";
}

TEST(Connect, DbAndServerTogetherIsAUsageError) {
  Flags f;
  EXPECT_THROW(f.Parse({"--server", "127.0.0.1:1", "--db", "/tmp/x.db"}), CLI::ParseError);
}

TEST(Connect, LocalModeOpensTheDatabase) {
  auto dir = TempDir("fusor-local-test");
  Flags f;
  f.Parse({"--db", (dir / "tuning.db").string()});
  auto api = Connect(f.options);
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  auto targets = (*api)->ListTargets({});
  ASSERT_TRUE(targets.ok()) << targets.status().ToString();
  EXPECT_GE(targets->profiles_size(), 1) << "the local CPU is registered at open";
  api->reset();
  EXPECT_TRUE(std::filesystem::exists(dir / "tuning.db"));
  std::filesystem::remove_all(dir);
}

// ---- TLS ----

// A self-signed certificate for localhost, made with the openssl CLI; empty when it is missing.
std::filesystem::path SelfSignedCertificate(const std::filesystem::path& dir) {
  std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=DNS:localhost -keyout " +
      (dir / "key.pem").string() + " -out " + (dir / "cert.pem").string() + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return {};
  return dir / "cert.pem";
}

TEST(Tls, RemoteTunerTrustsTheServersCertificate) {
  auto dir = TempDir("fusor-tls-test");
  auto cert = SelfSignedCertificate(dir);
  if (cert.empty()) GTEST_SKIP() << "no openssl to make a certificate";
  TestServer t(true, [&](TunerServerOptions* o) {
    o->listen = "localhost:0";
    o->tls_cert = cert.string();
    o->tls_key = (dir / "key.pem").string();
  });
  EXPECT_TRUE(t.server->tls());
  Flags f;
  f.Parse({"--server", "localhost:" + std::to_string(t.server->port()), "--tls-ca", cert.string(),
           "--token", kReadToken});
  auto api = Connect(f.options);
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  auto targets = (*api)->ListTargets({});
  EXPECT_TRUE(targets.ok()) << targets.status().ToString();
  RemoteTunerOptions plain;
  plain.address = "localhost:" + std::to_string(t.server->port());
  plain.token = kReadToken;
  EXPECT_EQ(RemoteTuner(plain).ListTargets({}).status().code(), Status::Code::kUnavailable)
      << "a plaintext client cannot talk to a TLS server";
  std::filesystem::remove_all(dir);
}

// A CA, and a client certificate it signs, made with the openssl CLI; false when that fails.
bool MakeClientCertificate(const std::filesystem::path& dir) {
  const std::string cmd =
      "(cd " + dir.string() +
      " && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=fusor-test-ca "
      "-keyout ca.key -out ca.pem"
      " && openssl req -newkey rsa:2048 -nodes -subj /CN=build-farm -keyout client.key "
      "-out client.csr"
      " && openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
      "-out client.pem) >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

TEST(Tls, MutualTlsRefusesAClientWithoutACertificateItsCaSigned) {
  auto dir = TempDir("fusor-mtls-test");
  auto cert = SelfSignedCertificate(dir);
  if (cert.empty() || !MakeClientCertificate(dir)) GTEST_SKIP() << "no openssl";
  TestServer t(true, [&](TunerServerOptions* o) {
    o->listen = "localhost:0";
    o->tls_cert = cert.string();
    o->tls_key = (dir / "key.pem").string();
    o->tls_client_ca = (dir / "ca.pem").string();
  });
  const std::string address = "localhost:" + std::to_string(t.server->port());
  Flags with_cert;
  with_cert.Parse({"--server", address, "--tls-ca", cert.string(), "--token", kReadToken,
                   "--tls-cert", (dir / "client.pem").string(), "--tls-key",
                   (dir / "client.key").string()});
  auto api = Connect(with_cert.options);
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  auto targets = (*api)->ListTargets({});
  EXPECT_TRUE(targets.ok()) << targets.status().ToString();

  Flags without_cert;
  without_cert.Parse({"--server", address, "--tls-ca", cert.string(), "--token", kReadToken});
  auto refused = Connect(without_cert.options);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ((*refused)->ListTargets({}).status().code(), Status::Code::kUnavailable);

  // A certificate without its key is a usage error at parse time (exit 2), before any connection.
  Flags half;
  EXPECT_THROW(half.Parse({"--server", address, "--tls-cert", (dir / "client.pem").string()}),
               CLI::RequiresError);
  ConnectionOptions half_options;
  half_options.server = address;
  half_options.tls_cert = (dir / "client.pem").string();
  EXPECT_EQ(Connect(half_options).status().code(), Status::Code::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

TEST(Tls, KeyWithoutCertificateIsRefused) {
  FakeTuner tuner;
  TunerServerOptions o;
  o.listen = "127.0.0.1:0";
  o.tls_key = "/nonexistent/key.pem";
  auto s = TunerServer::Start(&tuner, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace fusor::testing
