#include "db/sqlite_connection.h"

#include <sqlite3.h>

#include <algorithm>
#include <random>
#include <thread>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

namespace fusor::db {
namespace {

// The advice a person needs for each kind of failure.
Status StatusForCode(int rc, std::string message) {
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Status::Corruption(message +
                                "; the file is not a usable SQLite database: restore it from a "
                                "backup or move it aside to start a new one");
    case SQLITE_READONLY:
      return Status::FailedPrecondition(message + "; the database is read-only here");
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Unavailable(message + "; another connection held the lock for " +
                                 std::to_string(kBusyDeadline.count() / 1000) + " s");
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return Status::ResourceExhausted(std::move(message));
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_PERM:
    case SQLITE_NOLFS:
    case SQLITE_AUTH:
      return Status::IOError(std::move(message));
    case SQLITE_CONSTRAINT:
      return Status::FailedPrecondition(std::move(message));
    default:
      return Status::Internal(std::move(message));
  }
}

}  // namespace

int RetryWhileBusy(const std::function<int()>& attempt) {
  thread_local std::minstd_rand jitter(std::random_device{}());
  auto deadline = std::chrono::steady_clock::now() + kBusyDeadline;
  int delay_ms = 1;
  for (;;) {
    int rc = attempt();
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline) return rc;
    int sleep_ms = delay_ms / 2 + static_cast<int>(jitter() % (delay_ms / 2 + 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::max(sleep_ms, 1)));
    delay_ms = std::min(delay_ms * 2, 50);
  }
}

// Statement ------------------------------------------------------------------------------------

Statement::Statement(SqliteConnection* connection, sqlite3_stmt* stmt)
    : connection_(connection), stmt_(stmt) {}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Status Statement::Bind(std::initializer_list<SqlValue> values) {
  int index = 1;
  for (const SqlValue& value : values) FUSOR_RETURN_IF_ERROR(BindAt(index++, value));
  return Status::Ok();
}

Status Statement::Bind(const std::vector<SqlValue>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    FUSOR_RETURN_IF_ERROR(BindAt(static_cast<int>(i) + 1, values[i]));
  }
  return Status::Ok();
}

Status Statement::BindAt(int index, const SqlValue& value) {
  int rc = SQLITE_OK;
  if (std::holds_alternative<std::monostate>(value)) {
    rc = sqlite3_bind_null(stmt_, index);
  } else if (const int64_t* i = std::get_if<int64_t>(&value)) {
    rc = sqlite3_bind_int64(stmt_, index, *i);
  } else if (const double* d = std::get_if<double>(&value)) {
    rc = sqlite3_bind_double(stmt_, index, *d);
  } else if (const std::string* s = std::get_if<std::string>(&value)) {
    rc = sqlite3_bind_text64(stmt_, index, s->data(), s->size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  } else {
    const std::string& bytes = std::get<Blob>(value).bytes;
    rc = sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
  }
  if (rc != SQLITE_OK) return connection_->Error(rc, "binding parameter " + std::to_string(index));
  return Status::Ok();
}

StatusOr<bool> Statement::Step() {
  int rc;
  if (stepped_) {
    rc = sqlite3_step(stmt_);
  } else {
    // Nothing has happened yet, so a BUSY first step can simply be tried again.
    rc = RetryWhileBusy([this] {
      int r = sqlite3_step(stmt_);
      if ((r & 0xff) == SQLITE_BUSY) sqlite3_reset(stmt_);
      return r;
    });
    stepped_ = true;
  }
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  spdlog::debug("db: statement failed on '{}': {} ({})", connection_->path(),
                sqlite3_errmsg(connection_->raw()), sqlite3_sql(stmt_));
  return connection_->Error(rc, "");
}

Status Statement::Run() {
  for (;;) {
    FUSOR_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::Ok();
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  stepped_ = false;
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::Double(int column) const { return sqlite3_column_double(stmt_, column); }

std::optional<double> Statement::OptionalDouble(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Double(column);
}

std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, column));
}

std::string Statement::Bytes(int column) const {
  const void* blob = sqlite3_column_blob(stmt_, column);
  if (blob == nullptr) return "";
  return std::string(static_cast<const char*>(blob), sqlite3_column_bytes(stmt_, column));
}

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

// StatementLease ---------------------------------------------------------------------------------

StatementLease::StatementLease(Statement* cached) : stmt_(cached) { stmt_->lent_ = true; }

StatementLease::StatementLease(std::unique_ptr<Statement> owned)
    : stmt_(owned.get()), owned_(std::move(owned)) {}

StatementLease::StatementLease(StatementLease&& other) noexcept
    : stmt_(std::exchange(other.stmt_, nullptr)), owned_(std::move(other.owned_)) {}

StatementLease::~StatementLease() {
  if (stmt_ == nullptr) return;
  stmt_->Reset();
  stmt_->lent_ = false;
}

// SqliteConnection -------------------------------------------------------------------------------

SqliteConnection::SqliteConnection(sqlite3* db, std::string path, bool read_only)
    : db_(db), path_(std::move(path)), read_only_(read_only) {}

