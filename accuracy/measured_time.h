// A runtime measurement as the cost model's harnesses take it: the one conversion of runtime/'s
// Measurement into costmodel/'s MeasuredTime, and a MeasureFn that times a plan with a Measurer.
// Calibration (the service's, the plan-quality bench's), the machine checks and validation all
// time through these, so what a timing carries into a fit (its median, spread, instability,
// primitive-chain choices and whether the host was disturbed) is decided here once. It lives in
// accuracy/ because it needs both runtime/ and costmodel/, neither of which may link the other.
// Stateless functions; a MeasureFn is as thread-safe as the Measurer it holds.
#pragma once

#include "costmodel/calibration.h"
#include "runtime/measurer.h"

namespace fusor {

// `m` as the cost model's harnesses take it.
MeasuredTime MeasuredTimeOf(const Measurement& m);

// One plan timed by `measurer` (which must outlive the function).
MeasureFn MeasurePlanWith(Measurer* measurer);

// Each group of a plan timed alone and inside the plan by `measurer` (which must outlive the
// function), the quickest of `rounds` (Measurer::MeasureGroupsInPlan): what CalibrateInPlan fits.
InPlanMeasureFn MeasureGroupsInPlanWith(Measurer* measurer, int rounds);

}  // namespace fusor
