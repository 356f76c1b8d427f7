#include "db/postgres_plan_store.h"

#include <array>
#include <chrono>
#include <deque>
#include <optional>
#include <thread>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <pqxx/pqxx>

#include "db/open_plan_store.h"
#include "db/plan_order.h"
#include "db/schema.h"
#include "db/staleness.h"
#include "db/store_rules.h"

namespace fusor::db {
namespace {

// The schema, version by version, in PostgreSQL's dialect. Tables and columns mean what they mean
// in the SQLite schema (schema.cc): times are Unix milliseconds, durations nanoseconds, protos
// serialized fusor.v1 messages in BYTEA. meta holds 'schema_version' (what SQLite keeps in
// PRAGMA user_version), 'application' = 'fusor' (PRAGMA application_id) and 'created_unix_ms'.
// Keys compare in the "C" collation, byte order, as SQLite's text does. Calibration run ids come
// from a sequence, since replicas append at once.
constexpr std::string_view kSchemaV1 = R"sql(
CREATE TABLE meta (
  key   TEXT COLLATE "C" PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE targets (
  target_id          TEXT COLLATE "C" PRIMARY KEY,
  cpu_model          TEXT NOT NULL,
  isa                TEXT NOT NULL,
  cores              BIGINT NOT NULL,
  onednn_version     TEXT NOT NULL,
  cost_model_version TEXT COLLATE "C" NOT NULL,
  calibrated_unix_ms BIGINT NOT NULL,
  fingerprint        BYTEA NOT NULL,
  profile            BYTEA NOT NULL,
  updated_unix_ms    BIGINT NOT NULL
);
CREATE TABLE graphs (
  graph_hash      TEXT COLLATE "C" PRIMARY KEY CHECK (length(graph_hash) = 64),
  model_name      TEXT COLLATE "C" NOT NULL,
  node_count      BIGINT NOT NULL,
  graph           BYTEA NOT NULL,
  created_unix_ms BIGINT NOT NULL
);
CREATE INDEX graphs_by_model ON graphs (model_name);
CREATE TABLE plans (
  plan_id              BIGSERIAL PRIMARY KEY,
  graph_hash           TEXT COLLATE "C" NOT NULL REFERENCES graphs (graph_hash),
  target_id            TEXT COLLATE "C" NOT NULL REFERENCES targets (target_id),
  cost_model_version   TEXT COLLATE "C" NOT NULL,
  search_options       TEXT COLLATE "C" NOT NULL,
  plan                 BYTEA NOT NULL,
  predicted_ns         DOUBLE PRECISION NOT NULL,
  measured_ns          DOUBLE PRECISION,
  unfused_predicted_ns DOUBLE PRECISION,
  unfused_measured_ns  DOUBLE PRECISION,
  speedup              DOUBLE PRECISION,
  group_count          BIGINT NOT NULL,
  peak_memory_bytes    BIGINT NOT NULL,
  created_unix_ms      BIGINT NOT NULL,
  UNIQUE (graph_hash, target_id, cost_model_version, search_options)
);
CREATE INDEX plans_by_target ON plans (target_id, graph_hash);
CREATE INDEX plans_by_created
  ON plans (created_unix_ms DESC, graph_hash, target_id, cost_model_version, search_options);
CREATE TABLE measurements (
  measurement_id   BIGSERIAL PRIMARY KEY,
  plan_id          BIGINT NOT NULL REFERENCES plans (plan_id) ON DELETE CASCADE,
  group_id         BIGINT,
  samples          TEXT NOT NULL,
  sample_count     BIGINT NOT NULL,
  median_ns        DOUBLE PRECISION NOT NULL,
  spread           DOUBLE PRECISION NOT NULL,
  measured_unix_ms BIGINT NOT NULL
);
CREATE INDEX measurements_by_plan ON measurements (plan_id);
CREATE TABLE tuning_history (
  event_id           BIGSERIAL PRIMARY KEY,
  at_unix_ms         BIGINT NOT NULL,
  event              TEXT NOT NULL CHECK (event IN
                       ('stored', 'replaced', 'imported', 'deleted', 'expired', 'calibrated')),
  graph_hash         TEXT COLLATE "C",
  target_id          TEXT COLLATE "C" NOT NULL,
  cost_model_version TEXT,
  search_options     TEXT,
  predicted_ns       DOUBLE PRECISION,
  measured_ns        DOUBLE PRECISION,
  detail             TEXT NOT NULL DEFAULT ''
);
CREATE INDEX history_by_graph ON tuning_history (graph_hash, target_id);
)sql";

constexpr std::string_view kSchemaV2 = R"sql(
CREATE SEQUENCE calibration_run_ids;
CREATE TABLE calibration_samples (
  sample_id          BIGSERIAL PRIMARY KEY,
  target_id          TEXT COLLATE "C" NOT NULL REFERENCES targets (target_id),
  cost_model_version TEXT COLLATE "C" NOT NULL,
  run_id             BIGINT NOT NULL,
  run_unix_ms        BIGINT NOT NULL,
  benchmark          TEXT NOT NULL,
  features           TEXT NOT NULL,
  measured_ns        DOUBLE PRECISION NOT NULL,
  cv                 DOUBLE PRECISION NOT NULL
);
CREATE INDEX calibration_samples_by_run
  ON calibration_samples (target_id, cost_model_version, run_id);
)sql";

// Measurement agents and jobs, as in SQLite's version 3 (schema.cc). Jobs are leased with
// SELECT ... FOR UPDATE SKIP LOCKED, so replicas leasing at once never hand one job to two agents
// and never wait on each other's rows; times are the database server's clock.
constexpr std::string_view kSchemaV3 = R"sql(
ALTER TABLE measurements ADD COLUMN agent_id TEXT;
CREATE TABLE agents (
  agent_id           TEXT COLLATE "C" PRIMARY KEY,
  target_id          TEXT COLLATE "C" NOT NULL REFERENCES targets (target_id),
  name               TEXT NOT NULL,
  registered_unix_ms BIGINT NOT NULL,
  last_seen_unix_ms  BIGINT NOT NULL
);
CREATE INDEX agents_by_target ON agents (target_id, last_seen_unix_ms);
CREATE TABLE measurement_jobs (
  job_id                BIGSERIAL PRIMARY KEY,
  target_id             TEXT COLLATE "C" NOT NULL REFERENCES targets (target_id),
  graph_hash            TEXT COLLATE "C" NOT NULL,
  state                 TEXT NOT NULL CHECK (state IN ('queued', 'leased', 'done', 'cancelled')),
  agent_id              TEXT COLLATE "C",
  lease                 BIGINT NOT NULL DEFAULT 0,
  lease_expires_unix_ms BIGINT NOT NULL DEFAULT 0,
  created_unix_ms       BIGINT NOT NULL,
  finished_unix_ms      BIGINT,
  job                   BYTEA NOT NULL,
  result                BYTEA
);
CREATE INDEX measurement_jobs_by_target ON measurement_jobs (target_id, state, job_id);
)sql";

