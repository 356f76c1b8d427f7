#include "server/tuner_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <grp.h>
#include <sys/stat.h>

#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <tuple>

#include "base/net_address.h"
#include "server/access_tokens.h"
#include "server/grpc_service.h"
#include "server/reflection_service.h"
#include "server/service_metrics.h"
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
  if (!o.tls_client_ca.empty()) {
    FUSOR_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(o.tls_client_ca, "client CA"));
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  FUSOR_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(o.tls_cert, "certificate"));
  FUSOR_ASSIGN_OR_RETURN(pair.private_key, ReadPem(o.tls_key, "key"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  return grpc::SslServerCredentials(ssl);
}

Status CheckExposure(const TunerServerOptions& o) {
  if (!o.tls_client_ca.empty() && o.tls_cert.empty()) {
    return Status::InvalidArgument("tls_client_ca (mutual TLS) needs tls_cert and tls_key");
  }
  if (o.allow_insecure_remote || IsLoopbackAddress(o.listen)) return Status::Ok();
  if (o.token_file.empty()) {
    return Status::FailedPrecondition(
        "refusing to listen on " + o.listen +
        " without a token file: anyone who can reach it could tune and calibrate. Give "
        "--token-file, listen on 127.0.0.1, or pass --allow-insecure-remote");
  }
  if (o.tls_cert.empty()) {
    return Status::FailedPrecondition(
        "refusing to take bearer tokens in plaintext on " + o.listen +
        ": anyone on the network path could read and reuse them. Give --tls-cert and --tls-key, "
        "listen on 127.0.0.1, or pass --allow-insecure-remote (a trusted network only)");
  }
  return Status::Ok();
}

bool IsUnixSocket(const std::string& listen) { return listen.rfind("unix:", 0) == 0; }

StatusOr<gid_t> SocketGroup(const std::string& name) {
  struct group* g = getgrnam(name.c_str());
  if (g == nullptr) {
    return Status::InvalidArgument("unix_socket_group '" + name +
                                   "' is not a group of this machine (see getent group)");
  }
  return g->gr_gid;
}

// Gives the socket its group and mode: 0660 with a group, else 0600. Called after the bind,
// which created it 0600 (under umask 0177), so it was never open to more than its owner.
Status SetSocketAccess(const std::string& path, const std::string& group) {
  mode_t mode = S_IRUSR | S_IWUSR;
  if (!group.empty()) {
    FUSOR_ASSIGN_OR_RETURN(gid_t gid, SocketGroup(group));
    if (chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
      return Status::IOError("cannot give unix socket '" + path + "' group '" + group +
                             "' (fusord's user must belong to it)");
    }
    mode |= S_IRGRP | S_IWGRP;
  }
  if (chmod(path.c_str(), mode) != 0) {
    return Status::IOError("cannot set the mode of unix socket '" + path + "'");
  }
  return Status::Ok();
}

// Binds under umask 0177 when listening on a unix socket, so the socket file is owner-only from
// its creation, whatever umask fusord was started with.
std::unique_ptr<grpc::Server> BuildAndStart(grpc::ServerBuilder* builder, bool unix_socket) {
  if (!unix_socket) return builder->BuildAndStart();
  const mode_t saved = umask(0177);
  std::unique_ptr<grpc::Server> server = builder->BuildAndStart();
  umask(saved);
  return server;
}

}  // namespace

Status CheckTunerServerOptions(const TunerServerOptions& o) {
  if (o.worker_threads < 1) return Status::InvalidArgument("worker_threads must be at least 1");
  if (o.queue_size < 0) return Status::InvalidArgument("queue_size must not be negative");
  if (o.max_jobs_per_principal < 1 || o.max_joiners_per_job < 1) {
    return Status::InvalidArgument(
        "max_jobs_per_principal and max_joiners_per_job must be at least 1");
  }
  if (o.max_rpc_threads < 4) return Status::InvalidArgument("max_rpc_threads must be at least 4");
  if (o.max_message_bytes < 1024) {
    return Status::InvalidArgument("max_message_bytes must be at least 1024");
  }
  if (o.max_memory_bytes < 4 * int64_t{o.max_message_bytes}) {
    return Status::InvalidArgument("max_memory_bytes must be at least 4 times max_message_bytes (" +
                                   std::to_string(4 * int64_t{o.max_message_bytes}) + ")");
  }
  // A Tune holds max_message_bytes while its request is read and its parsed price on top.
  if (o.max_parse_bytes < 2 * int64_t{o.max_message_bytes}) {
    return Status::InvalidArgument("max_parse_bytes must be at least twice max_message_bytes (" +
                                   std::to_string(2 * int64_t{o.max_message_bytes}) + ")");
  }
  if (!o.unix_socket_group.empty()) {
    if (!IsUnixSocket(o.listen)) {
      return Status::InvalidArgument("unix_socket_group needs listen unix:PATH, not " + o.listen);
    }
    FUSOR_RETURN_IF_ERROR(SocketGroup(o.unix_socket_group).status());
  }
  if (o.max_concurrent_streams < 1) {
    return Status::InvalidArgument("max_concurrent_streams must be at least 1");
  }
  constexpr int kMaxSeconds = 1'000'000;  // ~11 days; kept in milliseconds in an int.
  for (auto [name, value, least] :
       {std::tuple{"max_connection_idle_s", o.max_connection_idle_s, 1},
        std::tuple{"max_connection_age_s", o.max_connection_age_s, 1},
        std::tuple{"connection_age_grace_s", o.connection_age_grace_s, 0}}) {
    if (value < least || value > kMaxSeconds) {
      return Status::InvalidArgument(std::string(name) + " must be in [" + std::to_string(least) +
                                     ", " + std::to_string(kMaxSeconds) + "], not " +
                                     std::to_string(value));
    }
  }
  return CheckExposure(o);
}

