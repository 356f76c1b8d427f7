#include "server/fusord_config.h"

#include <spdlog/common.h>

#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "graph/json_integer.h"
#include "server/metrics_http.h"

namespace fusor {
namespace {

using json = nlohmann::json;

template <typename T>
Status Read(const json& v, const std::string& key, T* out) {
  bool ok;
  if constexpr (std::is_same_v<T, bool>) {
    ok = v.is_boolean();
  } else if constexpr (std::is_integral_v<T>) {
    ok = v.is_number_integer();
  } else if constexpr (std::is_floating_point_v<T>) {
    ok = v.is_number();
  } else {
    ok = v.is_string();
  }
  if (!ok) return Status::InvalidArgument("key '" + key + "' has the wrong type: " + v.dump());
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!JsonInteger<T>(v)) {
      return Status::InvalidArgument("key '" + key + "' is " + v.dump() + ", outside [" +
                                     std::to_string(std::numeric_limits<T>::min()) + ", " +
                                     std::to_string(std::numeric_limits<T>::max()) + "]");
    }
  }
  *out = v.get<T>();
  return Status::Ok();
}

// One setting: its config key, its flag, and where it goes.
struct Setting {
  const char* key;
  const char* flag;
  std::function<Status(const json&, FusordConfig*)> apply;
};

template <typename T>
Setting Field(const char* key, const char* flag, T* (*field)(FusordConfig*)) {
  return {key, flag,
          [key, field](const json& v, FusordConfig* c) { return Read(v, key, field(c)); }};
}

