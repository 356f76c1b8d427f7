// `fusor db query`: stored plans, newest first, with filters, from files or a fusord.

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

struct QueryOptions {
  DbOptions db;
  ConnectionOptions remote;  // With --server, the query goes to a fusord (QueryPlans).
  std::string model, target, graph, since, until, page_token;
  double min_speedup = 0;
  bool current = false;
  bool wide = false;
  int limit = db::PlanQuery::kDefaultPageSize;
};

db::PlanQuery ToPlanQuery(const QueryOptions& o) {
  db::PlanQuery q;
  q.model_name = o.model;
  q.target_id = o.target;
  q.graph_hash_prefix = o.graph;
  q.created_after_unix_ms = ParseTime(o.since).value_or(0);
  q.created_before_unix_ms = ParseTime(o.until).value_or(0);
  q.min_speedup = o.min_speedup;
  q.only_current = o.current;
  q.current_cost_model_version = o.db.cost_model_version;
  q.page_size = o.limit;
  q.page_token = o.page_token;
  return q;
}

std::string StatusText(const db::StoredPlan& s, bool statuses_known) {
  if (!statuses_known) return "unknown";
  return s.stale ? "stale" : "current";
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Fits kTextColumns: ids cut to 12 characters, the creation time as an age, the model name cut to
// what is left. --wide adds the cost model and search options and prints ids and times whole.
void PrintPlanTable(const std::vector<db::StoredPlan>& plans, bool statuses_known, bool wide) {
  std::vector<std::string> header = {"GRAPH",    "MODEL",    "TARGET",  "PREDICTED",
                                     "MEASURED", "SPEED-UP", "CREATED", "STATUS"};
  if (wide) header.insert(header.begin() + 3, {"COST MODEL", "OPTIONS"});
  TextTable table(header);
  const int64_t now = NowUnixMs();
  for (const db::StoredPlan& s : plans) {
    const v1::Plan& p = s.plan;
    std::vector<std::string> row = {
        wide ? p.graph_hash() : p.graph_hash().substr(0, 12),
        statuses_known ? s.model_name : "?",
        wide ? p.target_id() : p.target_id().substr(0, 12),
        DurationText(p.predicted_ns()),
        DurationText(p.measured_ns()),
        SpeedUpText(p),
        wide ? LocalIsoTime(p.created_unix_ms()) : AgoText(p.created_unix_ms(), now),
        StatusText(s, statuses_known)};
    if (wide) {
      row.insert(row.begin() + 3,
                 {p.cost_model_version(), p.search_options().empty() ? "-" : p.search_options()});
    }
    table.Add(std::move(row));
  }
  for (size_t column : {3, 4, 5}) table.AlignRight(column + (wide ? 2 : 0));
  if (!wide) table.FitTo(kTextColumns, 1);
  table.Print(std::cout);
}

// A page of plans from a fusord. A server older than QueryPlansResponse.statuses sends none: the
// model and staleness of its plans are then unknown, and are printed so rather than guessed.
struct RemotePage {
  db::PlanPage page;
  bool statuses_known = true;
};

// The same query against a fusord, which judges staleness under its own cost model. The wire form
// has no graph-hash filter.
StatusOr<RemotePage> RemoteQuery(const QueryOptions& o) {
  FUSOR_ASSIGN_OR_RETURN(auto api, Connect(o.remote));
  v1::QueryPlansRequest r;
  r.set_model_name(o.model);
  r.set_target_id(o.target);
  r.set_created_after_unix_ms(ParseTime(o.since).value_or(0));
  r.set_created_before_unix_ms(ParseTime(o.until).value_or(0));
  r.set_min_speedup(o.min_speedup);
  r.set_page_size(o.limit);
  r.set_page_token(o.page_token);
  FUSOR_ASSIGN_OR_RETURN(v1::QueryPlansResponse response, api->QueryPlans(r));
  RemotePage remote;
  remote.statuses_known = response.statuses_size() == response.plans_size();
  for (int i = 0; i < response.plans_size(); ++i) {
    db::StoredPlan& s = remote.page.plans.emplace_back();
    s.plan = response.plans(i);
    s.database = o.remote.server;
    if (!remote.statuses_known) continue;
    s.model_name = response.statuses(i).model_name();
    s.stale = response.statuses(i).stale();
    s.stale_reason = response.statuses(i).stale_reason();
  }
  remote.page.next_page_token = response.next_page_token();
  return remote;
}

void PrintPlans(const db::PlanPage& page, const QueryOptions& o, bool statuses_known) {
  if (o.db.json) {
    ordered_json plans = ordered_json::array();
    for (const db::StoredPlan& s : page.plans) {
      ordered_json plan = PlanSummaryJson(s);
      if (!statuses_known) plan["model_name"] = plan["stale"] = plan["stale_reason"] = nullptr;
      plans.push_back(std::move(plan));
    }
    std::cout << ordered_json{{"plans", plans}, {"next_page_token", page.next_page_token}}.dump(2)
              << "\n";
    return;
  }
  if (page.plans.empty()) {
    std::cout << "no plans match\n";
    return;
  }
  PrintPlanTable(page.plans, statuses_known, o.wide);
  if (!page.next_page_token.empty()) {
    std::cout << "more: --page-token " << page.next_page_token << "\n";
  }
  if (!statuses_known) {
    std::cout << "note: the server sends no model names or staleness (it predates them)\n";
  }
}

int RunQuery(const QueryOptions& o) {
  if (o.remote.remote() &&
      (!o.graph.empty() || !o.db.db_path.empty() || !o.db.snapshots.empty() || o.current)) {
    return ReportUsageError(
        "db query",
        "--graph, --db, --snapshot and --current are for local databases, not with "
        "--server");
  }
  if (o.remote.remote()) {
    StatusOr<RemotePage> remote = RemoteQuery(o);
    if (!remote.ok()) return Fail("query", remote.status());
    PrintPlans(remote->page, o, remote->statuses_known);
    return kExitOk;
  }
  StatusOr<std::unique_ptr<db::PlanStore>> store = OpenForReading(o.db);
  if (!store.ok()) return Fail("query", store.status());
  StatusOr<db::PlanPage> page = (*store)->QueryPlans(ToPlanQuery(o));
  if (!page.ok()) return Fail("query", page.status());
  PrintPlans(*page, o, /*statuses_known=*/true);
  return kExitOk;
}

}  // namespace

