#include "server/grpc_service.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "graph/canonical.h"
#include "graph/graph_proto.h"
#include "server/grpc_status.h"

namespace fusor {

// Collects what one RPC's log line needs and writes it once, when the RPC ends.
class RequestLog {
 public:
  RequestLog(grpc::ServerContext* ctx, const char* method, uint64_t id)
      : ctx_(ctx), method_(method), id_(id), start_(std::chrono::steady_clock::now()) {}

  const char* method() const { return method_; }
  void set_principal(std::string name) { principal_ = std::move(name); }
  void set_graph(std::string hash) { graph_ = std::move(hash); }
  void set_target(std::string target) { target_ = std::move(target); }
  void set_shared(bool shared) { shared_ = shared; }

  grpc::Status Finish(const Status& s) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
                    .count();
    auto level = s.ok() ? spdlog::level::info : spdlog::level::warn;
    spdlog::log(level,
                "rpc id={} method={} peer={} principal={} graph={} target={}{} status={} "
                "duration_ms={:.2f}{}{}",
                id_, method_, ctx_->peer(), principal_, graph_.empty() ? "-" : graph_,
                target_.empty() ? "-" : target_, shared_ ? " joined=1" : "", CodeName(s.code()), ms,
                s.ok() ? "" : " error=", s.message());
    return ToGrpcStatus(s);
  }

 private:
  grpc::ServerContext* ctx_;
  const char* method_;
  uint64_t id_;
  std::chrono::steady_clock::time_point start_;
  std::string principal_ = "-";
  std::string graph_;
  std::string target_;
  bool shared_ = false;
};

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(50);

std::string_view AuthorizationOf(const grpc::ServerContext* ctx) {
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return {};
  return std::string_view(it->second.data(), it->second.size());
}

bool DeadlinePassed(const grpc::ServerContext* ctx) {
  return ctx->deadline() < std::chrono::system_clock::now();
}

Status StopReason(const grpc::ServerContext* ctx) {
  if (DeadlinePassed(ctx)) return Status::DeadlineExceeded("the call's deadline passed");
  return Status::Cancelled("the call was cancelled (by the client, or fusord is stopping)");
}

StatusOr<std::string> CheckedGraphHash(const v1::Graph& graph, const ValidationLimits& limits) {
  auto g = FromProto(graph, limits);
  if (!g.ok()) {
    std::string name = graph.model_name().empty() ? "(unnamed)" : graph.model_name();
    return Status::InvalidArgument("graph '" + name + "': " + g.status().message());
  }
  return CanonicalHash(*g);
}

}  // namespace

std::string TuneJobKey(const std::string& graph_hash, const v1::TuneRequest& request) {
  // TuneOptions has no map fields, so its serialisation is deterministic.
  return graph_hash + "|" + request.target_id() + "|" + request.options().SerializeAsString() +
         "|" + (request.force() ? "force" : "");
}

GrpcTunerService::GrpcTunerService(TunerApi* tuner, TuneJobQueue* jobs, const AccessTokens* tokens,
                                   const ValidationLimits& limits)
    : tuner_(tuner), jobs_(jobs), tokens_(tokens), limits_(limits) {}

Status GrpcTunerService::Admit(grpc::ServerContext* ctx, Role needed, RequestLog* log) const {
  if (DeadlinePassed(ctx)) return Status::DeadlineExceeded("the call's deadline had passed");
  if (tokens_ == nullptr) {
    log->set_principal("anonymous");
    return Status::Ok();
  }
  FUSOR_ASSIGN_OR_RETURN(Principal who, tokens_->Authenticate(AuthorizationOf(ctx)));
  log->set_principal(who.name);
  return Authorize(who, needed, log->method());
}

template <typename Response, typename Call>
Status GrpcTunerService::RunUnary(grpc::ServerContext* ctx, Role needed, RequestLog* log, Call call,
                                  Response* response) {
  FUSOR_RETURN_IF_ERROR(Admit(ctx, needed, log));
  StatusOr<Response> r = call();
  if (!r.ok()) return r.status();
  *response = std::move(r).value();
  return Status::Ok();
}