// The learned residual, as in SQLite's version 4 (schema.cc).
constexpr std::string_view kSchemaV4 = R"sql(
CREATE TABLE residual_samples (
  sample_id          BIGSERIAL PRIMARY KEY,
  target_id          TEXT COLLATE "C" NOT NULL REFERENCES targets (target_id),
  cost_model_version TEXT COLLATE "C" NOT NULL,
  graph_hash         TEXT COLLATE "C" NOT NULL,
  source             TEXT NOT NULL,
  features_version   TEXT COLLATE "C" NOT NULL,
  features           TEXT NOT NULL,
  measured_ns        DOUBLE PRECISION NOT NULL,
  measured_unix_ms   BIGINT NOT NULL
);
CREATE INDEX residual_samples_by_target
  ON residual_samples (target_id, cost_model_version, sample_id);

CREATE TABLE residuals (
  target_id          TEXT COLLATE "C" PRIMARY KEY REFERENCES targets (target_id),
  cost_model_version TEXT COLLATE "C" NOT NULL,
  residual           TEXT NOT NULL,
  training_samples   BIGINT NOT NULL,
  last_sample_id     BIGINT NOT NULL,
  fitted_unix_ms     BIGINT NOT NULL
);
)sql";

// kMigrations[i] takes a database from version i to version i + 1. Never edit a released one.
constexpr std::array<std::string_view, kSchemaVersion> kMigrations = {kSchemaV1, kSchemaV2,
                                                                      kSchemaV3, kSchemaV4};

// Advisory lock classes (the first key of PostgreSQL's two-key advisory locks), so Fusor's locks
// keep apart from each other and from other applications' single-key locks.
constexpr int32_t kMigrationLock = 0x46555300;  // "FUS\0": one migration at a time.
constexpr int32_t kTuneLock = 0x46555301;       // LockPlanKey: one search per plan key.
constexpr int32_t kPutPlanLock = 0x46555302;    // PutPlan: one writer per plan key at a time.

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

// The parameters of one statement, as text (NULL as nullopt), numbered $1, $2, ... in the order
// added.
class Params {
 public:
  std::string Text(std::string_view value) { return Add(std::string(value)); }
  std::string Int(int64_t value) { return Add(std::to_string(value)); }
  std::string Real(double value) { return Add(fmt::format("{}", value)); }
  // A time or size that is unknown when zero or less.
  std::string OptionalReal(std::optional<double> value) {
    if (!value || *value <= 0) return Add(std::nullopt);
    return Real(*value);
  }
  std::string Null() { return Add(std::nullopt); }
  std::string Bytes(const std::string& bytes) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex = "\\x";
    hex.reserve(2 + 2 * bytes.size());
    for (unsigned char c : bytes) {
      hex += kHex[c >> 4];
      hex += kHex[c & 15];
    }
    return Add(std::move(hex));
  }

  pqxx::result Exec(pqxx::dbtransaction& txn, const std::string& sql) const {
    std::vector<const char*> pointers;
    for (const std::optional<std::string>& v : values_) {
      pointers.push_back(v ? v->c_str() : nullptr);
    }
    return txn.exec_params(sql, pqxx::prepare::make_dynamic_params(pointers));
  }

 private:
  std::string Add(std::optional<std::string> value) {
    values_.push_back(std::move(value));
    return "$" + std::to_string(values_.size());
  }
  std::deque<std::optional<std::string>> values_;  // A deque: c_str() pointers stay put.
};

std::string BytesOf(const pqxx::field& field) { return pqxx::binarystring(field).str(); }
double RealOr0(const pqxx::field& field) { return field.is_null() ? 0 : field.as<double>(); }
std::string TextOrEmpty(const pqxx::field& field) {
  return field.is_null() ? std::string() : field.as<std::string>();
}

