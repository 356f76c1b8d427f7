#include "client/connection.h"

#include <tuple>

#include "base/input_file.h"
#include "base/net_address.h"

#include "client/remote_tuner.h"
#include "db/default_path.h"
#include "server/tuning_service.h"

namespace fusor {
namespace {

// Token files and PEM files are small; the cap keeps a wrong path (a log, a device) cheap.
constexpr int64_t kMaxCredentialFileBytes = 1 << 20;

StatusOr<std::string> ReadFile(const std::string& path, std::string_view what) {
  return ReadInputFile(path, what, kMaxCredentialFileBytes);
}

std::string Trimmed(const std::string& s) {
  size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = s.find_last_not_of(" \t\r\n");
  return s.substr(begin, end - begin + 1);
}

StatusOr<std::string> TokenOf(const ConnectionOptions& o) {
  if (!o.token.empty() || o.token_file.empty()) return o.token;
  auto text = ReadFile(o.token_file, "token file");
  if (!text.ok()) return Status::Unauthenticated(text.status().message());
  std::string token = Trimmed(*text);
  if (token.empty()) return Status::Unauthenticated("token file '" + o.token_file + "' is empty");
  return token;
}

StatusOr<std::unique_ptr<TunerApi>> ConnectRemote(const ConnectionOptions& o) {
  RemoteTunerOptions r;
  r.address = o.server;
  FUSOR_ASSIGN_OR_RETURN(r.token, TokenOf(o));
  r.tls = o.tls || !o.tls_ca.empty() || !o.tls_cert.empty();
  if (!r.token.empty() && !r.tls && !o.allow_insecure_remote && !IsLoopbackAddress(o.server)) {
    return Status::FailedPrecondition(
        "refusing to send the bearer token in plaintext to " + o.server +
        ": anyone on the network path could read and reuse it. Connect with --tls (or --tls-ca "
        "FILE), or pass --allow-insecure-remote on a trusted network");
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return Status::InvalidArgument("--tls-cert and --tls-key go together (mutual TLS)");
  }
  for (auto [flag, path, pem] : {std::tuple{"--tls-ca", &o.tls_ca, &r.tls_ca_pem},
                                 std::tuple{"--tls-cert", &o.tls_cert, &r.tls_cert_pem},
                                 std::tuple{"--tls-key", &o.tls_key, &r.tls_key_pem}}) {
    if (path->empty()) continue;
    auto text = ReadFile(*path, std::string(flag) + " file");
    if (!text.ok()) return text.status();
    *pem = std::move(text).value();
  }
  r.timeout_s = o.timeout_s;
  return std::unique_ptr<TunerApi>(std::make_unique<RemoteTuner>(r));
}

StatusOr<std::unique_ptr<TunerApi>> ConnectLocal(const ConnectionOptions& o) {
  // A person's first `fusor tune` on a machine calibrates it (about 10 s) rather than tuning with
  // the uncalibrated defaults, whose plans the measured refinement would mostly reject.
  FUSOR_ASSIGN_OR_RETURN(auto service, OpenLocalTuner(o.db_path, /*auto_calibrate=*/true));
  return std::unique_ptr<TunerApi>(std::move(service));
}

}  // namespace

StatusOr<std::unique_ptr<TuningService>> OpenLocalTuner(const std::string& db_path,
                                                        bool auto_calibrate) {
  TuningServiceOptions t;
  t.db_location = db_path;
  t.auto_calibrate = auto_calibrate;
  if (t.db_location.empty()) {
    FUSOR_ASSIGN_OR_RETURN(t.db_location, db::DefaultDatabasePath(/*create_directories=*/true));
  }
  return TuningService::Open(t);
}

CLI::Option* AddRemoteOptions(CLI::App* cmd, ConnectionOptions* o, const std::string& server_help) {
  auto* server = cmd->add_option("--server", o->server, server_help)->envname("FUSOR_SERVER");
  cmd->add_option("--token", o->token, "Bearer token for --server")->envname("FUSOR_TOKEN");
  cmd->add_option("--token-file", o->token_file, "File holding the bearer token")
      ->envname("FUSOR_TOKEN_FILE");
  cmd->add_flag("--tls", o->tls, "Connect with TLS (system root certificates)");
  cmd->add_option("--tls-ca", o->tls_ca, "Connect with TLS, trusting these roots (PEM)");
  auto* cert =
      cmd->add_option("--tls-cert", o->tls_cert, "Client certificate for mutual TLS (PEM)");
  auto* key = cmd->add_option("--tls-key", o->tls_key, "Client certificate's private key (PEM)");
  cert->needs(key);
  key->needs(cert);
  cmd->add_flag("--allow-insecure-remote", o->allow_insecure_remote,
                "Send the token without TLS to a non-loopback server (trusted networks only)");
  cmd->add_option("--timeout", o->timeout_s, "Deadline per call, seconds");
  return server;
}

CLI::Option* AddConnectionOptions(CLI::App* cmd, ConnectionOptions* o) {
  CLI::Option* server = AddRemoteOptions(cmd, o);
  auto* db = cmd->add_option("--db", o->db_path,
                             "Local tuning database: a SQLite file, sqlite:PATH or "
                             "postgresql://... (default: per-user SQLite file)");
  db->excludes(server);
  return server;
}

StatusOr<std::unique_ptr<TunerApi>> Connect(const ConnectionOptions& o) {
  return o.remote() ? ConnectRemote(o) : ConnectLocal(o);
}

}  // namespace fusor
