#include "tests/db/test_postgres.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/fmt/fmt.h>
#include <pqxx/pqxx>

namespace fusor::db::testing {
namespace {

constexpr const char* kBinDir = "/usr/lib/postgresql/15/bin";

// A TCP port nobody listens on now: the server's socket file is named after it.
StatusOr<int> FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::IOError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  if (!ok) return Status::IOError("cannot find a free port");
  return static_cast<int>(ntohs(addr.sin_port));
}

std::string Tail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
}

}  // namespace

StatusOr<std::unique_ptr<TestPostgres>> TestPostgres::Start() {
  std::string initdb = std::string(kBinDir) + "/initdb";
  if (access(initdb.c_str(), X_OK) != 0) {
    return Status::FailedPrecondition(fmt::format(
        "PostgreSQL 15 is not installed ({} is missing); run deploy/install-deps.sh, which "
        "installs postgresql-15 for these tests",
        initdb));
  }
  std::string pattern = "/tmp/fusor_pg_XXXXXX";  // Short: a unix socket path is at most 107 bytes.
  if (mkdtemp(pattern.data()) == nullptr) return Status::IOError("mkdtemp failed");
  FUSOR_ASSIGN_OR_RETURN(int port, FreePort());
  std::unique_ptr<TestPostgres> server(new TestPostgres(pattern, port));
  if (geteuid() == 0) {
    passwd* pw = getpwnam("postgres");
    if (pw == nullptr) {
      return Status::FailedPrecondition(
          "there is no 'postgres' user to run PostgreSQL as; run deploy/install-deps.sh");
    }
    if (chown(server->dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      return Status::IOError("cannot hand " + server->dir_ + " to the postgres user");
    }
  }
  FUSOR_RETURN_IF_ERROR(
      server->RunTool("initdb", fmt::format("-D {}/data -A trust -U postgres --no-sync "
                                            "--locale=C -E UTF8",
                                            server->dir_)));
  FUSOR_RETURN_IF_ERROR(server->Restart());
  return server;
}

TestPostgres::~TestPostgres() {
  if (running_) (void)RunTool("pg_ctl", fmt::format("-D {}/data -m immediate -w stop", dir_));
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

Status TestPostgres::RunTool(const std::string& tool, const std::string& arguments) const {
  std::string runner = geteuid() == 0 ? "runuser -u postgres -- " : "";
  std::string log = dir_ + "/commands.log";
  std::string command =
      fmt::format("{}{}/{} {} >>{} 2>&1 </dev/null", runner, kBinDir, tool, arguments, log);
  int rc = std::system(command.c_str());
  if (rc == 0) return Status::Ok();
  return Status::Internal(fmt::format("`{}` failed ({}):\n{}\nserver log:\n{}", command, rc,
                                      Tail(log), Tail(dir_ + "/server.log")));
}

Status TestPostgres::Stop() {
  FUSOR_RETURN_IF_ERROR(RunTool("pg_ctl", fmt::format("-D {}/data -m fast -w stop", dir_)));
  running_ = false;
  return Status::Ok();
}

Status TestPostgres::Restart() {
  // fsync off: a test's data need not survive a power cut, and it keeps each commit cheap.
  FUSOR_RETURN_IF_ERROR(
      RunTool("pg_ctl", fmt::format("-D {0}/data -l {0}/server.log -w -t 60 -o \"-k {0} -p {1} "
                                    "-c listen_addresses='' -c fsync=off\" start",
                                    dir_, port_)));
  running_ = true;
  return Status::Ok();
}

std::string TestPostgres::Uri(const std::string& name) const {
  return fmt::format("postgresql:///{}?host={}&port={}&user=postgres", name, dir_, port_);
}

StatusOr<std::string> TestPostgres::CreateDatabase(const std::string& name) {
  try {
    pqxx::connection c(Uri("postgres"));
    pqxx::nontransaction txn(c);
    txn.exec("CREATE DATABASE " + txn.quote_name(name));
  } catch (const std::exception& e) {
    return Status::Internal(fmt::format("cannot create database '{}': {}", name, e.what()));
  }
  return Uri(name);
}

std::string TestPostgres::Query(const std::string& database_uri, const std::string& sql) {
  try {
    pqxx::connection c(database_uri);
    pqxx::nontransaction txn(c);
    pqxx::result r = txn.exec(sql);
    if (r.empty() || r.columns() == 0) return "";
    return r[0][0].is_null() ? "NULL" : r[0][0].as<std::string>();
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  }
}

TestPostgres* SharedTestPostgres() {
  static StatusOr<std::unique_ptr<TestPostgres>>* server =
      new StatusOr<std::unique_ptr<TestPostgres>>(TestPostgres::Start());
  static const bool stop_at_exit = [] {
    std::atexit([] {
      if (server->ok()) server->value().reset();
    });
    return true;
  }();
  (void)stop_at_exit;
  if (!server->ok()) {
    ADD_FAILURE() << server->status().ToString();
    return nullptr;
  }
  return server->value().get();
}

}  // namespace fusor::db::testing
