// GrpcTunerService: fusor.v1.FusionTuner on the wire, around any TunerApi. Per RPC it
// authenticates the bearer token and checks the method's role (server/access_tokens.h) before it
// reads the request: every method is served as a stream whose one request message is read only
// once the call is admitted, so a call without a valid token costs an RPC thread for a moment and
// the few kilobytes gRPC's flow control lets in, whatever it sends. An admitted request is priced
// from its wire bytes and held against the parse budget (server/parse_budget.h) before it is
// parsed, for as long as the call runs. Then it honours the deadline, validates what it must look
// at itself, calls the TunerApi, turns the Status into a grpc::Status (server/grpc_status.h) and
// writes one log line (server/request_log.h): request id, method, peer, principal, graph hash and
// target when there are any, status and duration. No field of the request is logged or looked at
// before the call is authenticated. The method indices given to gRPC follow the order of service
// FusionTuner in proto/tuner.proto; every method's test fails if they do not.
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
#include "server/parse_budget.h"
#include "server/tune_jobs.h"
#include "server/tuner_api.h"

namespace fusor {

class RequestLog;
struct RequestLogPolicy;

class GrpcTunerService final : public v1::FusionTuner::Service {
 public:
  // `private_strings` (the database path, ...) never appear in messages sent to clients.
  // `parse_budget_bytes`: what the parsed requests of all calls may hold at once; a Tune holds
  // `max_message_bytes` of it while its request is read, so at most budget / max_message_bytes
  // Tune requests are read at once.
  GrpcTunerService(TunerApi* tuner, TuneJobQueue* jobs, const AccessTokens* tokens,
                   const ValidationLimits& limits, std::vector<std::string> private_strings = {},
                   int64_t parse_budget_bytes = kDefaultParseBudgetBytes,
                   int64_t max_message_bytes = int64_t{8} << 20);
  static constexpr int64_t kDefaultParseBudgetBytes = int64_t{256} << 20;
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
  grpc::Status ListAgents(grpc::ServerContext* ctx, const v1::ListAgentsRequest* request,
                          v1::ListAgentsResponse* response) override;
  grpc::Status ListMeasurementJobs(grpc::ServerContext* ctx,
                                   const v1::ListMeasurementJobsRequest* request,
                                   v1::ListMeasurementJobsResponse* response) override;

 private:
  template <typename Request, typename Response>
  void ServeUnaryAfterAdmission(int index, const char* method, Role needed,
                                grpc::Status (GrpcTunerService::*serve)(grpc::ServerContext*,
                                                                        const Request*, Response*));
  template <typename Request>
  StatusOr<ParseBudget::Hold> ReadAdmitted(grpc::ServerContext* ctx, const char* method,
                                           Role needed, int64_t read_bytes,
                                           grpc::internal::ReaderInterface<grpc::ByteBuffer>* in,
                                           Request* request, grpc::Status* refused);
  Status Admit(grpc::ServerContext* ctx, Role needed, RequestLog* log) const;
  template <typename Response, typename Call>
  Status RunUnary(grpc::ServerContext* ctx, Role needed, RequestLog* log, Call call,
                  Response* response);
  using EventWriter = grpc::internal::WriterInterface<v1::TuneEvent>;
  grpc::Status ServeTune(grpc::ServerContext* ctx, const v1::TuneRequest& request,
                         EventWriter* writer);
  Status SubmitTune(grpc::ServerContext* ctx, const v1::TuneRequest& request, EventWriter* writer,
                    RequestLog* log);
  Status ForwardEvents(grpc::ServerContext* ctx, TuneSubscription* job, EventWriter* writer);

  TunerApi* const tuner_;
  TuneJobQueue* const jobs_;
  const AccessTokens* const tokens_;
  const ValidationLimits limits_;
  const std::unique_ptr<RequestLogPolicy> log_policy_;
  ParseBudget parse_budget_;
  const int64_t max_message_bytes_;
  std::atomic<uint64_t> next_request_id_{1};
};

// The dedupe key of a Tune request whose graph has canonical hash `graph_hash`.
std::string TuneJobKey(const std::string& graph_hash, const v1::TuneRequest& request);

}  // namespace fusor