// SQLSTATE classes that mean the server went away or cannot serve yet: connection exceptions
// (08), operator intervention such as a shutdown (57P01-57P03).
bool IsConnectionState(const std::string& sqlstate) {
  return sqlstate.rfind("08", 0) == 0 || sqlstate == "57P01" || sqlstate == "57P02" ||
         sqlstate == "57P03";
}

StatusOr<StoredPlan> ReadStoredPlan(const pqxx::row& row, std::string_view current_cmv,
                                    const std::string& database) {
  FUSOR_ASSIGN_OR_RETURN(v1::Plan plan, ParseStoredPlan(BytesOf(row[0]), database));
  return JudgedPlan(std::move(plan), row[1].as<std::string>(), row[2].as<std::string>(),
                    row[3].as<int64_t>(), current_cmv, database);
}

// The URI with a connect timeout, so an unreachable host fails a call instead of hanging it.
std::string WithConnectTimeout(const std::string& uri) {
  if (uri.find("connect_timeout=") != std::string::npos) return uri;
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + "connect_timeout=5";
}

}  // namespace

struct PostgresPlanStore::Connection {
  explicit Connection(const std::string& uri) : pq(uri) {}
  pqxx::connection pq;
};

namespace {

// A session advisory lock held on a connection of its own; closing the connection releases it.
template <typename Connection>
class SessionLock final : public PlanKeyLock {
 public:
  explicit SessionLock(std::unique_ptr<Connection> connection)
      : connection_(std::move(connection)) {}

 private:
  std::unique_ptr<Connection> connection_;
};

}  // namespace

PostgresPlanStore::PostgresPlanStore(std::string uri, std::string name, PostgresOpenOptions options)
    : uri_(WithConnectTimeout(uri)), name_(std::move(name)), options_(options) {}

PostgresPlanStore::~PostgresPlanStore() = default;

StatusOr<std::unique_ptr<PostgresPlanStore::Connection>> PostgresPlanStore::NewConnection() {
  try {
    return std::make_unique<Connection>(uri_);
  } catch (const std::exception& e) {
    std::string why = e.what();
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return Status::Unavailable(fmt::format(
        "PostgreSQL database '{}' is unreachable: {}; check that the server runs and the "
        "location is right",
        name_, why));
  }
}

Status PostgresPlanStore::Run(std::string_view what, bool write, const Body& body) {
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<Connection> connection;
    bool pooled = false;
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      if (!idle_.empty()) {
        connection = std::move(idle_.back());
        idle_.pop_back();
        pooled = true;
      }
    }
    if (!connection) {
      FUSOR_ASSIGN_OR_RETURN(connection, NewConnection());
    }
    bool lost = false;
    Status s;
    try {
      pqxx::work txn(connection->pq);
      s = body(txn);
      if (s.ok() && write) txn.commit();
    } catch (const pqxx::in_doubt_error& e) {
      // The commit may or may not have happened: never retried.
      s = Status::Unavailable(fmt::format(
          "PostgreSQL database '{}' went away while committing; the write may or may not have "
          "been stored: {}",
          name_, e.what()));
      lost = true;
      attempt = 1;
    } catch (const pqxx::broken_connection& e) {
      s = Status::Unavailable(
          fmt::format("PostgreSQL database '{}' went away: {}", name_, e.what()));
      lost = true;
    } catch (const pqxx::sql_error& e) {
      lost = IsConnectionState(e.sqlstate());
      s = lost ? Status::Unavailable(
                     fmt::format("PostgreSQL database '{}' is not serving: {}", name_, e.what()))
               : Status::Internal(fmt::format("PostgreSQL database '{}': {} (SQLSTATE {})", name_,
                                              e.what(), e.sqlstate()));
    } catch (const std::exception& e) {
      s = Status::Internal(fmt::format("PostgreSQL database '{}': {}", name_, e.what()));
      lost = true;
    }
    if (!lost) {
      std::lock_guard<std::mutex> lock(pool_mu_);
      if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(connection));
      return s.WithContext(what);
    }
    // The other pooled connections went with the server: drop them all, so that the next call
    // connects afresh.
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      idle_.clear();
    }
    if (!pooled || attempt > 0) return s.WithContext(what);
    spdlog::warn("db: PostgreSQL database '{}': a pooled connection was lost ({}); retrying once",
                 name_, s.message());
  }
}

Status PostgresPlanStore::Write(std::string_view what, const Body& body) {
  if (options_.read_only) {
    return Status::FailedPrecondition(
        fmt::format("PostgreSQL database '{}' is open read-only; cannot {}", name_, what));
  }
  return Run(what, true, body);
}

// Schema
// -------------------------------------------------------------------------------------------

StatusOr<std::unique_ptr<PostgresPlanStore>> PostgresPlanStore::Open(const std::string& uri,
                                                                     PostgresOpenOptions options) {
  std::unique_ptr<PostgresPlanStore> store(
      new PostgresPlanStore(uri, RedactedLocation(uri), options));
  FUSOR_RETURN_IF_ERROR(store->Migrate());
  spdlog::info("db: opened PostgreSQL database '{}' (schema version {}, {})", store->name_,
               store->schema_version_, options.read_only ? "read-only" : "writable");
  return store;
}

