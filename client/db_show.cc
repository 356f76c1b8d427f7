// `fusor db show`: one graph's plans, their measurements (with the agent that took them) and
// history.

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include <spdlog/fmt/fmt.h>
#include <nlohmann/json.hpp>

#include "client/confidence_text.h"
#include "client/connection.h"
#include "client/db_cli.h"
#include "client/exit_codes.h"
#include "client/proto_json.h"
#include "client/text_format.h"
#include "db/default_path.h"
#include "db/layered_plan_store.h"
#include "db/open_plan_store.h"
#include "db/plan_order.h"
#include "db/snapshot.h"
#include "db/sqlite_plan_store.h"
#include "db/store_rules.h"

namespace fusor::dbcli {
namespace {

struct ShowOptions {
  DbOptions db;
  std::string graph, target;
};

ordered_json MeasurementJson(const db::Measurement& m) {
  return ordered_json{
      {"group_id", m.group_id ? ordered_json(*m.group_id) : ordered_json(nullptr)},
      {"samples", m.samples_ns.size()},
      {"median_ns", m.median_ns},
      {"spread", m.spread},
      {"measured_unix_ms", m.measured_unix_ms},
      {"agent_id", m.agent_id.empty() ? ordered_json(nullptr) : ordered_json(m.agent_id)},
      {"samples_ns", m.samples_ns}};
}

ordered_json HistoryJson(const db::HistoryEvent& e) {
  return ordered_json{{"at_unix_ms", e.at_unix_ms},
                      {"event", e.event},
                      {"graph_hash", e.key.graph_hash},
                      {"target_id", e.key.target_id},
                      {"cost_model_version", e.key.cost_model_version},
                      {"search_options", e.key.search_options},
                      {"predicted_ns", OptionalNs(e.predicted_ns)},
                      {"measured_ns", OptionalNs(e.measured_ns)},
                      {"detail", e.detail},
                      {"database", e.database}};
}

// Every plan of the one graph the prefix names.
StatusOr<std::vector<db::StoredPlan>> PlansOfGraph(db::PlanStore& store, const ShowOptions& o) {
  db::PlanQuery query;
  query.graph_hash_prefix = o.graph;
  query.target_id = o.target;
  query.current_cost_model_version = o.db.cost_model_version;
  query.page_size = db::PlanQuery::kMaxPageSize;
  FUSOR_ASSIGN_OR_RETURN(db::PlanPage page, store.QueryPlans(query));
  std::set<std::string> graphs;
  for (const db::StoredPlan& s : page.plans) graphs.insert(s.plan.graph_hash());
  if (graphs.empty()) {
    return Status::NotFound(fmt::format("no plan for a graph with hash '{}'{}", o.graph,
                                        o.target.empty() ? "" : " on target '" + o.target + "'"));
  }
  if (graphs.size() > 1) {
    return Status::InvalidArgument(fmt::format(
        "graph hash prefix '{}' matches {} graphs ({}, ...); give more digits", o.graph,
        graphs.size(),
        fmt::join(std::vector<std::string>(graphs.begin(), std::next(graphs.begin(), 2)), ", ")));
  }
  // Current plans first, best first; then stale ones.
  std::stable_sort(page.plans.begin(), page.plans.end(),
                   [](const db::StoredPlan& a, const db::StoredPlan& b) {
                     if (a.stale != b.stale) return !a.stale;
                     return db::BetterPlan(a.plan, b.plan);
                   });
  return std::move(page.plans);
}

void PrintGroups(const v1::Plan& plan) {
  TextTable table({"GROUP", "KIND", "NODES", "RECOMPUTED", "PREDICTED", "MEASURED"});
  for (const v1::FusionGroup& g : plan.groups()) {
    table.Add({std::to_string(g.id()), v1::GroupKind_Name(g.kind()),
               fmt::format("{}", fmt::join(g.nodes(), ",")),
               g.recomputed().empty() ? "-" : fmt::format("{}", fmt::join(g.recomputed(), ",")),
               DurationText(g.predicted().total_ns()), DurationText(g.measured_ns())});
  }
  table.Print(std::cout, "    ");
}

void PrintMeasurements(const std::vector<db::Measurement>& measurements) {
  if (measurements.empty()) return;
  TextTable table({"MEASURED", "OF", "SAMPLES", "MEDIAN", "SPREAD", "BY"});
  for (const db::Measurement& m : measurements) {
    table.Add({LocalIsoTime(m.measured_unix_ms),
               m.group_id ? fmt::format("group {}", *m.group_id) : "plan",
               std::to_string(m.samples_ns.size()), DurationText(m.median_ns),
               fmt::format("{:.1f}%", m.spread * 100),
               m.agent_id.empty() ? "this host" : "agent " + m.agent_id});
  }
  table.Print(std::cout, "    ");
}

void PrintPlanDetail(const db::StoredPlan& s, const std::vector<db::Measurement>& measurements) {
  const v1::Plan& p = s.plan;
  std::cout << fmt::format("\nplan for target {}, cost model {}, options '{}': {}\n", p.target_id(),
                           p.cost_model_version(), p.search_options(),
                           s.stale ? "STALE (" + s.stale_reason + ")" : "current");
  std::cout << fmt::format(
      "  predicted {}, measured {}, unfused {} predicted / {} measured, speed-up {}\n",
      DurationText(p.predicted_ns()), DurationText(p.measured_ns()),
      DurationText(p.unfused_predicted_ns()), DurationText(p.unfused_measured_ns()),
      SpeedUpText(p));
  if (const std::string confidence = ConfidenceText(p.confidence()); !confidence.empty()) {
    std::cout << fmt::format("  measured in {}\n", confidence);
  }
  for (const std::string& note : ConfidenceNotes(p.confidence())) {
    std::cout << fmt::format("  note: {}\n", note);
  }
  std::cout << fmt::format("  chosen with {}\n",
                           CostModelText(p.cost_model_version(), p.residual_training_samples()));
  std::cout << fmt::format("  {} groups, peak memory {}, created {}, from {}\n", p.groups_size(),
                           ByteString(p.peak_memory_bytes()), LocalIsoTime(p.created_unix_ms()),
                           s.database);
  PrintGroups(p);
  PrintMeasurements(measurements);
}

void PrintHistory(const std::vector<db::HistoryEvent>& events) {
  if (events.empty()) return;
  std::cout << "\nhistory (newest first):\n";
  TextTable table({"WHEN", "EVENT", "TARGET", "COST MODEL", "PREDICTED", "MEASURED", "DETAIL"});
  for (const db::HistoryEvent& e : events) {
    table.Add({LocalIsoTime(e.at_unix_ms), e.event, e.key.target_id.substr(0, 12),
               e.key.cost_model_version, DurationText(e.predicted_ns), DurationText(e.measured_ns),
               e.detail});
  }
  table.Print(std::cout, "  ");
}

// Everything `show` prints about one graph.
struct GraphView {
  std::string hash;
  v1::Graph graph;
  std::vector<db::StoredPlan> plans;
  std::vector<std::vector<db::Measurement>> measurements;  // Per plan.
  std::vector<db::HistoryEvent> history;
};

StatusOr<GraphView> LoadGraphView(db::PlanStore& store, const ShowOptions& o) {
  GraphView view;
  FUSOR_ASSIGN_OR_RETURN(view.plans, PlansOfGraph(store, o));
  view.hash = view.plans.front().plan.graph_hash();
  FUSOR_ASSIGN_OR_RETURN(view.graph, store.GetGraph(view.hash));
  for (const db::StoredPlan& s : view.plans) {
    FUSOR_ASSIGN_OR_RETURN(view.measurements.emplace_back(),
                           store.GetMeasurements(db::PlanKey::Of(s.plan)));
  }
  FUSOR_ASSIGN_OR_RETURN(view.history, store.History({view.hash, o.target, /*limit=*/20}));
  return view;
}

void PrintGraphView(const GraphView& view) {
  std::cout << fmt::format("graph {}\n  model '{}', {} nodes\n", view.hash, view.graph.model_name(),
                           view.graph.nodes_size());
  for (size_t i = 0; i < view.plans.size(); ++i) {
    PrintPlanDetail(view.plans[i], view.measurements[i]);
  }
  PrintHistory(view.history);
}

ordered_json GraphViewJson(const GraphView& view) {
  ordered_json plans = ordered_json::array();
  for (size_t i = 0; i < view.plans.size(); ++i) {
    ordered_json plan = PlanSummaryJson(view.plans[i]);
    plan["plan"] = ProtoJson(view.plans[i].plan);
    plan["measurements"] = ordered_json::array();
    for (const db::Measurement& m : view.measurements[i]) {
      plan["measurements"].push_back(MeasurementJson(m));
    }
    plans.push_back(std::move(plan));
  }
  ordered_json history = ordered_json::array();
  for (const db::HistoryEvent& e : view.history) history.push_back(HistoryJson(e));
  return ordered_json{{"graph",
                       {{"graph_hash", view.hash},
                        {"model_name", view.graph.model_name()},
                        {"node_count", view.graph.nodes_size()}}},
                      {"plans", plans},
                      {"history", history}};
}

int RunShow(const ShowOptions& o) {
  StatusOr<std::unique_ptr<db::PlanStore>> store = OpenForReading(o.db);
  if (!store.ok()) return Fail("show", store.status());
  StatusOr<GraphView> view = LoadGraphView(**store, o);
  if (!view.ok()) return Fail("show", view.status());
  if (o.db.json) {
    std::cout << GraphViewJson(*view).dump(2) << "\n";
  } else {
    PrintGraphView(*view);
  }
  return kExitOk;
}

}  // namespace

void AddShow(CLI::App& db, int* exit_code) {
  auto o = std::make_shared<ShowOptions>();
  CLI::App* show = db.add_subcommand("show", "Show a graph's plans, measurements and history");
  AddCommonOptions(show, &o->db, true);
  show->add_option("graph", o->graph, "Graph hash or a unique prefix of it")
      ->required()
      ->check(GraphHashValidator());
  show->add_option("--target", o->target, "Only plans for this target id");
  RefuseServerThenRun(show, &o->db, exit_code, [o] { return RunShow(*o); });
}

}  // namespace fusor::dbcli
