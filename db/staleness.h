// When a stored plan may no longer be served as current. One rule, used by every store (and
// mirrored by the SQL filter in sqlite_plan_store.cc, which tests hold to it):
//   - the plan was scored by a cost model other than the current one, or
//   - the plan was created before its target's latest calibration.
// The current cost-model version is the caller's; an empty one means the version the target's
// latest profile was calibrated for. Pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "proto/plan.pb.h"
#include "proto/target.pb.h"

namespace fusor::db {

// The cost-model version plans are judged against: current if given, else the target's.
std::string_view EffectiveCostModelVersion(std::string_view current_cost_model_version,
                                           const v1::HardwareProfile& target);

// A stored time (milliseconds since the Unix epoch) as people read it in stale reasons and plan
// sources: "2024-05-01 12:00:00 UTC".
std::string UtcText(int64_t unix_ms);

// Why the plan is stale, for people; "" when it is current.
std::string StaleReason(const v1::Plan& plan, std::string_view current_cost_model_version,
                        const v1::HardwareProfile& target);

}  // namespace fusor::db
