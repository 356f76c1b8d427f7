// How the CLI shows a measured plan's confidence (v1::MeasuredConfidence, written by the
// measurement protocol, search/plan_choice.h): one line of rounds, runs, spreads, the speed-up's
// interval and how the plan was chosen, and notes for people when the speed-up rests on timings
// that did not settle or on an uncalibrated target. `fusor tune` and `fusor db show` print these,
// so a headline and a stored plan read the same. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "proto/plan.pb.h"

namespace fusor {

// "3 rounds, 171 runs, spread 2.1% (unfused 3.0%), speed-up 2.41x-2.70x (95%), chosen by
// measurement", and ", timed by agent ID" when an agent timed it; "" when the plan carries no
// confidence (not measured, or stored before it).
std::string ConfidenceText(const v1::MeasuredConfidence& c);

// One sentence per reason not to trust the measured speed-up; none when it can be trusted.
std::vector<std::string> ConfidenceNotes(const v1::MeasuredConfidence& c);

}  // namespace fusor
