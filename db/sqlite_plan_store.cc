// SqlitePlanStore's file and connections: what the file is before it is opened, the pool that
// lends connections to calls, and one BEGIN IMMEDIATE transaction a logical write.
#include "db/sqlite_plan_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

namespace fusor::db {
namespace {

// Refuses early, with a clear message, what SQLite would refuse late or not at all (root ignores
// file modes, and SQLite quietly falls back to read-only).
Status CheckFile(const std::string& path, bool read_only) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return Status::IOError(fmt::format("database '{}': {}", path, std::strerror(errno)));
    }
    if (read_only) return Status::NotFound(fmt::format("database '{}' does not exist", path));
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
      return Status::NotFound(
          fmt::format("cannot create database '{}': directory '{}' does not "
                      "exist",
                      path, parent.string()));
    }
    // Created here, owner-only: SQLite gives its -wal and -shm files the database file's mode.
    int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) {
      return Status::IOError(
          fmt::format("cannot create database '{}': {}", path, std::strerror(errno)));
    }
    if (fd >= 0) close(fd);
    return Status::Ok();
  }
  if (!read_only && (st.st_mode & S_IRWXO)) {
    spdlog::warn("database '{}' is readable by others (mode {:04o}); chmod 600 it", path,
                 st.st_mode & 07777);
  }
  if (S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(fmt::format("'{}' is a directory, not a database file", path));
  }
  if (!read_only && ((st.st_mode & 0222) == 0 || access(path.c_str(), W_OK) != 0)) {
    return Status::FailedPrecondition(fmt::format(
        "database '{}' is read-only (file mode {:04o}); open it read-only to query it, or make "
        "it writable to store plans",
        path, st.st_mode & 07777));
  }
  return Status::Ok();
}

}  // namespace

SqlitePlanStore::SqlitePlanStore(std::string path, SqliteOpenOptions options, SchemaInfo schema,
                                 std::unique_ptr<SqliteConnection> first)
    : path_(std::move(path)), options_(options), schema_(std::move(schema)) {
  idle_.push_back(std::move(first));
}

SqlitePlanStore::~SqlitePlanStore() = default;

StatusOr<std::unique_ptr<SqlitePlanStore>> SqlitePlanStore::Open(const std::string& path,
                                                                 SqliteOpenOptions options) {
  FUSOR_RETURN_IF_ERROR(CheckFile(path, options.read_only));
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<SqliteConnection> first,
                         SqliteConnection::Open(path, options.read_only));
  if (!options.read_only && first->opened_read_only()) {
    return Status::FailedPrecondition(fmt::format(
        "database '{}' can only be opened read-only here (read-only file system or missing "
        "permission); open it read-only to query it",
        path));
  }
  FUSOR_ASSIGN_OR_RETURN(SchemaInfo schema, PrepareSchema(*first));
  spdlog::debug("db: opened '{}' (schema version {}, {})", path, schema.version,
                options.read_only ? "read-only" : "writable");
  return std::unique_ptr<SqlitePlanStore>(
      new SqlitePlanStore(path, options, std::move(schema), std::move(first)));
}

StatusOr<SqlitePlanStore::ConnectionLease> SqlitePlanStore::Connect() {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!idle_.empty()) {
      std::unique_ptr<SqliteConnection> connection = std::move(idle_.back());
      idle_.pop_back();
      return ConnectionLease(this, std::move(connection));
    }
  }
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<SqliteConnection> connection,
                         SqliteConnection::Open(path_, options_.read_only));
  return ConnectionLease(this, std::move(connection));
}

void SqlitePlanStore::ReturnConnection(std::unique_ptr<SqliteConnection> connection) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(connection));
  // Otherwise the surplus connection closes here.
}

Status SqlitePlanStore::Write(std::string_view what,
                              const std::function<Status(SqliteConnection&)>& body) {
  if (read_only()) {
    return Status::FailedPrecondition(
        fmt::format("database '{}' is open read-only; cannot {}", path_, what));
  }
  std::lock_guard<std::mutex> lock(write_mu_);
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  Status s = [&]() -> Status {
    FUSOR_ASSIGN_OR_RETURN(Transaction txn, Transaction::BeginWrite(*c));
    FUSOR_RETURN_IF_ERROR(body(*c));
    return txn.Commit();
  }();
  return s.WithContext(what);
}

}  // namespace fusor::db
