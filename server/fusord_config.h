// fusord's configuration: command-line flags and an optional JSON config file with the same
// settings. A flag given on the command line wins over the file; the file is parsed strictly (an
// unknown key or a value of the wrong type is an error naming it), so a typo cannot silently
// leave a limit at its default. Keys (flag in brackets), all optional:
//   listen [--listen]                    host:port or unix:PATH; default 127.0.0.1:7070
//   db_path [--db]                       tuning database: a SQLite file, sqlite:PATH or
//                                        postgresql://... (db/open_plan_store.h); default the
//                                        CLI's local-mode SQLite file
//   worker_threads [--worker-threads]    tuning jobs that run at once; default 1
//   queue_size [--queue-size]            tuning jobs that may wait; default 16
//   max_rpc_threads [--max-rpc-threads]  threads serving RPCs; default 256
//   max_message_bytes [--max-message-bytes]  largest request; default 8388608 (8 MiB)
//   max_memory_bytes [--max-memory-bytes]    gRPC's memory for all calls; default 536870912
//   max_parse_bytes [--max-parse-bytes]      what the parsed requests of all calls may hold
//                                        (server/parse_budget.h); default 268435456
//   unix_socket_group [--unix-socket-group]  with listen unix:PATH, the group that may connect
//                                        (socket mode 0660; without it 0600, owner only)
//   max_concurrent_streams [--max-concurrent-streams]  calls per connection; default 32
//   max_connection_idle_s [--max-connection-idle]      default 600
//   max_connection_age_s [--max-connection-age]        default 3600, then GOAWAY...
//   connection_age_grace_s [--connection-age-grace]    ...and this long to finish; default 3600
//   max_nodes [--max-nodes]              nodes per graph; default 1000000
//   max_tensor_elements [--max-tensor-elements]  elements per tensor; default 2^32
//   tls_cert, tls_key [--tls-cert, --tls-key]    PEM files; TLS when both are set
//   tls_client_ca [--tls-client-ca]      PEM roots of client certificates: mutual TLS
//   token_file [--token-file]            bearer tokens and roles (server/access_tokens.h)
//   allow_insecure_remote [--allow-insecure-remote]  beyond loopback without tokens or TLS
//   shutdown_grace_s [--shutdown-grace]  seconds in-flight calls get on SIGTERM; default 30
//   measure_threads [--measure-threads]  OpenMP threads for measurements; 0: all cores
//   default_measure_budget [--default-measure-budget]  plans measured per Tune; default 7
//   default_time_limit_s [--default-time-limit]        seconds per Tune; default 120
//   max_time_limit_s [--max-time-limit]       most seconds a Tune may ask for; default 3600
//   max_measure_budget [--max-measure-budget] most plans a Tune may ask to measure; default 64
//   calibration_time_limit_s [--calibration-time-limit]  seconds per Calibrate; default 60
//   max_calibration_time_limit_s [--max-calibration-time-limit]  most a Calibrate may ask; 600
//   max_jobs_per_principal [--max-jobs-per-principal]  Tune jobs one principal may have queued
//                                        or running at once; default 4
//   max_joiners_per_job [--max-joiners-per-job]        callers sharing one Tune job; default 64
//   measure_uncalibrated [--measure-uncalibrated]  measure on this CPU before it was calibrated,
//                                        with the defaults; default false: calibrate it first
//   learned_residual [--learned-residual]  score Tunes with the target's learned residual on
//                                        top of the analytical model, and fit it; default false
//   residual_refit_every [--residual-refit-every]  new timings of a target before its residual
//                                        is fitted again (also on Calibrate); default 32
//   log_level [--log-level]              trace, debug, info, warn, error; default info
//   log_format [--log-format]            text (one line per event) or json (JSON lines); text
//   metrics_listen [--metrics-listen]    HOST:PORT or PORT (127.0.0.1) of the Prometheus /metrics
//                                        listener (server/metrics_http.h); default none
// deploy/fusord.example.json shows them all. Plain data; not shared between threads.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "base/status.h"
#include "server/tuner_server.h"
#include "server/tuning_service.h"

namespace fusor {

struct FusordConfig {
  std::string config_file;  // --config; empty: flags only.
  TunerServerOptions server;
  TuningServiceOptions tuning;  // db_location empty: the default database path.
  double shutdown_grace_s = 30;
  std::string log_level = "info";
  std::string log_format = "text";  // "text" or "json".
  std::string metrics_listen;       // Empty: no metrics listener.
};

// Registers every flag on `app`, writing into `config`.
void AddFusordFlags(CLI::App* app, FusordConfig* config);

// After `app` parsed the command line: reads config->config_file (if set) into `config`, except
// the settings whose flags were given, then checks the values.
Status ApplyConfigFile(const CLI::App& app, FusordConfig* config);

// Applies the JSON text of a config file; keys whose flag is in `app`'s given flags are skipped.
// `origin` names the text in errors.
Status ApplyConfigJson(const std::string& text, const std::string& origin, const CLI::App& app,
                       FusordConfig* config);

}  // namespace fusor