const std::vector<Setting>& Settings() {
  using C = FusordConfig;
  static const std::vector<Setting> settings = {
      Field<std::string>("listen", "--listen", [](C* c) { return &c->server.listen; }),
      Field<std::string>("db_path", "--db", [](C* c) { return &c->tuning.db_location; }),
      Field<int>("worker_threads", "--worker-threads",
                 [](C* c) { return &c->server.worker_threads; }),
      Field<int>("queue_size", "--queue-size", [](C* c) { return &c->server.queue_size; }),
      Field<int>("max_rpc_threads", "--max-rpc-threads",
                 [](C* c) { return &c->server.max_rpc_threads; }),
      Field<int>("max_message_bytes", "--max-message-bytes",
                 [](C* c) { return &c->server.max_message_bytes; }),
      Field<int64_t>("max_memory_bytes", "--max-memory-bytes",
                     [](C* c) { return &c->server.max_memory_bytes; }),
      Field<int64_t>("max_parse_bytes", "--max-parse-bytes",
                     [](C* c) { return &c->server.max_parse_bytes; }),
      Field<std::string>("unix_socket_group", "--unix-socket-group",
                         [](C* c) { return &c->server.unix_socket_group; }),
      Field<int>("max_concurrent_streams", "--max-concurrent-streams",
                 [](C* c) { return &c->server.max_concurrent_streams; }),
      Field<int>("max_connection_idle_s", "--max-connection-idle",
                 [](C* c) { return &c->server.max_connection_idle_s; }),
      Field<int>("max_connection_age_s", "--max-connection-age",
                 [](C* c) { return &c->server.max_connection_age_s; }),
      Field<int>("connection_age_grace_s", "--connection-age-grace",
                 [](C* c) { return &c->server.connection_age_grace_s; }),
      Field<int64_t>("max_nodes", "--max-nodes", [](C* c) { return &c->server.limits.max_nodes; }),
      Field<int64_t>("max_tensor_elements", "--max-tensor-elements",
                     [](C* c) { return &c->server.limits.max_tensor_elements; }),
      Field<std::string>("tls_cert", "--tls-cert", [](C* c) { return &c->server.tls_cert; }),
      Field<std::string>("tls_key", "--tls-key", [](C* c) { return &c->server.tls_key; }),
      Field<std::string>("tls_client_ca", "--tls-client-ca",
                         [](C* c) { return &c->server.tls_client_ca; }),
      Field<std::string>("token_file", "--token-file", [](C* c) { return &c->server.token_file; }),
      Field<bool>("allow_insecure_remote", "--allow-insecure-remote",
                  [](C* c) { return &c->server.allow_insecure_remote; }),
      Field<double>("shutdown_grace_s", "--shutdown-grace",
                    [](C* c) { return &c->shutdown_grace_s; }),
      Field<int>("measure_threads", "--measure-threads",
                 [](C* c) { return &c->tuning.measure_threads; }),
      Field<int>("default_measure_budget", "--default-measure-budget",
                 [](C* c) { return &c->tuning.default_measure_budget; }),
      Field<double>("default_time_limit_s", "--default-time-limit",
                    [](C* c) { return &c->tuning.default_time_limit_s; }),
      Field<double>("max_time_limit_s", "--max-time-limit",
                    [](C* c) { return &c->tuning.max_time_limit_s; }),
      Field<int>("max_measure_budget", "--max-measure-budget",
                 [](C* c) { return &c->tuning.max_measure_budget; }),
      Field<double>("calibration_time_limit_s", "--calibration-time-limit",
                    [](C* c) { return &c->tuning.calibration_time_limit_s; }),
      Field<double>("max_calibration_time_limit_s", "--max-calibration-time-limit",
                    [](C* c) { return &c->tuning.max_calibration_time_limit_s; }),
      Field<int>("max_jobs_per_principal", "--max-jobs-per-principal",
                 [](C* c) { return &c->server.max_jobs_per_principal; }),
      Field<int>("max_joiners_per_job", "--max-joiners-per-job",
                 [](C* c) { return &c->server.max_joiners_per_job; }),
      Field<double>("agent_lease_s", "--agent-lease",
                    [](C* c) { return &c->tuning.agent_lease_s; }),
      Field<double>("agent_live_s", "--agent-live", [](C* c) { return &c->tuning.agent_live_s; }),
      Field<double>("agent_poll_s", "--agent-poll", [](C* c) { return &c->tuning.agent_poll_s; }),
      Field<bool>("measure_on_agents", "--measure-on-agents",
                  [](C* c) { return &c->tuning.measure_on_agents; }),
      Field<bool>("measure_uncalibrated", "--measure-uncalibrated",
                  [](C* c) { return &c->tuning.measure_uncalibrated; }),
      Field<bool>("learned_residual", "--learned-residual",
                  [](C* c) { return &c->tuning.learned_residual; }),
      Field<int>("residual_refit_every", "--residual-refit-every",
                 [](C* c) { return &c->tuning.residual_refit_every; }),
      Field<std::string>("log_level", "--log-level", [](C* c) { return &c->log_level; }),
      Field<std::string>("log_format", "--log-format", [](C* c) { return &c->log_format; }),
      Field<std::string>("metrics_listen", "--metrics-listen",
                         [](C* c) { return &c->metrics_listen; }),
  };
  return settings;
}

std::string KnownKeys() {
  std::string out;
  for (const Setting& s : Settings()) out += (out.empty() ? "" : ", ") + std::string(s.key);
  return out;
}

