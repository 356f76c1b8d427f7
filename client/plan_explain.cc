#include "client/plan_explain.h"

#include <algorithm>
#include <cstdio>

#include "graph/op_registry.h"
#include "lowering/unfused_ops.h"

namespace fusor {
namespace {

constexpr size_t kOpsShown = 50;

// The term whose contribution to the time dropped the most from `alone` to `fused`.
std::string Decided(const CostTerms& alone, const CostTerms& fused) {
  std::vector<NamedTerm> before = NamedTerms(alone), after = NamedTerms(fused);
  size_t best = 0;
  for (size_t k = 1; k < before.size(); ++k) {
    if (before[k].ns - after[k].ns > before[best].ns - after[best].ns) best = k;
  }
  return std::string(before[best].name);
}

std::string Row(const char* format_text, const std::vector<double>& us) {
  std::string out;
  char buf[32];
  for (double v : us) {
    std::snprintf(buf, sizeof buf, format_text, v);
    out += buf;
  }
  return out;
}

}  // namespace

std::string GroupOps(const Graph& g, const FusionGroup& group) {
  std::string s;
  for (NodeId n : group.nodes) {
    bool copy = std::count(group.recomputed.begin(), group.recomputed.end(), n) > 0;
    s += (s.empty() ? "" : "+") + g.node(n).op_type + (copy ? "*" : "");
  }
  const Node& first = g.node(group.nodes[0]);
  if (group.nodes.size() == 1 && ClassifyNode(g, first) == OpClass::kOpaque) {
    s += " (" + UnfusedKernelName(g, first) + ")";
  }
  return s;
}

std::vector<ExplainedGroup> ExplainPlan(const Graph& g, const FusionPlan& plan,
                                        const CostModel& model) {
  PlanCost cost = model.Cost(g, plan);
  std::vector<ExplainedGroup> out;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const FusionGroup& group = plan.groups[i];
    ExplainedGroup e{std::string(GroupKindName(group.kind)), GroupOps(g, group), cost.groups[i],
                     std::nullopt, ""};
    if (group.nodes.size() >= 2) {
      Graph region = g.ExtractRegion(group.nodes);
      e.alone = model.Cost(region, UnfusedPlan(region)).total;
      e.decided = Decided(*e.alone, e.fused);
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::string ExplainTable(const std::vector<ExplainedGroup>& groups, bool calibrated) {
  std::string out =
      std::string("each group's predicted time is the sum of its terms (us; overlap ") +
      "is subtracted; profile " + (calibrated ? "calibrated" : "UNCALIBRATED defaults") +
      ")\nalone: its ops each in a group of its own; decided: the term fusing "
      "saved the most\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%5s %-9s %9s |", "group", "kind", "time");
  out += buf;
  for (const NamedTerm& t : NamedTerms(CostTerms{})) {
    std::snprintf(buf, sizeof buf, " %8s", std::string(t.name).c_str());
    out += buf;
  }
  std::snprintf(buf, sizeof buf, " | %9s %-8s %s\n", "alone", "decided", "ops");
  out += buf;
  double total = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const ExplainedGroup& e = groups[i];
    std::vector<double> us;
    for (const NamedTerm& t : NamedTerms(e.fused)) us.push_back(t.ns / 1e3);
    std::string ops = e.ops.size() > kOpsShown ? e.ops.substr(0, kOpsShown - 3) + "..." : e.ops;
    std::snprintf(buf, sizeof buf, "%5zu %-9s %9.2f |", i, e.kind.c_str(), e.fused.total_ns / 1e3);
    out += buf + Row(" %8.2f", us);
    if (e.alone) {
      std::snprintf(buf, sizeof buf, " | %9.2f %-8s ", e.alone->total_ns / 1e3, e.decided.c_str());
    } else {
      std::snprintf(buf, sizeof buf, " | %9s %-8s ", "-", "-");
    }
    out += buf + ops + "\n";
    total += e.fused.total_ns;
  }
  std::snprintf(buf, sizeof buf, "total %.2f us over %zu groups\n", total / 1e3, groups.size());
  return out + buf;
}

nlohmann::json ExplainJson(const std::vector<ExplainedGroup>& groups) {
  nlohmann::json out = {{"groups", nlohmann::json::array()}};
  double total = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const ExplainedGroup& e = groups[i];
    nlohmann::json terms = nlohmann::json::object();
    for (const NamedTerm& t : NamedTerms(e.fused)) terms[std::string(t.name)] = t.ns;
    nlohmann::json g = {{"group", i},
                        {"kind", e.kind},
                        {"ops", e.ops},
                        {"total_ns", e.fused.total_ns},
                        {"terms_ns", terms}};
    if (e.alone) {
      g["alone_ns"] = e.alone->total_ns;
      g["decided"] = e.decided;
    }
    out["groups"].push_back(std::move(g));
    total += e.fused.total_ns;
  }
  out["total_ns"] = total;
  return out;
}

}  // namespace fusor
