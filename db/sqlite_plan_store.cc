#include "db/sqlite_plan_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "db/plan_order.h"
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

// Refuses early, with a clear message, what SQLite would refuse late or not at all (root ignores
// file modes, and SQLite quietly falls back to read-only).
Status CheckFile(const std::string& path, bool read_only) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return Status::IOError(fmt::format("database '{}': {}", path, std::strerror(errno)));
    }
    if (read_only) return Status::NotFound(fmt::format("database '{}' does not exist", path));
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
      return Status::NotFound(
          fmt::format("cannot create database '{}': directory '{}' does not "
                      "exist",
                      path, parent.string()));
    }
    // Created here, owner-only: SQLite gives its -wal and -shm files the database file's mode.
    int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) {
      return Status::IOError(
          fmt::format("cannot create database '{}': {}", path, std::strerror(errno)));
    }
    if (fd >= 0) close(fd);
    return Status::Ok();
  }
  if (!read_only && (st.st_mode & S_IRWXO)) {
    spdlog::warn("database '{}' is readable by others (mode {:04o}); chmod 600 it", path,
                 st.st_mode & 07777);
  }
  if (S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(fmt::format("'{}' is a directory, not a database file", path));
  }
  if (!read_only && ((st.st_mode & 0222) == 0 || access(path.c_str(), W_OK) != 0)) {
    return Status::FailedPrecondition(fmt::format(
        "database '{}' is read-only (file mode {:04o}); open it read-only to query it, or make "
        "it writable to store plans",
        path, st.st_mode & 07777));
  }
  return Status::Ok();
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

// Connection pool ---------------------------------------------------------------------------------

// A connection lent to one call; back to the pool when the lease ends.
class SqlitePlanStore::ConnectionLease {
 public:
  ConnectionLease(SqlitePlanStore* store, std::unique_ptr<SqliteConnection> connection)
      : store_(store), connection_(std::move(connection)) {}
  ConnectionLease(ConnectionLease&& other) noexcept = default;
  ConnectionLease& operator=(ConnectionLease&&) = delete;
  ~ConnectionLease() {
    if (connection_) store_->ReturnConnection(std::move(connection_));
  }
  SqliteConnection& operator*() const { return *connection_; }
  SqliteConnection* operator->() const { return connection_.get(); }

 private:
  SqlitePlanStore* store_;
  std::unique_ptr<SqliteConnection> connection_;
};

SqlitePlanStore::SqlitePlanStore(std::string path, SqliteOpenOptions options, SchemaInfo schema,
                                 std::unique_ptr<SqliteConnection> first)
    : path_(std::move(path)), options_(options), schema_(std::move(schema)) {
  idle_.push_back(std::move(first));
}

SqlitePlanStore::~SqlitePlanStore() = default;

StatusOr<std::unique_ptr<SqlitePlanStore>> SqlitePlanStore::Open(const std::string& path,
                                                                 SqliteOpenOptions options) {
  FUSOR_RETURN_IF_ERROR(CheckFile(path, options.read_only));
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<SqliteConnection> first,
                         SqliteConnection::Open(path, options.read_only));
  if (!options.read_only && first->opened_read_only()) {
    return Status::FailedPrecondition(fmt::format(
        "database '{}' can only be opened read-only here (read-only file system or missing "
        "permission); open it read-only to query it",
        path));
  }
  FUSOR_ASSIGN_OR_RETURN(SchemaInfo schema, PrepareSchema(*first));
  spdlog::debug("db: opened '{}' (schema version {}, {})", path, schema.version,
                options.read_only ? "read-only" : "writable");
  return std::unique_ptr<SqlitePlanStore>(
      new SqlitePlanStore(path, options, std::move(schema), std::move(first)));
}

StatusOr<SqlitePlanStore::ConnectionLease> SqlitePlanStore::Connect() {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!idle_.empty()) {
      std::unique_ptr<SqliteConnection> connection = std::move(idle_.back());
      idle_.pop_back();
      return ConnectionLease(this, std::move(connection));
    }
  }
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<SqliteConnection> connection,
                         SqliteConnection::Open(path_, options_.read_only));
  return ConnectionLease(this, std::move(connection));
}

void SqlitePlanStore::ReturnConnection(std::unique_ptr<SqliteConnection> connection) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(connection));
  // Otherwise the surplus connection closes here.
}

