#include "db/schema.h"

#include <array>
#include <chrono>
#include <string_view>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

namespace fusor::db {
namespace {

// Schema version 4 = version 1 plus calibration_samples (2), measurement agents and jobs (3),
// residual_samples and residuals (4).
// Times are milliseconds since the Unix epoch (UTC); durations are nanoseconds; protos are
// serialized fusor.v1 messages. Columns beside a proto repeat its fields so that people (sqlite3
// shell) and indexes can use them; the proto is what readers return.
//
//   meta            key/value facts about the file ('created_unix_ms'; for a deployment
//                   snapshot 'snapshot_of_target' and 'snapshot_exported_unix_ms').
//   targets         one row per CPU fingerprint with its latest calibrated HardwareProfile; plans
//                   created before calibrated_unix_ms are stale.
//   graphs          one row per canonical graph hash with the fusor.v1.Graph.
//   plans           one row per (graph, target, cost-model version, search options).
//                   measured_ns and unfused_measured_ns are NULL when not measured; speedup is
//                   unfused over fused time, measured when both were measured, else predicted.
//   measurements    samples behind a plan (group_id NULL) or one of its groups; deleted with it.
//   tuning_history  append-only log of what happened to plans and targets.
//   calibration_samples  (version 2) append-only log of calibration micro-benchmarks, one row per
//                   benchmark per calibration run; see kSchemaV2.
//   agents, measurement_jobs  (version 3) measurement agents and the queue of jobs they lease;
//                   measurements.agent_id names the agent that timed a measurement; see kSchemaV3.
//   residual_samples  (version 4) append-only log of what tunes timed, with the learned
//                   residual's features; residuals: each target's fitted residual. See kSchemaV4.
constexpr std::string_view kSchemaV1 = R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE targets (
  target_id          TEXT PRIMARY KEY,   -- TargetFingerprint.id
  cpu_model          TEXT NOT NULL,
  isa                TEXT NOT NULL,      -- ISA oneDNN dispatches to, e.g. avx2
  cores              INTEGER NOT NULL,
  onednn_version     TEXT NOT NULL,
  cost_model_version TEXT NOT NULL,      -- cost model the profile's constants were fitted for
  calibrated_unix_ms INTEGER NOT NULL,   -- latest calibration; older plans are stale
  fingerprint        BLOB NOT NULL,      -- fusor.v1.TargetFingerprint
  profile            BLOB NOT NULL,      -- fusor.v1.HardwareProfile
  updated_unix_ms    INTEGER NOT NULL
);

CREATE TABLE graphs (
  graph_hash      TEXT PRIMARY KEY CHECK (length(graph_hash) = 64),  -- canonical SHA-256, hex
  model_name      TEXT NOT NULL,
  node_count      INTEGER NOT NULL,
  graph           BLOB NOT NULL,         -- fusor.v1.Graph
  created_unix_ms INTEGER NOT NULL
);
CREATE INDEX graphs_by_model ON graphs (model_name);

CREATE TABLE plans (
  plan_id              INTEGER PRIMARY KEY,
  graph_hash           TEXT NOT NULL REFERENCES graphs (graph_hash),
  target_id            TEXT NOT NULL REFERENCES targets (target_id),
  cost_model_version   TEXT NOT NULL,
  search_options       TEXT NOT NULL,    -- canonical text of the search options
  plan                 BLOB NOT NULL,    -- fusor.v1.Plan
  predicted_ns         REAL NOT NULL,
  measured_ns          REAL,             -- NULL: not measured
  unfused_predicted_ns REAL,
  unfused_measured_ns  REAL,
  speedup              REAL,             -- unfused / fused; NULL when unknown
  group_count          INTEGER NOT NULL,
  peak_memory_bytes    INTEGER NOT NULL,
  created_unix_ms      INTEGER NOT NULL,
  UNIQUE (graph_hash, target_id, cost_model_version, search_options)
);
CREATE INDEX plans_by_target ON plans (target_id, graph_hash);
CREATE INDEX plans_by_created
  ON plans (created_unix_ms DESC, graph_hash, target_id, cost_model_version, search_options);

CREATE TABLE measurements (
  measurement_id   INTEGER PRIMARY KEY,
  plan_id          INTEGER NOT NULL REFERENCES plans (plan_id) ON DELETE CASCADE,
  group_id         INTEGER,              -- FusionGroup.id; NULL: the whole plan
  samples          TEXT NOT NULL,        -- JSON array of sample times in ns
  sample_count     INTEGER NOT NULL,
  median_ns        REAL NOT NULL,
  spread           REAL NOT NULL,        -- interquartile range / median
  measured_unix_ms INTEGER NOT NULL
);
CREATE INDEX measurements_by_plan ON measurements (plan_id);

CREATE TABLE tuning_history (
  event_id           INTEGER PRIMARY KEY,
  at_unix_ms         INTEGER NOT NULL,
  event              TEXT NOT NULL CHECK (event IN
                       ('stored', 'replaced', 'imported', 'deleted', 'expired', 'calibrated')),
  graph_hash         TEXT,               -- NULL for target events
  target_id          TEXT NOT NULL,
  cost_model_version TEXT,
  search_options     TEXT,
  predicted_ns       REAL,
  measured_ns        REAL,
  detail             TEXT NOT NULL DEFAULT ''
);
CREATE INDEX history_by_graph ON tuning_history (graph_hash, target_id);
)sql";

// Version 2: the calibration log. Fits are rerun over every sample so far, so the samples are kept,
// never updated or deleted. features is the JSON object the cost model wrote for the benchmark's
// group (costmodel SampleToJson); db/ does not read it. Features are computed by one cost-model
// version and mean nothing to another, so readers select by cost_model_version. run_id numbers the
// calibration runs of this file in order (1 + the largest so far).
constexpr std::string_view kSchemaV2 = R"sql(
CREATE TABLE calibration_samples (
  sample_id          INTEGER PRIMARY KEY,
  target_id          TEXT NOT NULL REFERENCES targets (target_id),
  cost_model_version TEXT NOT NULL,      -- cost model that computed the features
  run_id             INTEGER NOT NULL,   -- calibration run, local to this file
  run_unix_ms        INTEGER NOT NULL,   -- when the run measured
  benchmark          TEXT NOT NULL,      -- micro-benchmark name, e.g. stream_relu_16KiB
  features           TEXT NOT NULL,      -- JSON object: the group's features (SampleToJson)
  measured_ns        REAL NOT NULL,      -- median time
  cv                 REAL NOT NULL       -- coefficient of variation of the timing
);
CREATE INDEX calibration_samples_by_run
  ON calibration_samples (target_id, cost_model_version, run_id);
)sql";

