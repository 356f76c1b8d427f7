// A real PostgreSQL 15 server for tests: initdb and pg_ctl (Debian's postgresql-15) in a fresh
// temporary directory, listening only on a unix socket in that directory on a free port number,
// run as the `postgres` user when the test runs as root (PostgreSQL refuses to run as root). The
// destructor stops the server and removes the directory, also when a test failed. When
// PostgreSQL is not installed, Start fails with a message saying to run deploy/install-deps.sh:
// the tests fail rather than skip.
//
// Not thread-safe: one thread drives a server's life (Stop/Restart); stores may use it from any
// thread.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"

namespace fusor::db::testing {

class TestPostgres {
 public:
  static StatusOr<std::unique_ptr<TestPostgres>> Start();
  ~TestPostgres();
  TestPostgres(const TestPostgres&) = delete;
  TestPostgres& operator=(const TestPostgres&) = delete;

  // A new empty database; returns its connection URI.
  StatusOr<std::string> CreateDatabase(const std::string& name);
  // The connection URI of database `name` on this server.
  std::string Uri(const std::string& name) const;

  // Stops the server (fast shutdown: sessions are ended) and starts it again on the same socket.
  Status Stop();
  Status Restart();

  // Runs one SQL statement on database_uri; the first column of the first row as text ("" when
  // none, "NULL" for null), or "error: ..." when it fails.
  static std::string Query(const std::string& database_uri, const std::string& sql);

  const std::string& dir() const { return dir_; }

 private:
  TestPostgres(std::string dir, int port) : dir_(std::move(dir)), port_(port) {}
  // Runs a PostgreSQL program from the server's bin directory (as `postgres` when root), its
  // output appended to dir/commands.log.
  Status RunTool(const std::string& tool, const std::string& arguments) const;

  std::string dir_;
  int port_ = 0;
  bool running_ = false;
};

// One server for the whole test process, started on first use and stopped at exit; null (with a
// test failure recorded) when it cannot start.
TestPostgres* SharedTestPostgres();

}  // namespace fusor::db::testing
