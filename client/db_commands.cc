#include "client/db_commands.h"

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
#include "client/proto_json.h"

#include "client/confidence_text.h"
#include "client/connection.h"
#include "client/exit_codes.h"
#include "client/text_format.h"
#include "db/default_path.h"
#include "db/layered_plan_store.h"
#include "db/open_plan_store.h"
#include "db/plan_order.h"
#include "db/snapshot.h"
#include "db/sqlite_plan_store.h"
#include "db/store_rules.h"

namespace fusor {
namespace {

using nlohmann::ordered_json;

// Options every subcommand shares.
struct DbOptions {
  std::string db_path;                 // "" for the default database.
  std::vector<std::string> snapshots;  // Read-only layers under the database.
  std::string cost_model_version;      // "" for each target's calibrated version.
  bool json = false;
  // --server given to a verb that reads files only; refused as a usage error that names the verb
  // that does talk to a fusord (`db query`), rather than CLI11's "arguments were not expected".
  std::string server_refused;
};

struct QueryOptions {
  DbOptions db;
  ConnectionOptions remote;  // With --server, the query goes to a fusord (QueryPlans).
  std::string model, target, graph, since, until, page_token;
  double min_speedup = 0;
  bool current = false;
  int limit = db::PlanQuery::kDefaultPageSize;
};

struct ShowOptions {
  DbOptions db;
  std::string graph, target;
};

struct ExportOptions {
  DbOptions db;
  std::string target, out;
  bool force = false;
};

struct ImportOptions {
  DbOptions db;
  std::vector<std::string> inputs;
};

int Fail(std::string_view command, const Status& s) {
  return ReportError("db " + std::string(command), s);
}

// Times and durations ----------------------------------------------------------------------------

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<int64_t> ParseCalendarTime(const std::string& text) {
  for (const char* format : {"%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"}) {
    std::tm tm{};
    const char* end = strptime(text.c_str(), format, &tm);
    if (end != nullptr && *end == '\0') return static_cast<int64_t>(timegm(&tm)) * 1000;
  }
  return std::nullopt;
}

// Accepts milliseconds since the epoch, an ISO date or UTC date-time, or a span ago (90m, 12h, 7d).
std::optional<int64_t> ParseTime(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (std::optional<int64_t> calendar = ParseCalendarTime(text)) return calendar;
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits + 1 < text.size()) return std::nullopt;
  int64_t number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + digits, number);
  if (ec != std::errc() || end != text.data() + digits) return std::nullopt;
  if (digits == text.size()) return number;
  static const std::map<char, int64_t> kUnitMs = {
      {'s', 1000}, {'m', 60'000}, {'h', 3'600'000}, {'d', 86'400'000}};
  auto unit = kUnitMs.find(text.back());
  if (unit == kUnitMs.end()) return std::nullopt;
  return NowUnixMs() - number * unit->second;
}

CLI::Validator TimeValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (ParseTime(text)) return "";
        return "'" + text +
               "' is not a time: use 2024-05-01, 2024-05-01T12:00:00Z, "
               "milliseconds since the epoch, or a span ago like 12h or 7d";
      },
      "TIME");
}

// A graph hash or prefix of one, checked by the store's own rule before anything is opened: a
// model file given where a hash belongs is a usage error (exit 2), not a failed lookup.
CLI::Validator GraphHashValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        StatusOr<std::string> prefix = db::NormalizeHashPrefix(text);
        if (prefix.ok()) return "";
        return prefix.status().message() +
               "; `fusor db query` lists the graphs' hashes, and `fusor plan show MODEL.onnx` "
               "shows a model file's plan";
      },
      "HASH");
}

std::string SpeedUpText(const v1::Plan& plan) {
  std::optional<double> speedup = db::SpeedUp(plan);
  return speedup ? RatioText(*speedup, 1) : "-";
}

ordered_json OptionalNs(double ns) { return ns > 0 ? ordered_json(ns) : ordered_json(nullptr); }

// Opening databases -------------------------------------------------------------------------------

StatusOr<std::string> DatabasePath(const DbOptions& options, bool create_directories) {
  if (!options.db_path.empty()) return options.db_path;
  return db::DefaultDatabasePath(create_directories);
}

Status AddReadOnlyLayer(const std::string& path,
                        std::vector<std::unique_ptr<db::PlanStore>>& layers) {
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<db::PlanStore> store,
                         db::OpenPlanStore(path, {/*read_only=*/true}));
  layers.push_back(std::move(store));
  return Status::Ok();
}

