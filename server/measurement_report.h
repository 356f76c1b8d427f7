// What fusord accepts of an agent's ReportMeasurement: the result an agent sends for a job it
// leased, made safe to log, store and show to the principal whose Tune asked for it.
//
// CheckedMeasurementResult escapes and caps the agent's error text (base/untrusted_text.h), then
// checks that a result without an error has one timing per plan of the job, each time (median
// and every round) finite and positive, since the measurement protocol chooses plans from them.
// Pure functions of their arguments: safe from any thread.
#pragma once

#include <cstddef>

#include "base/status.h"
#include "proto/tuner.pb.h"

namespace fusor {

// The most of an agent's error text that is kept (escaped); the rest is cut with a marker.
inline constexpr size_t kMaxAgentErrorBytes = 512;

StatusOr<v1::MeasurementResult> CheckedMeasurementResult(v1::MeasurementResult result,
                                                         const v1::MeasurementJob& job);

}  // namespace fusor