// Version 3: measurement agents (`fusor agent`) and their job queue. An agent row is one agent
// process of a target, heard from at last_seen_unix_ms (live while recent). A job is the plans of
// one Tune to time on an agent of its target: queued, leased to agent_id until
// lease_expires_unix_ms (lease counts the leases; an expired lease may be taken by another
// agent, and only the agent holding the current lease may renew it or report), done (result
// holds the timings, agent_id who reported) or cancelled. measurements.agent_id is the agent that
// timed a measurement, NULL when fusord timed it itself.
constexpr std::string_view kSchemaV3 = R"sql(
ALTER TABLE measurements ADD COLUMN agent_id TEXT;
CREATE TABLE agents (
  agent_id           TEXT PRIMARY KEY,
  target_id          TEXT NOT NULL REFERENCES targets (target_id),
  name               TEXT NOT NULL,      -- what the agent calls itself (its host)
  registered_unix_ms INTEGER NOT NULL,
  last_seen_unix_ms  INTEGER NOT NULL    -- its latest call
);
CREATE INDEX agents_by_target ON agents (target_id, last_seen_unix_ms);
CREATE TABLE measurement_jobs (
  job_id                INTEGER PRIMARY KEY,
  target_id             TEXT NOT NULL REFERENCES targets (target_id),
  graph_hash            TEXT NOT NULL,
  state                 TEXT NOT NULL CHECK (state IN ('queued', 'leased', 'done', 'cancelled')),
  agent_id              TEXT,              -- the holder while leased; who reported when done
  lease                 INTEGER NOT NULL DEFAULT 0,  -- times leased
  lease_expires_unix_ms INTEGER NOT NULL DEFAULT 0,
  created_unix_ms       INTEGER NOT NULL,
  finished_unix_ms      INTEGER,           -- reported or cancelled
  job                   BLOB NOT NULL,     -- fusor.v1.MeasurementJob: graph, plans, timing
  result                BLOB               -- fusor.v1.MeasurementResult, when done
);
CREATE INDEX measurement_jobs_by_target ON measurement_jobs (target_id, state, job_id);
)sql";

