// OpenTuningDatabase: the one place a store location becomes a tuning database, used by fusord
// (--db and the db_path config key) and the CLI's local mode; OpenPlanStore opens its plans alone,
// for `fusor db` and the readers of stored plans. A location is
//   path.db | sqlite:path            a SQLite file (the embedded default; created when missing)
//   postgresql://... | postgres://...  a PostgreSQL database (libpq connection URI), shared by
//                                    fusord replicas
// Redacted() is the location as logs and messages show it: a password in the URI is never shown.
// Functions are safe from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "db/tuning_database.h"

namespace fusor::db {

struct StoreLocation {
  enum class Kind { kSqlite, kPostgres };
  Kind kind = Kind::kSqlite;
  std::string target;  // The SQLite file path, or the PostgreSQL connection URI.
};

// InvalidArgument for an empty location or an empty SQLite path after "sqlite:".
StatusOr<StoreLocation> ParseStoreLocation(std::string_view location);

// The location with any password (user:password@ or password=...) replaced by "***".
std::string RedactedLocation(std::string_view location);

struct StoreOpenOptions {
  // Queries only: nothing is written, not even a migration. Writes fail with FailedPrecondition.
  bool read_only = false;
};

// Opens (creating and migrating when writable) the database at location.
StatusOr<std::unique_ptr<TuningDatabase>> OpenTuningDatabase(std::string_view location,
                                                             StoreOpenOptions options = {});
// OpenTuningDatabase, seen as its plans.
StatusOr<std::unique_ptr<PlanStore>> OpenPlanStore(std::string_view location,
                                                   StoreOpenOptions options = {});

}  // namespace fusor::db
