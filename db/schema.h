// The tuning database's schema: its version, the migrations that reach it, and the checks every
// open runs. The schema itself (tables, columns, what they mean) is documented in schema.cc next to
// the SQL that creates it, and for people with the sqlite3 shell in docs/database.md.
//
// Versioning: PRAGMA user_version holds the schema version and PRAGMA application_id marks the file
// as Fusor's. Migration N takes a database from version N-1 to N inside one BEGIN IMMEDIATE
// transaction, so a crash leaves either the old or the new version, never half of one. Functions
// here take a connection the caller owns and uses from one thread.
//
// A read-only open does not migrate: it reads a file of any older version as it is, so readers
// check SchemaInfo::version before touching a table a later version added (calibration_samples:
// version 2; agents, measurement_jobs: version 3; residual_samples, residuals: version 4) and treat
// it as empty. Every migration must keep that possible, i.e. only add tables, columns and indexes.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "db/sqlite_connection.h"

namespace fusor::db {

inline constexpr int kSchemaVersion = 4;
// The first version with the calibration_samples table.
inline constexpr int kCalibrationLogVersion = 2;
// The first version with measurement agents and jobs (agents, measurement_jobs,
// measurements.agent_id).
inline constexpr int kAgentsVersion = 3;
// The first version with the residual_samples and residuals tables.
inline constexpr int kResidualLogVersion = 4;
inline constexpr int32_t kApplicationId = 0x46555352;  // "FUSR"

// What an opened database is.
struct SchemaInfo {
  int version = 0;
  int migrated_from = 0;           // Version before this open; equals version when unchanged.
  std::string snapshot_of_target;  // Non-empty for an exported deployment snapshot.
};

// Checks the file behind connection and, when writable, brings it to kSchemaVersion in WAL mode.
// Errors name the file: not SQLite or damaged (PRAGMA quick_check) is Corruption; another
// application's database, a newer schema ("upgrade fusor"), a snapshot opened for writing, or an
// empty file opened read-only are FailedPrecondition.
StatusOr<SchemaInfo> PrepareSchema(SqliteConnection& connection);

// Marks the database as a read-only deployment snapshot of target_id and switches it from WAL to a
// rollback journal, so the single file is complete and opens on read-only media.
Status MarkSnapshot(SqliteConnection& connection, const std::string& target_id,
                    int64_t exported_unix_ms);

}  // namespace fusor::db
