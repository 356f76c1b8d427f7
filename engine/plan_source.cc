#include "engine/plan_source.h"

#include "base/input_file.h"
#include "costmodel/hardware_profile.h"
#include "db/open_plan_store.h"
#include "db/staleness.h"
#include "graph/canonical.h"
#include "graph/plan_json.h"
#include "lowering/plan_legality.h"
#include "runtime/onednn_info.h"
#include "search/plan_search.h"

namespace fusor {
namespace {

std::string GroupsText(const FusionPlan& plan) {
  return "(" + std::to_string(plan.groups.size()) + " groups)";
}

// Why the database holds no current plan for the graph on the target: its newest stale plan's
// reason when it has one.
StatusOr<std::string> NoPlanReason(db::PlanStore& store, const std::string& where,
                                   const std::string& hash, const std::string& target_id) {
  db::PlanQuery query;
  query.graph_hash_prefix = hash;
  query.target_id = target_id;
  query.current_cost_model_version = kCostModelVersion;
  query.page_size = 1;
  FUSOR_ASSIGN_OR_RETURN(db::PlanPage page, store.QueryPlans(query));
  std::string reason = "no current plan in '" + where + "' for graph " + hash.substr(0, 16) +
                       " on target " + target_id;
  if (!page.plans.empty()) reason += ", only a stale one (" + page.plans[0].stale_reason + ")";
  return reason + " (tune it there: fusor tune MODEL)";
}

}  // namespace

StatusOr<std::string> PlanTargetId(const std::string& target_id) {
  if (!target_id.empty()) return target_id;
  FUSOR_ASSIGN_OR_RETURN(TargetFingerprint local, DetectTarget(OneDnnIsa(), OneDnnVersion()));
  return local.Id();
}

StatusOr<SourcedPlan> PlanFromJsonFile(const Graph& g, const std::string& path,
                                       const std::string& target_id) {
  FUSOR_ASSIGN_OR_RETURN(std::string text, ReadInputFile(path, "plan file", kMaxPlanFileBytes));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("'" + path + "' is not valid JSON");
  SourcedPlan sourced;
  auto plan = PlanFromJson(g, j, target_id, &sourced.warning);
  if (!plan.ok()) return plan.status().WithContext(path);
  sourced.plan = *std::move(plan);
  sourced.source = "plan JSON " + path + " " + GroupsText(sourced.plan);
  return sourced;
}

StatusOr<std::optional<SourcedPlan>> PlanFromDatabase(const Graph& g, const std::string& location,
                                                      const std::string& target_id,
                                                      std::string* reason) {
  const std::string where = db::RedactedLocation(location);
  auto store = db::OpenPlanStore(location, {.read_only = true});
  if (!store.ok()) return store.status().WithContext("plan database '" + where + "'");
  const std::string hash = CanonicalHash(g);
  auto best = (*store)->BestPlan(hash, target_id, kCostModelVersion);
  if (!best.ok()) {
    if (best.status().code() != Status::Code::kNotFound) return best.status();
    FUSOR_ASSIGN_OR_RETURN(*reason, NoPlanReason(**store, where, hash, target_id));
    return std::optional<SourcedPlan>();
  }
  auto plan = PlanFromProto(g, best->plan);
  if (!plan.ok()) {
    // Most often a plan tuned under an older lowering (a group kind the nodes no longer form); a
    // Tune of the graph no longer serves it and stores a new one under the same key.
    return Status::Corruption("plan database '" + where + "': the plan for graph " +
                              hash.substr(0, 16) + " on target " + target_id + " (cost model " +
                              best->plan.cost_model_version() + ", tuned " +
                              db::UtcText(best->plan.created_unix_ms()) +
                              ") does not fit that graph: " + plan.status().message() +
                              "; tune the graph again to replace it (fusor tune MODEL)");
  }
  SourcedPlan sourced;
  sourced.plan = *std::move(plan);
  sourced.source = "tuning database " + where + ", target " + target_id + ", tuned " +
                   db::UtcText(best->plan.created_unix_ms()) + " " + GroupsText(sourced.plan);
  return std::optional<SourcedPlan>(std::move(sourced));
}

SourcedPlan RulesPlanBecause(const Graph& g, const std::string& reason) {
  SourcedPlan sourced;
  sourced.plan = RulesPlan(g, SearchOptions{}.max_group_nodes);
  sourced.source = "rules plan " + GroupsText(sourced.plan) + ": " + reason;
  return sourced;
}

}  // namespace fusor
