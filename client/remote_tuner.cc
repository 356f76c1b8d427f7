#include "client/remote_tuner.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>

#include "base/periodic.h"
#include "server/grpc_status.h"

namespace fusor {
namespace {

constexpr double kQuickCallTimeoutS = 60;

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const RemoteTunerOptions& o) {
  if (!o.tls && o.tls_ca_pem.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = o.tls_ca_pem;
  ssl.pem_cert_chain = o.tls_cert_pem;
  ssl.pem_private_key = o.tls_key_pem;
  return grpc::SslCredentials(ssl);
}

// Cancels the call of `ctx` once *cancelled turns true, watching while the returned task lives;
// null when there is nothing to watch.
std::unique_ptr<PeriodicTask> WatchCancel(grpc::ClientContext* ctx,
                                          const std::atomic<bool>* cancelled) {
  if (cancelled == nullptr) return nullptr;
  return std::make_unique<PeriodicTask>(std::chrono::milliseconds(50), [ctx, cancelled] {
    if (!cancelled->load()) return true;
    ctx->TryCancel();
    return false;
  });
}

}  // namespace

RemoteTuner::RemoteTuner(const RemoteTunerOptions& options) : options_(options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options_.max_message_bytes);
  stub_ = v1::FusionTuner::NewStub(
      grpc::CreateCustomChannel(options_.address, ChannelCredentials(options_), args));
}

void RemoteTuner::Prepare(grpc::ClientContext* ctx, CallKind kind) const {
  // Tokens go as plain metadata rather than call credentials: gRPC refuses call credentials on an
  // insecure channel, and a loopback fusord without TLS is a supported setup.
  if (!options_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options_.token);
  double timeout = options_.timeout_s;
  if (timeout <= 0 && kind == CallKind::kQuick) timeout = kQuickCallTimeoutS;
  if (timeout > 0) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000)));
  }
}

// The request id fusord returns with every call is added to an error's message (unless the
// message names it already), so the error a person sees is the one line to find in fusord's log.
Status RemoteTuner::Convert(const grpc::ClientContext& ctx, const grpc::Status& s) const {
  const std::string context = "fusord at " + options_.address;
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto id = trailers.find(kRequestIdMetadata);
  if (s.ok() || id == trailers.end()) return FromGrpcStatus(s, context);
  std::string request_id = "request id " + std::string(id->second.data(), id->second.size());
  std::string message = s.error_message();
  if (message.find(request_id) == std::string::npos) message += " (" + request_id + ")";
  return FromGrpcStatus(grpc::Status(s.error_code(), message, s.error_details()), context);
}

Status RemoteTuner::Tune(const v1::TuneRequest& request, const EventSink& on_event,
                         const std::atomic<bool>* cancelled) {
  grpc::ClientContext ctx;
  Prepare(&ctx, CallKind::kLong);
  auto watch = WatchCancel(&ctx, cancelled);
  auto reader = stub_->Tune(&ctx, request);
  v1::TuneEvent event;
  bool have_result = false;
  while (reader->Read(&event)) {
    have_result = have_result || event.has_result();
    on_event(event);
  }
  Status s = Convert(ctx, reader->Finish());
  if (s.ok() && !have_result) return Status::Internal("fusord ended Tune without a result");
  return s;
}

template <typename Response, typename Call>
StatusOr<Response> RemoteTuner::Unary(Call call, const std::atomic<bool>* cancelled) const {
  grpc::ClientContext ctx;
  Prepare(&ctx, CallKind::kQuick);
  auto watch = WatchCancel(&ctx, cancelled);
  Response response;
  FUSOR_RETURN_IF_ERROR(Convert(ctx, call(&ctx, &response)));
  return response;
}

StatusOr<v1::GetPlanResponse> RemoteTuner::GetPlan(const v1::GetPlanRequest& request) {
  return Unary<v1::GetPlanResponse>(
      [&](grpc::ClientContext* c, auto* r) { return stub_->GetPlan(c, request, r); });
}

StatusOr<v1::QueryPlansResponse> RemoteTuner::QueryPlans(const v1::QueryPlansRequest& request) {
  return Unary<v1::QueryPlansResponse>(
      [&](grpc::ClientContext* c, auto* r) { return stub_->QueryPlans(c, request, r); });
}

StatusOr<v1::RegisterTargetResponse> RemoteTuner::RegisterTarget(
    const v1::RegisterTargetRequest& request) {
  return Unary<v1::RegisterTargetResponse>(
      [&](grpc::ClientContext* c, auto* r) { return stub_->RegisterTarget(c, request, r); });
}

StatusOr<v1::ListTargetsResponse> RemoteTuner::ListTargets(const v1::ListTargetsRequest& request) {
  return Unary<v1::ListTargetsResponse>(
      [&](grpc::ClientContext* c, auto* r) { return stub_->ListTargets(c, request, r); });
}

StatusOr<v1::CalibrateResponse> RemoteTuner::Calibrate(const v1::CalibrateRequest& request,
                                                       const std::atomic<bool>* cancelled) {
  grpc::ClientContext ctx;
  Prepare(&ctx, CallKind::kLong);
  auto watch = WatchCancel(&ctx, cancelled);
  v1::CalibrateResponse response;
  FUSOR_RETURN_IF_ERROR(Convert(ctx, stub_->Calibrate(&ctx, request, &response)));
  return response;
}

StatusOr<v1::RegisterAgentResponse> RemoteTuner::RegisterAgent(
    const v1::RegisterAgentRequest& request) {
  return Unary<v1::RegisterAgentResponse>(
      [&](grpc::ClientContext* c, auto* r) { return stub_->RegisterAgent(c, request, r); });
}

StatusOr<v1::LeaseMeasurementJobResponse> RemoteTuner::LeaseMeasurementJob(
    const v1::LeaseMeasurementJobRequest& request, const std::atomic<bool>* cancelled) {
  return Unary<v1::LeaseMeasurementJobResponse>(
      [&](grpc::ClientContext* c, auto* r) { return stub_->LeaseMeasurementJob(c, request, r); },
      cancelled);
}

StatusOr<v1::RenewMeasurementLeaseResponse> RemoteTuner::RenewMeasurementLease(
    const v1::RenewMeasurementLeaseRequest& request) {
  return Unary<v1::RenewMeasurementLeaseResponse>(
      [&](grpc::ClientContext* c, auto* r) { return stub_->RenewMeasurementLease(c, request, r); });
}

StatusOr<v1::ListAgentsResponse> RemoteTuner::ListAgents(const v1::ListAgentsRequest& request) {
  return Unary<v1::ListAgentsResponse>(
      [&](grpc::ClientContext* c, auto* r) { return stub_->ListAgents(c, request, r); });
}

StatusOr<v1::ListMeasurementJobsResponse> RemoteTuner::ListMeasurementJobs(
    const v1::ListMeasurementJobsRequest& request) {
  return Unary<v1::ListMeasurementJobsResponse>(
      [&](grpc::ClientContext* c, auto* r) { return stub_->ListMeasurementJobs(c, request, r); });
}

StatusOr<v1::ReportMeasurementResponse> RemoteTuner::ReportMeasurement(
    const v1::ReportMeasurementRequest& request) {
  return Unary<v1::ReportMeasurementResponse>(
      [&](grpc::ClientContext* c, auto* r) { return stub_->ReportMeasurement(c, request, r); });
}

}  // namespace fusor
