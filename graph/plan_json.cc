#include "graph/plan_json.h"

#include <optional>
#include <string>

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
  FUSOR_RETURN_IF_ERROR(CheckKeys(j, {"kind", "nodes", "recomputed"}, where));
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
  return group;
}

}  // namespace

nlohmann::json PlanToJson(const FusionPlan& plan) {
  nlohmann::json groups = nlohmann::json::array();
  for (const FusionGroup& g : plan.groups) {
    groups.push_back({{"kind", std::string(GroupKindName(g.kind))},
                      {"nodes", g.nodes},
                      {"recomputed", g.recomputed}});
  }
  return {{"version", kPlanJsonVersion}, {"groups", groups}};
}

StatusOr<FusionPlan> PlanFromJson(const Graph& g, const nlohmann::json& j) {
  FUSOR_RETURN_IF_ERROR(CheckKeys(j, {"version", "groups"}, "plan"));
  if (!j.contains("version") || j["version"] != kPlanJsonVersion) {
    return Status::InvalidArgument("plan: \"version\" must be " + std::to_string(kPlanJsonVersion));
  }
  if (!j.contains("groups") || !j["groups"].is_array()) {
    return Status::InvalidArgument("plan: \"groups\" must be an array");
  }
  FusionPlan plan;
  for (size_t i = 0; i < j["groups"].size(); ++i) {
    FUSOR_ASSIGN_OR_RETURN(FusionGroup group, GroupFromJson(j["groups"][i], i));
    plan.groups.push_back(std::move(group));
  }
  FUSOR_RETURN_IF_ERROR(CheckPlan(g, plan));
  return plan;
}

}  // namespace fusor
