#include "server/metrics_http.h"

#include <httplib.h>
#include <sys/socket.h>

#include <charconv>
#include <chrono>
#include <mutex>
#include <thread>

#include "base/metrics.h"
#include "base/net_address.h"

namespace fusor {
namespace {

constexpr size_t kServingThreads = 2;  // Scrapes are rare; a few at once is plenty.

// SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, with which a second fusord on the
// same metrics port would bind too and answer half the scrapes; binding must fail instead.
void ReuseAddressOnly(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

StatusOr<int> PortOf(const std::string& listen, const std::string& text) {
  int port = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || port < 0 ||
      port > 65535) {
    return Status::InvalidArgument("metrics_listen '" + listen +
                                   "': the port must be a number in 0..65535 (HOST:PORT or PORT)");
  }
  return port;
}

struct Endpoint {
  std::string host;
  int port = 0;
};

StatusOr<Endpoint> ParseListen(const std::string& listen) {
  if (listen.rfind("unix:", 0) == 0) {
    return Status::InvalidArgument("metrics_listen '" + listen +
                                   "': a unix socket is not supported; give HOST:PORT or PORT");
  }
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    FUSOR_ASSIGN_OR_RETURN(int port, PortOf(listen, listen));
    return Endpoint{"127.0.0.1", port};
  }
  std::string host = HostOfAddress(listen);
  if (host.empty()) {
    return Status::InvalidArgument("metrics_listen '" + listen + "' has no host before the ':'");
  }
  FUSOR_ASSIGN_OR_RETURN(int port, PortOf(listen, listen.substr(colon + 1)));
  return Endpoint{host, port};
}

std::string Joined(const Endpoint& e) {
  bool v6 = e.host.find(':') != std::string::npos;
  return (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

}  // namespace

StatusOr<std::string> CheckMetricsListen(const std::string& listen, bool allow_insecure_remote) {
  FUSOR_ASSIGN_OR_RETURN(Endpoint e, ParseListen(listen));
  std::string address = Joined(e);
  if (!allow_insecure_remote && !IsLoopbackAddress(address)) {
    return Status::FailedPrecondition(
        "refusing to serve metrics on " + address +
        ": the endpoint has no tokens or TLS, so anyone who can reach it could read fusord's "
        "targets and load. Serve them on 127.0.0.1 (a local Prometheus or a proxy), or pass "
        "--allow-insecure-remote (a trusted network only)");
  }
  return address;
}

struct MetricsHttpServer::State {
  httplib::Server http;
  Endpoint bound;
  std::thread thread;
  std::mutex stop_mu;  // Serialises Stop; guards stopped.
  bool stopped = false;
};

StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& listen,
                                                                      bool allow_insecure_remote) {
  FUSOR_ASSIGN_OR_RETURN(std::string address, CheckMetricsListen(listen, allow_insecure_remote));
  FUSOR_ASSIGN_OR_RETURN(Endpoint endpoint, ParseListen(address));
  auto state = std::make_unique<State>();
  httplib::Server& http = state->http;
  http.new_task_queue = [] { return new httplib::ThreadPool(kServingThreads); };
  http.set_socket_options(ReuseAddressOnly);
  http.set_payload_max_length(4096);
  http.set_read_timeout(5, 0);
  http.set_write_timeout(5, 0);
  http.Get("/metrics", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(metrics::Registry::Default().Exposition(),
                         "text/plain; version=0.0.4; charset=utf-8");
  });
  int port = endpoint.port;
  bool bound = port == 0 ? (port = http.bind_to_any_port(endpoint.host)) > 0
                         : http.bind_to_port(endpoint.host, port);
  if (!bound) {
    return Status::Unavailable("cannot serve metrics on " + address +
                               " (address in use, or not an address of this machine?)");
  }
  state->bound = {endpoint.host, port};
  state->thread = std::thread([http = &state->http] { http->listen_after_bind(); });
  // httplib's stop() does nothing before the loop runs, so Stop could not end a loop that had
  // not started yet.
  for (int i = 0; i < 5000 && !http.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(std::move(state)));
}

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

std::string MetricsHttpServer::address() const { return Joined(state_->bound); }

void MetricsHttpServer::Stop() {
  std::lock_guard<std::mutex> lock(state_->stop_mu);
  if (state_->stopped) return;
  state_->stopped = true;
  state_->http.stop();
  state_->thread.join();
}

}  // namespace fusor
