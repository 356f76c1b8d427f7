// Fuzz harness: the measurement agents' protos through the conversions they go through. The
// first byte picks the message, the rest is its wire form:
//   0: RegisterAgentRequest, as fusord reads an agent's profile (ProfileFromProto);
//   1: LeaseMeasurementJobResponse, as `fusor agent` reads the job it leased (FromProto of the
//      graph, its canonical hash, PlanFromProto of every plan, MeasurementAgent's PlansOf).
// Accepted: the profile survives ProfileToProto unchanged; each plan survives PlanToProto.
// (ReportMeasurementRequest's timings are checked in server/agent_dispatch.cc, CheckResult.)
#include <cstddef>
#include <cstdint>

#include <google/protobuf/stubs/logging.h>

#include "costmodel/hardware_profile.h"
#include "graph/canonical.h"
#include "graph/graph_proto.h"
#include "graph/plan.h"
#include "proto/tuner.pb.h"
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  fusor::fuzz::Accepted() = false;
  if (size == 0) return 0;
  switch (data[0] % 2) {
    case 0:
      fusor::fuzz::Accepted() = Register(data + 1, size - 1);
      break;
    default:
      fusor::fuzz::Accepted() = Lease(data + 1, size - 1);
  }
  return 0;
}