Status PostgresPlanStore::Migrate() {
  auto body = [&](pqxx::dbtransaction& txn) -> Status {
    if (!options_.read_only) {
      txn.exec_params("SELECT pg_advisory_xact_lock($1, 0)", kMigrationLock);
    }
    bool has_meta = !txn.exec("SELECT to_regclass('meta')")[0][0].is_null();
    int64_t version = 0;
    if (has_meta) {
      pqxx::result r = txn.exec(
          "SELECT (SELECT value FROM meta WHERE key = 'application'), "
          "(SELECT value FROM meta WHERE key = 'schema_version')");
      if (TextOrEmpty(r[0][0]) != "fusor") {
        return Status::FailedPrecondition(fmt::format(
            "PostgreSQL database '{}' has a 'meta' table that is not Fusor's; it is another "
            "application's database; name a database of its own for Fusor",
            name_));
      }
      version = r[0][1].as<int64_t>(0);
    } else {
      int64_t tables =
          txn.exec(
                 "SELECT count(*) FROM pg_tables WHERE schemaname = "
                 "current_schema() AND tablename IN ('targets', 'plans', 'graphs')")[0][0]
              .as<int64_t>();
      if (tables > 0) {
        return Status::FailedPrecondition(fmt::format(
            "PostgreSQL database '{}' has tables named like Fusor's but no Fusor 'meta' table; "
            "name a database of its own for Fusor",
            name_));
      }
    }
    if (version > kSchemaVersion) {
      return Status::FailedPrecondition(
          fmt::format("PostgreSQL database '{}' has schema version {}, this fusor understands "
                      "up to {}; upgrade fusor",
                      name_, version, kSchemaVersion));
    }
    schema_version_ = static_cast<int>(version);
    if (options_.read_only) {
      if (version == 0) {
        return Status::FailedPrecondition(fmt::format(
            "PostgreSQL database '{}' is not a Fusor tuning database yet; open it writable to "
            "create one",
            name_));
      }
      return Status::Ok();
    }
    for (int64_t v = version; v < kSchemaVersion; ++v) txn.exec(std::string(kMigrations[v]));
    if (version < kSchemaVersion) {
      Params p;
      std::string sql = fmt::format(
          "INSERT INTO meta (key, value) VALUES ('schema_version', {0}), ('application', 'fusor') "
          "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
          p.Text(std::to_string(kSchemaVersion)));
      p.Exec(txn, sql);
      if (version == 0) {
        Params q;
        q.Exec(txn, fmt::format("INSERT INTO meta (key, value) VALUES ('created_unix_ms', {})",
                                q.Text(std::to_string(NowUnixMs()))));
      }
      spdlog::info("db: migrated PostgreSQL database '{}' from schema version {} to {}", name_,
                   version, kSchemaVersion);
      schema_version_ = kSchemaVersion;
    }
    return Status::Ok();
  };
  return Run("open the tuning database", !options_.read_only, body);
}

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

// Calibration log
// ----------------------------------------------------------------------------------

StatusOr<int64_t> PostgresPlanStore::AppendCalibrationRun(const CalibrationRun& run) {
  FUSOR_RETURN_IF_ERROR(ValidateCalibrationRun(run));
  int64_t run_id = 0;
  FUSOR_RETURN_IF_ERROR(Write(
      fmt::format("append a calibration run of target '{}'", run.target_id),
      [&](pqxx::dbtransaction& txn) -> Status {
        Params t;
        if (t.Exec(txn,
                   fmt::format("SELECT 1 FROM targets WHERE target_id = {}", t.Text(run.target_id)))
                .empty()) {
          return Status::FailedPrecondition(fmt::format(
              "target '{}' is not in database '{}'; store (register) its hardware profile first",
              run.target_id, name_));
        }
        run_id = txn.exec("SELECT nextval('calibration_run_ids')")[0][0].as<int64_t>();
        int64_t at = run.run_unix_ms != 0 ? run.run_unix_ms : NowUnixMs();
        for (const CalibrationSampleRow& sample : run.samples) {
          Params p;
          p.Exec(txn,
                 fmt::format("INSERT INTO calibration_samples (target_id, "
                             "cost_model_version, run_id, run_unix_ms, benchmark, features, "
                             "measured_ns, cv) VALUES ({}, {}, {}, {}, {}, {}, {}, {})",
                             p.Text(run.target_id), p.Text(run.cost_model_version), p.Int(run_id),
                             p.Int(at), p.Text(sample.benchmark), p.Text(sample.features_json),
                             p.Real(sample.measured_ns), p.Real(sample.cv)));
        }
        return Status::Ok();
      }));
  spdlog::info("db: appended calibration run {} of target {} (cost model {}, {} samples) to '{}'",
               run_id, run.target_id, run.cost_model_version, run.samples.size(), name_);
  return run_id;
}

