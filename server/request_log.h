// The request log: one line per RPC, written when the RPC ends, with the ids a person greps for
// (request id, method, peer, principal, graph hash, target, status, duration).
//
// Nothing a caller sent is logged before the call is authenticated: RequestLog keeps request
// fields only once Admit has passed (set_graph / set_target are called after it), and every field
// that came from the request or from an error message about it goes through LogField or
// LogQuoted (base/untrusted_text.h), which escape it and cap its length, so a request can neither
// forge a line nor grow the log by more than a bounded amount. Calls refused before authentication
// (no token, a wrong token, a missing role) are logged through a RefusalLogLimiter: at most a few
// lines a second, with a count of the refusals left out.
//
// What the client is told is not always what is logged: a fault of the server's own (Internal,
// IOError, Corruption) reaches the client as a short message naming the request id to look up in
// the log, and the server's private strings (its database path, its directories) are replaced
// in every message sent, so errors never show a client the server's file system.
//
// A RequestLog belongs to one RPC's thread. RefusalLogLimiter and RequestLogPolicy are
// thread-safe (the policy is immutable after construction but for its limiter).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "base/clock.h"
#include "base/status.h"
#include "base/untrusted_text.h"

namespace fusor {

// Lets through at most `per_second` refusal lines in each second; Admit returns how many were
// held back since the last line let through (to print with it), or -1 to hold this one back.
class RefusalLogLimiter {
 public:
  explicit RefusalLogLimiter(int per_second = 5, const Clock* clock = nullptr);
  int64_t Admit();

 private:
  const int per_second_;
  const Clock& clock_;
  std::mutex mu_;
  int64_t window_start_ns_ = 0;  // Guarded by mu_, as are the two below.
  int in_window_ = 0;
  int64_t held_back_ = 0;
};

// What every RequestLog of one service shares.
struct RequestLogPolicy {
  RefusalLogLimiter refusals;
  // Replaced by "<server path>" in messages sent to clients (the database path, its directory).
  std::vector<std::string> private_strings;
};

// The message a client is sent for `s`, with the server's private strings hidden.
grpc::Status ClientStatus(const Status& s, uint64_t request_id,
                          const std::vector<std::string>& private_strings);

class RequestLog {
 public:
  RequestLog(grpc::ServerContext* ctx, const char* method, uint64_t id, RequestLogPolicy* policy);

  const char* method() const { return method_; }
  uint64_t id() const { return id_; }
  void set_principal(std::string name) { principal_ = std::move(name); }
  const std::string& principal() const { return principal_; }
  // Request fields: call only after the call was admitted.
  void set_graph(std::string_view hash) { graph_ = LogField(hash, 80); }
  void set_target(std::string_view target) { target_ = LogField(target, 128); }
  void set_shared(bool shared) { shared_ = shared; }

  // Writes the line (or, for a refusal, counts it when the limiter holds it back) and returns
  // the status to send the client.
  grpc::Status Finish(const Status& s);

 private:
  grpc::ServerContext* ctx_;
  const char* method_;
  uint64_t id_;
  RequestLogPolicy* policy_;
  std::chrono::steady_clock::time_point start_;
  std::string principal_ = "-";
  std::string graph_ = "-";
  std::string target_ = "-";
  bool shared_ = false;
};

}  // namespace fusor
