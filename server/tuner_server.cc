#include "server/tuner_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "server/access_tokens.h"
#include "server/grpc_service.h"
#include "server/tune_jobs.h"

namespace fusor {
namespace {

StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot read TLS " + std::string(what) + " '" + path + "'");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const TunerServerOptions& o) {
  if (o.tls_cert.empty() && o.tls_key.empty()) return grpc::InsecureServerCredentials();
  if (o.tls_cert.empty() || o.tls_key.empty()) {
    return Status::InvalidArgument("TLS needs both tls_cert and tls_key");
  }
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  FUSOR_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(o.tls_cert, "certificate"));
  FUSOR_ASSIGN_OR_RETURN(pair.private_key, ReadPem(o.tls_key, "key"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  return grpc::SslServerCredentials(ssl);
}

std::string HostOf(const std::string& listen) {
  size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? listen : listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

Status CheckExposure(const TunerServerOptions& o) {
  if (!o.token_file.empty() || o.allow_insecure_remote || IsLoopbackAddress(o.listen)) {
    return Status::Ok();
  }
  return Status::FailedPrecondition(
      "refusing to listen on " + o.listen +
      " without a token file: anyone who can reach it could tune and calibrate. Give "
      "--token-file, listen on 127.0.0.1, or pass --allow-insecure-remote");
}

}  // namespace

Status CheckTunerServerOptions(const TunerServerOptions& o) {
  if (o.worker_threads < 1) return Status::InvalidArgument("worker_threads must be at least 1");
  if (o.queue_size < 0) return Status::InvalidArgument("queue_size must not be negative");
  if (o.max_rpc_threads < 4) return Status::InvalidArgument("max_rpc_threads must be at least 4");
  if (o.max_message_bytes < 1024) {
    return Status::InvalidArgument("max_message_bytes must be at least 1024");
  }
  return CheckExposure(o);
}

bool IsLoopbackAddress(const std::string& listen) {
  if (listen.rfind("unix:", 0) == 0) return true;
  std::string host = HostOf(listen);
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

struct TunerServer::State {
  TunerServerOptions options;
  std::optional<AccessTokens> tokens;
  std::unique_ptr<TuneJobQueue> jobs;
  std::unique_ptr<GrpcTunerService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::mutex shutdown_mu;  // Serialises Shutdown; guards shut_down.
  bool shut_down = false;

  Status Build(TunerApi* tuner);
};

Status TunerServer::State::Build(TunerApi* tuner) {
  FUSOR_ASSIGN_OR_RETURN(auto credentials, Credentials(options));
  jobs = std::make_unique<TuneJobQueue>(
      tuner, TuneJobQueueOptions{options.worker_threads, options.queue_size});
  service = std::make_unique<GrpcTunerService>(tuner, jobs.get(), tokens ? &*tokens : nullptr,
                                               options.limits);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  grpc::ResourceQuota quota("fusord");
  quota.SetMaxThreads(options.max_rpc_threads);
  builder.SetResourceQuota(quota);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  // gRPC sets SO_REUSEPORT by default, so a second fusord on the same port would start and
  // silently take half the connections; binding must fail instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.listen, credentials, &port);
  builder.RegisterService(service.get());
  server = builder.BuildAndStart();
  if (!server || (port == 0 && options.listen.rfind("unix:", 0) != 0)) {
    jobs->Stop();
    return Status::Unavailable("cannot listen on " + options.listen +
                               " (address in use, or not an address of this machine?)");
  }
  server->GetHealthCheckService()->SetServingStatus(true);
  return Status::Ok();
}

StatusOr<std::unique_ptr<TunerServer>> TunerServer::Start(TunerApi* tuner,
                                                          const TunerServerOptions& options) {
  FUSOR_RETURN_IF_ERROR(CheckTunerServerOptions(options));
  auto state = std::make_unique<State>();
  state->options = options;
  if (!options.token_file.empty()) {
    FUSOR_ASSIGN_OR_RETURN(state->tokens, AccessTokens::Load(options.token_file));
  }
  FUSOR_RETURN_IF_ERROR(state->Build(tuner));
  return std::unique_ptr<TunerServer>(new TunerServer(std::move(state)));
}

TunerServer::TunerServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

TunerServer::~TunerServer() { Shutdown(std::chrono::milliseconds(0)); }

std::string TunerServer::address() const {
  const std::string& listen = state_->options.listen;
  if (listen.rfind("unix:", 0) == 0) return listen;
  return listen.substr(0, listen.rfind(':')) + ":" + std::to_string(state_->port);
}

int TunerServer::port() const { return state_->port; }
bool TunerServer::tls() const { return !state_->options.tls_cert.empty(); }
bool TunerServer::authenticated() const { return state_->tokens.has_value(); }
TuneJobQueue::Counts TunerServer::job_counts() const { return state_->jobs->counts(); }

// Order matters: the queue stops taking jobs first so nothing new starts; gRPC's Shutdown lets
// calls finish until the deadline and then cancels them, which makes their subscriptions leave and
// so cancels the jobs; only then are the workers joined.
void TunerServer::Shutdown(std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> lock(state_->shutdown_mu);
  if (state_->shut_down) return;
  state_->shut_down = true;
  state_->server->GetHealthCheckService()->SetServingStatus(false);
  state_->jobs->StopAccepting();
  state_->server->Shutdown(std::chrono::system_clock::now() + grace);
  state_->jobs->Stop();
  state_->server->Wait();
}

}  // namespace fusor
