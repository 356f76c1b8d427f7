// fusord: serves the tuning service (TuningService over SQLite) as fusor.v1.FusionTuner over gRPC.
// Settings come from flags and an optional JSON config file (server/fusord_config.h). SIGTERM or
// SIGINT shuts down gracefully: in-flight calls get shutdown_grace_s to finish, then are
// cancelled, and the database is closed before the process exits.
#include <signal.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "base/net_address.h"
#include "db/default_path.h"
#include "db/open_plan_store.h"
#include "server/fusord_config.h"
#include "server/json_log.h"
#include "server/metrics_http.h"
#include "server/tuner_server.h"
#include "server/tuning_service.h"

namespace fusor {
namespace {

constexpr int kExitStartFailed = 1;
constexpr int kExitUsage = 2;

// Log lines to stderr through stdio's buffer. spdlog's own stderr sinks flush after every line,
// a write(2) per request that cost a fifth of GetPlan throughput (docs/benchmarks.md); here
// lines are flushed at warnings and above, once a second, and at exit. Text lines by default,
// JSON lines (server/json_log.h) once set_json is called.
class BufferedStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void set_json(bool json) { json_ = json; }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (json_) {
      std::string line = JsonLogLine(msg);
      fwrite(line.data(), 1, line.size(), stderr);
      return;
    }
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    fwrite(line.data(), 1, line.size(), stderr);
  }
  void flush_() override { fflush(stderr); }

 private:
  std::atomic<bool> json_{false};
};

std::shared_ptr<BufferedStderrSink> InstallLogger() {
  static char buffer[1 << 16];
  setvbuf(stderr, buffer, _IOFBF, sizeof buffer);
  auto sink = std::make_shared<BufferedStderrSink>();
  auto logger = std::make_shared<spdlog::logger>("fusord", sink);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  spdlog::flush_every(std::chrono::seconds(1));
  return sink;
}

// Blocks the shutdown signals in every thread (they inherit the mask), so that only sigwait in
// main receives them and no gRPC or OpenMP thread is interrupted.
sigset_t BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

Status ResolveDatabasePath(FusordConfig* config) {
  if (!config->tuning.db_location.empty()) return Status::Ok();
  FUSOR_ASSIGN_OR_RETURN(config->tuning.db_location, db::DefaultDatabasePath(true));
  return Status::Ok();
}

// The paths a client has no business seeing in an error message.
// The server's file paths, as given and made absolute, hidden from clients' error messages.
std::vector<std::string> PrivateStrings(const FusordConfig& config) {
  std::vector<std::string> out;
  auto add = [&out](const std::string& path) {
    if (path.empty()) return;
    out.push_back(path);
    std::error_code ec;
    std::string absolute = std::filesystem::absolute(path, ec).lexically_normal().string();
    if (!ec && absolute != path) out.push_back(absolute);
  };
  // A SQLite file's path is private; a PostgreSQL location is named in errors only redacted
  // (db/open_plan_store.h), so clients may see which server and database failed.
  auto location = db::ParseStoreLocation(config.tuning.db_location);
  if (location.ok() && location->kind == db::StoreLocation::Kind::kSqlite) {
    add(location->target);
    std::string dir = std::filesystem::path(location->target).parent_path().string();
    if (dir.size() > 1) add(dir);
  }
  for (const std::string& path : {config.config_file, config.server.token_file,
                                  config.server.tls_cert, config.server.tls_key}) {
    add(path);
  }
  return out;
}

int Serve(FusordConfig config, const sigset_t& signals) {
  config.tuning.limits = config.server.limits;
  if (Status s = CheckTunerServerOptions(config.server); !s.ok()) {
    spdlog::error("fusord: {}", s.ToString());
    return kExitStartFailed;
  }
  if (Status s = ResolveDatabasePath(&config); !s.ok()) {
    spdlog::error("fusord: {}", s.ToString());
    return kExitStartFailed;
  }
  config.server.private_strings = PrivateStrings(config);
  auto service = TuningService::Open(config.tuning);
  if (!service.ok()) {
    spdlog::error("fusord: cannot open the tuning service: {}", service.status().ToString());
    return kExitStartFailed;
  }
  auto server = TunerServer::Start(service->get(), config.server);
  if (!server.ok()) {
    spdlog::error("fusord: {}", server.status().ToString());
    return kExitStartFailed;
  }
  std::unique_ptr<MetricsHttpServer> metrics;
  if (!config.metrics_listen.empty()) {
    auto started =
        MetricsHttpServer::Start(config.metrics_listen, config.server.allow_insecure_remote);
    if (!started.ok()) {
      spdlog::error("fusord: {}", started.status().ToString());
      return kExitStartFailed;
    }
    metrics = std::move(started).value();
  }
  spdlog::info("fusord: listening on {} tls={} auth={} workers={} queue={} metrics={} db={}",
               (*server)->address(), (*server)->tls() ? "on" : "off",
               (*server)->authenticated() ? "tokens" : "off", config.server.worker_threads,
               config.server.queue_size,
               metrics ? "http://" + metrics->address() + "/metrics" : std::string("off"),
               db::RedactedLocation(config.tuning.db_location));
  if (!IsLoopbackAddress(config.server.listen) &&
      (config.server.token_file.empty() || config.server.tls_cert.empty())) {
    spdlog::warn(
        "fusord: listening on {} with {}: allowed by allow_insecure_remote; use it on a trusted "
        "network only",
        config.server.listen,
        config.server.token_file.empty() ? "no tokens" : "tokens in plaintext");
  }
  if (metrics && !IsLoopbackAddress(metrics->address())) {
    spdlog::warn("fusord: metrics on {} without tokens or TLS: allowed by allow_insecure_remote",
                 metrics->address());
  }
  spdlog::default_logger()->flush();  // Scripts and tests wait for this line.
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("fusord: {} received, shutting down (grace {:.0f} s)",
               sig == SIGTERM ? "SIGTERM" : "SIGINT", config.shutdown_grace_s);
  auto grace = std::chrono::milliseconds(static_cast<int64_t>(config.shutdown_grace_s * 1000));
  (*server)->Shutdown(grace);
  if (metrics) metrics->Stop();
  server->reset();
  service->reset();
  spdlog::info("fusord: stopped; database {} closed",
               db::RedactedLocation(config.tuning.db_location));
  spdlog::shutdown();
  return 0;
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) {
  sigset_t signals = fusor::BlockShutdownSignals();
  auto sink = fusor::InstallLogger();
  CLI::App app{"fusord: the Fusor tuning service (fusor.v1.FusionTuner over gRPC)"};
  app.set_version_flag("--version", "fusord 0.1.0");
  fusor::FusordConfig config;
  fusor::AddFusordFlags(&app, &config);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : fusor::kExitUsage;
  }
  if (fusor::Status s = fusor::ApplyConfigFile(app, &config); !s.ok()) {
    spdlog::error("fusord: {}", s.ToString());
    return fusor::kExitUsage;
  }
  sink->set_json(config.log_format == "json");
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  return fusor::Serve(std::move(config), signals);
}
