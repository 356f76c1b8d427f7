// The JSON form of a fusion plan, for `fusor run --plan` and for people reading or hand-writing
// plans. Format (version 1):
//   {"version": 1,
//    "groups": [{"kind": "anchor", "nodes": [0, 1], "recomputed": []}, ...]}
// kind is one of "single", "anchor", "reduction", "loop", "opaque" (GroupKindName); nodes are
// canonical node ids of the graph the plan is for (graph/canonical.h), ascending; "recomputed" may
// be omitted when empty. Parsing is strict: an unknown key, a wrong type or an illegal plan is an
// error naming what is wrong. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/plan.h"

namespace fusor {

// The largest plan file a reader loads: a plan of a million nodes is about 20 MB of JSON.
inline constexpr int64_t kMaxPlanFileBytes = int64_t{64} << 20;

inline constexpr int kPlanJsonVersion = 1;

nlohmann::json PlanToJson(const FusionPlan& plan);

// Parses and checks the plan against `g` (CheckPlan).
StatusOr<FusionPlan> PlanFromJson(const Graph& g, const nlohmann::json& j);

}  // namespace fusor
