// TunerApi: the fusor.v1.FusionTuner service as a C++ interface, in the wire messages. Three
// implementations share it: TuningService (the in-process core: search, measurement, database),
// the gRPC service in fusord, which adapts it to the network, and RemoteTuner in the client, which
// calls a fusord over gRPC. The CLI works against TunerApi, so local and remote mode run the same
// code paths. Errors are Status (never exceptions). Implementations are safe to call from many
// threads at once.
#pragma once

#include <atomic>
#include <functional>

#include "base/status.h"
#include "proto/tuner.pb.h"

namespace fusor {

class TunerApi {
 public:
  using EventSink = std::function<void(const v1::TuneEvent&)>;

  virtual ~TunerApi() = default;

  // Tunes a graph: sends Progress events while it runs, then exactly one Result event, and returns
  // ok; or returns the error. Stops with Cancelled soon after *cancelled becomes true.
  virtual Status Tune(const v1::TuneRequest& request, const EventSink& on_event,
                      const std::atomic<bool>* cancelled) = 0;
  virtual StatusOr<v1::GetPlanResponse> GetPlan(const v1::GetPlanRequest& request) = 0;
  virtual StatusOr<v1::QueryPlansResponse> QueryPlans(const v1::QueryPlansRequest& request) = 0;
  virtual StatusOr<v1::RegisterTargetResponse> RegisterTarget(
      const v1::RegisterTargetRequest& request) = 0;
  virtual StatusOr<v1::ListTargetsResponse> ListTargets(const v1::ListTargetsRequest& request) = 0;
  // Calibrates the service's own CPU; stops with Cancelled soon after *cancelled (if given)
  // becomes true, storing nothing.
  virtual StatusOr<v1::CalibrateResponse> Calibrate(const v1::CalibrateRequest& request,
                                                    const std::atomic<bool>* cancelled) = 0;
  StatusOr<v1::CalibrateResponse> Calibrate(const v1::CalibrateRequest& request) {
    return Calibrate(request, nullptr);
  }

  // Measurement agents (`fusor agent`). An implementation without them (a test fake) answers
  // Unimplemented. LeaseMeasurementJob waits for a job up to the request's wait and stops soon
  // after *cancelled (if given) becomes true.
  virtual StatusOr<v1::RegisterAgentResponse> RegisterAgent(
      const v1::RegisterAgentRequest& request);
  virtual StatusOr<v1::LeaseMeasurementJobResponse> LeaseMeasurementJob(
      const v1::LeaseMeasurementJobRequest& request, const std::atomic<bool>* cancelled);
  virtual StatusOr<v1::RenewMeasurementLeaseResponse> RenewMeasurementLease(
      const v1::RenewMeasurementLeaseRequest& request);
  virtual StatusOr<v1::ReportMeasurementResponse> ReportMeasurement(
      const v1::ReportMeasurementRequest& request);
  // The agents and the job queue, for operators.
  virtual StatusOr<v1::ListAgentsResponse> ListAgents(const v1::ListAgentsRequest& request);
  virtual StatusOr<v1::ListMeasurementJobsResponse> ListMeasurementJobs(
      const v1::ListMeasurementJobsRequest& request);
};

inline Status NoMeasurementAgents() {
  return Status::Unimplemented("this tuner serves no measurement agents");
}
inline StatusOr<v1::RegisterAgentResponse> TunerApi::RegisterAgent(
    const v1::RegisterAgentRequest&) {
  return NoMeasurementAgents();
}
inline StatusOr<v1::LeaseMeasurementJobResponse> TunerApi::LeaseMeasurementJob(
    const v1::LeaseMeasurementJobRequest&, const std::atomic<bool>*) {
  return NoMeasurementAgents();
}
inline StatusOr<v1::RenewMeasurementLeaseResponse> TunerApi::RenewMeasurementLease(
    const v1::RenewMeasurementLeaseRequest&) {
  return NoMeasurementAgents();
}
inline StatusOr<v1::ReportMeasurementResponse> TunerApi::ReportMeasurement(
    const v1::ReportMeasurementRequest&) {
  return NoMeasurementAgents();
}
inline StatusOr<v1::ListAgentsResponse> TunerApi::ListAgents(const v1::ListAgentsRequest&) {
  return NoMeasurementAgents();
}
inline StatusOr<v1::ListMeasurementJobsResponse> TunerApi::ListMeasurementJobs(
    const v1::ListMeasurementJobsRequest&) {
  return NoMeasurementAgents();
}

}  // namespace fusor
