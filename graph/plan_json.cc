#include "graph/plan_json.h"

#include <optional>
#include <string>

#include "graph/canonical.h"
#include "graph/json_integer.h"

namespace fusor {
namespace {

constexpr GroupKind kKinds[] = {GroupKind::kSingle, GroupKind::kAnchor, GroupKind::kReduction,
                                GroupKind::kLoop, GroupKind::kOpaque};

Status CheckKeys(const nlohmann::json& j, std::initializer_list<const char*> allowed,
                 const std::string& where) {
  if (!j.is_object()) return Status::InvalidArgument(where + ": expected a JSON object");
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* a : allowed) known = known || key == a;
    if (!known) return Status::InvalidArgument(where + ": unknown key '" + key + "'");
  }
  return Status::Ok();
}

StatusOr<std::vector<NodeId>> NodeIds(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array()) return Status::InvalidArgument(where + ": expected an array of node ids");
  std::vector<NodeId> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer()) return Status::InvalidArgument(where + ": node ids are integers");
    std::optional<NodeId> id = JsonInteger<NodeId>(v);
    if (!id || *id < 0) {
      return Status::InvalidArgument(where + ": node id " + v.dump() + " is out of range");
    }
    ids.push_back(*id);
  }
  return ids;
}

StatusOr<FusionGroup> GroupFromJson(const nlohmann::json& j, size_t index) {
  std::string where = "plan group " + std::to_string(index);
  FUSOR_RETURN_IF_ERROR(CheckKeys(j, {"kind", "nodes", "recomputed", "kernel"}, where));
  if (!j.contains("kind") || !j["kind"].is_string() || !j.contains("nodes")) {
    return Status::InvalidArgument(where + ": needs \"kind\" (a string) and \"nodes\"");
  }
  FusionGroup group;
  std::string kind = j["kind"].get<std::string>();
  bool found = false;
  for (GroupKind k : kKinds) {
    if (GroupKindName(k) == kind) {
      group.kind = k;
      found = true;
    }
  }
  if (!found) {
    return Status::InvalidArgument(where + ": kind '" + kind +
                                   "' is not one of single, anchor, reduction, loop, opaque");
  }
  FUSOR_ASSIGN_OR_RETURN(group.nodes, NodeIds(j["nodes"], where + " nodes"));
  if (j.contains("recomputed")) {
    FUSOR_ASSIGN_OR_RETURN(group.recomputed, NodeIds(j["recomputed"], where + " recomputed"));
  }
  if (j.contains("kernel")) {
    if (!j["kernel"].is_string()) {
      return Status::InvalidArgument(where +
                                     ": \"kernel\" is oneDNN's name of an implementation "
                                     "(a string, such as \"brg_matmul:avx2\")");
    }
    group.kernel = j["kernel"].get<std::string>();
  }
  return group;
}

StatusOr<PlanOrigin> OriginFromJson(const nlohmann::json& j) {
  if (!j.contains("graph_hash") || !j["graph_hash"].is_string() || !j.contains("target_id") ||
      !j["target_id"].is_string()) {
    return Status::InvalidArgument(
        "plan: version 2 needs \"graph_hash\" and \"target_id\" (strings)");
  }
  return PlanOrigin{j["graph_hash"].get<std::string>(), j["target_id"].get<std::string>()};
}

Status CheckOrigin(const Graph& g, const PlanOrigin& origin, std::string_view target_id) {
  const std::string hash = CanonicalHash(g);
  if (origin.graph_hash != hash) {
    return Status::InvalidArgument("plan is for graph " + origin.graph_hash + ", this model is " +
                                   hash);
  }
  if (!origin.target_id.empty() && !target_id.empty() && origin.target_id != target_id) {
    return Status::InvalidArgument("plan was tuned for target " + origin.target_id +
                                   ", this is target " + std::string(target_id) +
                                   " (tune the model on this machine)");
  }
  return Status::Ok();
}

}  // namespace

nlohmann::json PlanToJson(const FusionPlan& plan, const PlanOrigin& origin) {
  nlohmann::json groups = nlohmann::json::array();
  for (const FusionGroup& g : plan.groups) {
    groups.push_back({{"kind", std::string(GroupKindName(g.kind))},
                      {"nodes", g.nodes},
                      {"recomputed", g.recomputed}});
    if (!g.kernel.empty()) groups.back()["kernel"] = g.kernel;
  }
  return {{"version", kPlanJsonVersion},
          {"graph_hash", origin.graph_hash},
          {"target_id", origin.target_id},
          {"groups", groups}};
}

StatusOr<FusionPlan> DecodePlanJson(const Graph& g, const nlohmann::json& j,
                                    std::string_view target_id, std::string* warning) {
  FUSOR_RETURN_IF_ERROR(CheckKeys(j, {"version", "graph_hash", "target_id", "groups"}, "plan"));
  if (!j.contains("version") || (j["version"] != 1 && j["version"] != kPlanJsonVersion)) {
    return Status::InvalidArgument("plan: \"version\" must be 1 or " +
                                   std::to_string(kPlanJsonVersion));
  }
  if (j["version"] == 1) {
    if (j.contains("graph_hash") || j.contains("target_id")) {
      return Status::InvalidArgument(
          "plan: version 1 has no \"graph_hash\" or \"target_id\"; they are version 2's");
    }
    if (warning != nullptr) {
      *warning =
          "plan JSON version 1 names no graph or target, so it is checked for legality only "
          "(save it again with fusor tune --save-plan)";
    }
  } else {
    FUSOR_ASSIGN_OR_RETURN(PlanOrigin origin, OriginFromJson(j));
    FUSOR_RETURN_IF_ERROR(CheckOrigin(g, origin, target_id));
  }
  if (!j.contains("groups") || !j["groups"].is_array()) {
    return Status::InvalidArgument("plan: \"groups\" must be an array");
  }
  FusionPlan plan;
  for (size_t i = 0; i < j["groups"].size(); ++i) {
    FUSOR_ASSIGN_OR_RETURN(FusionGroup group, GroupFromJson(j["groups"][i], i));
    plan.groups.push_back(std::move(group));
  }
  return plan;
}

}  // namespace fusor
