// What the PostgreSQL store's files (postgres_*.cc) share: the parameters of a statement
// (Params), readers of result fields, the advisory-lock classes and the pooled connection.
// Internal to db/. A Params or a connection is used by one thread at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/fmt/fmt.h>
#include <pqxx/pqxx>

#include "db/postgres_plan_store.h"

namespace fusor::db {

struct PostgresPlanStore::Connection {
  explicit Connection(const std::string& uri) : pq(uri) {}
  pqxx::connection pq;
};

// Advisory lock classes (the first key of PostgreSQL's two-key advisory locks), so Fusor's locks
// keep apart from each other and from other applications' single-key locks.
inline constexpr int32_t kMigrationLock = 0x46555300;  // "FUS\0": one migration at a time.
inline constexpr int32_t kTuneLock = 0x46555301;       // LockPlanKey: one search per plan key.
inline constexpr int32_t kPutPlanLock = 0x46555302;  // PutPlan: one writer per plan key at a time.

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

inline std::string BytesOf(const pqxx::field& field) { return pqxx::binarystring(field).str(); }
inline double RealOr0(const pqxx::field& field) { return field.is_null() ? 0 : field.as<double>(); }
inline std::string TextOrEmpty(const pqxx::field& field) {
  return field.is_null() ? std::string() : field.as<std::string>();
}

}  // namespace fusor::db
