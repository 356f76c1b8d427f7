#include "accuracy/measured_time.h"

namespace fusor {

MeasuredTime MeasuredTimeOf(const Measurement& m) {
  return MeasuredTime{static_cast<double>(m.median_ns), m.cv, m.unstable, m.primitive_chain,
                      m.disturbed};
}

MeasureFn MeasurePlanWith(Measurer* measurer) {
  return [measurer](const Graph& g, const FusionPlan& plan) -> StatusOr<MeasuredTime> {
    FUSOR_ASSIGN_OR_RETURN(Measurement m, measurer->MeasurePlan(g, plan));
    return MeasuredTimeOf(m);
  };
}

InPlanMeasureFn MeasureGroupsInPlanWith(Measurer* measurer, int rounds) {
  return [measurer, rounds](const Graph& g, const FusionPlan& plan) -> StatusOr<InPlanTimes> {
    FUSOR_ASSIGN_OR_RETURN(GroupTimesInPlan t, measurer->MeasureGroupsInPlan(g, plan, rounds));
    return InPlanTimes{std::move(t.alone_ns), std::move(t.in_plan_ns)};
  };
}

}  // namespace fusor