Status SqlitePlanStore::Write(std::string_view what,
                              const std::function<Status(SqliteConnection&)>& body) {
  if (read_only()) {
    return Status::FailedPrecondition(
        fmt::format("database '{}' is open read-only; cannot {}", path_, what));
  }
  std::lock_guard<std::mutex> lock(write_mu_);
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  Status s = [&]() -> Status {
    FUSOR_ASSIGN_OR_RETURN(Transaction txn, Transaction::BeginWrite(*c));
    FUSOR_RETURN_IF_ERROR(body(*c));
    return txn.Commit();
  }();
  return s.WithContext(what);
}

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

// Calibration log -------------------------------------------------------------------------------

StatusOr<int64_t> SqlitePlanStore::AppendCalibrationRun(const CalibrationRun& run) {
  FUSOR_RETURN_IF_ERROR(ValidateCalibrationRun(run));
  int64_t run_id = 0;
  Status s =
      Write(fmt::format("append a calibration run of target '{}'", run.target_id),
            [&](SqliteConnection& c) -> Status {
              FUSOR_RETURN_IF_ERROR(RequireTarget(c, run.target_id));
              FUSOR_ASSIGN_OR_RETURN(run_id, tables::InsertCalibrationRun(c, run, NowUnixMs()));
              return Status::Ok();
            });
  if (!s.ok()) return s;
  spdlog::info("db: appended calibration run {} of target {} (cost model {}, {} samples) to '{}'",
               run_id, run.target_id, run.cost_model_version, run.samples.size(), path_);
  return run_id;
}

StatusOr<std::vector<CalibrationRun>> SqlitePlanStore::CalibrationRuns(
    const CalibrationRunQuery& query) {
  if (query.max_runs < 1) {
    return Status::InvalidArgument(
        fmt::format("max_runs is {}; ask for at least 1 calibration run", query.max_runs));
  }
  if (schema_.version < kCalibrationLogVersion) return std::vector<CalibrationRun>();
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  return tables::ReadCalibrationRuns(*c, query);
}

// Learned residual ------------------------------------------------------------------------------

Status SqlitePlanStore::AppendResidualSamples(std::span<const ResidualSampleRow> rows) {
  FUSOR_RETURN_IF_ERROR(ValidateResidualSamples(rows));
  if (rows.empty()) return Status::Ok();
  return Write(
      fmt::format("append {} residual samples of target '{}'", rows.size(), rows.front().target_id),
      [&](SqliteConnection& c) -> Status {
        for (const ResidualSampleRow& r : rows)
          FUSOR_RETURN_IF_ERROR(RequireTarget(c, r.target_id));
        return tables::InsertResidualSamples(c, rows, NowUnixMs());
      });
}

StatusOr<std::vector<ResidualSampleRow>> SqlitePlanStore::ResidualSamples(
    const ResidualSampleQuery& query) {
  FUSOR_RETURN_IF_ERROR(ValidateResidualSampleQuery(query));
  if (schema_.version < kResidualLogVersion) return std::vector<ResidualSampleRow>();
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  return tables::ReadResidualSamples(*c, query);
}

Status SqlitePlanStore::PutResidual(const StoredResidual& residual) {
  FUSOR_RETURN_IF_ERROR(ValidateResidual(residual));
  return Write(fmt::format("store the residual of target '{}'", residual.target_id),
               [&](SqliteConnection& c) -> Status {
                 FUSOR_RETURN_IF_ERROR(RequireTarget(c, residual.target_id));
                 return tables::UpsertResidual(c, residual, NowUnixMs());
               });
}

