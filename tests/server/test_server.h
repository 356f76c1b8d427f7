// An in-process TunerServer on a free loopback port around a FakeTuner, with a token file in a
// temporary directory, for the gRPC layer's unit tests. Tokens: one per role combination.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "proto/tuner.grpc.pb.h"
#include "server/tuner_server.h"
#include "tests/server/fake_tuner.h"
#include "tests/server/test_tokens.h"

namespace fusor::testing {

class TestServer {
 public:
  // With `authenticated`, the token file above is used; `tweak` adjusts the options first.
  explicit TestServer(bool authenticated = true,
                      const std::function<void(TunerServerOptions*)>& tweak = {}) {
    dir_ = TempDir("fusor-server-test");
    TunerServerOptions o;
    o.listen = "127.0.0.1:0";
    if (authenticated) o.token_file = WriteTokenFile(dir_);
    if (tweak) tweak(&o);
    auto s = TunerServer::Start(&tuner, o);
    if (!s.ok()) throw std::runtime_error(s.status().ToString());
    server = std::move(s).value();
    channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
    stub = v1::FusionTuner::NewStub(channel);
  }
  ~TestServer() {
    server.reset();
    std::filesystem::remove_all(dir_);
  }

  FakeTuner tuner;
  std::unique_ptr<TunerServer> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::FusionTuner::Stub> stub;

 private:
  std::filesystem::path dir_;
};

inline void SetToken(grpc::ClientContext* ctx, const std::string& token) {
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
}

// Runs a Tune call to the end; returns its status and, in *events, what arrived.
inline grpc::Status RunTune(v1::FusionTuner::Stub* stub, const v1::TuneRequest& request,
                            const std::string& token, std::vector<v1::TuneEvent>* events = nullptr,
                            std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  grpc::ClientContext ctx;
  SetToken(&ctx, token);
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  auto reader = stub->Tune(&ctx, request);
  v1::TuneEvent e;
  while (reader->Read(&e)) {
    if (events) events->push_back(e);
  }
  return reader->Finish();
}

// Waits (up to 10 s, a bound on a hang, not a speed check) until `condition` holds; fails if not.
inline void WaitUntil(const std::function<bool()>& condition) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!condition() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(condition());
}

}  // namespace fusor::testing
