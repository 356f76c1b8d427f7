// TunerServer: a running gRPC server that serves one TunerApi as fusor.v1.FusionTuner, plus the
// standard grpc.health.v1.Health service and server reflection of the fusor.v1 API alone
// (server/reflection_service.h; so grpcurl and grpc_cli work). It
// owns the listening socket, the Tune job queue and workers, and the token table; it borrows the
// TunerApi, which must outlive it.
//
// Safety rules applied at Start: beyond a loopback address (base/net_address.h) the server needs a
// token file and TLS, so that nobody can call it without a token and no token crosses the network
// in plaintext, unless allow_insecure_remote is set; TLS is on when a certificate and key are
// given, and mutual TLS when a client CA is given too. Shutdown is graceful: health turns
// NOT_SERVING, new tuning jobs are refused, in-flight calls get `grace` to finish and are then
// cancelled (which cancels their jobs), and the workers are joined, so the TunerApi can then be
// closed safely.
//
// Start, Shutdown and the accessors may be called from any thread; Shutdown is idempotent.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "graph/validate.h"
#include "server/tune_jobs.h"
#include "server/tuner_api.h"

namespace fusor {

struct TunerServerOptions {
  // host:port (port 0 picks a free one) or unix:PATH. A unix socket is created mode 0600 (owner
  // only), or 0660 with unix_socket_group, whatever the umask.
  std::string listen = "127.0.0.1:7070";
  std::string unix_socket_group;
  int worker_threads = 1;          // Tuning jobs that run at once.
  int queue_size = 16;             // Tuning jobs that may wait; more: RESOURCE_EXHAUSTED.
  int max_jobs_per_principal = 4;  // Tuning jobs one principal may have queued or running.
  int max_joiners_per_job = 64;    // Callers that may share one tuning job.
  int max_rpc_threads = 256;       // Threads serving RPCs; more calls: RESOURCE_EXHAUSTED.
  // Largest request accepted. A request is read only once its call is admitted (its token
  // checked), so this bounds what an authenticated caller sends per call; a graph proto takes
  // ~150 bytes a node (BERT-base: ~0.2 MiB), so 8 MiB is ~50k nodes.
  int max_message_bytes = 8 << 20;
  // What the parsed requests of all calls may hold at once, priced from their wire bytes before
  // they are parsed (server/parse_budget.h); a request that does not fit: RESOURCE_EXHAUSTED.
  int64_t max_parse_bytes = int64_t{256} << 20;
  // Memory gRPC may use for all connections and calls together (its ResourceQuota): beyond it,
  // reads wait and new calls are refused, however many clients send at once.
  int64_t max_memory_bytes = int64_t{512} << 20;
  int max_concurrent_streams = 32;    // Calls at once on one connection.
  int max_connection_idle_s = 600;    // A connection with no call for this long is closed.
  int max_connection_age_s = 3600;    // Then a connection is asked to reconnect (GOAWAY)...
  int connection_age_grace_s = 3600;  // ...and its calls get this long to finish.
  ValidationLimits limits;            // Node and tensor-size caps for Tune graphs.
  std::string tls_cert;               // PEM certificate chain file; TLS when set.
  std::string tls_key;                // PEM private key file; required with tls_cert.
  // PEM roots of client certificates (mutual TLS): with it, a client must present a certificate
  // that these sign, on top of its token. Needs tls_cert.
  std::string tls_client_ca;
  std::string token_file;  // Bearer tokens (access_tokens.h); none: no auth.
  // Listen beyond loopback without a token file, or take tokens there without TLS.
  bool allow_insecure_remote = false;
  // Never shown to clients in error messages (the database path, its directory).
  std::vector<std::string> private_strings;
};

class TunerServer {
 public:
  static StatusOr<std::unique_ptr<TunerServer>> Start(TunerApi* tuner,
                                                      const TunerServerOptions& options);
  ~TunerServer();  // Shutdown(0).

  // The address actually bound ("127.0.0.1:41237" when port 0 was asked for).
  std::string address() const;
  int port() const;
  bool tls() const;
  bool authenticated() const;

  // Tuning jobs queued and running, and callers waiting on them.
  TuneJobQueue::Counts job_counts() const;

  void Shutdown(std::chrono::milliseconds grace);

 private:
  struct State;
  explicit TunerServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The checks Start makes before binding (value ranges; no token file beyond loopback), so a
// daemon can refuse a bad configuration before it opens its database.
Status CheckTunerServerOptions(const TunerServerOptions& options);

}  // namespace fusor
