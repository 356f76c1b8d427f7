// What `fusor plan explain` reports: for each group of a plan, the cost model's predicted time
// and every named term it is the sum of (costmodel/cost_model.h, NamedTerms: compute, index
// work, chains, memory, handoffs, tile traffic, overlap, spill, launch, reorders), so the columns
// add up to the group's time and a conv or matmul group shows its compute where it is. A fused
// group (two or more ops) is also priced as its ops run alone, and the term that saved the most
// is named. The plan's total is its groups' times plus what running them one after another adds
// (CostModel::WholePlan, costmodel/in_plan.h).
//
// Plain data and pure functions over a borrowed graph, plan and model; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "costmodel/cost_model.h"
#include "graph/graph.h"
#include "graph/plan.h"

namespace fusor {

// "Conv+Relu+Add*": the group's ops in order, * marking a recomputed copy. An opaque node's group
// names how it runs and so how it is priced: "LSTM (oneDNN RNN)", "InstanceNormalization
// (reference fallback)" (lowering/unfused_ops.h). A group whose kernel the tuner chose names it:
// "MatMul+Add (kernel brg_matmul:avx2)" (FusionGroup::kernel).
std::string GroupOps(const Graph& g, const FusionGroup& group);

struct ExplainedGroup {
  std::string kind;  // GroupKindName.
  std::string ops;   // GroupOps.
  CostTerms fused;   // The group's predicted terms in the plan.
  // Fused groups only: the same ops each in a group of its own, and the term whose share of the
  // time dropped the most by fusing them.
  std::optional<CostTerms> alone;
  std::string decided;
};

struct ExplainedPlan {
  std::vector<ExplainedGroup> groups;
  double in_plan_ns = 0;  // What the plan adds to the sum of its groups.
  double total_ns = 0;    // The whole plan: the groups' sum plus in_plan_ns.
};

ExplainedPlan ExplainPlan(const Graph& g, const FusionPlan& plan, const CostModel& model);

// The columns `plan show` and `plan explain` print without --wide, each the sum of some named
// terms (NamedTerms), so that together they add up to a group's time: compute (compute, index,
// chains: CostTerms::compute_ns), memory (memory, handoff, tiles: CostTerms::memory_ns), launch,
// and other (overlap, spill, reorder, learned).
struct TermColumn {
  std::string_view name;
  std::vector<std::string_view> terms;
};
const std::vector<TermColumn>& TermColumns();
// "memory = memory + handoff + tiles": what a column adds up.
std::string ColumnText(const TermColumn& column);
// "other = overlap (negative) + spill + reorder + learned".
std::string OtherColumnText();

// The table `fusor plan explain` prints (times in us), one row per group: the TermColumns, in
// kTextColumns (client/text_format.h), or with `wide` every named term.
std::string ExplainTable(const ExplainedPlan& plan, bool calibrated, bool wide = false);

// The same as JSON: {"groups": [{"group", "kind", "ops", "total_ns", "terms_ns": {name: ns},
// "alone_ns", "decided"}], "groups_ns", "in_plan_ns", "total_ns"} (total = groups + in_plan).
nlohmann::json ExplainJson(const ExplainedPlan& plan);

}  // namespace fusor
