#include "server/grpc_service.h"

#include <grpcpp/support/method_handler.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "graph/canonical.h"
#include "graph/graph_proto.h"
#include "server/grpc_status.h"
#include "server/request_log.h"

namespace fusor {

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

// Sets a flag once the call is cancelled (by the client, or by fusord's shutdown after its
// grace) or its deadline passes, for a core call that runs on the RPC thread and checks the flag
// between steps. Polls: the synchronous API has no cancellation callback.
class CallWatch {
 public:
  explicit CallWatch(grpc::ServerContext* ctx)
      : thread_([this, ctx] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!done_) {
            if (ctx->IsCancelled() || DeadlinePassed(ctx)) {
              stopped_ = true;
              return;
            }
            wake_.wait_for(lock, kPollInterval);
          }
        }) {}
  ~CallWatch() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  const std::atomic<bool>* stopped() const { return &stopped_; }

 private:
  std::mutex mu_;
  std::condition_variable wake_;
  bool done_ = false;  // Guarded by mu_.
  std::atomic<bool> stopped_{false};
  std::thread thread_;  // Last: starts once the members above exist.
};

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
                                   const ValidationLimits& limits,
                                   std::vector<std::string> private_strings,
                                   int64_t parse_budget_bytes, int64_t max_message_bytes)
    : tuner_(tuner),
      jobs_(jobs),
      tokens_(tokens),
      limits_(limits),
      log_policy_(std::make_unique<RequestLogPolicy>()),
      parse_budget_(parse_budget_bytes),
      max_message_bytes_(max_message_bytes) {
  log_policy_->private_strings = std::move(private_strings);
  // The indices are the methods' order in proto/tuner.proto's service FusionTuner.
  using Stream = grpc::ServerReaderWriter<v1::TuneEvent, grpc::ByteBuffer>;
  MarkMethodStreamed(
      0,
      new grpc::internal::BidiStreamingHandler<GrpcTunerService, grpc::ByteBuffer, v1::TuneEvent>(
          [](GrpcTunerService* self, grpc::ServerContext* ctx, Stream* stream) {
            v1::TuneRequest request;
            grpc::Status refused;
            auto hold = self->ReadAdmitted(ctx, "Tune", kRoleTune, self->max_message_bytes_, stream,
                                           &request, &refused);
            return hold.ok() ? self->ServeTune(ctx, request, stream) : refused;
          },
          this));
  ServeUnaryAfterAdmission(1, "GetPlan", kRoleRead, &GrpcTunerService::GetPlan);
  ServeUnaryAfterAdmission(2, "QueryPlans", kRoleRead, &GrpcTunerService::QueryPlans);
  ServeUnaryAfterAdmission(3, "RegisterTarget", kRoleAdmin, &GrpcTunerService::RegisterTarget);
  ServeUnaryAfterAdmission(4, "ListTargets", kRoleRead, &GrpcTunerService::ListTargets);
  ServeUnaryAfterAdmission(5, "Calibrate", kRoleAdmin, &GrpcTunerService::Calibrate);
  ServeUnaryAfterAdmission(6, "RegisterAgent", kRoleAgent, &GrpcTunerService::RegisterAgent);
  ServeUnaryAfterAdmission(7, "LeaseMeasurementJob", kRoleAgent,
                           &GrpcTunerService::LeaseMeasurementJob);
  ServeUnaryAfterAdmission(8, "RenewMeasurementLease", kRoleAgent,
                           &GrpcTunerService::RenewMeasurementLease);
  ServeUnaryAfterAdmission(9, "ReportMeasurement", kRoleAgent,
                           &GrpcTunerService::ReportMeasurement);
  ServeUnaryAfterAdmission(10, "ListAgents", kRoleRead, &GrpcTunerService::ListAgents);
  ServeUnaryAfterAdmission(11, "ListMeasurementJobs", kRoleRead,
                           &GrpcTunerService::ListMeasurementJobs);
}

GrpcTunerService::~GrpcTunerService() = default;

// Serves method `index` as a stream of one request and one response, so that the request is read
// after admission rather than by gRPC before the handler runs; `serve` is the method's handler.
template <typename Request, typename Response>
void GrpcTunerService::ServeUnaryAfterAdmission(
    int index, const char* method, Role needed,
    grpc::Status (GrpcTunerService::*serve)(grpc::ServerContext*, const Request*, Response*)) {
  using Stream = grpc::ServerReaderWriter<Response, grpc::ByteBuffer>;
  MarkMethodStreamed(
      index, new grpc::internal::BidiStreamingHandler<GrpcTunerService, grpc::ByteBuffer, Response>(
                 [method, needed, serve](GrpcTunerService* self, grpc::ServerContext* ctx,
                                         Stream* stream) {
                   Request request;
                   grpc::Status refused;
                   auto hold =
                       self->ReadAdmitted(ctx, method, needed, 0, stream, &request, &refused);
                   if (!hold.ok()) return refused;
                   Response response;
                   grpc::Status s = (self->*serve)(ctx, &request, &response);
                   if (s.ok()) stream->Write(response);
                   return s;
                 },
                 this));
}

