#include "tests/server/memory_probe.h"

#include <fstream>
#include <sstream>
#include <thread>

#include "tests/server/wire.h"

namespace fusor::testing {
namespace {

// Its own connection: channels with equal arguments would share one (and its stream limit).
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace

StatusOr<int64_t> PeakRssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    int64_t kb = 0;
    fields >> kb;
    return kb * 1024;
  }
  return Status::IOError("no VmHWM in /proc/" + std::to_string(pid) + "/status");
}

std::string EmptyNodesTuneRequest(size_t bytes) {
  const size_t nodes = (bytes - 8) / 2;
  std::string graph;
  graph.reserve(bytes);
  for (size_t i = 0; i < nodes; ++i) graph += LengthDelimitedField(3, "");
  std::string request = LengthDelimitedField(1, graph);
  if (request.size() < bytes) {
    const size_t pad = bytes - request.size();
    // Graph.model_name (field 1): tag, length and text, inside the graph; its varint may grow.
    graph = LengthDelimitedField(1, std::string(pad > 2 ? pad - 2 : 0, 'm')) + graph;
    request = LengthDelimitedField(1, graph);
  }
  return request;
}

StatusOr<ProbeResult> ProbeTuneMemory(const std::string& address, pid_t pid, int calls,
                                      const std::string& request, const std::string& token) {
  ProbeResult result;
  FUSOR_ASSIGN_OR_RETURN(result.peak_before_bytes, PeakRssBytes(pid));
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < calls; ++i) {
    channels.push_back(OwnChannel(address));
    channels.back()->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }
  result.statuses.resize(calls);
  std::vector<std::thread> threads;
  for (int i = 0; i < calls; ++i) {
    threads.emplace_back([&, i] {
      result.statuses[i] =
          RawUnaryCall(channels[i], "/fusor.v1.FusionTuner/Tune", request, nullptr, token);
    });
  }
  for (std::thread& t : threads) t.join();
  FUSOR_ASSIGN_OR_RETURN(result.peak_after_bytes, PeakRssBytes(pid));
  return result;
}

}  // namespace fusor::testing
