// How a CLI verb reaches the tuning service: remote (a fusord at --server, with a bearer token)
// or local (the same TuningService in-process, over the embedded SQLite database). Verbs register
// the flags with AddConnectionOptions and call Connect once their flags are parsed; the TunerApi
// they get behaves the same either way, so local and remote mode share every code path above it.
//
// Flags (environment variable in brackets; a flag wins over its variable):
//   --server ADDR [FUSOR_SERVER]     host:port or unix:PATH; without it, local mode
//   --token TOKEN [FUSOR_TOKEN]      bearer token (visible in `ps`: prefer the file or variable)
//   --token-file FILE [FUSOR_TOKEN_FILE]  file holding the token (surrounding whitespace ignored)
//   --tls                            use TLS with the system's root certificates
//   --tls-ca FILE                    use TLS with these root certificates (PEM)
//   --tls-cert FILE, --tls-key FILE  client certificate and key (PEM), for a fusord that
//                                    requires mutual TLS; imply TLS
//   --allow-insecure-remote          send the token without TLS to a non-loopback server
//                                    (refused otherwise: anyone on the path could reuse it)
//   --timeout SECONDS                deadline per call (default: none for tune and calibrate,
//                                    60 s for the rest)
//   --db PATH                        local mode's database (default db/default_path.h);
//                                    not allowed with --server
// ConnectionOptions is plain data owned by the verb's CLI::App; Connect's result is owned by the
// caller and thread-safe like every TunerApi.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "base/status.h"
#include "server/tuner_api.h"
#include "server/tuning_service.h"

namespace fusor {

struct ConnectionOptions {
  std::string server;
  std::string token;
  std::string token_file;
  bool tls = false;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  bool allow_insecure_remote = false;
  double timeout_s = 0;
  std::string db_path;

  bool remote() const { return !server.empty(); }
};

// Every flag above; returns the --server option.
CLI::Option* AddConnectionOptions(CLI::App* cmd, ConnectionOptions* o);
// Every flag above but --db, for a verb with a --db of its own (`db query`, `agent`); returns the
// --server option.
CLI::Option* AddRemoteOptions(CLI::App* cmd, ConnectionOptions* o,
                              const std::string& server_help =
                                  "fusord address (host:port); "
                                  "default: local");

// Remote when o.server is set, local otherwise. Fails with Unauthenticated when the token file
// cannot be read, IOError for an unreadable CA, certificate or key file, FailedPrecondition for a
// token that would travel in plaintext to another machine, and whatever opening the local
// database fails with. Reaching a remote server is not tried here: the first call reports
// UNAVAILABLE.
StatusOr<std::unique_ptr<TunerApi>> Connect(const ConnectionOptions& o);

// The in-process tuning service local mode uses, over db_path (empty: the per-user default).
StatusOr<std::unique_ptr<TuningService>> OpenLocalTuner(const std::string& db_path,
                                                        bool auto_calibrate);

}  // namespace fusor