grpc::Status GrpcTunerService::GetPlan(grpc::ServerContext* ctx, const v1::GetPlanRequest* request,
                                       v1::GetPlanResponse* response) {
  RequestLog log(ctx, "GetPlan", next_request_id_++);
  log.set_graph(request->graph_hash());
  log.set_target(request->target_id());
  return log.Finish(RunUnary(
      ctx, kRoleRead, &log, [&] { return tuner_->GetPlan(*request); }, response));
}

grpc::Status GrpcTunerService::QueryPlans(grpc::ServerContext* ctx,
                                          const v1::QueryPlansRequest* request,
                                          v1::QueryPlansResponse* response) {
  RequestLog log(ctx, "QueryPlans", next_request_id_++);
  log.set_target(request->target_id());
  return log.Finish(RunUnary(
      ctx, kRoleRead, &log, [&] { return tuner_->QueryPlans(*request); }, response));
}

grpc::Status GrpcTunerService::RegisterTarget(grpc::ServerContext* ctx,
                                              const v1::RegisterTargetRequest* request,
                                              v1::RegisterTargetResponse* response) {
  RequestLog log(ctx, "RegisterTarget", next_request_id_++);
  log.set_target(request->profile().target().id());
  return log.Finish(RunUnary(
      ctx, kRoleAdmin, &log, [&] { return tuner_->RegisterTarget(*request); }, response));
}

grpc::Status GrpcTunerService::ListTargets(grpc::ServerContext* ctx,
                                           const v1::ListTargetsRequest* request,
                                           v1::ListTargetsResponse* response) {
  RequestLog log(ctx, "ListTargets", next_request_id_++);
  return log.Finish(RunUnary(
      ctx, kRoleRead, &log, [&] { return tuner_->ListTargets(*request); }, response));
}

grpc::Status GrpcTunerService::Calibrate(grpc::ServerContext* ctx,
                                         const v1::CalibrateRequest* request,
                                         v1::CalibrateResponse* response) {
  RequestLog log(ctx, "Calibrate", next_request_id_++);
  return log.Finish(RunUnary(
      ctx, kRoleAdmin, &log, [&] { return tuner_->Calibrate(*request); }, response));
}

grpc::Status GrpcTunerService::Tune(grpc::ServerContext* ctx, const v1::TuneRequest* request,
                                    grpc::ServerWriter<v1::TuneEvent>* writer) {
  RequestLog log(ctx, "Tune", next_request_id_++);
  log.set_target(request->target_id());
  return log.Finish(SubmitTune(ctx, *request, writer, &log));
}

Status GrpcTunerService::SubmitTune(grpc::ServerContext* ctx, const v1::TuneRequest& request,
                                    grpc::ServerWriter<v1::TuneEvent>* writer, RequestLog* log) {
  FUSOR_RETURN_IF_ERROR(Admit(ctx, kRoleTune, log));
  FUSOR_ASSIGN_OR_RETURN(std::string hash, CheckedGraphHash(request.graph(), limits_));
  log->set_graph(hash);
  FUSOR_ASSIGN_OR_RETURN(auto job, jobs_->Submit(TuneJobKey(hash, request), request));
  log->set_shared(job->joined());
  return ForwardEvents(ctx, job.get(), writer);
}

// Polls for cancellation between events: the synchronous API has no cancellation callback, and
// 50 ms is well inside what a person or a deadline notices.
Status GrpcTunerService::ForwardEvents(grpc::ServerContext* ctx, TuneSubscription* job,
                                       grpc::ServerWriter<v1::TuneEvent>* writer) {
  v1::TuneEvent event;
  Status status;
  while (!ctx->IsCancelled() && !DeadlinePassed(ctx)) {
    switch (job->Wait(kPollInterval, &event, &status)) {
      case TuneSubscription::Next::kEvent:
        if (!writer->Write(event)) return StopReason(ctx);
        break;
      case TuneSubscription::Next::kDone:
        return status;
      case TuneSubscription::Next::kTimeout:
        break;
    }
  }
  return StopReason(ctx);
}

}  // namespace fusor
