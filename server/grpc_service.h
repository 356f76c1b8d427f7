// GrpcTunerService: fusor.v1.FusionTuner on the wire, around any TunerApi. Per RPC it
// authenticates the bearer token and checks the method's role (server/access_tokens.h), honours
// the deadline, validates what it must look at itself, calls the TunerApi, turns the Status into a
// grpc::Status (server/grpc_status.h) and writes one log line (server/request_log.h): request id,
// method, peer, principal, graph hash and target when there are any, status and duration. No
// field of the request is logged or looked at before the call is authenticated.
//
// Tune is not run on the RPC thread: the graph is checked against the limits (FromProto) and
// hashed canonically here, and the job goes to the TuneJobQueue under the key (graph hash, target,
// options, force), so identical concurrent requests share one job. The RPC thread forwards the
// job's events and leaves the job when the client cancels or its deadline passes.
//
// Borrows the TunerApi, the queue and the tokens (null: authentication off), which must outlive
// it. Thread-safe, as gRPC's synchronous server calls it from many threads.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "graph/validate.h"
#include "proto/tuner.grpc.pb.h"
#include "server/access_tokens.h"
#include "server/tune_jobs.h"
#include "server/tuner_api.h"

namespace fusor {

class RequestLog;
struct RequestLogPolicy;

class GrpcTunerService final : public v1::FusionTuner::Service {
 public:
  // `private_strings` (the database path, ...) never appear in messages sent to clients.
  GrpcTunerService(TunerApi* tuner, TuneJobQueue* jobs, const AccessTokens* tokens,
                   const ValidationLimits& limits, std::vector<std::string> private_strings = {});
  ~GrpcTunerService() override;

  grpc::Status Tune(grpc::ServerContext* ctx, const v1::TuneRequest* request,
                    grpc::ServerWriter<v1::TuneEvent>* writer) override;
  grpc::Status GetPlan(grpc::ServerContext* ctx, const v1::GetPlanRequest* request,
                       v1::GetPlanResponse* response) override;
  grpc::Status QueryPlans(grpc::ServerContext* ctx, const v1::QueryPlansRequest* request,
                          v1::QueryPlansResponse* response) override;
  grpc::Status RegisterTarget(grpc::ServerContext* ctx, const v1::RegisterTargetRequest* request,
                              v1::RegisterTargetResponse* response) override;
  grpc::Status ListTargets(grpc::ServerContext* ctx, const v1::ListTargetsRequest* request,
                           v1::ListTargetsResponse* response) override;
  grpc::Status Calibrate(grpc::ServerContext* ctx, const v1::CalibrateRequest* request,
                         v1::CalibrateResponse* response) override;
  // Measurement agents: the 'agent' role.
  grpc::Status RegisterAgent(grpc::ServerContext* ctx, const v1::RegisterAgentRequest* request,
                             v1::RegisterAgentResponse* response) override;
  grpc::Status LeaseMeasurementJob(grpc::ServerContext* ctx,
                                   const v1::LeaseMeasurementJobRequest* request,
                                   v1::LeaseMeasurementJobResponse* response) override;
  grpc::Status RenewMeasurementLease(grpc::ServerContext* ctx,
                                     const v1::RenewMeasurementLeaseRequest* request,
                                     v1::RenewMeasurementLeaseResponse* response) override;
  grpc::Status ReportMeasurement(grpc::ServerContext* ctx,
                                 const v1::ReportMeasurementRequest* request,
                                 v1::ReportMeasurementResponse* response) override;

 private:
  Status Admit(grpc::ServerContext* ctx, Role needed, RequestLog* log) const;
  template <typename Response, typename Call>
  Status RunUnary(grpc::ServerContext* ctx, Role needed, RequestLog* log, Call call,
                  Response* response);
  Status SubmitTune(grpc::ServerContext* ctx, const v1::TuneRequest& request,
                    grpc::ServerWriter<v1::TuneEvent>* writer, RequestLog* log);
  Status ForwardEvents(grpc::ServerContext* ctx, TuneSubscription* job,
                       grpc::ServerWriter<v1::TuneEvent>* writer);

  TunerApi* const tuner_;
  TuneJobQueue* const jobs_;
  const AccessTokens* const tokens_;
  const ValidationLimits limits_;
  const std::unique_ptr<RequestLogPolicy> log_policy_;
  std::atomic<uint64_t> next_request_id_{1};
};

// The dedupe key of a Tune request whose graph has canonical hash `graph_hash`.
std::string TuneJobKey(const std::string& graph_hash, const v1::TuneRequest& request);

}  // namespace fusor
