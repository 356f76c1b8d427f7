// Fuzz harness: the measurement agents' protos through the conversions they go through. The
// first byte picks the message, the rest is its wire form:
//   0: RegisterAgentRequest, as fusord reads an agent's profile (ProfileFromProto);
//   1: LeaseMeasurementJobResponse, as `fusor agent` reads the job it leased (FromProto of the
//      graph, its canonical hash, PlanFromProto of every plan, MeasurementAgent's PlansOf);
//   2: a plan count (one byte, 0-7) and a MeasurementResult, as fusord takes an agent's report of
//      a job of that many plans (CheckedMeasurementResult, server/measurement_report.h).
// Accepted: the profile survives ProfileToProto unchanged; each plan survives PlanToProto; a
// report's error text holds no line break and is capped, and a report without one has a finite,
// positive time per plan.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "costmodel/hardware_profile.h"
#include "graph/canonical.h"
#include "graph/graph_proto.h"
#include "graph/plan.h"
#include "lowering/plan_legality.h"
#include "proto/tuner.pb.h"
#include "server/measurement_report.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

bool Register(const uint8_t* data, size_t size) {
  fusor::v1::RegisterAgentRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return false;
  auto p = fusor::ProfileFromProto(request.profile());
  if (!p.ok()) {
    FUZZ_CHECK(!p.status().message().empty(), "a profile error without a message");
    return false;
  }
  fusor::v1::HardwareProfile wire;
  fusor::ProfileToProto(*p, &wire);
  auto back = fusor::ProfileFromProto(wire);
  FUZZ_CHECK(back.ok(),
             "ProfileToProto of an accepted profile is refused: " + back.status().ToString());
  FUZZ_CHECK(fusor::ProfileToJson(*back) == fusor::ProfileToJson(*p),
             "the profile changed over a proto round trip");
  return true;
}

bool Lease(const uint8_t* data, size_t size) {
  fusor::v1::LeaseMeasurementJobResponse response;
  if (!response.ParseFromArray(data, static_cast<int>(size))) return false;
  const fusor::v1::MeasurementJob& job = response.job();
  auto g = fusor::FromProto(job.graph());
  if (!g.ok()) {
    FUZZ_CHECK(!g.status().message().empty(), "a graph error without a message");
    return false;
  }
  (void)fusor::CanonicalHash(*g);
  bool all = true;
  for (const fusor::v1::Plan& wire : job.plans()) {
    auto plan = fusor::PlanFromProto(*g, wire);
    if (!plan.ok()) {
      FUZZ_CHECK(!plan.status().message().empty(), "a plan error without a message");
      all = false;
      continue;
    }
    fusor::v1::Plan again;
    fusor::PlanToProto(*plan, &again);
    auto back = fusor::PlanFromProto(*g, again);
    FUZZ_CHECK(back.ok() && *back == *plan, "a plan changed over a proto round trip");
  }
  return all;
}

bool Report(const uint8_t* data, size_t size) {
  if (size == 0) return false;
  fusor::v1::MeasurementJob job;
  job.set_job_id(7);
  for (int i = 0; i < data[0] % 8; ++i) job.add_plans();
  fusor::v1::MeasurementResult result;
  if (!result.ParseFromArray(data + 1, static_cast<int>(size - 1))) return false;
  auto checked = fusor::CheckedMeasurementResult(result, job);
  if (!checked.ok()) {
    FUZZ_CHECK(!checked.status().message().empty(), "a report error without a message");
    return false;
  }
  const std::string& error = checked->error();
  FUZZ_CHECK(error.find('\n') == std::string::npos && error.find('\r') == std::string::npos,
             "an agent's error text keeps a line break");
  FUZZ_CHECK(error.size() <= 4 * fusor::kMaxAgentErrorBytes + 64,
             "an agent's error text is not capped");
  if (!error.empty()) return true;
  FUZZ_CHECK(checked->timings_size() == job.plans_size(), "a report without one timing per plan");
  for (const auto& timing : checked->timings()) {
    FUZZ_CHECK(std::isfinite(timing.median_ns()) && timing.median_ns() > 0,
               "an accepted median that is not a time");
    for (double r : timing.round_ns()) {
      FUZZ_CHECK(std::isfinite(r) && r > 0, "an accepted round that is not a time");
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  fusor::fuzz::Accepted() = false;
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0:
      fusor::fuzz::Accepted() = Register(data + 1, size - 1);
      break;
    case 2:
      fusor::fuzz::Accepted() = Report(data + 1, size - 1);
      break;
    default:
      fusor::fuzz::Accepted() = Lease(data + 1, size - 1);
  }
  return 0;
}
