// RemoteTuner: TunerApi over a gRPC channel to a fusord. Each call carries
// `authorization: Bearer TOKEN` when a token is set, and a deadline when a timeout is set. Errors
// come back as the Status codes the server sent (server/grpc_status.h), prefixed with "fusord at
// ADDRESS", so the CLI's exit codes are the same as in local mode: UNAVAILABLE exits 3,
// UNAUTHENTICATED and PERMISSION_DENIED exit 5. Tune stops the call when *cancelled turns true,
// which cancels the job on the server once no other caller shares it.
//
// Owns the channel. Safe to call from many threads at once (gRPC channels and stubs are).
#pragma once

#include <memory>
#include <string>

#include "proto/tuner.grpc.pb.h"
#include "server/tuner_api.h"

namespace fusor {

struct RemoteTunerOptions {
  std::string address;       // host:port or unix:PATH of the fusord.
  std::string token;         // Bearer token; empty sends none.
  bool tls = false;          // TLS (implied by tls_ca_pem).
  std::string tls_ca_pem;    // Root certificates in PEM; empty: the system's.
  std::string tls_cert_pem;  // Client certificate chain (mutual TLS); empty: none.
  std::string tls_key_pem;   // Its private key.
  double timeout_s = 0;      // Deadline per call; 0: none for Tune and Calibrate, 60 s for others.
  int max_message_bytes = 64 << 20;  // Largest response accepted.
};

class RemoteTuner final : public TunerApi {
 public:
  explicit RemoteTuner(const RemoteTunerOptions& options);

  Status Tune(const v1::TuneRequest& request, const EventSink& on_event,
              const std::atomic<bool>* cancelled) override;
  StatusOr<v1::GetPlanResponse> GetPlan(const v1::GetPlanRequest& request) override;
  StatusOr<v1::QueryPlansResponse> QueryPlans(const v1::QueryPlansRequest& request) override;
  StatusOr<v1::RegisterTargetResponse> RegisterTarget(
      const v1::RegisterTargetRequest& request) override;
  StatusOr<v1::ListTargetsResponse> ListTargets(const v1::ListTargetsRequest& request) override;
  using TunerApi::Calibrate;
  StatusOr<v1::CalibrateResponse> Calibrate(const v1::CalibrateRequest& request,
                                            const std::atomic<bool>* cancelled) override;
  StatusOr<v1::RegisterAgentResponse> RegisterAgent(
      const v1::RegisterAgentRequest& request) override;
  StatusOr<v1::LeaseMeasurementJobResponse> LeaseMeasurementJob(
      const v1::LeaseMeasurementJobRequest& request, const std::atomic<bool>* cancelled) override;
  StatusOr<v1::RenewMeasurementLeaseResponse> RenewMeasurementLease(
      const v1::RenewMeasurementLeaseRequest& request) override;
  StatusOr<v1::ReportMeasurementResponse> ReportMeasurement(
      const v1::ReportMeasurementRequest& request) override;
  StatusOr<v1::ListAgentsResponse> ListAgents(const v1::ListAgentsRequest& request) override;
  StatusOr<v1::ListMeasurementJobsResponse> ListMeasurementJobs(
      const v1::ListMeasurementJobsRequest& request) override;

 private:
  enum class CallKind { kQuick, kLong };
  void Prepare(grpc::ClientContext* ctx, CallKind kind) const;
  // One quick unary call: `call(ctx, response)` makes it; cancelled as *cancelled turns true.
  template <typename Response, typename Call>
  StatusOr<Response> Unary(Call call, const std::atomic<bool>* cancelled = nullptr) const;
  Status Convert(const grpc::ClientContext& ctx, const grpc::Status& s) const;

  const RemoteTunerOptions options_;
  std::unique_ptr<v1::FusionTuner::Stub> stub_;
};

}  // namespace fusor
