#include "client/plan_explain.h"

#include <algorithm>
#include <sstream>

#include <spdlog/fmt/fmt.h>

#include "client/text_format.h"

#include "graph/op_registry.h"
#include "lowering/unfused_ops.h"

namespace fusor {
namespace {

// The term whose contribution to the time dropped the most from `alone` to `fused`.
std::string Decided(const CostTerms& alone, const CostTerms& fused) {
  std::vector<NamedTerm> before = NamedTerms(alone), after = NamedTerms(fused);
  size_t best = 0;
  for (size_t k = 1; k < before.size(); ++k) {
    if (before[k].ns - after[k].ns > before[best].ns - after[best].ns) best = k;
  }
  return std::string(before[best].name);
}

std::string Us(double ns) { return fmt::format("{:.2f}", ns / 1e3); }

// The group's time in the table's columns: every named term (wide), or the TermColumns' sums.
std::vector<std::pair<std::string, double>> Columns(const CostTerms& t, bool wide) {
  std::vector<std::pair<std::string, double>> out;
  const std::vector<NamedTerm> named = NamedTerms(t);
  if (wide) {
    for (const NamedTerm& term : named) out.emplace_back(term.name, term.ns);
    return out;
  }
  for (const TermColumn& column : TermColumns()) {
    double ns = 0;
    for (const NamedTerm& term : named) {
      ns += std::count(column.terms.begin(), column.terms.end(), term.name) ? term.ns : 0;
    }
    out.emplace_back(column.name, ns);
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
  if (!group.kernel.empty()) s += " (kernel " + group.kernel + ")";
  return s;
}

ExplainedPlan ExplainPlan(const Graph& g, const FusionPlan& plan, const CostModel& model) {
  const WholePlanCost whole = model.WholePlan(g, plan);
  ExplainedPlan out;
  out.in_plan_ns = whole.in_plan_ns;
  out.total_ns = whole.total_ns;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const FusionGroup& group = plan.groups[i];
    ExplainedGroup e{std::string(GroupKindName(group.kind)), GroupOps(g, group),
                     whole.groups.groups[i], std::nullopt, ""};
    if (group.nodes.size() >= 2) {
      Graph region = g.ExtractRegion(group.nodes);
      e.alone = model.Cost(region, UnfusedPlan(region)).total;
      e.decided = Decided(*e.alone, e.fused);
    }
    out.groups.push_back(std::move(e));
  }
  return out;
}

const std::vector<TermColumn>& TermColumns() {
  static const auto* columns = new std::vector<TermColumn>{
      {"compute", {"compute", "index", "chains"}},
      {"memory", {"memory", "handoff", "tiles"}},
      {"launch", {"launch"}},
      {"other", {"overlap", "spill", "reorder", "learned"}},
  };
  return *columns;
}

std::string ColumnText(const TermColumn& column) {
  std::string text = std::string(column.name) + " =";
  for (std::string_view term : column.terms) {
    text += std::string(text.back() == '=' ? " " : " + ") + std::string(term);
    if (term == "overlap") text += " (negative)";
  }
  return text;
}

std::string OtherColumnText() { return ColumnText(TermColumns().back()); }

std::string ExplainTable(const ExplainedPlan& plan, bool calibrated, bool wide) {
  const std::vector<ExplainedGroup>& groups = plan.groups;
  std::string out = std::string("each group's time (us) is the sum of its terms; profile ") +
                    (calibrated ? "calibrated" : "UNCALIBRATED defaults") + "\n";
  if (wide) {
    out += "overlap is subtracted\n";
  } else {
    out += ColumnText(TermColumns()[0]) + "; " + ColumnText(TermColumns()[1]) + "\n" +
           OtherColumnText() + "; --wide shows every term\n";
  }
  out += "alone: its ops each in a group of its own; decided: the term fusing saved the most\n";
  std::vector<std::string> header = {"group", "kind", "time", "|"};
  const size_t terms = Columns(CostTerms{}, wide).size();
  for (const auto& [name, ns] : Columns(CostTerms{}, wide)) header.push_back(name);
  for (const char* h : {"|", "alone", "decided", "ops"}) header.push_back(h);
  TextTable table(header);
  double total = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const ExplainedGroup& e = groups[i];
    std::vector<std::string> row = {std::to_string(i), e.kind, Us(e.fused.total_ns), "|"};
    for (const auto& [name, ns] : Columns(e.fused, wide)) row.push_back(Us(ns));
    row.push_back("|");
    row.push_back(e.alone ? Us(e.alone->total_ns) : "-");
    row.push_back(e.alone ? e.decided : "-");
    row.push_back(e.ops);
    table.Add(std::move(row));
    total += e.fused.total_ns;
  }
  for (size_t c = 0; c < header.size() - 2; ++c) {
    if (c != 1 && c != 3 && c != 4 + terms) table.AlignRight(c);
  }
  if (!wide) table.FitTo(kTextColumns, header.size() - 1);
  std::ostringstream text;
  table.Print(text);
  return out + text.str() +
         fmt::format(
             "total {:.2f} us = {} groups {:.2f} us + in-plan {:.2f} us (what the plan "
             "adds)\n",
             plan.total_ns / 1e3, groups.size(), total / 1e3, plan.in_plan_ns / 1e3);
}

nlohmann::json ExplainJson(const ExplainedPlan& plan) {
  const std::vector<ExplainedGroup>& groups = plan.groups;
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
  out["groups_ns"] = total;
  out["in_plan_ns"] = plan.in_plan_ns;
  out["total_ns"] = plan.total_ns;
  return out;
}

}  // namespace fusor