// Version 4: the learned residual (costmodel/residual.h). residual_samples keeps every plan and
// region a tune timed stably, with each group's analytical prediction and features as JSON
// (costmodel ResidualSampleToJson; db/ does not read it). features_version names the features'
// layout (ResidualFeaturesVersion): a row of another layout is skipped by the reader, never
// misread. residuals holds each target's latest fit (costmodel ResidualToJson), the cost model it
// corrects, its training set's size and the newest sample it saw (later samples are new to it).
constexpr std::string_view kSchemaV4 = R"sql(
CREATE TABLE residual_samples (
  sample_id          INTEGER PRIMARY KEY,
  target_id          TEXT NOT NULL REFERENCES targets (target_id),
  cost_model_version TEXT NOT NULL,      -- cost model that predicted and computed the features
  graph_hash         TEXT NOT NULL,      -- graph tuned (a region's: the graph it was cut from)
  source             TEXT NOT NULL,      -- 'plan', or 'region Conv+Relu' and the like
  features_version   TEXT NOT NULL,      -- layout of the features, e.g. f29-0123456789ab
  features           TEXT NOT NULL,      -- JSON: per group predicted ns and features
  measured_ns        REAL NOT NULL,      -- median time of the whole plan or region
  measured_unix_ms   INTEGER NOT NULL
);
CREATE INDEX residual_samples_by_target
  ON residual_samples (target_id, cost_model_version, sample_id);

CREATE TABLE residuals (
  target_id          TEXT PRIMARY KEY REFERENCES targets (target_id),
  cost_model_version TEXT NOT NULL,      -- cost model the residual corrects
  residual           TEXT NOT NULL,      -- JSON fusor.residual.v1
  training_samples   INTEGER NOT NULL,
  last_sample_id     INTEGER NOT NULL,   -- newest residual_samples row the fit saw
  fitted_unix_ms     INTEGER NOT NULL
);
)sql";

// kMigrations[i] takes a database from version i to version i + 1. Never edit a released one.
constexpr std::array<std::string_view, kSchemaVersion> kMigrations = {kSchemaV1, kSchemaV2,
                                                                      kSchemaV3, kSchemaV4};

struct FileFacts {
  int64_t version = 0;
  int64_t application_id = 0;
  int64_t objects = 0;  // Tables, indexes, views in sqlite_schema.
};

Status QuickCheck(SqliteConnection& connection) {
  FUSOR_ASSIGN_OR_RETURN(StatementLease check, connection.Prepare("PRAGMA quick_check(1)"));
  FUSOR_ASSIGN_OR_RETURN(bool row, check->Step());
  std::string verdict = row ? check->Text(0) : "no result";
  if (verdict == "ok") return Status::Ok();
  return Status::Corruption(
      fmt::format("database '{}' is corrupt (quick_check: {}); restore it from a backup or move "
                  "it aside to start a new one",
                  connection.path(), verdict));
}

// In one read transaction: read one by one, another process creating the schema could commit
// between the reads (version and application_id 0 read before its commit, its tables after), and
// a file being created would look like another application's database.
StatusOr<FileFacts> ReadFacts(SqliteConnection& connection) {
  FileFacts facts;
  FUSOR_ASSIGN_OR_RETURN(Transaction snapshot, Transaction::BeginRead(connection));
  FUSOR_ASSIGN_OR_RETURN(facts.version, connection.QueryInt("PRAGMA user_version"));
  FUSOR_ASSIGN_OR_RETURN(facts.application_id, connection.QueryInt("PRAGMA application_id"));
  FUSOR_ASSIGN_OR_RETURN(facts.objects, connection.QueryInt("SELECT count(*) FROM sqlite_schema"));
  return facts;
}

Status CheckOwnership(const SqliteConnection& connection, const FileFacts& facts) {
  bool fresh = facts.application_id == 0 && facts.version == 0 && facts.objects == 0;
  if (facts.application_id == kApplicationId || fresh) return Status::Ok();
  return Status::FailedPrecondition(
      fmt::format("database '{}' is a SQLite database of another application (application_id "
                  "{:#x}), not a Fusor tuning database; pass a different --db",
                  connection.path(), facts.application_id));
}

Status CheckVersion(const SqliteConnection& connection, const FileFacts& facts) {
  if (facts.version > kSchemaVersion) {
    return Status::FailedPrecondition(
        fmt::format("database '{}' has schema version {}, this fusor understands up to {}; "
                    "upgrade fusor",
                    connection.path(), facts.version, kSchemaVersion));
  }
  if (facts.version == 0 && connection.read_only()) {
    return Status::FailedPrecondition(
        fmt::format("database '{}' is empty, not a Fusor tuning database yet; name an existing "
                    "tuning database, or open it writable to create one",
                    connection.path()));
  }
  // An older file opened read-only is read as it is (a deployed snapshot is never migrated); what
  // later versions added reads as empty.
  return Status::Ok();
}

StatusOr<std::string> ReadSnapshotMarker(SqliteConnection& connection) {
  FUSOR_ASSIGN_OR_RETURN(StatementLease read,
                         connection.Prepare("SELECT value FROM meta WHERE key = ?"));
  FUSOR_RETURN_IF_ERROR(read->Bind({std::string("snapshot_of_target")}));
  FUSOR_ASSIGN_OR_RETURN(bool row, read->Step());
  return row ? read->Text(0) : std::string();
}