// The database (when it exists or was named) over the snapshots, all read-only.
StatusOr<std::unique_ptr<db::PlanStore>> OpenForReading(const DbOptions& options) {
  FUSOR_ASSIGN_OR_RETURN(std::string path, DatabasePath(options, false));
  std::vector<std::unique_ptr<db::PlanStore>> layers;
  std::error_code ec;
  bool default_absent = options.db_path.empty() && !std::filesystem::exists(path, ec);
  if (default_absent && options.snapshots.empty()) {
    return Status::NotFound(fmt::format(
        "no tuning database at '{}' (the default); tune a model first, or pass --db PATH or "
        "--snapshot PATH",
        path));
  }
  if (!default_absent) FUSOR_RETURN_IF_ERROR(AddReadOnlyLayer(path, layers));
  for (const std::string& snapshot : options.snapshots) {
    FUSOR_RETURN_IF_ERROR(AddReadOnlyLayer(snapshot, layers));
  }
  if (layers.size() == 1) return std::move(layers.front());
  return std::unique_ptr<db::PlanStore>(std::make_unique<db::LayeredPlanStore>(std::move(layers)));
}

// JSON for scripts --------------------------------------------------------------------------------

ordered_json PlanSummaryJson(const db::StoredPlan& stored) {
  const v1::Plan& p = stored.plan;
  std::optional<double> speedup = db::SpeedUp(p);
  return ordered_json{
      {"graph_hash", p.graph_hash()},
      {"model_name", stored.model_name},
      {"target_id", p.target_id()},
      {"cost_model_version", p.cost_model_version()},
      {"residual_training_samples", p.residual_training_samples()},
      {"search_options", p.search_options()},
      {"predicted_ns", p.predicted_ns()},
      {"measured_ns", OptionalNs(p.measured_ns())},
      {"unfused_predicted_ns", OptionalNs(p.unfused_predicted_ns())},
      {"unfused_measured_ns", OptionalNs(p.unfused_measured_ns())},
      {"speedup", speedup ? ordered_json(*speedup) : ordered_json(nullptr)},
      {"groups", p.groups_size()},
      {"peak_memory_bytes", p.peak_memory_bytes()},
      {"created_unix_ms", p.created_unix_ms()},
      {"stale", stored.stale},
      {"stale_reason", stored.stale_reason},
      {"database", stored.database},
  };
}

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

// fusor db query ----------------------------------------------------------------------------------

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

