// fusord's configuration: command-line flags and an optional JSON config file with the same
// settings. A flag given on the command line wins over the file; the file is parsed strictly (an
// unknown key or a value of the wrong type is an error naming it), so a typo cannot silently
// leave a limit at its default. Keys (flag in brackets), all optional:
//   listen [--listen]                    host:port or unix:PATH; default 127.0.0.1:7070
//   db_path [--db]                       SQLite tuning database; default as the CLI's local mode
//   worker_threads [--worker-threads]    tuning jobs that run at once; default 1
//   queue_size [--queue-size]            tuning jobs that may wait; default 16
//   max_rpc_threads [--max-rpc-threads]  threads serving RPCs; default 256
//   max_message_bytes [--max-message-bytes]  largest request; default 67108864
//   max_nodes [--max-nodes]              nodes per graph; default 1000000
//   max_tensor_elements [--max-tensor-elements]  elements per tensor; default 2^32
//   tls_cert, tls_key [--tls-cert, --tls-key]    PEM files; TLS when both are set
//   token_file [--token-file]            bearer tokens and roles (server/access_tokens.h)
//   allow_insecure_remote [--allow-insecure-remote]  listen beyond loopback with no tokens
//   shutdown_grace_s [--shutdown-grace]  seconds in-flight calls get on SIGTERM; default 30
//   measure_threads [--measure-threads]  OpenMP threads for measurements; 0: all cores
//   default_measure_budget [--default-measure-budget]  plans measured per Tune; default 7
//   default_time_limit_s [--default-time-limit]        seconds per Tune; default 120
//   calibration_time_limit_s [--calibration-time-limit]  seconds per Calibrate; default 60
//   log_level [--log-level]              trace, debug, info, warn, error; default info
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
  TuningServiceOptions tuning;  // db_path empty: the default database path.
  double shutdown_grace_s = 30;
  std::string log_level = "info";
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