// Admits the call from its metadata alone, then reads its request message (holding `read_bytes`
// of the parse budget meanwhile: the Tune, whose requests are the large ones), prices it and holds
// the price against the parse budget, then parses it. On a refusal, logs it (RequestLog) and sets
// `refused` to what the client is told.
template <typename Request>
StatusOr<ParseBudget::Hold> GrpcTunerService::ReadAdmitted(
    grpc::ServerContext* ctx, const char* method, Role needed, int64_t read_bytes,
    grpc::internal::ReaderInterface<grpc::ByteBuffer>* in, Request* request,
    grpc::Status* refused) {
  RequestLog log(ctx, method, next_request_id_++, log_policy_.get());
  auto read = [&]() -> StatusOr<ParseBudget::Hold> {
    FUSOR_RETURN_IF_ERROR(Admit(ctx, needed, &log));
    FUSOR_ASSIGN_OR_RETURN(
        ParseBudget::Hold reading,
        parse_budget_.Reserve(read_bytes, "reading a " + std::string(method) + " request"));
    grpc::ByteBuffer wire;
    if (!in->Read(&wire)) {
      return Status::InvalidArgument(std::string(method) +
                                     " takes one request message; the call ended without one");
    }
    grpc::ProtoBufferReader priced(&wire);
    FUSOR_ASSIGN_OR_RETURN(int64_t bytes, EstimateParsedBytes(*Request::descriptor(), &priced));
    FUSOR_ASSIGN_OR_RETURN(ParseBudget::Hold hold,
                           parse_budget_.Reserve(bytes, "the request, parsed,"));
    grpc::ProtoBufferReader parsed(&wire);
    if (!request->ParseFromZeroCopyStream(&parsed)) {
      return Status::InvalidArgument("the request is not a well-formed " +
                                     Request::descriptor()->full_name() + " message");
    }
    return hold;
  };
  StatusOr<ParseBudget::Hold> hold = read();
  if (!hold.ok()) *refused = log.Finish(hold.status());
  return hold;
}

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
  RequestLog log(ctx, "GetPlan", next_request_id_++, log_policy_.get());
  return log.Finish(RunUnary(
      ctx, kRoleRead, &log,
      [&] {
        log.set_graph(request->graph_hash());
        log.set_target(request->target_id());
        return tuner_->GetPlan(*request);
      },
      response));
}

grpc::Status GrpcTunerService::QueryPlans(grpc::ServerContext* ctx,
                                          const v1::QueryPlansRequest* request,
                                          v1::QueryPlansResponse* response) {
  RequestLog log(ctx, "QueryPlans", next_request_id_++, log_policy_.get());
  return log.Finish(RunUnary(
      ctx, kRoleRead, &log,
      [&] {
        log.set_target(request->target_id());
        return tuner_->QueryPlans(*request);
      },
      response));
}

grpc::Status GrpcTunerService::RegisterTarget(grpc::ServerContext* ctx,
                                              const v1::RegisterTargetRequest* request,
                                              v1::RegisterTargetResponse* response) {
  RequestLog log(ctx, "RegisterTarget", next_request_id_++, log_policy_.get());
  return log.Finish(RunUnary(
      ctx, kRoleAdmin, &log,
      [&] {
        log.set_target(request->profile().target().id());
        return tuner_->RegisterTarget(*request);
      },
      response));
}

grpc::Status GrpcTunerService::ListTargets(grpc::ServerContext* ctx,
                                           const v1::ListTargetsRequest* request,
                                           v1::ListTargetsResponse* response) {
  RequestLog log(ctx, "ListTargets", next_request_id_++, log_policy_.get());
  return log.Finish(RunUnary(
      ctx, kRoleRead, &log, [&] { return tuner_->ListTargets(*request); }, response));
}

grpc::Status GrpcTunerService::ListAgents(grpc::ServerContext* ctx,
                                          const v1::ListAgentsRequest* request,
                                          v1::ListAgentsResponse* response) {
  RequestLog log(ctx, "ListAgents", next_request_id_++, log_policy_.get());
  return log.Finish(RunUnary(
      ctx, kRoleRead, &log, [&] { return tuner_->ListAgents(*request); }, response));
}

