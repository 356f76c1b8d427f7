#include "server/request_log.h"

#include <spdlog/spdlog.h>

#include <cctype>

#include "server/grpc_status.h"
#include "server/json_log.h"
#include "server/service_metrics.h"

namespace fusor {
namespace {

bool IsServerFault(Status::Code code) {
  return code == Status::Code::kInternal || code == Status::Code::kIOError ||
         code == Status::Code::kCorruption;
}

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Every occurrence of a private string that stands as a path of its own: not inside a longer
// word or path ("tok" hides "tok" and "tok.bak" but not "token"; "/srv/db" hides "/srv/db-wal").
std::string Redacted(std::string message, const std::vector<std::string>& private_strings) {
  for (const std::string& secret : private_strings) {
    if (secret.empty()) continue;
    for (size_t at = message.find(secret); at != std::string::npos; at = message.find(secret, at)) {
      const size_t end = at + secret.size();
      const bool starts = at == 0 || !(IsWordChar(message[at - 1]) || message[at - 1] == '/' ||
                                       message[at - 1] == '.' || message[at - 1] == '-');
      const bool ends = end == message.size() || !IsWordChar(message[end]);
      if (!starts || !ends) {
        at = end;
        continue;
      }
      message.replace(at, secret.size(), "<server path>");
      at += std::string_view("<server path>").size();
    }
  }
  return message;
}

bool IsRefusal(const Status& s) {
  return s.code() == Status::Code::kUnauthenticated || s.code() == Status::Code::kPermissionDenied;
}

}  // namespace

grpc::Status ClientStatus(const Status& s, uint64_t request_id,
                          const std::vector<std::string>& private_strings) {
  if (s.ok()) return grpc::Status::OK;
  const grpc::StatusCode code = ToGrpcStatus(s).error_code();
  if (IsServerFault(s.code())) {
    return grpc::Status(code, "fusord could not complete the request (" +
                                  std::string(CodeName(s.code())) + "); request id " +
                                  std::to_string(request_id) + " in fusord's log has the details");
  }
  return grpc::Status(code, Redacted(s.message(), private_strings));
}

RefusalLogLimiter::RefusalLogLimiter(int per_second, const Clock* clock)
    : per_second_(per_second), clock_(clock != nullptr ? *clock : Clock::Real()) {}

int64_t RefusalLogLimiter::Admit() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_.NowNs();
  if (now - window_start_ns_ >= 1'000'000'000) {
    window_start_ns_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= per_second_) {
    ++held_back_;
    return -1;
  }
  ++in_window_;
  int64_t held = held_back_;
  held_back_ = 0;
  return held;
}

RequestLog::RequestLog(grpc::ServerContext* ctx, const char* method, uint64_t id,
                       RequestLogPolicy* policy)
    : ctx_(ctx),
      method_(method),
      id_(id),
      policy_(policy),
      start_(std::chrono::steady_clock::now()) {}

grpc::Status RequestLog::Finish(const Status& s) {
  grpc::Status to_client = ClientStatus(s, id_, policy_->private_strings);
  ctx_->AddTrailingMetadata(kRequestIdMetadata, std::to_string(id_));
  const double seconds = metrics::SecondsSince(start_);
  const std::string code(GrpcCodeName(to_client.error_code()));
  Metrics().rpcs.With({method_, code}).Increment();
  Metrics().rpc_seconds.With({method_, code}).Observe(seconds);
  std::string held_back;
  int64_t held = 0;
  if (IsRefusal(s)) {
    held = policy_->refusals.Admit();
    if (held < 0) return to_client;
    if (held > 0) held_back = " refusals_not_logged=" + std::to_string(held);
  }
  const double ms = seconds * 1000;
  const std::string peer = LogField(ctx_->peer());
  const std::string principal = LogField(principal_);
  // The same event as structured fields, for JSON log lines (server/json_log.h).
  nlohmann::json fields = {{"request_id", id_},
                           {"method", method_},
                           {"peer", peer},
                           {"principal", principal},
                           {"graph", graph_},
                           {"target", target_},
                           {"status", CodeName(s.code())},
                           {"grpc_code", code},
                           {"duration_ms", ms}};
  if (shared_) fields["joined"] = true;
  if (held > 0) fields["refusals_not_logged"] = held;
  if (!s.ok()) fields["error"] = s.message().substr(0, 1024);
  ScopedLogFields scoped(&fields);
  spdlog::log(s.ok() ? spdlog::level::info : spdlog::level::warn,
              "rpc id={} method={} peer={} principal={} graph={} target={}{} status={} "
              "duration_ms={:.2f}{}{}{}",
              id_, method_, peer, principal, graph_, target_, shared_ ? " joined=1" : "",
              CodeName(s.code()), ms, held_back,
              s.ok() ? "" : " error=", s.ok() ? "" : LogQuoted(s.message()));
  return to_client;
}

}  // namespace fusor
