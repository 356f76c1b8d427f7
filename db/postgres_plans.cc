// PostgresPlanStore's plans: targets, graphs, plans with their measurements, the tuning history,
// expiry and stats, as rows of the tables postgres_schema.cc creates.
#include <optional>

#include <spdlog/spdlog.h>

#include "db/plan_order.h"
#include "db/postgres_plan_store.h"
#include "db/postgres_sql.h"
#include "db/schema.h"
#include "db/staleness.h"
#include "db/store_rules.h"

namespace fusor::db {
namespace {

// PlanIsCurrent as SQL over plans p joined with targets t, given the current cost-model version
// as the parameter `cmv` ('' for each target's own); it mirrors StaleReason() (staleness.h).
std::string PlanIsCurrent(std::string_view cmv) {
  return fmt::format(
      "(p.cost_model_version = COALESCE(NULLIF({0}, ''), t.cost_model_version) AND "
      "p.created_unix_ms >= t.calibrated_unix_ms)",
      cmv);
}

// Columns as tables.h's kSelectPlans: the plan, what judges it, then the row's key and creation
// time.
constexpr std::string_view kSelectPlans =
    "SELECT p.plan, g.model_name, t.cost_model_version, t.calibrated_unix_ms, p.graph_hash, "
    "p.target_id, p.cost_model_version, p.search_options, p.created_unix_ms "
    "FROM plans p JOIN graphs g ON g.graph_hash = p.graph_hash "
    "JOIN targets t ON t.target_id = p.target_id";
constexpr int kPlanGraphColumn = 4;

// Where a row of kSelectPlans stands in listing order, from its own columns.
ListingPosition RowPosition(const pqxx::row& row) {
  return {
      row[kPlanGraphColumn + 4].as<int64_t>(),
      {row[kPlanGraphColumn].as<std::string>(), row[kPlanGraphColumn + 1].as<std::string>(),
       row[kPlanGraphColumn + 2].as<std::string>(), row[kPlanGraphColumn + 3].as<std::string>()}};
}

// BetterPlan()'s order (plan_order.h) as an ORDER BY list over plans p.
constexpr std::string_view kBestFirst =
    "(p.measured_ns IS NOT NULL) DESC, COALESCE(p.measured_ns, p.predicted_ns) ASC, "
    "p.created_unix_ms DESC";

StatusOr<StoredPlan> ReadStoredPlan(const pqxx::row& row, std::string_view current_cmv,
                                    const std::string& database) {
  FUSOR_ASSIGN_OR_RETURN(v1::Plan plan, ParseStoredPlan(BytesOf(row[0]), database));
  return JudgedPlan(std::move(plan), row[1].as<std::string>(), row[2].as<std::string>(),
                    row[3].as<int64_t>(), current_cmv, database);
}

}  // namespace

// Targets and graphs
// -------------------------------------------------------------------------------

namespace {

// Stores a profile unless the stored one is newer or identical; true if stored.
bool UpsertTarget(pqxx::dbtransaction& txn, const v1::HardwareProfile& profile, int64_t now_ms) {
  const v1::TargetFingerprint& fp = profile.target();
  Params p;
  std::string sql =
      UpsertTargetSql({p.Text(fp.id()), p.Text(fp.cpu_model()), p.Text(fp.isa()), p.Int(fp.cores()),
                       p.Text(fp.onednn_version()), p.Text(profile.cost_model_version()),
                       p.Int(profile.calibrated_unix_ms()), p.Bytes(fp.SerializeAsString()),
                       p.Bytes(profile.SerializeAsString()), p.Int(now_ms)});
  return p.Exec(txn, sql).affected_rows() > 0;
}

void AppendHistory(pqxx::dbtransaction& txn, const HistoryEvent& e) {
  Params p;
  bool plan_event = !e.key.graph_hash.empty();
  std::string sql = fmt::format(
      "INSERT INTO tuning_history (at_unix_ms, event, graph_hash, target_id, cost_model_version, "
      "search_options, predicted_ns, measured_ns, detail) VALUES ({}, {}, {}, {}, {}, {}, {}, {}, "
      "{})",
      p.Int(e.at_unix_ms), p.Text(e.event), plan_event ? p.Text(e.key.graph_hash) : p.Null(),
      p.Text(e.key.target_id), plan_event ? p.Text(e.key.cost_model_version) : p.Null(),
      plan_event ? p.Text(e.key.search_options) : p.Null(), p.OptionalReal(e.predicted_ns),
      p.OptionalReal(e.measured_ns), p.Text(e.detail));
  p.Exec(txn, sql);
}

struct PlanRow {
  int64_t plan_id = 0;
  v1::Plan plan;
};

StatusOr<std::optional<PlanRow>> FindPlanRow(pqxx::dbtransaction& txn, const PlanKey& key,
                                             const std::string& database) {
  Params p;
  std::string sql = fmt::format(
      "SELECT plan_id, plan FROM plans WHERE graph_hash = {} AND target_id = {} AND "
      "cost_model_version = {} AND search_options = {}",
      p.Text(key.graph_hash), p.Text(key.target_id), p.Text(key.cost_model_version),
      p.Text(key.search_options));
  pqxx::result r = p.Exec(txn, sql);
  if (r.empty()) return std::optional<PlanRow>();
  PlanRow row{r[0][0].as<int64_t>(), {}};
  FUSOR_ASSIGN_OR_RETURN(row.plan, ParseStoredPlan(BytesOf(r[0][1]), database));
  return std::optional<PlanRow>(std::move(row));
}

// The plan's columns in the order of kPlanColumns, as parameters.
std::string PlanValues(Params& p, const v1::Plan& plan) {
  return fmt::format("{}, {}, {}, {}, {}, {}, {}, {}, {}", p.Bytes(plan.SerializeAsString()),
                     p.Real(plan.predicted_ns()), p.OptionalReal(plan.measured_ns()),
                     p.OptionalReal(plan.unfused_predicted_ns()),
                     p.OptionalReal(plan.unfused_measured_ns()), p.OptionalReal(SpeedUp(plan)),
                     p.Int(plan.groups_size()), p.Int(plan.peak_memory_bytes()),
                     p.Int(plan.created_unix_ms()));
}
constexpr std::string_view kPlanColumns =
    "plan, predicted_ns, measured_ns, unfused_predicted_ns, unfused_measured_ns, speedup, "
    "group_count, peak_memory_bytes, created_unix_ms";

int64_t InsertPlan(pqxx::dbtransaction& txn, const v1::Plan& plan) {
  Params p;
  std::string sql = fmt::format(
      "INSERT INTO plans (graph_hash, target_id, cost_model_version, search_options, {}) "
      "VALUES ({}, {}, {}, {}, {}) RETURNING plan_id",
      kPlanColumns, p.Text(plan.graph_hash()), p.Text(plan.target_id()),
      p.Text(plan.cost_model_version()), p.Text(plan.search_options()), PlanValues(p, plan));
  return p.Exec(txn, sql)[0][0].as<int64_t>();
}

void ReplacePlan(pqxx::dbtransaction& txn, int64_t plan_id, const v1::Plan& plan) {
  Params d;
  d.Exec(txn, fmt::format("DELETE FROM measurements WHERE plan_id = {}", d.Int(plan_id)));
  Params p;
  std::string values = PlanValues(p, plan);
  p.Exec(txn, fmt::format("UPDATE plans SET ({}) = ROW({}) WHERE plan_id = {}", kPlanColumns,
                          values, p.Int(plan_id)));
}

void InsertMeasurements(pqxx::dbtransaction& txn, int64_t plan_id,
                        std::span<const Measurement> measurements, int64_t default_unix_ms) {
  for (const Measurement& m : measurements) {
    SampleSummary summary = Summarize(m.samples_ns);
    int64_t at = m.measured_unix_ms != 0 ? m.measured_unix_ms : default_unix_ms;
    Params p;
    std::string sql = fmt::format(
        "INSERT INTO measurements (plan_id, group_id, samples, sample_count, median_ns, spread, "
        "measured_unix_ms, agent_id) VALUES ({}, {}, {}, {}, {}, {}, {}, {})",
        p.Int(plan_id), m.group_id ? p.Int(*m.group_id) : p.Null(),
        p.Text(SamplesJson(m.samples_ns)), p.Int(static_cast<int64_t>(m.samples_ns.size())),
        p.Real(summary.median_ns), p.Real(summary.spread), p.Int(at),
        m.agent_id.empty() ? p.Null() : p.Text(m.agent_id));
    p.Exec(txn, sql);
  }
}

void DeleteOrphanGraphs(pqxx::dbtransaction& txn) {
  txn.exec(
      "DELETE FROM graphs WHERE NOT EXISTS "
      "(SELECT 1 FROM plans p WHERE p.graph_hash = graphs.graph_hash)");
}

}  // namespace

Status PostgresPlanStore::PutTarget(const v1::HardwareProfile& profile) {
  const std::string& id = profile.target().id();
  if (id.empty()) return Status::InvalidArgument("hardware profile has no target id to store");
  return Write(fmt::format("store target '{}'", id), [&](pqxx::dbtransaction& txn) -> Status {
    int64_t now = NowUnixMs();
    if (!UpsertTarget(txn, profile, now)) {
      spdlog::info("db: target {} unchanged in '{}': its stored calibration is as new or newer", id,
                   name_);
      return Status::Ok();
    }
    spdlog::info("db: stored target {} calibrated at {} (cost model {}) in '{}'", id,
                 UtcText(profile.calibrated_unix_ms()), profile.cost_model_version(), name_);
    AppendHistory(txn, CalibratedEvent(profile, now));
    return Status::Ok();
  });
}

StatusOr<v1::HardwareProfile> PostgresPlanStore::GetTarget(std::string_view target_id) {
  std::optional<v1::HardwareProfile> found;
  FUSOR_RETURN_IF_ERROR(Read("read a target", [&](pqxx::dbtransaction& txn) -> Status {
    Params p;
    pqxx::result r = p.Exec(
        txn, fmt::format("SELECT profile FROM targets WHERE target_id = {}", p.Text(target_id)));
    if (r.empty()) return Status::Ok();
    FUSOR_ASSIGN_OR_RETURN(
        found, ParseStored<v1::HardwareProfile>(BytesOf(r[0][0]), "target profile", name_));
    return Status::Ok();
  }));
  if (!found) {
    return Status::NotFound(fmt::format("target '{}' is not in database '{}'", target_id, name_));
  }
  return *std::move(found);
}

StatusOr<std::vector<v1::HardwareProfile>> PostgresPlanStore::ListTargets() {
  std::vector<v1::HardwareProfile> profiles;
  FUSOR_RETURN_IF_ERROR(Read("list targets", [&](pqxx::dbtransaction& txn) -> Status {
    profiles.clear();
    for (const pqxx::row& row : txn.exec("SELECT profile FROM targets ORDER BY target_id")) {
      FUSOR_ASSIGN_OR_RETURN(
          v1::HardwareProfile profile,
          ParseStored<v1::HardwareProfile>(BytesOf(row[0]), "target profile", name_));
      profiles.push_back(std::move(profile));
    }
    return Status::Ok();
  }));
  return profiles;
}

StatusOr<v1::Graph> PostgresPlanStore::GetGraph(std::string_view graph_hash) {
  std::optional<v1::Graph> found;
  FUSOR_RETURN_IF_ERROR(Read("read a graph", [&](pqxx::dbtransaction& txn) -> Status {
    Params p;
    pqxx::result r = p.Exec(
        txn, fmt::format("SELECT graph FROM graphs WHERE graph_hash = {}", p.Text(graph_hash)));
    if (r.empty()) return Status::Ok();
    FUSOR_ASSIGN_OR_RETURN(found, ParseStored<v1::Graph>(BytesOf(r[0][0]), "graph", name_));
    return Status::Ok();
  }));
  if (!found) {
    return Status::NotFound(fmt::format("graph {} is not in database '{}'", graph_hash, name_));
  }
  return *std::move(found);
}

// Plans: writes
// ------------------------------------------------------------------------------------

Status PostgresPlanStore::PutPlan(const v1::Plan& plan, const v1::Graph& graph,
                                  std::span<const Measurement> measurements) {
  FUSOR_RETURN_IF_ERROR(ValidatePlan(plan));
  FUSOR_RETURN_IF_ERROR(ValidateMeasurements(plan, measurements));
  std::string what = fmt::format("store plan for graph {} on target '{}'",
                                 ShortHash(plan.graph_hash()), plan.target_id());
  return Write(what, [&](pqxx::dbtransaction& txn) -> Status {
    // Two replicas storing one key at once would both miss FindPlanRow and collide on the
    // unique key; the lock makes the second one replace the first's plan instead.
    txn.exec_params("SELECT pg_advisory_xact_lock($1, $2)", kPutPlanLock,
                    static_cast<int32_t>(PlanKeyLockId(PlanKey::Of(plan))));
    Params t;
    if (t.Exec(txn,
               fmt::format("SELECT 1 FROM targets WHERE target_id = {}", t.Text(plan.target_id())))
            .empty()) {
      return Status::FailedPrecondition(fmt::format(
          "target '{}' is not in database '{}'; store (register) its hardware profile first",
          plan.target_id(), name_));
    }
    int64_t now = NowUnixMs();
    v1::Plan stored = plan;
    if (stored.created_unix_ms() == 0) stored.set_created_unix_ms(now);
    Params g;
    g.Exec(txn,
           fmt::format("INSERT INTO graphs (graph_hash, model_name, node_count, graph, "
                       "created_unix_ms) VALUES ({}, {}, {}, {}, {}) "
                       "ON CONFLICT (graph_hash) DO NOTHING",
                       g.Text(plan.graph_hash()), g.Text(graph.model_name()),
                       g.Int(graph.nodes_size()), g.Bytes(graph.SerializeAsString()), g.Int(now)));
    FUSOR_ASSIGN_OR_RETURN(std::optional<PlanRow> existing,
                           FindPlanRow(txn, PlanKey::Of(plan), name_));
    int64_t plan_id = 0;
    if (existing) {
      plan_id = existing->plan_id;
      ReplacePlan(txn, plan_id, stored);
      AppendHistory(txn, PlanEvent("replaced", existing->plan, now, "by a newer tuning"));
    } else {
      plan_id = InsertPlan(txn, stored);
    }
    InsertMeasurements(txn, plan_id, measurements, stored.created_unix_ms());
    AppendHistory(txn, PlanEvent("stored", stored, now, ""));
    spdlog::info(
        "db: stored plan graph={} target={} cost_model={} options='{}' predicted_ns={:.0f} "
        "measured_ns={:.0f} in '{}'",
        plan.graph_hash(), plan.target_id(), plan.cost_model_version(), plan.search_options(),
        plan.predicted_ns(), plan.measured_ns(), name_);
    return Status::Ok();
  });
}

Status PostgresPlanStore::DeletePlan(const PlanKey& key) {
  std::string what = fmt::format("delete plan for graph {} on target '{}'",
                                 ShortHash(key.graph_hash), key.target_id);
  return Write(what, [&](pqxx::dbtransaction& txn) -> Status {
    FUSOR_ASSIGN_OR_RETURN(std::optional<PlanRow> row, FindPlanRow(txn, key, name_));
    if (!row) return Status::NotFound("no such plan in database '" + name_ + "'");
    AppendHistory(txn, PlanEvent("deleted", row->plan, NowUnixMs(), ""));
    Params p;
    p.Exec(txn, fmt::format("DELETE FROM plans WHERE plan_id = {}", p.Int(row->plan_id)));
    return Status::Ok();
  });
}

StatusOr<int64_t> PostgresPlanStore::ExpirePlans(const ExpireRule& rule) {
  FUSOR_RETURN_IF_ERROR(ValidateExpireRule(rule));
  // The plans the rule selects, as a FROM ... WHERE clause over plans p and targets t.
  auto selected = [&rule](Params& p) {
    std::string sql = "FROM plans p JOIN targets t ON t.target_id = p.target_id WHERE (false";
    if (rule.created_before_unix_ms != 0) {
      sql += " OR p.created_unix_ms < " + p.Int(rule.created_before_unix_ms);
    }
    if (rule.stale) sql += " OR NOT " + PlanIsCurrent(p.Text(rule.current_cost_model_version));
    return sql + ")";
  };
  int64_t expired = 0;
  FUSOR_RETURN_IF_ERROR(Write("expire plans", [&](pqxx::dbtransaction& txn) -> Status {
    Params log;
    std::string now = log.Int(NowUnixMs());
    log.Exec(txn, fmt::format("INSERT INTO tuning_history (at_unix_ms, event, graph_hash, "
                              "target_id, cost_model_version, search_options, predicted_ns, "
                              "measured_ns) SELECT {}, 'expired', p.graph_hash, p.target_id, "
                              "p.cost_model_version, p.search_options, p.predicted_ns, "
                              "p.measured_ns {}",
                              now, selected(log)));
    Params del;
    std::string sql =
        fmt::format("DELETE FROM plans WHERE plan_id IN (SELECT p.plan_id {})", selected(del));
    expired = static_cast<int64_t>(del.Exec(txn, sql).affected_rows());
    DeleteOrphanGraphs(txn);
    return Status::Ok();
  }));
  spdlog::info("db: expired {} plans from '{}'", expired, name_);
  return expired;
}

Status PostgresPlanStore::RequireTarget(pqxx::dbtransaction& txn, std::string_view target_id) {
  Params t;
  if (!t.Exec(txn, fmt::format("SELECT 1 FROM targets WHERE target_id = {}", t.Text(target_id)))
           .empty()) {
    return Status::Ok();
  }
  return Status::FailedPrecondition(fmt::format(
      "target '{}' is not in database '{}'; store (register) its hardware profile first", target_id,
      name_));
}

// Plans: reads
// -------------------------------------------------------------------------------------

StatusOr<StoredPlan> PostgresPlanStore::GetPlan(const PlanKey& key,
                                                std::string_view current_cost_model_version) {
  std::optional<StoredPlan> found;
  FUSOR_RETURN_IF_ERROR(Read("read a plan", [&](pqxx::dbtransaction& txn) -> Status {
    Params p;
    std::string sql = fmt::format(
        "{} WHERE p.graph_hash = {} AND p.target_id = {} AND p.cost_model_version = {} AND "
        "p.search_options = {}",
        kSelectPlans, p.Text(key.graph_hash), p.Text(key.target_id), p.Text(key.cost_model_version),
        p.Text(key.search_options));
    pqxx::result r = p.Exec(txn, sql);
    if (r.empty()) return Status::Ok();
    FUSOR_ASSIGN_OR_RETURN(found, ReadStoredPlan(r[0], current_cost_model_version, name_));
    return Status::Ok();
  }));
  if (!found) {
    return Status::NotFound(fmt::format(
        "no plan for graph {} on target '{}' with cost model '{}' and options '{}' in '{}'",
        ShortHash(key.graph_hash), key.target_id, key.cost_model_version, key.search_options,
        name_));
  }
  return *std::move(found);
}

StatusOr<StoredPlan> PostgresPlanStore::BestPlan(std::string_view graph_hash,
                                                 std::string_view target_id,
                                                 std::string_view current_cost_model_version) {
  std::optional<StoredPlan> found;
  int64_t stale = 0;
  FUSOR_RETURN_IF_ERROR(Read("read the best plan", [&](pqxx::dbtransaction& txn) -> Status {
    Params p;
    std::string hash = p.Text(graph_hash);
    std::string target = p.Text(target_id);
    std::string sql = fmt::format(
        "{} WHERE p.graph_hash = {} AND p.target_id = {} AND {} ORDER BY {} LIMIT 1", kSelectPlans,
        hash, target, PlanIsCurrent(p.Text(current_cost_model_version)), kBestFirst);
    pqxx::result r = p.Exec(txn, sql);
    if (!r.empty()) {
      FUSOR_ASSIGN_OR_RETURN(found, ReadStoredPlan(r[0], current_cost_model_version, name_));
      return Status::Ok();
    }
    Params c;
    stale = c.Exec(txn, fmt::format("SELECT count(*) FROM plans WHERE graph_hash = {} AND "
                                    "target_id = {}",
                                    c.Text(graph_hash), c.Text(target_id)))[0][0]
                .as<int64_t>();
    return Status::Ok();
  }));
  if (found) return *std::move(found);
  return Status::NotFound(fmt::format(
      "no current plan for graph {} on target '{}' in '{}'{}", ShortHash(graph_hash), target_id,
      name_,
      stale > 0 ? fmt::format(" ({} stored plans are stale: the cost model changed or the target "
                              "was recalibrated since)",
                              stale)
                : ""));
}

StatusOr<PlanPage> PostgresPlanStore::QueryPlans(const PlanQuery& query) {
  FUSOR_ASSIGN_OR_RETURN(int32_t page_size, PageSizeOf(query));
  Params p;
  std::string sql = std::string(kSelectPlans) + " WHERE true";
  if (!query.model_name.empty()) sql += " AND g.model_name = " + p.Text(query.model_name);
  if (!query.target_id.empty()) sql += " AND p.target_id = " + p.Text(query.target_id);
  if (!query.graph_hash_prefix.empty()) {
    FUSOR_ASSIGN_OR_RETURN(std::string prefix, NormalizeHashPrefix(query.graph_hash_prefix));
    // '~' sorts after every hex digit, so this range is exactly the hashes with the prefix.
    sql += fmt::format(" AND p.graph_hash >= {} AND p.graph_hash < {}", p.Text(prefix),
                       p.Text(prefix + "~"));
  }
  if (query.created_after_unix_ms != 0) {
    sql += " AND p.created_unix_ms >= " + p.Int(query.created_after_unix_ms);
  }
  if (query.created_before_unix_ms != 0) {
    sql += " AND p.created_unix_ms < " + p.Int(query.created_before_unix_ms);
  }
  if (query.min_speedup > 0) sql += " AND p.speedup >= " + p.Real(query.min_speedup);
  if (query.only_current) {
    sql += " AND " + PlanIsCurrent(p.Text(query.current_cost_model_version));
  }
  if (!query.page_token.empty()) {
    FUSOR_ASSIGN_OR_RETURN(ListingPosition after, DecodePageToken(query.page_token));
    const PlanKey& k = after.key;
    std::string created = p.Int(after.created_unix_ms);
    sql += fmt::format(
        " AND (p.created_unix_ms < {0} OR (p.created_unix_ms = {0} AND (p.graph_hash, "
        "p.target_id, p.cost_model_version, p.search_options) > ({1}, {2}, {3}, {4})))",
        created, p.Text(k.graph_hash), p.Text(k.target_id), p.Text(k.cost_model_version),
        p.Text(k.search_options));
  }
  sql += fmt::format(
      " ORDER BY p.created_unix_ms DESC, p.graph_hash, p.target_id, p.cost_model_version, "
      "p.search_options LIMIT {}",
      p.Int(page_size + 1));
  PlanPage page;
  FUSOR_RETURN_IF_ERROR(Read("query plans", [&](pqxx::dbtransaction& txn) -> Status {
    // A page covers page_size rows; a corrupt one is named instead of listed (AddListedPlan).
    page = PlanPage();
    ListingPosition last;
    int32_t rows = 0;
    for (const pqxx::row& row : p.Exec(txn, sql)) {
      if (rows++ == page_size) {
        page.next_page_token = EncodePageToken(last);
        break;
      }
      last = RowPosition(row);
      FUSOR_RETURN_IF_ERROR(
          AddListedPlan(ReadStoredPlan(row, query.current_cost_model_version, name_),
                        last.key.graph_hash, last.key.target_id, name_, &page));
    }
    return Status::Ok();
  }));
  return page;
}

StatusOr<std::vector<Measurement>> PostgresPlanStore::GetMeasurements(const PlanKey& key) {
  std::vector<Measurement> measurements;
  bool found = false;
  FUSOR_RETURN_IF_ERROR(Read("read measurements", [&](pqxx::dbtransaction& txn) -> Status {
    measurements.clear();
    FUSOR_ASSIGN_OR_RETURN(std::optional<PlanRow> row, FindPlanRow(txn, key, name_));
    found = row.has_value();
    if (!found) return Status::Ok();
    Params p;
    std::string sql = fmt::format(
        "SELECT group_id, samples, median_ns, spread, measured_unix_ms, {} FROM measurements "
        "WHERE plan_id = {} ORDER BY group_id IS NOT NULL, group_id, measurement_id",
        schema_version_ >= kAgentsVersion ? "agent_id" : "NULL", p.Int(row->plan_id));
    for (const pqxx::row& r : p.Exec(txn, sql)) {
      Measurement m;
      if (!r[0].is_null()) m.group_id = static_cast<int32_t>(r[0].as<int64_t>());
      FUSOR_ASSIGN_OR_RETURN(m.samples_ns, ParseSamplesJson(r[1].as<std::string>(), name_));
      m.median_ns = r[2].as<double>();
      m.spread = r[3].as<double>();
      m.measured_unix_ms = r[4].as<int64_t>();
      m.agent_id = TextOrEmpty(r[5]);
      measurements.push_back(std::move(m));
    }
    return Status::Ok();
  }));
  if (!found) {
    return Status::NotFound(fmt::format("no plan for graph {} on target '{}' in '{}'",
                                        ShortHash(key.graph_hash), key.target_id, name_));
  }
  return measurements;
}

StatusOr<std::vector<HistoryEvent>> PostgresPlanStore::History(const HistoryQuery& query) {
  FUSOR_ASSIGN_OR_RETURN(std::string prefix, NormalizeHashPrefix(query.graph_hash_prefix));
  std::vector<HistoryEvent> events;
  FUSOR_RETURN_IF_ERROR(Read("read the tuning history", [&](pqxx::dbtransaction& txn) -> Status {
    events.clear();
    Params p;
    std::string hash = p.Text(prefix);
    std::string target = p.Text(query.target_id);
    std::string sql = fmt::format(
        "SELECT at_unix_ms, event, graph_hash, target_id, cost_model_version, search_options, "
        "predicted_ns, measured_ns, detail FROM tuning_history "
        "WHERE ({0} = '' OR left(graph_hash, length({0})) = {0}) AND ({1} = '' OR target_id = {1}) "
        "ORDER BY event_id DESC LIMIT {2}",
        hash, target, p.Int(query.limit));
    for (const pqxx::row& r : p.Exec(txn, sql)) {
      HistoryEvent e;
      e.at_unix_ms = r[0].as<int64_t>();
      e.event = r[1].as<std::string>();
      e.key = {TextOrEmpty(r[2]), TextOrEmpty(r[3]), TextOrEmpty(r[4]), TextOrEmpty(r[5])};
      e.predicted_ns = RealOr0(r[6]);
      e.measured_ns = RealOr0(r[7]);
      e.detail = r[8].as<std::string>();
      e.database = name_;
      events.push_back(std::move(e));
    }
    return Status::Ok();
  }));
  return events;
}

// Stats
// --------------------------------------------------------------------------------------------

StatusOr<std::vector<DatabaseStats>> PostgresPlanStore::Stats(
    std::string_view current_cost_model_version) {
  DatabaseStats s;
  FUSOR_RETURN_IF_ERROR(Read("count the database", [&](pqxx::dbtransaction& txn) -> Status {
    s = DatabaseStats();
    s.path = name_;
    s.schema_version = schema_version_;
    s.read_only = options_.read_only;
    pqxx::row counts = txn.exec1(
        "SELECT pg_database_size(current_database()), (SELECT count(*) FROM targets), "
        "(SELECT count(*) FROM graphs), (SELECT count(*) FROM plans), "
        "(SELECT count(*) FROM measurements), (SELECT count(*) FROM tuning_history), "
        "(SELECT count(DISTINCT run_id) FROM calibration_samples), "
        "(SELECT count(*) FROM calibration_samples)");
    s.file_bytes = counts[0].as<int64_t>();
    s.targets = counts[1].as<int64_t>();
    s.graphs = counts[2].as<int64_t>();
    s.plans = counts[3].as<int64_t>();
    s.measurements = counts[4].as<int64_t>();
    s.history_events = counts[5].as<int64_t>();
    s.calibration_runs = counts[6].as<int64_t>();
    s.calibration_samples = counts[7].as<int64_t>();
    Params p;
    std::string sql = fmt::format(
        "SELECT t.target_id, t.cpu_model, t.isa, t.calibrated_unix_ms, count(p.plan_id), "
        "count(p.plan_id) FILTER (WHERE NOT {}), "
        "(SELECT count(*) FROM calibration_samples c WHERE c.target_id = t.target_id) "
        "FROM targets t LEFT JOIN plans p ON p.target_id = t.target_id "
        "GROUP BY t.target_id ORDER BY t.target_id",
        PlanIsCurrent(p.Text(current_cost_model_version)));
    for (const pqxx::row& r : p.Exec(txn, sql)) {
      TargetStats t{r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<std::string>(),
                    r[3].as<int64_t>(),     r[4].as<int64_t>(),     r[5].as<int64_t>(),
                    r[6].as<int64_t>()};
      s.stale_plans += t.stale_plans;
      s.per_target.push_back(std::move(t));
    }
    return Status::Ok();
  }));
  return std::vector<DatabaseStats>{std::move(s)};
}

}  // namespace fusor::db
