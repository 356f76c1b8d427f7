// TunerServer: a running gRPC server that serves one TunerApi as fusor.v1.FusionTuner, plus the
// standard grpc.health.v1.Health service and server reflection (so grpcurl and grpc_cli work). It
// owns the listening socket, the Tune job queue and workers, and the token table; it borrows the
// TunerApi, which must outlive it.
//
// Safety rules applied at Start: without a token file the server only binds a loopback address
// (or a unix socket) unless allow_insecure_remote is set; TLS is on when a certificate and key are
// given. Shutdown is graceful: health turns NOT_SERVING, new tuning jobs are refused, in-flight
// calls get `grace` to finish and are then cancelled (which cancels their jobs), and the workers
// are joined, so the TunerApi can then be closed safely.
//
// Start, Shutdown and the accessors may be called from any thread; Shutdown is idempotent.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/status.h"
#include "graph/validate.h"
#include "server/tune_jobs.h"
#include "server/tuner_api.h"

namespace fusor {

struct TunerServerOptions {
  std::string listen = "127.0.0.1:7070";  // host:port (port 0 picks a free one) or unix:PATH.
  int worker_threads = 1;                 // Tuning jobs that run at once.
  int queue_size = 16;                    // Tuning jobs that may wait; more: RESOURCE_EXHAUSTED.
  int max_rpc_threads = 256;              // Threads serving RPCs; more calls: RESOURCE_EXHAUSTED.
  int max_message_bytes = 64 << 20;       // Largest request accepted.
  ValidationLimits limits;                // Node and tensor-size caps for Tune graphs.
  std::string tls_cert;                   // PEM certificate chain file; TLS when set.
  std::string tls_key;                    // PEM private key file; required with tls_cert.
  std::string token_file;                 // Bearer tokens (access_tokens.h); none: no auth.
  bool allow_insecure_remote = false;     // Listen beyond loopback without a token file.
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

// True for localhost, 127.0.0.0/8, ::1 and unix sockets: addresses no other machine can reach.
bool IsLoopbackAddress(const std::string& listen);

}  // namespace fusor