StatusOr<std::string> JournalMode(SqliteConnection& connection, std::string_view pragma) {
  FUSOR_ASSIGN_OR_RETURN(StatementLease mode, connection.Prepare(pragma));
  FUSOR_ASSIGN_OR_RETURN(bool row, mode->Step());
  return row ? mode->Text(0) : std::string();
}

Status UseWriteAheadLog(SqliteConnection& connection) {
  FUSOR_ASSIGN_OR_RETURN(std::string mode, JournalMode(connection, "PRAGMA journal_mode"));
  if (mode == "wal") return Status::Ok();
  FUSOR_ASSIGN_OR_RETURN(mode, JournalMode(connection, "PRAGMA journal_mode = WAL"));
  if (mode == "wal") return Status::Ok();
  return Status::FailedPrecondition(
      fmt::format("database '{}': cannot switch to write-ahead logging (journal mode stays '{}'); "
                  "put the database on a local file system",
                  connection.path(), mode));
}

// Applies the missing migrations in one transaction; another process may have done it first.
StatusOr<int> Migrate(SqliteConnection& connection) {
  FUSOR_ASSIGN_OR_RETURN(Transaction txn, Transaction::BeginWrite(connection));
  FUSOR_ASSIGN_OR_RETURN(int64_t version, connection.QueryInt("PRAGMA user_version"));
  if (version >= kSchemaVersion) return static_cast<int>(version);
  for (int64_t v = version; v < kSchemaVersion; ++v) {
    FUSOR_RETURN_IF_ERROR(connection.ExecuteScript(kMigrations[v]));
  }
  FUSOR_RETURN_IF_ERROR(connection.ExecuteScript(fmt::format(
      "PRAGMA user_version = {}; PRAGMA application_id = {};", kSchemaVersion, kApplicationId)));
  if (version == 0) {
    int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    FUSOR_RETURN_IF_ERROR(
        connection.Execute("INSERT INTO meta (key, value) VALUES (?, ?)",
                           {std::string("created_unix_ms"), std::to_string(now)}));
  }
  FUSOR_RETURN_IF_ERROR(txn.Commit());
  spdlog::info("db: migrated '{}' from schema version {} to {}", connection.path(), version,
               kSchemaVersion);
  return static_cast<int>(version);
}

}  // namespace

StatusOr<SchemaInfo> PrepareSchema(SqliteConnection& connection) {
  FUSOR_RETURN_IF_ERROR(QuickCheck(connection));
  FUSOR_ASSIGN_OR_RETURN(FileFacts facts, ReadFacts(connection));
  FUSOR_RETURN_IF_ERROR(CheckOwnership(connection, facts));
  FUSOR_RETURN_IF_ERROR(CheckVersion(connection, facts));
  SchemaInfo info{static_cast<int>(facts.version), static_cast<int>(facts.version), ""};
  if (facts.version >= 1) {
    FUSOR_ASSIGN_OR_RETURN(info.snapshot_of_target, ReadSnapshotMarker(connection));
  }
  if (connection.read_only()) return info;
  if (!info.snapshot_of_target.empty()) {
    return Status::FailedPrecondition(fmt::format(
        "database '{}' is a read-only deployment snapshot of target '{}'; query it read-only, or "
        "merge it into a writable database with `fusor db import`",
        connection.path(), info.snapshot_of_target));
  }
  FUSOR_RETURN_IF_ERROR(UseWriteAheadLog(connection));
  if (facts.version < kSchemaVersion) {
    FUSOR_ASSIGN_OR_RETURN(info.migrated_from, Migrate(connection));
    info.version = kSchemaVersion;
  }
  return info;
}

Status MarkSnapshot(SqliteConnection& connection, const std::string& target_id,
                    int64_t exported_unix_ms) {
  {
    FUSOR_ASSIGN_OR_RETURN(Transaction txn, Transaction::BeginWrite(connection));
    constexpr std::string_view kPut = "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)";
    FUSOR_RETURN_IF_ERROR(connection.Execute(kPut, {std::string("snapshot_of_target"), target_id}));
    FUSOR_RETURN_IF_ERROR(connection.Execute(
        kPut, {std::string("snapshot_exported_unix_ms"), std::to_string(exported_unix_ms)}));
    FUSOR_RETURN_IF_ERROR(txn.Commit());
  }
  FUSOR_ASSIGN_OR_RETURN(std::string mode, JournalMode(connection, "PRAGMA journal_mode = DELETE"));
  if (mode != "delete") {
    return Status::Internal(
        fmt::format("database '{}': cannot leave write-ahead logging (journal mode stays '{}')",
                    connection.path(), mode));
  }
  return Status::Ok();
}

}  // namespace fusor::db
