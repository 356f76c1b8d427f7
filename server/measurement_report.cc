#include "server/measurement_report.h"

#include <spdlog/fmt/fmt.h>

#include <cmath>

#include "base/untrusted_text.h"

namespace fusor {
namespace {

bool IsTime(double ns) { return std::isfinite(ns) && ns > 0; }

Status CheckTimings(const v1::MeasurementResult& result, const v1::MeasurementJob& job) {
  if (result.timings_size() != job.plans_size()) {
    return Status::InvalidArgument(
        fmt::format("measurement job {} has {} plans, the result {} timings; report one timing "
                    "per plan, in the job's order (or an error)",
                    job.job_id(), job.plans_size(), result.timings_size()));
  }
  for (int i = 0; i < result.timings_size(); ++i) {
    const v1::PlanTiming& timing = result.timings(i);
    if (!IsTime(timing.median_ns())) {
      return Status::InvalidArgument(fmt::format(
          "measurement job {}: timing {} has median_ns {}; a time must be finite and positive",
          job.job_id(), i, timing.median_ns()));
    }
    for (int r = 0; r < timing.round_ns_size(); ++r) {
      if (!IsTime(timing.round_ns(r))) {
        return Status::InvalidArgument(fmt::format(
            "measurement job {}: timing {} has round_ns[{}] {}; a time must be finite and "
            "positive",
            job.job_id(), i, r, timing.round_ns(r)));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<v1::MeasurementResult> CheckedMeasurementResult(v1::MeasurementResult result,
                                                         const v1::MeasurementJob& job) {
  result.set_error(EscapedText(result.error(), kMaxAgentErrorBytes));
  if (!result.error().empty()) return result;
  FUSOR_RETURN_IF_ERROR(CheckTimings(result, job));
  return result;
}

}  // namespace fusor