StatusOr<std::vector<CalibrationRun>> PostgresPlanStore::CalibrationRuns(
    const CalibrationRunQuery& query) {
  if (query.max_runs < 1) {
    return Status::InvalidArgument(
        fmt::format("max_runs is {}; ask for at least 1 calibration run", query.max_runs));
  }
  std::vector<CalibrationRun> runs;
  FUSOR_RETURN_IF_ERROR(Read("read the calibration log", [&](pqxx::dbtransaction& txn) -> Status {
    runs.clear();
    Params p;
    std::string target = p.Text(query.target_id);
    std::string cmv = p.Text(query.cost_model_version);
    std::string sql = fmt::format(
        "SELECT run_id, run_unix_ms, sample_id, benchmark, features, measured_ns, cv "
        "FROM calibration_samples WHERE target_id = {0} AND cost_model_version = {1} "
        "AND run_id IN (SELECT DISTINCT run_id FROM calibration_samples "
        "WHERE target_id = {0} AND cost_model_version = {1} ORDER BY run_id DESC LIMIT {2}) "
        "ORDER BY run_id DESC, sample_id",
        target, cmv, p.Int(query.max_runs));
    for (const pqxx::row& row : p.Exec(txn, sql)) {
      int64_t run_id = row[0].as<int64_t>();
      if (runs.empty() || runs.back().run_id != run_id) {
        runs.push_back(
            {run_id, query.target_id, query.cost_model_version, row[1].as<int64_t>(), {}, name_});
      }
      runs.back().samples.push_back({row[2].as<int64_t>(), row[3].as<std::string>(),
                                     row[4].as<std::string>(), row[5].as<double>(),
                                     row[6].as<double>()});
    }
    return Status::Ok();
  }));
  return runs;
}

// Learned residual
// ---------------------------------------------------------------------------------

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

Status PostgresPlanStore::AppendResidualSamples(std::span<const ResidualSampleRow> rows) {
  FUSOR_RETURN_IF_ERROR(ValidateResidualSamples(rows));
  if (rows.empty()) return Status::Ok();
  return Write(
      fmt::format("append {} residual samples of target '{}'", rows.size(), rows.front().target_id),
      [&](pqxx::dbtransaction& txn) -> Status {
        const int64_t now = NowUnixMs();
        for (const ResidualSampleRow& r : rows) {
          FUSOR_RETURN_IF_ERROR(RequireTarget(txn, r.target_id));
          Params p;
          p.Exec(txn,
                 fmt::format("INSERT INTO residual_samples (target_id, cost_model_version, "
                             "graph_hash, source, features_version, features, measured_ns, "
                             "measured_unix_ms) VALUES ({}, {}, {}, {}, {}, {}, {}, {})",
                             p.Text(r.target_id), p.Text(r.cost_model_version),
                             p.Text(r.graph_hash), p.Text(r.source), p.Text(r.features_version),
                             p.Text(r.features_json), p.Real(r.measured_ns),
                             p.Int(r.measured_unix_ms != 0 ? r.measured_unix_ms : now)));
        }
        return Status::Ok();
      });
}

StatusOr<std::vector<ResidualSampleRow>> PostgresPlanStore::ResidualSamples(
    const ResidualSampleQuery& query) {
  FUSOR_RETURN_IF_ERROR(ValidateResidualSampleQuery(query));
  std::vector<ResidualSampleRow> rows;
  FUSOR_RETURN_IF_ERROR(Read("read the residual samples", [&](pqxx::dbtransaction& txn) -> Status {
    rows.clear();
    Params p;
    std::string sql = fmt::format(
        "SELECT * FROM (SELECT sample_id, graph_hash, source, features_version, features, "
        "measured_ns, measured_unix_ms FROM residual_samples WHERE target_id = {} AND "
        "cost_model_version = {} AND sample_id > {} ORDER BY sample_id DESC LIMIT {}) newest "
        "ORDER BY sample_id",
        p.Text(query.target_id), p.Text(query.cost_model_version), p.Int(query.after_sample_id),
        p.Int(query.max_samples));
    for (const pqxx::row& row : p.Exec(txn, sql)) {
      rows.push_back({row[0].as<int64_t>(), query.target_id, query.cost_model_version,
                      row[1].as<std::string>(), row[2].as<std::string>(), row[3].as<std::string>(),
                      row[4].as<std::string>(), row[5].as<double>(), row[6].as<int64_t>()});
    }
    return Status::Ok();
  }));
  return rows;
}

Status PostgresPlanStore::PutResidual(const StoredResidual& r) {
  FUSOR_RETURN_IF_ERROR(ValidateResidual(r));
  return Write(
      fmt::format("store the residual of target '{}'", r.target_id),
      [&](pqxx::dbtransaction& txn) -> Status {
        FUSOR_RETURN_IF_ERROR(RequireTarget(txn, r.target_id));
        Params p;
        p.Exec(txn, fmt::format("INSERT INTO residuals (target_id, cost_model_version, residual, "
                                "training_samples, last_sample_id, fitted_unix_ms) VALUES ({}, {}, "
                                "{}, {}, {}, {}) ON CONFLICT (target_id) DO UPDATE SET "
                                "cost_model_version = EXCLUDED.cost_model_version, residual = "
                                "EXCLUDED.residual, training_samples = EXCLUDED.training_samples, "
                                "last_sample_id = EXCLUDED.last_sample_id, fitted_unix_ms = "
                                "EXCLUDED.fitted_unix_ms",
                                p.Text(r.target_id), p.Text(r.cost_model_version),
                                p.Text(r.residual_json), p.Int(r.training_samples),
                                p.Int(r.last_sample_id),
                                p.Int(r.fitted_unix_ms != 0 ? r.fitted_unix_ms : NowUnixMs())));
        return Status::Ok();
      });
}