grpc::Status GrpcTunerService::ListMeasurementJobs(grpc::ServerContext* ctx,
                                                   const v1::ListMeasurementJobsRequest* request,
                                                   v1::ListMeasurementJobsResponse* response) {
  RequestLog log(ctx, "ListMeasurementJobs", next_request_id_++, log_policy_.get());
  return log.Finish(RunUnary(
      ctx, kRoleRead, &log, [&] { return tuner_->ListMeasurementJobs(*request); }, response));
}

grpc::Status GrpcTunerService::Calibrate(grpc::ServerContext* ctx,
                                         const v1::CalibrateRequest* request,
                                         v1::CalibrateResponse* response) {
  RequestLog log(ctx, "Calibrate", next_request_id_++, log_policy_.get());
  return log.Finish(RunUnary(
      ctx, kRoleAdmin, &log,
      [&] {
        CallWatch watch(ctx);
        return tuner_->Calibrate(*request, watch.stopped());
      },
      response));
}

grpc::Status GrpcTunerService::RegisterAgent(grpc::ServerContext* ctx,
                                             const v1::RegisterAgentRequest* request,
                                             v1::RegisterAgentResponse* response) {
  RequestLog log(ctx, "RegisterAgent", next_request_id_++, log_policy_.get());
  return log.Finish(RunUnary(
      ctx, kRoleAgent, &log,
      [&] {
        log.set_target(request->profile().target().id());
        return tuner_->RegisterAgent(*request);
      },
      response));
}

grpc::Status GrpcTunerService::LeaseMeasurementJob(grpc::ServerContext* ctx,
                                                   const v1::LeaseMeasurementJobRequest* request,
                                                   v1::LeaseMeasurementJobResponse* response) {
  RequestLog log(ctx, "LeaseMeasurementJob", next_request_id_++, log_policy_.get());
  return log.Finish(RunUnary(
      ctx, kRoleAgent, &log,
      [&] {
        CallWatch watch(ctx);
        auto leased = tuner_->LeaseMeasurementJob(*request, watch.stopped());
        if (leased.ok() && leased->leased()) {
          log.set_graph(leased->job().graph_hash());
          log.set_target(leased->job().target_id());
        }
        return leased;
      },
      response));
}

grpc::Status GrpcTunerService::RenewMeasurementLease(
    grpc::ServerContext* ctx, const v1::RenewMeasurementLeaseRequest* request,
    v1::RenewMeasurementLeaseResponse* response) {
  RequestLog log(ctx, "RenewMeasurementLease", next_request_id_++, log_policy_.get());
  return log.Finish(RunUnary(
      ctx, kRoleAgent, &log, [&] { return tuner_->RenewMeasurementLease(*request); }, response));
}

grpc::Status GrpcTunerService::ReportMeasurement(grpc::ServerContext* ctx,
                                                 const v1::ReportMeasurementRequest* request,
                                                 v1::ReportMeasurementResponse* response) {
  RequestLog log(ctx, "ReportMeasurement", next_request_id_++, log_policy_.get());
  return log.Finish(RunUnary(
      ctx, kRoleAgent, &log, [&] { return tuner_->ReportMeasurement(*request); }, response));
}

grpc::Status GrpcTunerService::Tune(grpc::ServerContext* ctx, const v1::TuneRequest* request,
                                    grpc::ServerWriter<v1::TuneEvent>* writer) {
  return ServeTune(ctx, *request, writer);
}

grpc::Status GrpcTunerService::ServeTune(grpc::ServerContext* ctx, const v1::TuneRequest& request,
                                         EventWriter* writer) {
  RequestLog log(ctx, "Tune", next_request_id_++, log_policy_.get());
  return log.Finish(SubmitTune(ctx, request, writer, &log));
}

Status GrpcTunerService::SubmitTune(grpc::ServerContext* ctx, const v1::TuneRequest& request,
                                    EventWriter* writer, RequestLog* log) {
  FUSOR_RETURN_IF_ERROR(Admit(ctx, kRoleTune, log));
  log->set_target(request.target_id());
  FUSOR_ASSIGN_OR_RETURN(std::string hash, CheckedGraphHash(request.graph(), limits_));
  log->set_graph(hash);
  FUSOR_ASSIGN_OR_RETURN(auto job,
                         jobs_->Submit(TuneJobKey(hash, request), request, log->principal()));
  log->set_shared(job->joined());
  return ForwardEvents(ctx, job.get(), writer);
}

// Polls for cancellation between events: the synchronous API has no cancellation callback, and
// 50 ms is well inside what a person or a deadline notices.
Status GrpcTunerService::ForwardEvents(grpc::ServerContext* ctx, TuneSubscription* job,
                                       EventWriter* writer) {
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
