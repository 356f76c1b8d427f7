// A thin RAII layer over the SQLite C API. SqliteConnection owns one sqlite3 handle and a cache of
// its prepared statements; a StatementLease lends one statement for one use and resets it when it
// goes out of scope; Transaction is BEGIN IMMEDIATE (write) or BEGIN (read) that rolls back unless
// committed. SQLite result codes become Status values that name the database file.
//
// Busy handling: every connection has a busy timeout, and statements that can meet a lock held by
// another connection (BEGIN IMMEDIATE, COMMIT, pragmas, the first step of a read) are retried with
// backoff until kBusyDeadline, so SQLITE_BUSY never reaches a caller; past the deadline the caller
// gets Unavailable.
//
// Ownership: a connection must outlive its leases and transactions. Thread safety: a connection and
// everything it lends may be used by one thread at a time (connections are opened without SQLite's
// own mutex); SqlitePlanStore gives each thread its own connection from a pool. A connection must
// not be used across fork().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "base/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace fusor::db {

// Bytes bound as a BLOB (a std::string binds as TEXT).
struct Blob {
  std::string bytes;
};

// A value bound to a statement parameter; std::monostate binds NULL.
using SqlValue = std::variant<std::monostate, int64_t, double, std::string, Blob>;

// How long a statement keeps retrying while another connection holds the lock it needs.
inline constexpr std::chrono::milliseconds kBusyDeadline{60'000};
// The SQLite busy timeout of every connection; retries go on past it until kBusyDeadline.
inline constexpr std::chrono::milliseconds kBusyTimeout{5'000};

class SqliteConnection;

// One prepared statement. Owned by its connection's cache (or by a lease, when the cached one is
// already lent out).
class Statement {
 public:
  Statement(SqliteConnection* connection, sqlite3_stmt* stmt);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds values to parameters 1..n.
  Status Bind(std::initializer_list<SqlValue> values);
  Status Bind(const std::vector<SqlValue>& values);
  Status BindAt(int index, const SqlValue& value);
  // Advances to the next row: true when a row is ready, false when the statement is done.
  StatusOr<bool> Step();
  // Steps until done, for statements whose rows (if any) are not wanted.
  Status Run();
  // Resets for another use and clears bindings.
  void Reset();

  int64_t Int(int column) const;
  double Double(int column) const;
  std::optional<double> OptionalDouble(int column) const;  // nullopt for NULL.
  std::string Text(int column) const;
  std::string Bytes(int column) const;  // A BLOB column's bytes.
  bool IsNull(int column) const;

 private:
  friend class StatementLease;
  friend class SqliteConnection;
  SqliteConnection* connection_;
  sqlite3_stmt* stmt_;
  bool stepped_ = false;  // A step has run since the last reset (no busy retry after that).
  bool lent_ = false;     // A lease holds this cached statement now.
};

// One use of a statement. Resets (and returns) a cached statement on destruction.
class StatementLease {
 public:
  explicit StatementLease(Statement* cached);
  explicit StatementLease(std::unique_ptr<Statement> owned);
  StatementLease(StatementLease&& other) noexcept;
  StatementLease& operator=(StatementLease&&) = delete;
  ~StatementLease();

  Statement* operator->() const { return stmt_; }
  Statement& operator*() const { return *stmt_; }

 private:
  Statement* stmt_;
  std::unique_ptr<Statement> owned_;
};

class SqliteConnection {
 public:
  // Opens path read-write (creating it) or read-only (it must exist). Sets the busy timeout,
  // foreign keys on and synchronous=FULL; read-only connections are also query_only. Does not
  // read the file yet: schema.h checks what it is.
  static StatusOr<std::unique_ptr<SqliteConnection>> Open(const std::string& path, bool read_only);
  ~SqliteConnection();
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  // A prepared statement for sql, from the cache when possible.
  StatusOr<StatementLease> Prepare(std::string_view sql);
  // Prepares, binds and runs one statement whose rows are not wanted.
  Status Execute(std::string_view sql, std::initializer_list<SqlValue> values = {});
  Status Execute(std::string_view sql, const std::vector<SqlValue>& values);
  // Runs one statement returning a single integer (a pragma, a count).
  StatusOr<int64_t> QueryInt(std::string_view sql, std::initializer_list<SqlValue> values = {});
  // Runs several statements, no parameters, no busy retry: for migrations inside a transaction.
  Status ExecuteScript(std::string_view sql);

  // A Status for SQLite result code rc, naming the file and what was being done.
  Status Error(int rc, std::string_view doing) const;

  const std::string& path() const { return path_; }
  bool read_only() const { return read_only_; }
  // True when SQLite itself opened the file read-only (for instance a read-only file system).
  bool opened_read_only() const;
  int64_t changes() const;
  int64_t last_insert_rowid() const;
  sqlite3* raw() const { return db_; }

 private:
  SqliteConnection(sqlite3* db, std::string path, bool read_only);

  sqlite3* db_;
  std::string path_;
  bool read_only_;
  std::unordered_map<std::string, std::unique_ptr<Statement>> statements_;
};

// A transaction that rolls back on destruction unless committed.
class Transaction {
 public:
  // BEGIN IMMEDIATE: takes the write lock up front so no statement fails half-way with BUSY.
  static StatusOr<Transaction> BeginWrite(SqliteConnection& connection);
  // BEGIN: a consistent view for several reads.
  static StatusOr<Transaction> BeginRead(SqliteConnection& connection);
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();

  Status Commit();

 private:
  explicit Transaction(SqliteConnection* connection) : connection_(connection) {}
  SqliteConnection* connection_;  // Null once committed, rolled back or moved from.
};

// Runs attempt() until it returns something other than SQLITE_BUSY / SQLITE_LOCKED or kBusyDeadline
// passes, sleeping with jittered backoff between tries; returns the last SQLite result code.
int RetryWhileBusy(const std::function<int()>& attempt);

}  // namespace fusor::db