void PrintPlanTable(const std::vector<db::StoredPlan>& plans, bool statuses_known) {
  TextTable table({"GRAPH", "MODEL", "TARGET", "COST MODEL", "OPTIONS", "PREDICTED", "MEASURED",
                   "SPEED-UP", "CREATED", "STATUS"});
  for (const db::StoredPlan& s : plans) {
    const v1::Plan& p = s.plan;
    table.Add({p.graph_hash().substr(0, 12), statuses_known ? s.model_name : "?",
               p.target_id().substr(0, 12), p.cost_model_version(),
               p.search_options().empty() ? "-" : p.search_options(),
               DurationText(p.predicted_ns()), DurationText(p.measured_ns()), SpeedUpText(p),
               LocalIsoTime(p.created_unix_ms()),
               !statuses_known ? "unknown"
               : s.stale       ? "stale"
                               : "current"});
  }
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

void PrintPlans(const db::PlanPage& page, bool json, bool statuses_known) {
  if (json) {
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
  PrintPlanTable(page.plans, statuses_known);
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
    PrintPlans(remote->page, o.db.json, remote->statuses_known);
    return kExitOk;
  }
  StatusOr<std::unique_ptr<db::PlanStore>> store = OpenForReading(o.db);
  if (!store.ok()) return Fail("query", store.status());
  StatusOr<db::PlanPage> page = (*store)->QueryPlans(ToPlanQuery(o));
  if (!page.ok()) return Fail("query", page.status());
  PrintPlans(*page, o.db.json, /*statuses_known=*/true);
  return kExitOk;
}

// fusor db show -----------------------------------------------------------------------------------

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

// fusor db stats ----------------------------------------------------------------------------------

ordered_json StatsJson(const db::DatabaseStats& s) {
  ordered_json targets = ordered_json::array();
  for (const db::TargetStats& t : s.per_target) {
    targets.push_back({{"target_id", t.target_id},
                       {"cpu_model", t.cpu_model},
                       {"isa", t.isa},
                       {"calibrated_unix_ms", t.calibrated_unix_ms},
                       {"plans", t.plans},
                       {"stale_plans", t.stale_plans},
                       {"calibration_samples", t.calibration_samples}});
  }
  return ordered_json{{"path", s.path},
                      {"schema_version", s.schema_version},
                      {"read_only", s.read_only},
                      {"snapshot_of_target", s.snapshot_of_target},
                      {"file_bytes", s.file_bytes},
                      {"targets", s.targets},
                      {"graphs", s.graphs},
                      {"plans", s.plans},
                      {"stale_plans", s.stale_plans},
                      {"measurements", s.measurements},
                      {"history_events", s.history_events},
                      {"calibration_runs", s.calibration_runs},
                      {"calibration_samples", s.calibration_samples},
                      {"per_target", targets}};
}

void PrintStats(const db::DatabaseStats& s) {
  std::cout << fmt::format(
      "database {}\n  schema version {}, {}{}, {}\n", s.path, s.schema_version,
      s.read_only ? "opened read-only" : "writable",
      s.snapshot_of_target.empty() ? "" : ", snapshot of target " + s.snapshot_of_target,
      ByteString(s.file_bytes));
  std::cout << fmt::format(
      "  {} targets, {} graphs, {} plans ({} stale), {} measurements, {} history events\n",
      s.targets, s.graphs, s.plans, s.stale_plans, s.measurements, s.history_events);
  std::cout << fmt::format("  {} calibration samples from {} calibration runs\n",
                           s.calibration_samples, s.calibration_runs);
  if (s.per_target.empty()) return;
  TextTable table({"TARGET", "CPU", "ISA", "CALIBRATED", "PLANS", "STALE", "CALIBRATION SAMPLES"});
  for (const db::TargetStats& t : s.per_target) {
    table.Add({t.target_id, t.cpu_model, t.isa, LocalIsoTime(t.calibrated_unix_ms),
               std::to_string(t.plans), std::to_string(t.stale_plans),
               std::to_string(t.calibration_samples)});
  }
  table.Print(std::cout, "  ");
}

int RunStats(const DbOptions& o) {
  StatusOr<std::unique_ptr<db::PlanStore>> store = OpenForReading(o);
  if (!store.ok()) return Fail("stats", store.status());
  StatusOr<std::vector<db::DatabaseStats>> stats = (*store)->Stats(o.cost_model_version);
  if (!stats.ok()) return Fail("stats", stats.status());
  if (o.json) {
    ordered_json databases = ordered_json::array();
    for (const db::DatabaseStats& s : *stats) databases.push_back(StatsJson(s));
    std::cout << ordered_json{{"databases", databases}}.dump(2) << "\n";
    return kExitOk;
  }
  for (const db::DatabaseStats& s : *stats) PrintStats(s);
  return kExitOk;
}

// fusor db export / import ------------------------------------------------------------------------

int RunExport(const ExportOptions& o) {
  StatusOr<std::unique_ptr<db::PlanStore>> store = OpenForReading(o.db);
  if (!store.ok()) return Fail("export", store.status());
  StatusOr<db::ExportSummary> summary =
      db::ExportSnapshot(**store, o.target, o.db.cost_model_version, o.out, o.force);
  if (!summary.ok()) {
    Status s = summary.status();
    if (s.code() == Status::Code::kAlreadyExists) s = s.WithContext("pass --force to replace it");
    return Fail("export", s);
  }
  if (o.db.json) {
    std::cout << ordered_json{{"path", summary->path},
                              {"target_id", o.target},
                              {"plans", summary->plans},
                              {"graphs", summary->graphs}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << fmt::format("exported {} plans ({} graphs) for target {} to {}\n", summary->plans,
                             summary->graphs, o.target, summary->path);
  }
  return kExitOk;
}

int RunImport(const ImportOptions& o) {
  StatusOr<std::string> path = DatabasePath(o.db, /*create_directories=*/true);
  if (!path.ok()) return Fail("import", path.status());
  StatusOr<db::StoreLocation> location = db::ParseStoreLocation(*path);
  if (!location.ok()) return Fail("import", location.status());
  if (location->kind != db::StoreLocation::Kind::kSqlite) {
    return Fail("import", Status::Unimplemented(fmt::format(
                              "import merges into a SQLite tuning database; '{}' is PostgreSQL",
                              db::RedactedLocation(*path))));
  }
  StatusOr<std::unique_ptr<db::SqlitePlanStore>> store =
      db::SqlitePlanStore::Open(location->target, db::SqliteOpenOptions());
  if (!store.ok()) return Fail("import", store.status());
  ordered_json imports = ordered_json::array();
  for (const std::string& input : o.inputs) {
    StatusOr<db::MergeCounts> counts = db::ImportSnapshot(input, **store);
    if (!counts.ok()) return Fail("import", counts.status());
    imports.push_back({{"snapshot", input},
                       {"plans_added", counts->plans_added},
                       {"plans_replaced", counts->plans_replaced},
                       {"plans_kept", counts->plans_kept},
                       {"graphs_added", counts->graphs_added},
                       {"targets_updated", counts->targets_updated}});
    if (o.db.json) continue;
    std::cout << fmt::format(
        "imported {} into {}: {} plans added, {} replaced, {} kept (stored plan newer), {} graphs "
        "added, {} targets updated\n",
        input, *path, counts->plans_added, counts->plans_replaced, counts->plans_kept,
        counts->graphs_added, counts->targets_updated);
  }
  if (o.db.json)
    std::cout << ordered_json{{"database", *path}, {"imports", imports}}.dump(2) << "\n";
  return kExitOk;
}

// Registration ------------------------------------------------------------------------------------

void AddCommonOptions(CLI::App* command, DbOptions* o, bool snapshots) {
  command->add_option("--db", o->db_path,
                      "Tuning database: a SQLite file, sqlite:PATH or postgresql://... "
                      "(default: $XDG_DATA_HOME/fusor/tuning.db)");
  if (snapshots) {
    command
        ->add_option("--snapshot", o->snapshots,
                     "Read-only snapshot database to query under --db (repeatable)")
        ->check(CLI::ExistingFile);
  }
  command->add_option("--cost-model-version", o->cost_model_version,
                      "Current cost-model version (default: each target's calibrated one)");
  command->add_flag("--json", o->json, "Print JSON for scripts instead of a table");
}

// Registers the hidden --server of a verb that reads database files only, and runs `run` unless
// it was given.
void RefuseServerThenRun(CLI::App* command, DbOptions* o, int* exit_code,
                         std::function<int()> run) {
  command->add_option("--server", o->server_refused)->group("");
  const std::string verb = "db " + command->get_name();
  command->callback([o, exit_code, verb, run = std::move(run)] {
    *exit_code = o->server_refused.empty()
                     ? run()
                     : ReportUsageError(verb, "--server: `fusor " + verb +
                                                  "` reads database files (--db, --snapshot); "
                                                  "`fusor db query --server` asks a fusord");
  });
}

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
  query->add_option("--limit", o->limit, "Plans per page")
      ->check(CLI::Range(1, static_cast<int>(db::PlanQuery::kMaxPageSize)));
  query->add_option("--page-token", o->page_token, "Continue after a previous page");
  AddRemoteOptions(query, &o->remote, "Query a fusord (host:port) instead of a file");
  query->callback([o, exit_code] { *exit_code = RunQuery(*o); });
}

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

void AddStats(CLI::App& db, int* exit_code) {
  auto o = std::make_shared<DbOptions>();
  CLI::App* stats = db.add_subcommand(
      "stats", "Count targets, graphs, plans, stale plans and calibration samples");
  AddCommonOptions(stats, o.get(), true);
  RefuseServerThenRun(stats, o.get(), exit_code, [o] { return RunStats(*o); });
}

void AddExport(CLI::App& db, int* exit_code) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* command =
      db.add_subcommand("export", "Write a read-only snapshot of a target's best current plans");
  AddCommonOptions(command, &o->db, true);
  command->add_option("--target", o->target, "Target id to export")->required();
  command->add_option("out", o->out, "Snapshot file to write")->required();
  command->add_flag("--force", o->force, "Replace the snapshot file if it exists");
  RefuseServerThenRun(command, &o->db, exit_code, [o] { return RunExport(*o); });
}

void AddImport(CLI::App& db, int* exit_code) {
  auto o = std::make_shared<ImportOptions>();
  CLI::App* command = db.add_subcommand(
      "import", "Merge snapshots into the database; under one key the newer plan wins");
  AddCommonOptions(command, &o->db, false);
  command->add_option("snapshots", o->inputs, "Snapshot (or any Fusor database) files")
      ->required()
      ->check(CLI::ExistingFile);
  RefuseServerThenRun(command, &o->db, exit_code, [o] { return RunImport(*o); });
}

}  // namespace

void AddDbCommands(CLI::App& app, int* exit_code) {
  CLI::App* db = app.add_subcommand("db", "Query and move plans in a local tuning database");
  db->require_subcommand(1);
  AddQuery(*db, exit_code);
  AddShow(*db, exit_code);
  AddStats(*db, exit_code);
  AddExport(*db, exit_code);
  AddImport(*db, exit_code);
}

}  // namespace fusor
