// SqlitePlanStore's plans: targets, graphs, plans with their measurements, the tuning history,
// expiry, merges of bundles and stats (tables.cc holds the rows).
#include <filesystem>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "db/plan_order.h"
#include "db/sqlite_plan_store.h"
#include "db/staleness.h"
#include "db/store_rules.h"
#include "db/tables.h"

namespace fusor::db {
namespace {

// A statement assembled from optional WHERE conditions, with its parameters in order.
class SqlBuilder {
 public:
  explicit SqlBuilder(std::string_view start) : sql_(start) { sql_ += " WHERE 1 = 1"; }

  void Where(std::string_view condition, std::initializer_list<SqlValue> values) {
    sql_ += " AND ";
    sql_ += condition;
    values_.insert(values_.end(), values);
  }
  void Append(std::string_view text, std::initializer_list<SqlValue> values = {}) {
    sql_ += text;
    values_.insert(values_.end(), values);
  }
  const std::string& sql() const { return sql_; }
  const std::vector<SqlValue>& values() const { return values_; }

 private:
  std::string sql_;
  std::vector<SqlValue> values_;
};

// The SELECT for one page of QueryPlans: its filters, the position after the page token, listing
// order, and `limit` rows.
StatusOr<SqlBuilder> PlanQuerySql(const PlanQuery& query, int64_t limit) {
  SqlBuilder sql(tables::kSelectPlans);
  if (!query.model_name.empty()) sql.Where("g.model_name = ?", {query.model_name});
  if (!query.target_id.empty()) sql.Where("p.target_id = ?", {query.target_id});
  if (!query.graph_hash_prefix.empty()) {
    FUSOR_ASSIGN_OR_RETURN(std::string prefix, NormalizeHashPrefix(query.graph_hash_prefix));
    // '~' sorts after every hex digit, so this range is exactly the hashes with the prefix.
    sql.Where("p.graph_hash >= ? AND p.graph_hash < ?", {prefix, prefix + "~"});
  }
  if (query.created_after_unix_ms != 0) {
    sql.Where("p.created_unix_ms >= ?", {query.created_after_unix_ms});
  }
  if (query.created_before_unix_ms != 0) {
    sql.Where("p.created_unix_ms < ?", {query.created_before_unix_ms});
  }
  if (query.min_speedup > 0) sql.Where("p.speedup >= ?", {query.min_speedup});
  if (query.only_current) sql.Where(tables::kPlanIsCurrent, {query.current_cost_model_version});
  if (!query.page_token.empty()) {
    FUSOR_ASSIGN_OR_RETURN(ListingPosition after, DecodePageToken(query.page_token));
    const PlanKey& k = after.key;
    sql.Where(
        "(p.created_unix_ms < ? OR (p.created_unix_ms = ? AND (p.graph_hash, p.target_id, "
        "p.cost_model_version, p.search_options) > (?, ?, ?, ?)))",
        {after.created_unix_ms, after.created_unix_ms, k.graph_hash, k.target_id,
         k.cost_model_version, k.search_options});
  }
  sql.Append(
      " ORDER BY p.created_unix_ms DESC, p.graph_hash, p.target_id, p.cost_model_version, "
      "p.search_options LIMIT ?",
      {limit});
  return sql;
}

int64_t FileBytes(const std::string& path) {
  std::error_code ec;
  int64_t bytes = 0;
  for (const std::string& p : {path, path + "-wal"}) {
    uintmax_t size = std::filesystem::file_size(p, ec);
    if (!ec) bytes += static_cast<int64_t>(size);
  }
  return bytes;
}

}  // namespace

// Targets and graphs -----------------------------------------------------------------------------

Status SqlitePlanStore::PutTarget(const v1::HardwareProfile& profile) {
  const std::string& id = profile.target().id();
  if (id.empty()) return Status::InvalidArgument("hardware profile has no target id to store");
  return Write(fmt::format("store target '{}'", id), [&](SqliteConnection& c) -> Status {
    int64_t now = NowUnixMs();
    FUSOR_ASSIGN_OR_RETURN(bool stored, tables::UpsertTarget(c, profile, now));
    if (!stored) {
      spdlog::info("db: target {} unchanged in '{}': its stored calibration is as new or newer", id,
                   path_);
      return Status::Ok();
    }
    spdlog::info("db: stored target {} calibrated at {} (cost model {}) in '{}'", id,
                 UtcText(profile.calibrated_unix_ms()), profile.cost_model_version(), path_);
    return tables::AppendHistory(c, CalibratedEvent(profile, now));
  });
}

StatusOr<v1::HardwareProfile> SqlitePlanStore::GetTarget(std::string_view target_id) {
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  FUSOR_ASSIGN_OR_RETURN(std::optional<v1::HardwareProfile> profile,
                         tables::FindTarget(*c, target_id));
  if (!profile) {
    return Status::NotFound(fmt::format("target '{}' is not in database '{}'", target_id, path_));
  }
  return *std::move(profile);
}

StatusOr<std::vector<v1::HardwareProfile>> SqlitePlanStore::ListTargets() {
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  return tables::AllTargets(*c);
}

StatusOr<v1::Graph> SqlitePlanStore::GetGraph(std::string_view graph_hash) {
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  FUSOR_ASSIGN_OR_RETURN(std::optional<v1::Graph> graph, tables::FindGraph(*c, graph_hash));
  if (!graph) {
    return Status::NotFound(fmt::format("graph {} is not in database '{}'", graph_hash, path_));
  }
  return *std::move(graph);
}

// Plans: writes ---------------------------------------------------------------------------------

Status SqlitePlanStore::PutPlan(const v1::Plan& plan, const v1::Graph& graph,
                                std::span<const Measurement> measurements) {
  FUSOR_RETURN_IF_ERROR(ValidatePlan(plan));
  FUSOR_RETURN_IF_ERROR(ValidateMeasurements(plan, measurements));
  std::string what = fmt::format("store plan for graph {} on target '{}'",
                                 ShortHash(plan.graph_hash()), plan.target_id());
  return Write(what,
               [&](SqliteConnection& c) { return PutPlanLocked(c, plan, graph, measurements); });
}

Status SqlitePlanStore::RequireTarget(SqliteConnection& c, std::string_view target_id) {
  FUSOR_ASSIGN_OR_RETURN(std::optional<v1::HardwareProfile> target,
                         tables::FindTarget(c, target_id));
  if (target) return Status::Ok();
  return Status::FailedPrecondition(fmt::format(
      "target '{}' is not in database '{}'; store its calibrated hardware profile first", target_id,
      path_));
}

Status SqlitePlanStore::PutPlanLocked(SqliteConnection& c, const v1::Plan& plan,
                                      const v1::Graph& graph,
                                      std::span<const Measurement> measurements) {
  FUSOR_RETURN_IF_ERROR(RequireTarget(c, plan.target_id()));
  int64_t now = NowUnixMs();
  v1::Plan stored = plan;
  if (stored.created_unix_ms() == 0) stored.set_created_unix_ms(now);
  FUSOR_RETURN_IF_ERROR(tables::InsertGraphIfMissing(c, plan.graph_hash(), graph, now).status());
  FUSOR_ASSIGN_OR_RETURN(std::optional<tables::PlanRow> existing,
                         tables::FindPlanRow(c, PlanKey::Of(plan)));
  int64_t plan_id = 0;
  if (existing) {
    plan_id = existing->plan_id;
    FUSOR_RETURN_IF_ERROR(tables::ReplacePlan(c, plan_id, stored));
    FUSOR_RETURN_IF_ERROR(
        tables::AppendHistory(c, PlanEvent("replaced", existing->plan, now, "by a newer tuning")));
  } else {
    FUSOR_ASSIGN_OR_RETURN(plan_id, tables::InsertPlan(c, stored));
  }
  FUSOR_RETURN_IF_ERROR(
      tables::InsertMeasurements(c, plan_id, measurements, stored.created_unix_ms()));
  FUSOR_RETURN_IF_ERROR(tables::AppendHistory(c, PlanEvent("stored", stored, now, "")));
  spdlog::info(
      "db: stored plan graph={} target={} cost_model={} options='{}' predicted_ns={:.0f} "
      "measured_ns={:.0f} in '{}'",
      plan.graph_hash(), plan.target_id(), plan.cost_model_version(), plan.search_options(),
      plan.predicted_ns(), plan.measured_ns(), path_);
  return Status::Ok();
}

StatusOr<MergeCounts> SqlitePlanStore::Merge(const PlanBundle& bundle, const std::string& source,
                                             bool record_history) {
  for (const PlanBundle::Entry& entry : bundle.plans) {
    FUSOR_RETURN_IF_ERROR(ValidatePlan(entry.plan));
  }
  MergeCounts counts;
  Status s = Write(fmt::format("merge plans from '{}'", source), [&](SqliteConnection& c) {
    counts = MergeCounts();
    int64_t now = NowUnixMs();
    for (const v1::HardwareProfile& target : bundle.targets) {
      FUSOR_ASSIGN_OR_RETURN(bool stored, tables::UpsertTarget(c, target, now));
      counts.targets_updated += stored ? 1 : 0;
    }
    for (const auto& [hash, graph] : bundle.graphs) {
      FUSOR_ASSIGN_OR_RETURN(bool added, tables::InsertGraphIfMissing(c, hash, graph, now));
      counts.graphs_added += added ? 1 : 0;
    }
    for (const PlanBundle::Entry& entry : bundle.plans) {
      FUSOR_RETURN_IF_ERROR(MergePlanLocked(c, entry, source, record_history, counts));
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  spdlog::info("db: merged '{}' into '{}': {} plans added, {} replaced, {} kept, {} graphs added",
               source, path_, counts.plans_added, counts.plans_replaced, counts.plans_kept,
               counts.graphs_added);
  return counts;
}

Status SqlitePlanStore::MergePlanLocked(SqliteConnection& c, const PlanBundle::Entry& entry,
                                        const std::string& source, bool record_history,
                                        MergeCounts& counts) {
  FUSOR_ASSIGN_OR_RETURN(std::optional<tables::PlanRow> existing,
                         tables::FindPlanRow(c, PlanKey::Of(entry.plan)));
  int64_t plan_id = 0;
  if (!existing) {
    FUSOR_ASSIGN_OR_RETURN(plan_id, tables::InsertPlan(c, entry.plan));
    ++counts.plans_added;
  } else if (IncomingPlanWins(entry.plan, existing->plan)) {
    plan_id = existing->plan_id;
    FUSOR_RETURN_IF_ERROR(tables::ReplacePlan(c, plan_id, entry.plan));
    ++counts.plans_replaced;
  } else {
    ++counts.plans_kept;
    return Status::Ok();
  }
  FUSOR_RETURN_IF_ERROR(
      tables::InsertMeasurements(c, plan_id, entry.measurements, entry.plan.created_unix_ms()));
  if (!record_history) return Status::Ok();
  return tables::AppendHistory(c, PlanEvent("imported", entry.plan, NowUnixMs(), "from " + source));
}

Status SqlitePlanStore::DeletePlan(const PlanKey& key) {
  return Write(fmt::format("delete plan for graph {} on target '{}'", ShortHash(key.graph_hash),
                           key.target_id),
               [&](SqliteConnection& c) -> Status {
                 FUSOR_ASSIGN_OR_RETURN(std::optional<tables::PlanRow> row,
                                        tables::FindPlanRow(c, key));
                 if (!row) return Status::NotFound("no such plan in database '" + path_ + "'");
                 FUSOR_RETURN_IF_ERROR(
                     tables::AppendHistory(c, PlanEvent("deleted", row->plan, NowUnixMs(), "")));
                 return tables::DeletePlanRow(c, row->plan_id);
               });
}

StatusOr<int64_t> SqlitePlanStore::ExpirePlans(const ExpireRule& rule) {
  FUSOR_RETURN_IF_ERROR(ValidateExpireRule(rule));
  SqlBuilder selected("FROM plans p JOIN targets t ON t.target_id = p.target_id");
  selected.Append(" AND (0");
  if (rule.created_before_unix_ms != 0) {
    selected.Append(" OR p.created_unix_ms < ?", {rule.created_before_unix_ms});
  }
  if (rule.stale) {
    selected.Append(fmt::format(" OR NOT {}", tables::kPlanIsCurrent),
                    {rule.current_cost_model_version});
  }
  selected.Append(")");
  int64_t expired = 0;
  Status s = Write("expire plans", [&](SqliteConnection& c) -> Status {
    std::vector<SqlValue> values = {NowUnixMs()};
    values.insert(values.end(), selected.values().begin(), selected.values().end());
    FUSOR_RETURN_IF_ERROR(c.Execute(
        "INSERT INTO tuning_history (at_unix_ms, event, graph_hash, target_id, "
        "cost_model_version, search_options, predicted_ns, measured_ns) SELECT ?, 'expired', "
        "p.graph_hash, p.target_id, p.cost_model_version, p.search_options, p.predicted_ns, "
        "p.measured_ns " +
            selected.sql(),
        values));
    FUSOR_RETURN_IF_ERROR(
        c.Execute("DELETE FROM plans WHERE plan_id IN (SELECT p.plan_id " + selected.sql() + ")",
                  selected.values()));
    expired = c.changes();
    return tables::DeleteOrphanGraphs(c).status();
  });
  if (!s.ok()) return s;
  spdlog::info("db: expired {} plans from '{}'", expired, path_);
  return expired;
}

// Plans: reads ----------------------------------------------------------------------------------

StatusOr<std::optional<StoredPlan>> SqlitePlanStore::ReadOnePlan(
    SqliteConnection& c, std::string_view sql, const std::vector<SqlValue>& values,
    std::string_view current_cost_model_version) {
  FUSOR_ASSIGN_OR_RETURN(StatementLease row, c.Prepare(sql));
  FUSOR_RETURN_IF_ERROR(row->Bind(values));
  FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
  if (!found) return std::optional<StoredPlan>();
  FUSOR_ASSIGN_OR_RETURN(StoredPlan plan,
                         tables::ReadStoredPlan(*row, current_cost_model_version, path_));
  return std::optional<StoredPlan>(std::move(plan));
}

StatusOr<StoredPlan> SqlitePlanStore::GetPlan(const PlanKey& key,
                                              std::string_view current_cost_model_version) {
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  static const std::string kSql = std::string(tables::kSelectPlans) +
                                  " WHERE p.graph_hash = ? AND p.target_id = ? AND "
                                  "p.cost_model_version = ? AND p.search_options = ?";
  FUSOR_ASSIGN_OR_RETURN(
      std::optional<StoredPlan> plan,
      ReadOnePlan(*c, kSql,
                  {key.graph_hash, key.target_id, key.cost_model_version, key.search_options},
                  current_cost_model_version));
  if (!plan) {
    return Status::NotFound(fmt::format(
        "no plan for graph {} on target '{}' with cost model '{}' and options '{}' in '{}'",
        ShortHash(key.graph_hash), key.target_id, key.cost_model_version, key.search_options,
        path_));
  }
  return *std::move(plan);
}

StatusOr<StoredPlan> SqlitePlanStore::BestPlan(std::string_view graph_hash,
                                               std::string_view target_id,
                                               std::string_view current_cost_model_version) {
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  static const std::string kSql =
      fmt::format("{} WHERE p.graph_hash = ? AND p.target_id = ? AND {} ORDER BY {} LIMIT 1",
                  tables::kSelectPlans, tables::kPlanIsCurrent, tables::kBestFirst);
  std::string cmv(current_cost_model_version);
  FUSOR_ASSIGN_OR_RETURN(
      std::optional<StoredPlan> plan,
      ReadOnePlan(*c, kSql, {std::string(graph_hash), std::string(target_id), cmv}, cmv));
  if (plan) return *std::move(plan);
  FUSOR_ASSIGN_OR_RETURN(
      int64_t stale,
      c->QueryInt("SELECT count(*) FROM plans WHERE graph_hash = ? AND target_id = ?",
                  {std::string(graph_hash), std::string(target_id)}));
  return Status::NotFound(fmt::format(
      "no current plan for graph {} on target '{}' in '{}'{}", ShortHash(graph_hash), target_id,
      path_,
      stale > 0 ? fmt::format(" ({} stored plans are stale: the cost model changed or the target "
                              "was recalibrated since)",
                              stale)
                : ""));
}

StatusOr<PlanPage> SqlitePlanStore::QueryPlans(const PlanQuery& query) {
  FUSOR_ASSIGN_OR_RETURN(int32_t page_size, PageSizeOf(query));
  FUSOR_ASSIGN_OR_RETURN(SqlBuilder sql, PlanQuerySql(query, page_size + 1));
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  FUSOR_ASSIGN_OR_RETURN(StatementLease row, c->Prepare(sql.sql()));
  FUSOR_RETURN_IF_ERROR(row->Bind(sql.values()));
  // A page covers page_size rows; a corrupt one is named instead of listed (AddListedPlan).
  PlanPage page;
  ListingPosition last;
  for (int32_t rows = 0;; ++rows) {
    FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
    if (!found) break;
    if (rows == page_size) {
      page.next_page_token = EncodePageToken(last);
      break;
    }
    last = tables::RowPosition(*row);
    FUSOR_RETURN_IF_ERROR(
        AddListedPlan(tables::ReadStoredPlan(*row, query.current_cost_model_version, path_),
                      last.key.graph_hash, last.key.target_id, path_, &page));
  }
  return page;
}

StatusOr<std::vector<Measurement>> SqlitePlanStore::GetMeasurements(const PlanKey& key) {
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  FUSOR_ASSIGN_OR_RETURN(std::optional<tables::PlanRow> row, tables::FindPlanRow(*c, key));
  if (!row) {
    return Status::NotFound(fmt::format("no plan for graph {} on target '{}' in '{}'",
                                        ShortHash(key.graph_hash), key.target_id, path_));
  }
  return tables::ReadMeasurements(*c, row->plan_id, schema_.version >= kAgentsVersion);
}

StatusOr<std::vector<HistoryEvent>> SqlitePlanStore::History(const HistoryQuery& query) {
  HistoryQuery normalized = query;
  FUSOR_ASSIGN_OR_RETURN(normalized.graph_hash_prefix,
                         NormalizeHashPrefix(query.graph_hash_prefix));
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  return tables::ReadHistory(*c, normalized);
}

// Stats ------------------------------------------------------------------------------------------

StatusOr<std::vector<DatabaseStats>> SqlitePlanStore::Stats(
    std::string_view current_cost_model_version) {
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  FUSOR_ASSIGN_OR_RETURN(Transaction txn, Transaction::BeginRead(*c));
  FUSOR_ASSIGN_OR_RETURN(DatabaseStats stats, StatsLocked(*c, current_cost_model_version));
  FUSOR_RETURN_IF_ERROR(txn.Commit());
  return std::vector<DatabaseStats>{std::move(stats)};
}

StatusOr<DatabaseStats> SqlitePlanStore::StatsLocked(SqliteConnection& c,
                                                     std::string_view current_cmv) {
  DatabaseStats s;
  s.path = path_;
  s.schema_version = schema_.version;
  s.read_only = read_only();
  s.snapshot_of_target = schema_.snapshot_of_target;
  s.file_bytes = FileBytes(path_);
  FUSOR_ASSIGN_OR_RETURN(s.targets, c.QueryInt("SELECT count(*) FROM targets"));
  FUSOR_ASSIGN_OR_RETURN(s.graphs, c.QueryInt("SELECT count(*) FROM graphs"));
  FUSOR_ASSIGN_OR_RETURN(s.plans, c.QueryInt("SELECT count(*) FROM plans"));
  FUSOR_ASSIGN_OR_RETURN(s.measurements, c.QueryInt("SELECT count(*) FROM measurements"));
  FUSOR_ASSIGN_OR_RETURN(s.history_events, c.QueryInt("SELECT count(*) FROM tuning_history"));
  static const std::string kPerTarget = fmt::format(
      "SELECT t.target_id, t.cpu_model, t.isa, t.calibrated_unix_ms, count(p.plan_id), "
      "coalesce(sum(p.plan_id IS NOT NULL AND NOT {}), 0) FROM targets t "
      "LEFT JOIN plans p ON p.target_id = t.target_id GROUP BY t.target_id ORDER BY t.target_id",
      tables::kPlanIsCurrent);
  FUSOR_ASSIGN_OR_RETURN(StatementLease row, c.Prepare(kPerTarget));
  FUSOR_RETURN_IF_ERROR(row->Bind({std::string(current_cmv)}));
  for (;;) {
    FUSOR_ASSIGN_OR_RETURN(bool found, row->Step());
    if (!found) break;
    TargetStats t{
        row->Text(0), row->Text(1), row->Text(2), row->Int(3), row->Int(4), row->Int(5), 0};
    s.stale_plans += t.stale_plans;
    s.per_target.push_back(std::move(t));
  }
  if (schema_.version >= kCalibrationLogVersion) {
    FUSOR_RETURN_IF_ERROR(tables::CountCalibrationLog(c, s));
  }
  return s;
}

}  // namespace fusor::db