struct TunerServer::State {
  TunerServerOptions options;
  std::optional<AccessTokens> tokens;
  std::unique_ptr<TuneJobQueue> jobs;
  std::unique_ptr<GrpcTunerService> service;
  ReflectionService reflection;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::mutex shutdown_mu;  // Serialises Shutdown; guards shut_down.
  bool shut_down = false;
  // The queue's gauges; after `jobs`, so they are removed before the queue goes.
  std::vector<metrics::CallbackRegistration> job_gauges;

  void AddJobGauges();

  Status Build(TunerApi* tuner);
};

Status TunerServer::State::Build(TunerApi* tuner) {
  FUSOR_ASSIGN_OR_RETURN(auto credentials, Credentials(options));
  jobs = std::make_unique<TuneJobQueue>(
      tuner, TuneJobQueueOptions{options.worker_threads, options.queue_size,
                                 options.max_jobs_per_principal, options.max_joiners_per_job});
  service = std::make_unique<GrpcTunerService>(tuner, jobs.get(), tokens ? &*tokens : nullptr,
                                               options.limits, options.private_strings,
                                               options.max_parse_bytes, options.max_message_bytes);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  grpc::ResourceQuota quota("fusord");
  quota.SetMaxThreads(options.max_rpc_threads);
  quota.Resize(static_cast<size_t>(options.max_memory_bytes));
  builder.SetResourceQuota(quota);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  // A stream's window stays at gRPC's 64 KiB lookahead until its handler reads the message (then
  // the transport opens it to the message's size): so a call refused before its request is read
  // holds at most that much. With BDP probing a client could grow every window to megabytes.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, options.max_connection_idle_s * 1000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, options.max_connection_age_s * 1000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                             options.connection_age_grace_s * 1000);
  // gRPC sets SO_REUSEPORT by default, so a second fusord on the same port would start and
  // silently take half the connections; binding must fail instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.listen, credentials, &port);
  builder.RegisterService(service.get());
  builder.RegisterService(&reflection);
  server = BuildAndStart(&builder, IsUnixSocket(options.listen));
  if (!server || (port == 0 && !IsUnixSocket(options.listen))) {
    jobs->Stop();
    return Status::Unavailable("cannot listen on " + options.listen +
                               " (address in use, or not an address of this machine?)");
  }
  if (IsUnixSocket(options.listen)) {
    Status access = SetSocketAccess(options.listen.substr(5), options.unix_socket_group);
    if (!access.ok()) {
      server->Shutdown();
      jobs->Stop();
      return access;
    }
  }
  server->GetHealthCheckService()->SetServingStatus(true);
  Metrics();  // Every family is listed from the first scrape on.
  AddJobGauges();
  return Status::Ok();
}

// Queue depth, running jobs and waiting callers, read from the queue at each scrape.
void TunerServer::State::AddJobGauges() {
  metrics::Registry& registry = metrics::Registry::Default();
  auto gauge = [&](const char* name, const char* help, int TuneJobQueue::Counts::*field) {
    job_gauges.push_back(registry.AddGaugeCallback(name, help, {}, [queue = jobs.get(), field] {
      return metrics::GaugeSamples{{{}, static_cast<double>(queue->counts().*field)}};
    }));
  };
  gauge(ServiceMetrics::kJobsQueued, "Tuning jobs waiting for a worker",
        &TuneJobQueue::Counts::queued);
  gauge(ServiceMetrics::kJobsRunning, "Tuning jobs a worker is running",
        &TuneJobQueue::Counts::running);
  gauge(ServiceMetrics::kJobSubscribers, "Tune calls waiting on queued or running jobs",
        &TuneJobQueue::Counts::subscribers);
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
  if (IsUnixSocket(listen)) return listen;
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
