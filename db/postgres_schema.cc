// PostgresPlanStore's schema and its migration: opening a database checks that it is Fusor's (or
// empty) and, when writable, migrates it to kSchemaVersion under an advisory lock, so replicas
// starting together migrate once.
#include <array>

#include <spdlog/spdlog.h>

#include "db/open_plan_store.h"
#include "db/postgres_plan_store.h"
#include "db/postgres_sql.h"
#include "db/schema.h"
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

}  // namespace

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

}  // namespace fusor::db