Status CheckValues(const FusordConfig& c) {
  if (spdlog::level::from_str(c.log_level) == spdlog::level::off && c.log_level != "off") {
    return Status::InvalidArgument("log_level '" + c.log_level +
                                   "' is not one of trace, debug, info, warn, error, off");
  }
  if (c.log_format != "text" && c.log_format != "json") {
    return Status::InvalidArgument("log_format '" + c.log_format + "' is not one of text, json");
  }
  // Only the address's form here (a usage error, exit 2); the loopback rule is checked when the
  // listener starts (exit 1), as it is for the gRPC listen address.
  if (!c.metrics_listen.empty()) {
    FUSOR_RETURN_IF_ERROR(
        CheckMetricsListen(c.metrics_listen, /*allow_insecure_remote=*/true).status());
  }
  if (!(c.shutdown_grace_s >= 0 && c.shutdown_grace_s <= 86'400)) {
    return Status::InvalidArgument("shutdown_grace_s must be in [0, 86400]");
  }
  if (c.server.limits.max_nodes < 1 || c.server.limits.max_tensor_elements < 1) {
    return Status::InvalidArgument("max_nodes and max_tensor_elements must be at least 1");
  }
  const TuningServiceOptions& t = c.tuning;
  if (t.default_measure_budget < 0 || !(t.default_time_limit_s > 0) ||
      !(t.calibration_time_limit_s > 0)) {
    return Status::InvalidArgument(
        "default_measure_budget must be >= 0 and the time limits positive");
  }
  if (t.max_measure_budget < t.default_measure_budget || t.max_measure_budget > 10'000) {
    return Status::InvalidArgument("max_measure_budget must be in [default_measure_budget, 10000]");
  }
  if (!(t.max_time_limit_s >= t.default_time_limit_s) || t.max_time_limit_s > 86'400) {
    return Status::InvalidArgument("max_time_limit_s must be in [default_time_limit_s, 86400]");
  }
  if (!(t.agent_lease_s > 0 && t.agent_lease_s <= 86'400) ||
      !(t.agent_live_s > 0 && t.agent_live_s <= 86'400) ||
      !(t.agent_poll_s >= 0 && t.agent_poll_s <= 600)) {
    return Status::InvalidArgument(
        "agent_lease_s and agent_live_s must be in (0, 86400], agent_poll_s in [0, 600]");
  }
  if (!(t.max_calibration_time_limit_s >= t.calibration_time_limit_s) ||
      t.max_calibration_time_limit_s > 86'400) {
    return Status::InvalidArgument(
        "max_calibration_time_limit_s must be in [calibration_time_limit_s, 86400]");
  }
  if (t.residual_refit_every < 1 || t.residual_refit_every > 1'000'000) {
    return Status::InvalidArgument("residual_refit_every must be in [1, 1000000]");
  }
  return Status::Ok();
}

}  // namespace

void AddFusordFlags(CLI::App* app, FusordConfig* c) {
  app->option_defaults()->always_capture_default();  // Every default shows in --help.
  app->add_option("--config", c->config_file, "JSON config file (deploy/fusord.example.json)");
  app->add_option("--listen", c->server.listen, "host:port or unix:PATH (port 0: any free port)");
  app->add_option("--db", c->tuning.db_location,
                  "Tuning database: a SQLite file, sqlite:PATH or postgresql://... "
                  "(default: the CLI's SQLite file)");
  app->add_option("--worker-threads", c->server.worker_threads, "Tuning jobs that run at once");
  app->add_option("--queue-size", c->server.queue_size, "Tuning jobs that may wait");
  app->add_option("--max-rpc-threads", c->server.max_rpc_threads, "Threads serving RPCs");
  app->add_option("--max-message-bytes", c->server.max_message_bytes, "Largest request");
  app->add_option("--max-memory-bytes", c->server.max_memory_bytes,
                  "Memory gRPC may use for all calls together");
  app->add_option("--max-parse-bytes", c->server.max_parse_bytes,
                  "Memory the parsed requests of all calls may hold together");
  app->add_option("--unix-socket-group", c->server.unix_socket_group,
                  "With --listen unix:PATH: the socket's group, which may connect (mode 0660)");
  app->add_option("--max-concurrent-streams", c->server.max_concurrent_streams,
                  "Calls at once on one connection");
  app->add_option("--max-connection-idle", c->server.max_connection_idle_s,
                  "Seconds an idle connection stays open");
  app->add_option("--max-connection-age", c->server.max_connection_age_s,
                  "Seconds before a connection is asked to reconnect");
  app->add_option("--connection-age-grace", c->server.connection_age_grace_s,
                  "Seconds an aged connection's calls get to finish");
  app->add_option("--max-nodes", c->server.limits.max_nodes, "Nodes per graph");
  app->add_option("--max-tensor-elements", c->server.limits.max_tensor_elements,
                  "Elements per tensor");
  app->add_option("--tls-cert", c->server.tls_cert, "PEM certificate chain (enables TLS)");
  app->add_option("--tls-key", c->server.tls_key, "PEM private key");
  app->add_option("--tls-client-ca", c->server.tls_client_ca,
                  "PEM roots that must sign client certificates (mutual TLS)");
  app->add_option("--token-file", c->server.token_file, "Lines 'TOKEN ROLES [NAME]'");
  app->add_flag("--allow-insecure-remote", c->server.allow_insecure_remote,
                "Listen beyond loopback without a token file or TLS (a trusted network only)");
  app->add_option("--shutdown-grace", c->shutdown_grace_s,
                  "Seconds in-flight calls get on SIGTERM");
  app->add_option("--measure-threads", c->tuning.measure_threads, "OpenMP threads; 0: all");
  app->add_option("--default-measure-budget", c->tuning.default_measure_budget,
                  "Plans measured per Tune");
  app->add_option("--default-time-limit", c->tuning.default_time_limit_s, "Seconds per Tune");
  app->add_option("--max-time-limit", c->tuning.max_time_limit_s,
                  "Most seconds a Tune may ask for");
  app->add_option("--max-measure-budget", c->tuning.max_measure_budget,
                  "Most plans a Tune may ask to measure");
  app->add_option("--calibration-time-limit", c->tuning.calibration_time_limit_s,
                  "Seconds per Calibrate");
  app->add_option("--max-calibration-time-limit", c->tuning.max_calibration_time_limit_s,
                  "Most seconds a Calibrate may ask for");
  app->add_option("--max-jobs-per-principal", c->server.max_jobs_per_principal,
                  "Tuning jobs one principal may have queued or running");
  app->add_option("--max-joiners-per-job", c->server.max_joiners_per_job,
                  "Callers that may share one tuning job");
  app->add_option("--agent-lease", c->tuning.agent_lease_s,
                  "Seconds a measurement agent's lease lasts unless renewed");
  app->add_option("--agent-live", c->tuning.agent_live_s,
                  "Seconds since its last call within which an agent counts as live");
  app->add_option("--agent-poll", c->tuning.agent_poll_s,
                  "Most seconds an agent's poll waits for a job");
  app->add_flag("--measure-on-agents", c->tuning.measure_on_agents,
                "Send this CPU's measurements to live agents of it too");
  app->add_flag("--measure-uncalibrated", c->tuning.measure_uncalibrated,
                "Measure on this CPU before it was calibrated, with the default constants "
                "(default: calibrate it before the first Tune that measures)");
  app->add_flag("--learned-residual", c->tuning.learned_residual,
                "Score Tunes with the target's learned residual on top of the analytical cost "
                "model and fit it (timings are kept either way)");
  app->add_option("--residual-refit-every", c->tuning.residual_refit_every,
                  "Refit a target's learned residual after this many new timings");
  app->add_option("--log-level", c->log_level, "trace, debug, info, warn, error");
  app->add_option("--log-format", c->log_format, "text, or json (one JSON object a line)");
  app->add_option("--metrics-listen", c->metrics_listen,
                  "HOST:PORT or PORT (loopback) serving Prometheus metrics at /metrics");
}

Status ApplyConfigJson(const std::string& text, const std::string& origin, const CLI::App& app,
                       FusordConfig* config) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument(origin + ": not a JSON object");
  }
  for (const auto& [key, value] : j.items()) {
    auto it = std::find_if(Settings().begin(), Settings().end(),
                           [&key = key](const Setting& s) { return key == s.key; });
    if (it == Settings().end()) {
      return Status::InvalidArgument(origin + ": unknown key '" + key +
                                     "'; known keys: " + KnownKeys());
    }
    if (app.count(it->flag) > 0) continue;
    FUSOR_RETURN_IF_ERROR(it->apply(value, config).WithContext(origin));
  }
  return Status::Ok();
}

Status ApplyConfigFile(const CLI::App& app, FusordConfig* config) {
  if (!config->config_file.empty()) {
    std::ifstream in(config->config_file, std::ios::binary);
    if (!in) return Status::IOError("cannot read config file '" + config->config_file + "'");
    std::stringstream text;
    text << in.rdbuf();
    FUSOR_RETURN_IF_ERROR(ApplyConfigJson(text.str(), config->config_file, app, config));
  }
  return CheckValues(*config);
}

}  // namespace fusor