StatusOr<StoredResidual> PostgresPlanStore::GetResidual(std::string_view target_id) {
  std::optional<StoredResidual> found;
  FUSOR_RETURN_IF_ERROR(Read("read a residual", [&](pqxx::dbtransaction& txn) -> Status {
    Params p;
    pqxx::result r = p.Exec(
        txn, fmt::format("SELECT cost_model_version, residual, training_samples, last_sample_id, "
                         "fitted_unix_ms FROM residuals WHERE target_id = {}",
                         p.Text(target_id)));
    if (r.empty()) return Status::Ok();
    found = StoredResidual{std::string(target_id),
                           r[0][0].as<std::string>(),
                           r[0][1].as<std::string>(),
                           r[0][2].as<int64_t>(),
                           r[0][3].as<int64_t>(),
                           r[0][4].as<int64_t>(),
                           name_};
    return Status::Ok();
  }));
  if (!found) {
    return Status::NotFound(
        fmt::format("no learned residual for target '{}' in '{}'", target_id, name_));
  }
  return std::move(*found);
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

// Replicas
// -----------------------------------------------------------------------------------------

StatusOr<std::unique_ptr<PlanKeyLock>> PostgresPlanStore::LockPlanKey(
    const PlanKey& key, const std::atomic<bool>* cancelled) {
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<Connection> connection, NewConnection());
  // The plan key's lock id is the second key of a two-key advisory lock.
  int32_t id = static_cast<int32_t>(PlanKeyLockId(key));
  try {
    for (;;) {
      bool held = false;
      {
        pqxx::nontransaction txn(connection->pq);
        held = txn.exec_params1("SELECT pg_try_advisory_lock($1, $2)", kTuneLock, id)[0].as<bool>();
      }
      if (held)
        return std::unique_ptr<PlanKeyLock>(
            std::make_unique<SessionLock<Connection>>(std::move(connection)));
      if (cancelled != nullptr && cancelled->load()) {
        return Status::Cancelled("cancelled while another replica tuned the same graph");
      }
      // Polled rather than blocking in pg_advisory_lock, so a cancelled wait ends promptly.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception& e) {
    return Status::Unavailable(fmt::format(
        "PostgreSQL database '{}' went away while waiting for another replica's tune of graph {}: "
        "{}",
        name_, ShortHash(key.graph_hash), e.what()));
  }
}

// Measurement agents and jobs
// ----------------------------------------------------------------------

namespace {

// The database server's clock, in Unix milliseconds: every replica judges leases by it.
int64_t DbNowMs(pqxx::dbtransaction& txn) {
  return txn.exec1("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")[0]
      .as<int64_t>();
}

constexpr std::string_view kSelectJob =
    "SELECT job_id, target_id, state, agent_id, lease, lease_expires_unix_ms, created_unix_ms, "
    "finished_unix_ms, job, result FROM measurement_jobs";

StatusOr<MeasurementJobRow> ReadJob(const pqxx::row& r, const std::string& database) {
  MeasurementJobRow j;
  j.job_id = r[0].as<int64_t>();
  j.target_id = r[1].as<std::string>();
  j.state = r[2].as<std::string>();
  j.agent_id = TextOrEmpty(r[3]);
  j.lease = r[4].as<int64_t>();
  j.lease_expires_unix_ms = r[5].as<int64_t>();
  j.created_unix_ms = r[6].as<int64_t>();
  j.finished_unix_ms = r[7].is_null() ? 0 : r[7].as<int64_t>();
  FUSOR_ASSIGN_OR_RETURN(
      j.job, ParseStored<v1::MeasurementJob>(BytesOf(r[8]), "measurement job", database));
  if (!r[9].is_null()) {
    FUSOR_ASSIGN_OR_RETURN(j.result, ParseStored<v1::MeasurementResult>(
                                         BytesOf(r[9]), "measurement result", database));
  }
  FillJobLease(j);
  return j;
}

// The job's row, locked until the transaction ends (`lock`); nullopt when unknown.
StatusOr<std::optional<MeasurementJobRow>> FindJob(pqxx::dbtransaction& txn, int64_t job_id,
                                                   bool lock, const std::string& database) {
  Params p;
  pqxx::result r = p.Exec(txn, fmt::format("{} WHERE job_id = {}{}", kSelectJob, p.Int(job_id),
                                           lock ? " FOR UPDATE" : ""));
  if (r.empty()) return std::optional<MeasurementJobRow>();
  FUSOR_ASSIGN_OR_RETURN(MeasurementJobRow row, ReadJob(r[0], database));
  return std::optional<MeasurementJobRow>(std::move(row));
}

}  // namespace

Status PostgresPlanStore::PutAgent(const AgentRecord& agent) {
  FUSOR_RETURN_IF_ERROR(ValidateAgent(agent));
  return Write(
      fmt::format("register agent '{}'", agent.agent_id), [&](pqxx::dbtransaction& txn) -> Status {
        FUSOR_RETURN_IF_ERROR(RequireTarget(txn, agent.target_id));
        Params p;
        std::string now = p.Int(DbNowMs(txn));
        p.Exec(txn, fmt::format(
                        "INSERT INTO agents (agent_id, target_id, name, "
                        "registered_unix_ms, last_seen_unix_ms) VALUES ({1}, {2}, {3}, {0}, "
                        "{0}) ON CONFLICT (agent_id) DO UPDATE SET target_id = "
                        "excluded.target_id, name = excluded.name, registered_unix_ms = "
                        "excluded.registered_unix_ms, last_seen_unix_ms = "
                        "excluded.last_seen_unix_ms",
                        now, p.Text(agent.agent_id), p.Text(agent.target_id), p.Text(agent.name)));
        return Status::Ok();
      });
}

StatusOr<AgentRecord> PostgresPlanStore::TouchAgent(std::string_view agent_id) {
  std::optional<AgentRecord> agent;
  FUSOR_RETURN_IF_ERROR(Write("note an agent's call", [&](pqxx::dbtransaction& txn) -> Status {
    agent.reset();
    Params p;
    pqxx::result r = p.Exec(
        txn, fmt::format("UPDATE agents SET last_seen_unix_ms = {} WHERE agent_id = {} RETURNING "
                         "agent_id, target_id, name, registered_unix_ms, last_seen_unix_ms",
                         p.Int(DbNowMs(txn)), p.Text(agent_id)));
    if (r.empty()) return Status::Ok();
    agent = AgentRecord{r[0][0].as<std::string>(), r[0][1].as<std::string>(),
                        r[0][2].as<std::string>(), r[0][3].as<int64_t>(), r[0][4].as<int64_t>()};
    return Status::Ok();
  }));
  if (!agent) {
    return Status::NotFound(fmt::format(
        "agent '{}' is not registered in database '{}'; register it (fusor agent does at start)",
        agent_id, name_));
  }
  return *std::move(agent);
}

StatusOr<int64_t> PostgresPlanStore::CountLiveAgents(std::string_view target_id, int64_t live_ms) {
  if (schema_version_ < kAgentsVersion) return 0;
  int64_t live = 0;
  FUSOR_RETURN_IF_ERROR(Read("count live agents", [&](pqxx::dbtransaction& txn) -> Status {
    Params p;
    std::string sql =
        fmt::format("SELECT count(*) FROM agents WHERE target_id = {} AND last_seen_unix_ms >= {}",
                    p.Text(target_id), p.Int(DbNowMs(txn) - live_ms));
    live = p.Exec(txn, sql)[0][0].as<int64_t>();
    return Status::Ok();
  }));
  return live;
}

StatusOr<int64_t> PostgresPlanStore::EnqueueJob(const v1::MeasurementJob& job) {
  FUSOR_RETURN_IF_ERROR(ValidateJob(job));
  int64_t job_id = 0;
  FUSOR_RETURN_IF_ERROR(
      Write(fmt::format("queue a measurement job for target '{}'", job.target_id()),
            [&](pqxx::dbtransaction& txn) -> Status {
              FUSOR_RETURN_IF_ERROR(RequireTarget(txn, job.target_id()));
              Params p;
              std::string sql = fmt::format(
                  "INSERT INTO measurement_jobs (target_id, graph_hash, state, created_unix_ms, "
                  "job) VALUES ({}, {}, {}, {}, {}) RETURNING job_id",
                  p.Text(job.target_id()), p.Text(job.graph_hash()), p.Text(kJobQueued),
                  p.Int(DbNowMs(txn)), p.Bytes(job.SerializeAsString()));
              job_id = p.Exec(txn, sql)[0][0].as<int64_t>();
              return Status::Ok();
            }));
  return job_id;
}

StatusOr<std::optional<MeasurementJobRow>> PostgresPlanStore::LeaseJob(std::string_view target_id,
                                                                       std::string_view agent_id,
                                                                       int64_t lease_ms) {
  FUSOR_RETURN_IF_ERROR(ValidateLease({1, std::string(agent_id), 1}, lease_ms));
  std::optional<MeasurementJobRow> leased;
  FUSOR_RETURN_IF_ERROR(Write("lease a measurement job", [&](pqxx::dbtransaction& txn) -> Status {
    leased.reset();
    int64_t now = DbNowMs(txn);
    Params p;
    std::string sql = fmt::format(
        "SELECT job_id FROM measurement_jobs WHERE target_id = {} AND {} ORDER BY job_id LIMIT 1 "
        "FOR UPDATE SKIP LOCKED",
        p.Text(target_id), LeasableJobSql(p.Int(now)));
    pqxx::result r = p.Exec(txn, sql);
    if (r.empty()) return Status::Ok();
    int64_t job_id = r[0][0].as<int64_t>();
    Params u;
    u.Exec(txn,
           fmt::format("UPDATE measurement_jobs SET state = {}, agent_id = {}, lease = "
                       "lease + 1, lease_expires_unix_ms = {} WHERE job_id = {}",
                       u.Text(kJobLeased), u.Text(agent_id), u.Int(now + lease_ms), u.Int(job_id)));
    FUSOR_ASSIGN_OR_RETURN(leased, FindJob(txn, job_id, false, name_));
    return Status::Ok();
  }));
  return leased;
}

StatusOr<int64_t> PostgresPlanStore::RenewLease(const JobLease& lease, int64_t lease_ms) {
  FUSOR_RETURN_IF_ERROR(ValidateLease(lease, lease_ms));
  int64_t expires = 0;
  FUSOR_RETURN_IF_ERROR(
      Write(fmt::format("renew the lease of measurement job {}", lease.job_id),
            [&](pqxx::dbtransaction& txn) -> Status {
              FUSOR_ASSIGN_OR_RETURN(std::optional<MeasurementJobRow> row,
                                     FindJob(txn, lease.job_id, true, name_));
              if (!row) return UnknownJob(lease.job_id, name_);
              FUSOR_RETURN_IF_ERROR(CheckHoldsLease(lease, *row, name_));
              expires = DbNowMs(txn) + lease_ms;
              Params p;
              p.Exec(txn, fmt::format("UPDATE measurement_jobs SET lease_expires_unix_ms = {} "
                                      "WHERE job_id = {}",
                                      p.Int(expires), p.Int(lease.job_id)));
              return Status::Ok();
            }));
  return expires;
}

Status PostgresPlanStore::FinishJob(const JobLease& lease, const v1::MeasurementResult& result) {
  FUSOR_RETURN_IF_ERROR(ValidateLease(lease, 1));
  return Write(fmt::format("store the result of measurement job {}", lease.job_id),
               [&](pqxx::dbtransaction& txn) -> Status {
                 FUSOR_ASSIGN_OR_RETURN(std::optional<MeasurementJobRow> row,
                                        FindJob(txn, lease.job_id, true, name_));
                 if (!row) return UnknownJob(lease.job_id, name_);
                 FUSOR_RETURN_IF_ERROR(CheckHoldsLease(lease, *row, name_));
                 Params p;
                 p.Exec(txn, fmt::format("UPDATE measurement_jobs SET state = {}, result = {}, "
                                         "finished_unix_ms = {} WHERE job_id = {}",
                                         p.Text(kJobDone), p.Bytes(result.SerializeAsString()),
                                         p.Int(DbNowMs(txn)), p.Int(lease.job_id)));
                 return Status::Ok();
               });
}

Status PostgresPlanStore::CancelJob(int64_t job_id) {
  return Write(
      fmt::format("cancel measurement job {}", job_id), [&](pqxx::dbtransaction& txn) -> Status {
        FUSOR_ASSIGN_OR_RETURN(std::optional<MeasurementJobRow> row,
                               FindJob(txn, job_id, true, name_));
        if (!row) return UnknownJob(job_id, name_);
        if (row->state == kJobDone) return Status::Ok();
        Params p;
        p.Exec(txn, fmt::format("UPDATE measurement_jobs SET state = {}, "
                                "finished_unix_ms = {} WHERE job_id = {}",
                                p.Text(kJobCancelled), p.Int(DbNowMs(txn)), p.Int(job_id)));
        return Status::Ok();
      });
}

StatusOr<int64_t> PostgresPlanStore::PruneJobs(int64_t older_than_ms) {
  FUSOR_RETURN_IF_ERROR(ValidatePruneAge(older_than_ms));
  int64_t pruned = 0;
  FUSOR_RETURN_IF_ERROR(
      Write("prune finished measurement jobs", [&](pqxx::dbtransaction& txn) -> Status {
        Params p;
        pruned =
            static_cast<int64_t>(p.Exec(txn, fmt::format("DELETE FROM measurement_jobs WHERE "
                                                         "state IN ({}, {}) AND "
                                                         "finished_unix_ms < {}",
                                                         p.Text(kJobDone), p.Text(kJobCancelled),
                                                         p.Int(DbNowMs(txn) - older_than_ms)))
                                     .affected_rows());
        return Status::Ok();
      }));
  return pruned;
}

StatusOr<AgentListing> PostgresPlanStore::ListAgents() {
  AgentListing listing;
  FUSOR_RETURN_IF_ERROR(Read("list agents", [&](pqxx::dbtransaction& txn) -> Status {
    listing.now_unix_ms = DbNowMs(txn);
    if (schema_version_ < kAgentsVersion) return Status::Ok();
    for (const pqxx::row& r :
         txn.exec("SELECT agent_id, target_id, name, registered_unix_ms, last_seen_unix_ms FROM "
                  "agents ORDER BY last_seen_unix_ms DESC, agent_id")) {
      listing.agents.push_back({r[0].as<std::string>(), r[1].as<std::string>(),
                                r[2].as<std::string>(), r[3].as<int64_t>(), r[4].as<int64_t>()});
    }
    return Status::Ok();
  }));
  return listing;
}

StatusOr<JobListing> PostgresPlanStore::ListJobs(bool include_finished) {
  JobListing listing;
  FUSOR_RETURN_IF_ERROR(Read("list measurement jobs", [&](pqxx::dbtransaction& txn) -> Status {
    listing.now_unix_ms = DbNowMs(txn);
    if (schema_version_ < kAgentsVersion) return Status::Ok();
    std::string sql = fmt::format("{}{} ORDER BY job_id", kSelectJob,
                                  include_finished ? "" : " WHERE state IN ('queued', 'leased')");
    for (const pqxx::row& r : txn.exec(sql)) {
      FUSOR_ASSIGN_OR_RETURN(listing.jobs.emplace_back(), ReadJob(r, name_));
    }
    return Status::Ok();
  }));
  return listing;
}

StatusOr<MeasurementJobRow> PostgresPlanStore::GetJob(int64_t job_id) {
  if (schema_version_ < kAgentsVersion) return UnknownJob(job_id, name_);
  std::optional<MeasurementJobRow> found;
  FUSOR_RETURN_IF_ERROR(Read("read a measurement job", [&](pqxx::dbtransaction& txn) -> Status {
    FUSOR_ASSIGN_OR_RETURN(found, FindJob(txn, job_id, false, name_));
    return Status::Ok();
  }));
  if (!found) return UnknownJob(job_id, name_);
  return *std::move(found);
}

}  // namespace fusor::db
