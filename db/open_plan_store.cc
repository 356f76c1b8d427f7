#include "db/open_plan_store.h"

#include <spdlog/fmt/fmt.h>

#include "db/postgres_plan_store.h"
#include "db/sqlite_plan_store.h"

namespace fusor::db {
namespace {

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// Replaces the value of `password=` in a URI's query, up to the next '&'.
void RedactQueryPassword(std::string& text) {
  for (size_t at = text.find("password="); at != std::string::npos;
       at = text.find("password=", at + 1)) {
    size_t value = at + 9;
    size_t end = std::min(text.find('&', value), text.size());
    text.replace(value, end - value, "***");
  }
}

}  // namespace

StatusOr<StoreLocation> ParseStoreLocation(std::string_view location) {
  if (location.empty()) {
    return Status::InvalidArgument(
        "empty database location; give a SQLite file path, sqlite:PATH or postgresql://...");
  }
  if (StartsWith(location, "postgresql://") || StartsWith(location, "postgres://")) {
    return StoreLocation{StoreLocation::Kind::kPostgres, std::string(location)};
  }
  if (StartsWith(location, "sqlite:")) {
    std::string_view path = location.substr(7);
    if (path.empty()) {
      return Status::InvalidArgument("database location 'sqlite:' names no file; use sqlite:PATH");
    }
    return StoreLocation{StoreLocation::Kind::kSqlite, std::string(path)};
  }
  return StoreLocation{StoreLocation::Kind::kSqlite, std::string(location)};
}

std::string RedactedLocation(std::string_view location) {
  std::string text(location);
  size_t scheme = text.find("://");
  if (scheme == std::string::npos) return text;
  size_t authority = scheme + 3;
  size_t end = std::min(text.find_first_of("/?", authority), text.size());
  size_t at = text.rfind('@', end);
  if (at != std::string::npos && at > authority) {
    size_t colon = text.find(':', authority);
    if (colon != std::string::npos && colon < at) text.replace(colon + 1, at - colon - 1, "***");
  }
  RedactQueryPassword(text);
  return text;
}

StatusOr<std::unique_ptr<TuningDatabase>> OpenTuningDatabase(std::string_view location,
                                                             StoreOpenOptions options) {
  FUSOR_ASSIGN_OR_RETURN(StoreLocation parsed, ParseStoreLocation(location));
  if (parsed.kind == StoreLocation::Kind::kPostgres) {
    FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<PostgresPlanStore> store,
                           PostgresPlanStore::Open(parsed.target, {options.read_only}));
    return std::unique_ptr<TuningDatabase>(std::move(store));
  }
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<SqlitePlanStore> store,
                         SqlitePlanStore::Open(parsed.target, {options.read_only}));
  return std::unique_ptr<TuningDatabase>(std::move(store));
}

StatusOr<std::unique_ptr<PlanStore>> OpenPlanStore(std::string_view location,
                                                   StoreOpenOptions options) {
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<TuningDatabase> database,
                         OpenTuningDatabase(location, options));
  return std::unique_ptr<PlanStore>(std::move(database));
}

}  // namespace fusor::db