SqliteConnection::~SqliteConnection() {
  statements_.clear();  // Finalize before closing, or close_v2 would defer the close.
  sqlite3_close_v2(db_);
}

StatusOr<std::unique_ptr<SqliteConnection>> SqliteConnection::Open(const std::string& path,
                                                                   bool read_only) {
  int flags = SQLITE_OPEN_NOMUTEX |
              (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  // Owns db from here, so a failed open is closed too.
  std::unique_ptr<SqliteConnection> connection(new SqliteConnection(db, path, read_only));
  if (rc != SQLITE_OK) return connection->Error(rc, "cannot open");
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, static_cast<int>(kBusyTimeout.count()));
  FUSOR_RETURN_IF_ERROR(connection->Execute("PRAGMA foreign_keys = ON"));
  // FULL: a commit that returned survives power loss too, not only a killed process.
  FUSOR_RETURN_IF_ERROR(connection->Execute("PRAGMA synchronous = FULL"));
  if (read_only) FUSOR_RETURN_IF_ERROR(connection->Execute("PRAGMA query_only = ON"));
  return connection;
}

StatusOr<StatementLease> SqliteConnection::Prepare(std::string_view sql) {
  auto it = statements_.find(std::string(sql));
  if (it != statements_.end() && !it->second->lent_) return StatementLease(it->second.get());
  sqlite3_stmt* stmt = nullptr;
  int rc = RetryWhileBusy([&] {
    sqlite3_finalize(stmt);
    stmt = nullptr;
    return sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  });
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return Error(rc, "");
  }
  auto owned = std::make_unique<Statement>(this, stmt);
  // The cached copy is lent out (a nested use of the same SQL): this one lives for one use.
  if (it != statements_.end()) return StatementLease(std::move(owned));
  Statement* cached = owned.get();
  statements_.emplace(std::string(sql), std::move(owned));
  return StatementLease(cached);
}

Status SqliteConnection::Execute(std::string_view sql, std::initializer_list<SqlValue> values) {
  FUSOR_ASSIGN_OR_RETURN(StatementLease stmt, Prepare(sql));
  FUSOR_RETURN_IF_ERROR(stmt->Bind(values));
  return stmt->Run();
}

Status SqliteConnection::Execute(std::string_view sql, const std::vector<SqlValue>& values) {
  FUSOR_ASSIGN_OR_RETURN(StatementLease stmt, Prepare(sql));
  FUSOR_RETURN_IF_ERROR(stmt->Bind(values));
  return stmt->Run();
}

StatusOr<int64_t> SqliteConnection::QueryInt(std::string_view sql,
                                             std::initializer_list<SqlValue> values) {
  FUSOR_ASSIGN_OR_RETURN(StatementLease stmt, Prepare(sql));
  FUSOR_RETURN_IF_ERROR(stmt->Bind(values));
  FUSOR_ASSIGN_OR_RETURN(bool row, stmt->Step());
  if (!row)
    return Status::Internal("database '" + path_ + "': '" + std::string(sql) + "' gave no row");
  return stmt->Int(0);
}

Status SqliteConnection::ExecuteScript(std::string_view sql) {
  std::string script(sql);
  int rc = sqlite3_exec(db_, script.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return Error(rc, "");
  return Status::Ok();
}

Status SqliteConnection::Error(int rc, std::string_view doing) const {
  const char* detail = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  std::string message = doing.empty() ? fmt::format("database '{}': {}", path_, detail)
                                      : fmt::format("database '{}': {}: {}", path_, doing, detail);
  return StatusForCode(rc, std::move(message));
}

bool SqliteConnection::opened_read_only() const { return sqlite3_db_readonly(db_, "main") == 1; }

int64_t SqliteConnection::changes() const { return sqlite3_changes64(db_); }

int64_t SqliteConnection::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

// Transaction ------------------------------------------------------------------------------------

StatusOr<Transaction> Transaction::BeginWrite(SqliteConnection& connection) {
  FUSOR_RETURN_IF_ERROR(connection.Execute("BEGIN IMMEDIATE"));
  return Transaction(&connection);
}

StatusOr<Transaction> Transaction::BeginRead(SqliteConnection& connection) {
  FUSOR_RETURN_IF_ERROR(connection.Execute("BEGIN"));
  return Transaction(&connection);
}

Transaction::Transaction(Transaction&& other) noexcept
    : connection_(std::exchange(other.connection_, nullptr)) {}

Transaction::~Transaction() {
  if (connection_ == nullptr) return;
  // SQLite may already have rolled back after some errors (a full disk); ROLLBACK would then fail.
  if (sqlite3_get_autocommit(connection_->raw()) == 0) {
    Status s = connection_->Execute("ROLLBACK");
    if (!s.ok()) spdlog::warn("db: rollback failed on '{}': {}", connection_->path(), s.ToString());
  }
}

Status Transaction::Commit() {
  SqliteConnection* connection = std::exchange(connection_, nullptr);
  Status s = connection->Execute("COMMIT");
  if (s.ok()) return s;
  connection_ = connection;  // Roll back in the destructor.
  return s;
}

}  // namespace fusor::db