StatusOr<StoredResidual> SqlitePlanStore::GetResidual(std::string_view target_id) {
  std::optional<StoredResidual> found;
  if (schema_.version >= kResidualLogVersion) {
    FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
    FUSOR_ASSIGN_OR_RETURN(found, tables::FindResidual(*c, target_id));
  }
  if (!found) {
    return Status::NotFound(
        fmt::format("no learned residual for target '{}' in '{}'", target_id, path_));
  }
  return std::move(*found);
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

// Plan-key locks ---------------------------------------------------------------------------------

namespace {

// Holds an open-file-description lock; closing the descriptor releases it.
class FileRangeLock final : public PlanKeyLock {
 public:
  explicit FileRangeLock(int fd) : fd_(fd) {}
  ~FileRangeLock() override { close(fd_); }

 private:
  int fd_;
};

}  // namespace

StatusOr<std::unique_ptr<PlanKeyLock>> SqlitePlanStore::LockPlanKey(
    const PlanKey& key, const std::atomic<bool>* cancelled) {
  if (read_only()) {
    return Status::FailedPrecondition(
        fmt::format("database '{}' is open read-only; it takes no tuning locks", path_));
  }
  std::string lock_path = path_ + "-tunelock";
  int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::IOError(
        fmt::format("cannot open the tuning lock file '{}': {}", lock_path, std::strerror(errno)));
  }
  struct flock range {};
  range.l_type = F_WRLCK;
  range.l_whence = SEEK_SET;
  range.l_start = static_cast<off_t>(PlanKeyLockId(key));
  range.l_len = 1;
  // Polled rather than waited for (F_OFD_SETLKW), so a cancelled wait ends promptly.
  while (fcntl(fd, F_OFD_SETLK, &range) != 0) {
    if (errno != EAGAIN && errno != EACCES && errno != EINTR) {
      Status s = Status::IOError(fmt::format("cannot lock the tuning lock file '{}': {}", lock_path,
                                             std::strerror(errno)));
      close(fd);
      return s;
    }
    if (cancelled != nullptr && cancelled->load()) {
      close(fd);
      return Status::Cancelled("cancelled while another process tuned the same graph");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::unique_ptr<PlanKeyLock>(std::make_unique<FileRangeLock>(fd));
}

// Measurement agents and jobs ------------------------------------------------------------------

Status SqlitePlanStore::PutAgent(const AgentRecord& agent) {
  FUSOR_RETURN_IF_ERROR(ValidateAgent(agent));
  return Write(fmt::format("register agent '{}'", agent.agent_id), [&](SqliteConnection& c) {
    FUSOR_RETURN_IF_ERROR(RequireTarget(c, agent.target_id));
    return tables::UpsertAgent(c, agent, NowUnixMs());
  });
}

StatusOr<AgentRecord> SqlitePlanStore::TouchAgent(std::string_view agent_id) {
  std::optional<AgentRecord> agent;
  FUSOR_RETURN_IF_ERROR(Write("note an agent's call", [&](SqliteConnection& c) -> Status {
    FUSOR_ASSIGN_OR_RETURN(agent, tables::TouchAgent(c, agent_id, NowUnixMs()));
    return Status::Ok();
  }));
  if (!agent) {
    return Status::NotFound(fmt::format(
        "agent '{}' is not registered in database '{}'; register it (fusor agent does at start)",
        agent_id, path_));
  }
  return *std::move(agent);
}

StatusOr<int64_t> SqlitePlanStore::CountLiveAgents(std::string_view target_id, int64_t live_ms) {
  if (schema_.version < kAgentsVersion) return 0;
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  return tables::CountLiveAgents(*c, target_id, NowUnixMs() - live_ms);
}

StatusOr<int64_t> SqlitePlanStore::EnqueueJob(const v1::MeasurementJob& job) {
  FUSOR_RETURN_IF_ERROR(ValidateJob(job));
  int64_t job_id = 0;
  FUSOR_RETURN_IF_ERROR(
      Write(fmt::format("queue a measurement job for target '{}'", job.target_id()),
            [&](SqliteConnection& c) -> Status {
              FUSOR_RETURN_IF_ERROR(RequireTarget(c, job.target_id()));
              FUSOR_ASSIGN_OR_RETURN(job_id, tables::InsertJob(c, job, NowUnixMs()));
              return Status::Ok();
            }));
  return job_id;
}

StatusOr<std::optional<MeasurementJobRow>> SqlitePlanStore::LeaseJob(std::string_view target_id,
                                                                     std::string_view agent_id,
                                                                     int64_t lease_ms) {
  FUSOR_RETURN_IF_ERROR(ValidateLease({1, std::string(agent_id), 1}, lease_ms));
  std::optional<MeasurementJobRow> leased;
  FUSOR_RETURN_IF_ERROR(Write("lease a measurement job", [&](SqliteConnection& c) -> Status {
    leased.reset();
    int64_t now = NowUnixMs();
    FUSOR_ASSIGN_OR_RETURN(std::optional<int64_t> job_id, tables::LeasableJob(c, target_id, now));
    if (!job_id) return Status::Ok();
    FUSOR_RETURN_IF_ERROR(tables::SetJobLease(c, *job_id, agent_id, now + lease_ms));
    FUSOR_ASSIGN_OR_RETURN(leased, tables::FindJob(c, *job_id));
    return Status::Ok();
  }));
  return leased;
}

StatusOr<MeasurementJobRow> SqlitePlanStore::HeldJob(SqliteConnection& c, const JobLease& lease) {
  FUSOR_ASSIGN_OR_RETURN(std::optional<MeasurementJobRow> row, tables::FindJob(c, lease.job_id));
  if (!row) return UnknownJob(lease.job_id, path_);
  FUSOR_RETURN_IF_ERROR(CheckHoldsLease(lease, *row, path_));
  return *std::move(row);
}

StatusOr<int64_t> SqlitePlanStore::RenewLease(const JobLease& lease, int64_t lease_ms) {
  FUSOR_RETURN_IF_ERROR(ValidateLease(lease, lease_ms));
  int64_t expires = 0;
  FUSOR_RETURN_IF_ERROR(Write(fmt::format("renew the lease of measurement job {}", lease.job_id),
                              [&](SqliteConnection& c) -> Status {
                                FUSOR_RETURN_IF_ERROR(HeldJob(c, lease).status());
                                expires = NowUnixMs() + lease_ms;
                                return tables::ExtendJobLease(c, lease.job_id, expires);
                              }));
  return expires;
}

Status SqlitePlanStore::FinishJob(const JobLease& lease, const v1::MeasurementResult& result) {
  FUSOR_RETURN_IF_ERROR(ValidateLease(lease, 1));
  return Write(fmt::format("store the result of measurement job {}", lease.job_id),
               [&](SqliteConnection& c) -> Status {
                 FUSOR_RETURN_IF_ERROR(HeldJob(c, lease).status());
                 return tables::EndJob(c, lease.job_id, kJobDone, &result, NowUnixMs());
               });
}

Status SqlitePlanStore::CancelJob(int64_t job_id) {
  return Write(
      fmt::format("cancel measurement job {}", job_id), [&](SqliteConnection& c) -> Status {
        FUSOR_ASSIGN_OR_RETURN(std::optional<MeasurementJobRow> row, tables::FindJob(c, job_id));
        if (!row) return UnknownJob(job_id, path_);
        if (row->state == kJobDone) return Status::Ok();
        return tables::EndJob(c, job_id, kJobCancelled, nullptr, NowUnixMs());
      });
}

StatusOr<int64_t> SqlitePlanStore::PruneJobs(int64_t older_than_ms) {
  FUSOR_RETURN_IF_ERROR(ValidatePruneAge(older_than_ms));
  int64_t pruned = 0;
  FUSOR_RETURN_IF_ERROR(
      Write("prune finished measurement jobs", [&](SqliteConnection& c) -> Status {
        FUSOR_ASSIGN_OR_RETURN(pruned, tables::DeleteFinishedJobs(c, NowUnixMs() - older_than_ms));
        return Status::Ok();
      }));
  return pruned;
}

StatusOr<AgentListing> SqlitePlanStore::ListAgents() {
  AgentListing listing;
  listing.now_unix_ms = NowUnixMs();
  if (schema_.version < kAgentsVersion) return listing;
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  FUSOR_ASSIGN_OR_RETURN(listing.agents, tables::ReadAgents(*c));
  return listing;
}

StatusOr<JobListing> SqlitePlanStore::ListJobs(bool include_finished) {
  JobListing listing;
  listing.now_unix_ms = NowUnixMs();
  if (schema_.version < kAgentsVersion) return listing;
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  FUSOR_ASSIGN_OR_RETURN(listing.jobs, tables::ReadJobs(*c, include_finished));
  return listing;
}

StatusOr<MeasurementJobRow> SqlitePlanStore::GetJob(int64_t job_id) {
  if (schema_.version < kAgentsVersion) return UnknownJob(job_id, path_);
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  FUSOR_ASSIGN_OR_RETURN(std::optional<MeasurementJobRow> row, tables::FindJob(*c, job_id));
  if (!row) return UnknownJob(job_id, path_);
  return *std::move(row);
}

}  // namespace fusor::db
