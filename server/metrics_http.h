// MetricsHttpServer: fusord's optional HTTP listener for Prometheus. GET /metrics answers with
// the process-wide metrics registry (base/metrics.h) in the text exposition format 0.0.4; any
// other path is 404. The HTTP protocol is cpp-httplib's (Debian's libcpp-httplib-dev); this file
// only binds, routes and stops it.
//
// Exposure follows fusord's rule for its gRPC port (server/tuner_server.h, base/net_address.h):
// the endpoint has no tokens and no TLS, so an address beyond loopback is refused unless
// allow_insecure_remote is set. A bare port means 127.0.0.1.
//
// Owns the listening socket and its threads (one accepts, two serve); Stop (or the destructor)
// closes the socket and joins them. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"

namespace fusor {

// "HOST:PORT", "[V6]:PORT" or "PORT" (loopback) as "HOST:PORT"; InvalidArgument naming what is
// wrong otherwise (a unix socket, a port outside 0..65535). FailedPrecondition for an address
// beyond loopback unless `allow_insecure_remote`.
StatusOr<std::string> CheckMetricsListen(const std::string& listen, bool allow_insecure_remote);

class MetricsHttpServer {
 public:
  // Binds `listen` (checked as above; port 0 picks a free port) and starts serving.
  static StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& listen,
                                                            bool allow_insecure_remote);
  ~MetricsHttpServer();  // Stop().

  // The address bound, with the actual port ("127.0.0.1:41239").
  std::string address() const;
  void Stop();

 private:
  struct State;
  explicit MetricsHttpServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace fusor
