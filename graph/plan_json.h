// The JSON form of a fusion plan, for `fusor run --plan`, the engine, and people reading or
// hand-writing plans. Format (version 2):
//   {"version": 2,
//    "graph_hash": "<64 hex digits>", "target_id": "<target fingerprint id>",
//    "groups": [{"kind": "anchor", "nodes": [0, 1], "recomputed": [],
//                "kernel": "brg_matmul:avx2"}, ...]}
// graph_hash is the canonical hash of the graph the plan is for (graph/canonical.h); target_id is
// the target it was tuned on, "" for a plan tuned for no one target (unfused, rules, hand-written).
// kind is one of "single", "anchor", "reduction", "loop", "opaque" (GroupKindName); nodes are
// canonical node ids of that graph, ascending; "recomputed" may be omitted when empty; "kernel"
// (FusionGroup::kernel), present only when the tuner chose one, names oneDNN's implementation of
// the group's primitive, which a run then requires (runtime/kernel_choice.h). Version 1
// is the same without graph_hash and target_id: it still loads, checked for legality only, with a
// warning. Parsing is strict: an unknown key, a wrong type or an illegal plan is an error naming
// what is wrong (legality: lowering/plan_legality.h). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/plan.h"

namespace fusor {

// The largest plan file a reader loads: a plan of a million nodes is about 20 MB of JSON.
inline constexpr int64_t kMaxPlanFileBytes = int64_t{64} << 20;

inline constexpr int kPlanJsonVersion = 2;

// What a plan is for: the canonical hash of its graph and the target it was tuned on ("" for
// none).
struct PlanOrigin {
  std::string graph_hash;
  std::string target_id;
};

nlohmann::json PlanToJson(const FusionPlan& plan, const PlanOrigin& origin);

// Decodes a plan JSON to run on `g` on target `target_id`. A plan for another graph is refused by
// name ("plan is for graph H1, this model is H2") before its groups are read, so the error says
// what is wrong rather than which group does not fit; so is a plan tuned for another target, when
// both it and `target_id` name one ("" runs it on any target: benches replaying recorded plans).
// A version-1 plan names no graph or target: it loads, and *warning (when given) says it could not
// be checked. The groups are not checked for legality here: PlanFromJson
// (lowering/plan_legality.h) decodes and then checks, and is what readers of plan files call.
StatusOr<FusionPlan> DecodePlanJson(const Graph& g, const nlohmann::json& j,
                                    std::string_view target_id = "",
                                    std::string* warning = nullptr);

}  // namespace fusor
