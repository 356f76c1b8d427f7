#include "client/connection.h"

#include <fstream>
#include <sstream>

#include "client/remote_tuner.h"
#include "db/default_path.h"
#include "server/tuning_service.h"

namespace fusor {
namespace {

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot read '" + path + "'");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Trimmed(const std::string& s) {
  size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = s.find_last_not_of(" \t\r\n");
  return s.substr(begin, end - begin + 1);
}

StatusOr<std::string> TokenOf(const ConnectionOptions& o) {
  if (!o.token.empty() || o.token_file.empty()) return o.token;
  auto text = ReadFile(o.token_file);
  if (!text.ok()) return Status::Unauthenticated("token file: " + text.status().message());
  std::string token = Trimmed(*text);
  if (token.empty()) return Status::Unauthenticated("token file '" + o.token_file + "' is empty");
  return token;
}

StatusOr<std::unique_ptr<TunerApi>> ConnectRemote(const ConnectionOptions& o) {
  RemoteTunerOptions r;
  r.address = o.server;
  FUSOR_ASSIGN_OR_RETURN(r.token, TokenOf(o));
  r.tls = o.tls || !o.tls_ca.empty();
  if (!o.tls_ca.empty()) {
    auto pem = ReadFile(o.tls_ca);
    if (!pem.ok()) return pem.status().WithContext("--tls-ca");
    r.tls_ca_pem = std::move(pem).value();
  }
  r.timeout_s = o.timeout_s;
  return std::unique_ptr<TunerApi>(std::make_unique<RemoteTuner>(r));
}

StatusOr<std::unique_ptr<TunerApi>> ConnectLocal(const ConnectionOptions& o) {
  TuningServiceOptions t;
  t.db_path = o.db_path;
  // A person's first `fusor tune` on a machine calibrates it (about 10 s) rather than tuning with
  // the uncalibrated defaults, whose plans the measured refinement would mostly reject.
  t.auto_calibrate = true;
  if (t.db_path.empty()) {
    FUSOR_ASSIGN_OR_RETURN(t.db_path, db::DefaultDatabasePath(/*create_directories=*/true));
  }
  FUSOR_ASSIGN_OR_RETURN(auto service, TuningService::Open(t));
  return std::unique_ptr<TunerApi>(std::move(service));
}

}  // namespace

void AddConnectionOptions(CLI::App* cmd, ConnectionOptions* o) {
  auto* server =
      cmd->add_option("--server", o->server, "fusord address (host:port); default: local")
          ->envname("FUSOR_SERVER");
  cmd->add_option("--token", o->token, "Bearer token for --server")->envname("FUSOR_TOKEN");
  cmd->add_option("--token-file", o->token_file, "File holding the bearer token")
      ->envname("FUSOR_TOKEN_FILE");
  cmd->add_flag("--tls", o->tls, "Connect with TLS (system root certificates)");
  cmd->add_option("--tls-ca", o->tls_ca, "Connect with TLS, trusting these roots (PEM)");
  cmd->add_option("--timeout", o->timeout_s, "Deadline per call, seconds");
  auto* db = cmd->add_option("--db", o->db_path, "Local database (default: per-user)");
  db->excludes(server);
}

StatusOr<std::unique_ptr<TunerApi>> Connect(const ConnectionOptions& o) {
  return o.remote() ? ConnectRemote(o) : ConnectLocal(o);
}

}  // namespace fusor
