// PostgresPlanStore's connections: the pool, one transaction per call, and how libpqxx's
// exceptions and a server that went away become a Status (postgres_plan_store.h).
#include <memory>
#include <mutex>

#include <spdlog/spdlog.h>

#include "db/postgres_plan_store.h"
#include "db/postgres_sql.h"

namespace fusor::db {
namespace {

// SQLSTATE classes that mean the server went away or cannot serve yet: connection exceptions
// (08), operator intervention such as a shutdown (57P01-57P03).
bool IsConnectionState(const std::string& sqlstate) {
  return sqlstate.rfind("08", 0) == 0 || sqlstate == "57P01" || sqlstate == "57P02" ||
         sqlstate == "57P03";
}

// The URI with a connect timeout, so an unreachable host fails a call instead of hanging it.
std::string WithConnectTimeout(const std::string& uri) {
  if (uri.find("connect_timeout=") != std::string::npos) return uri;
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + "connect_timeout=5";
}

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

}  // namespace fusor::db