void AddQuery(CLI::App& db, int* exit_code) {
  auto o = std::make_shared<QueryOptions>();
  CLI::App* query = db.add_subcommand("query", "List stored plans, newest first, with filters");
  AddCommonOptions(query, &o->db, true);
  query->add_option("--model", o->model, "Only plans of graphs with this model name");
  query->add_option("--target", o->target, "Only plans for this target id");
  query->add_option("--graph", o->graph, "Only plans of graphs whose hash starts with this")
      ->check(GraphHashValidator());
  query->add_option("--since", o->since, "Only plans created at or after TIME")
      ->check(TimeValidator());
  query->add_option("--until", o->until, "Only plans created before TIME")->check(TimeValidator());
  query->add_option("--min-speedup", o->min_speedup, "Only plans at least this much faster")
      ->check(CLI::NonNegativeNumber);
  query->add_flag("--current", o->current, "Leave out stale plans");
  query->add_flag("--wide", o->wide,
                  "Every column whole: full ids, ISO 8601 times, cost model and search options");
  query->add_option("--limit", o->limit, "Plans per page")
      ->check(CLI::Range(1, static_cast<int>(db::PlanQuery::kMaxPageSize)));
  query->add_option("--page-token", o->page_token, "Continue after a previous page");
  AddRemoteOptions(query, &o->remote, "Query a fusord (host:port) instead of a file");
  query->callback([o, exit_code] { *exit_code = RunQuery(*o); });
}

}  // namespace fusor::dbcli
