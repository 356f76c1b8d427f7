// Load generator for a running fusord: several client threads, each on its own connection, send
// (1) GetPlan for a plan already stored (cache hits: the path deployments hit), and (2) Tune for
// distinct small graphs (forced, so every one searches, measures and stores). Prints
// QPS and p50/p99/max latency per phase.
//   build/bench/grpc_load --server 127.0.0.1:7070[,127.0.0.1:7071...] [--token T] [--threads 4]
//                         [--seconds 10]
//                         [--tune-graphs 20] [--tune-threads 2]
//                         [--soak-seconds 60 [--soak-clients 64] [--server-pid PID]]
// The token (read and tune roles) may also come from FUSOR_TOKEN. With several --server addresses
// (replicas on one PostgreSQL store) client thread t of every phase talks to server t mod N, so
// the same total client threads spread evenly over the replicas (docs/scale-out.md).
// --soak-seconds S runs a soak phase instead: --soak-clients clients (64) mix GetPlan, QueryPlans
// and Tune (a small set of graphs, so jobs are shared and the queue fills) for S seconds; it
// prints the calls by status code (RESOURCE_EXHAUSTED is fusord refusing by design, anything else
// other than OK is an error) and, with --server-pid, fusord's resident memory every 10 s.
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "graph/graph_proto.h"
#include "proto/tuner.grpc.pb.h"
#include "server/grpc_status.h"

namespace {

using Clock = std::chrono::steady_clock;

struct LoadOptions {
  std::vector<std::string> servers = {"127.0.0.1:7070"};
  std::string token;
  int threads = 4;
  double seconds = 10;
  int tune_graphs = 20;
  int tune_threads = 2;
};

struct PhaseResult {
  std::vector<double> latencies_ms;
  int64_t errors = 0;
  double wall_s = 0;
};

std::unique_ptr<fusor::v1::FusionTuner::Stub> Connect(const std::string& server, int id) {
  grpc::ChannelArguments args;
  // A distinct argument and a local subchannel pool give each thread its own TCP connection, as
  // separate client machines would have.
  args.SetInt("fusor.bench.connection", id);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return fusor::v1::FusionTuner::NewStub(
      grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args));
}

// Client thread `thread` of a phase talks to one server, round robin over --server.
const std::string& ServerFor(const LoadOptions& o, int thread) {
  return o.servers[static_cast<size_t>(thread) % o.servers.size()];
}

void Authorize(grpc::ClientContext* ctx, const std::string& token) {
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
}

fusor::TensorId AddTensor(fusor::Graph* g, const std::string& name, fusor::Shape dims,
                          fusor::TensorKind kind) {
  fusor::Tensor t;
  t.name = name;
  t.dims = std::move(dims);
  t.kind = kind;
  t.dtype = fusor::DType::kFloat32;
  return g->AddTensor(std::move(t));
}

void AddOp(fusor::Graph* g, const std::string& op, std::vector<fusor::TensorId> inputs,
           fusor::TensorId output) {
  fusor::Node n;
  n.name = op + "_" + std::to_string(g->num_nodes());
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = {output};
  g->AddNode(std::move(n));
}

// A small MLP, `layers` x (MatMul, Add bias, Relu), batch 8: an anchor with post-ops per layer,
// which is what the search and the measurement spend their time on. Distinct `variant`s below
// 512 have distinct widths, hence distinct canonical hashes.
fusor::Graph SmallMlp(int variant, int layers = 4) {
  int64_t width = 32 + 4 * (variant % 512);
  fusor::Graph g;
  fusor::TensorId x = AddTensor(&g, "x", {8, width}, fusor::TensorKind::kGraphInput);
  g.AddInput(x);
  for (int l = 0; l < layers; ++l) {
    std::string p = "l" + std::to_string(l) + "_";
    auto w = AddTensor(&g, p + "w", {width, width}, fusor::TensorKind::kWeight);
    auto b = AddTensor(&g, p + "b", {width}, fusor::TensorKind::kWeight);
    auto mm = AddTensor(&g, p + "mm", {8, width}, fusor::TensorKind::kActivation);
    auto add = AddTensor(&g, p + "add", {8, width}, fusor::TensorKind::kActivation);
    auto relu = AddTensor(&g, p + "relu", {8, width}, fusor::TensorKind::kActivation);
    AddOp(&g, "MatMul", {x, w}, mm);
    AddOp(&g, "Add", {mm, b}, add);
    AddOp(&g, "Relu", {add}, relu);
    x = relu;
  }
  g.AddOutput(x);
  g.Link();
  g.model_name = "grpc_load_" + std::to_string(variant);
  return g;
}

// `force` makes a Tune of a graph tuned by an earlier run search and measure again.
fusor::v1::TuneRequest SmallTune(int variant, bool force) {
  fusor::v1::TuneRequest r;
  *r.mutable_graph() = fusor::ToProto(SmallMlp(variant));
  r.mutable_options()->set_measure_budget(1);
  r.set_force(force);
  return r;
}

grpc::Status RunTune(fusor::v1::FusionTuner::Stub* stub, const std::string& token,
                     const fusor::v1::TuneRequest& request, fusor::v1::Plan* plan) {
  grpc::ClientContext ctx;
  Authorize(&ctx, token);
  auto reader = stub->Tune(&ctx, request);
  fusor::v1::TuneEvent e;
  while (reader->Read(&e)) {
    if (e.has_result()) *plan = e.result().plan();
  }
  return reader->Finish();
}

PhaseResult GetPlanPhase(const LoadOptions& o, const fusor::v1::GetPlanRequest& request) {
  std::vector<std::vector<double>> per_thread(o.threads);
  std::atomic<int64_t> errors{0};
  auto end = Clock::now() + std::chrono::duration<double>(o.seconds);
  auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] {
      auto stub = Connect(ServerFor(o, t), t);
      fusor::v1::GetPlanResponse response;
      while (Clock::now() < end) {
        grpc::ClientContext ctx;
        Authorize(&ctx, o.token);
        auto t0 = Clock::now();
        grpc::Status s = stub->GetPlan(&ctx, request, &response);
        per_thread[t].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        if (!s.ok()) ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  PhaseResult r;
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& v : per_thread) r.latencies_ms.insert(r.latencies_ms.end(), v.begin(), v.end());
  r.errors = errors;
  return r;
}

PhaseResult TunePhase(const LoadOptions& o) {
  std::vector<std::vector<double>> per_thread(o.tune_threads);
  std::atomic<int64_t> errors{0};
  std::atomic<int> next{0};
  auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < o.tune_threads; ++t) {
    threads.emplace_back([&, t] {
      auto stub = Connect(ServerFor(o, t), 1000 + t);
      for (int i = next++; i < o.tune_graphs; i = next++) {
        fusor::v1::TuneRequest request = SmallTune(1 + i, /*force=*/true);
        fusor::v1::Plan plan;
        auto t0 = Clock::now();
        grpc::Status s = RunTune(stub.get(), o.token, request, &plan);
        per_thread[t].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        if (!s.ok()) {
          ++errors;
          std::fprintf(stderr, "grpc_load: Tune: %s\n", s.error_message().c_str());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  PhaseResult r;
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& v : per_thread) r.latencies_ms.insert(r.latencies_ms.end(), v.begin(), v.end());
  r.errors = errors;
  return r;
}

int64_t ResidentKiB(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return -1;
}

// Each client picks its next call from a fixed-seed stream: 6 in 10 GetPlan, 3 QueryPlans, 1 Tune.
int Soak(const LoadOptions& o, const fusor::v1::GetPlanRequest& get, double seconds, int clients,
         int server_pid) {
  std::mutex mu;
  std::map<std::string, int64_t> by_code;  // "Method CODE" -> calls; guarded by mu.
  std::atomic<bool> stop{false};
  auto count = [&](const char* method, const grpc::Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    ++by_code[std::string(method) + " " + std::string(fusor::GrpcCodeName(s.error_code()))];
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto stub = Connect(ServerFor(o, c), 2000 + c);
      std::mt19937 rng(static_cast<uint32_t>(c));
      while (!stop) {
        int pick = static_cast<int>(rng() % 10);
        grpc::ClientContext ctx;
        Authorize(&ctx, o.token);
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
        if (pick < 6) {
          fusor::v1::GetPlanResponse r;
          count("GetPlan", stub->GetPlan(&ctx, get, &r));
        } else if (pick < 9) {
          fusor::v1::QueryPlansRequest q;
          q.set_page_size(20);
          fusor::v1::QueryPlansResponse r;
          count("QueryPlans", stub->QueryPlans(&ctx, q, &r));
        } else {
          fusor::v1::Plan plan;
          count("Tune", RunTune(stub.get(), o.token,
                                SmallTune(1 + static_cast<int>(rng() % 8),
                                          /*force=*/false),
                                &plan));
        }
      }
    });
  }
  std::printf("fusord resident memory (KiB):");
  auto start = Clock::now();
  for (int tick = 0; Clock::now() - start < std::chrono::duration<double>(seconds); ++tick) {
    if (server_pid > 0 && tick % 10 == 0)
      std::printf(" %lld", static_cast<long long>(ResidentKiB(server_pid)));
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  stop = true;
  for (auto& t : threads) t.join();
  if (server_pid > 0) std::printf(" %lld (after)", static_cast<long long>(ResidentKiB(server_pid)));
  std::printf("\n| call | status | count |\n|---|---|---|\n");
  int64_t errors = 0;
  for (const auto& [key, n] : by_code) {
    size_t space = key.find(' ');
    std::string code = key.substr(space + 1);
    std::printf("| %s | %s | %lld |\n", key.substr(0, space).c_str(), code.c_str(),
                static_cast<long long>(n));
    if (code != "OK" && code != "RESOURCE_EXHAUSTED") errors += n;
  }
  std::printf("errors other than RESOURCE_EXHAUSTED: %lld\n", static_cast<long long>(errors));
  return errors == 0 ? 0 : 1;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

void Report(const char* phase, int threads, const PhaseResult& r) {
  double max =
      r.latencies_ms.empty() ? 0 : *std::max_element(r.latencies_ms.begin(), r.latencies_ms.end());
  std::printf("| %s | %d | %zu | %lld | %.1f | %.2f | %.2f | %.2f |\n", phase, threads,
              r.latencies_ms.size(), static_cast<long long>(r.errors),
              static_cast<double>(r.latencies_ms.size()) / r.wall_s,
              Percentile(r.latencies_ms, 0.50), Percentile(r.latencies_ms, 0.99), max);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"grpc_load: GetPlan and Tune load against a running fusord"};
  LoadOptions o;
  if (const char* t = std::getenv("FUSOR_TOKEN")) o.token = t;
  app.add_option("--server", o.servers,
                 "fusord address; several, comma-separated, spread the clients")
      ->delimiter(',');
  app.add_option("--token", o.token, "Bearer token with read and tune roles");
  app.add_option("--threads", o.threads, "GetPlan client threads");
  app.add_option("--seconds", o.seconds, "GetPlan phase duration");
  app.add_option("--tune-graphs", o.tune_graphs, "Distinct graphs to tune (0: skip the phase)")
      ->check(CLI::Range(0, 511));
  app.add_option("--tune-threads", o.tune_threads, "Tune client threads");
  double soak_seconds = 0;
  int soak_clients = 64;
  int server_pid = 0;
  app.add_option("--soak-seconds", soak_seconds, "Run the mixed soak phase for this long instead");
  app.add_option("--soak-clients", soak_clients, "Soak clients, each on its own connection")
      ->check(CLI::Range(1, 1024));
  app.add_option("--server-pid", server_pid, "fusord's pid, to report its resident memory");
  CLI11_PARSE(app, argc, argv);

  // A plan to hit: tune one graph (a cache hit itself if it was tuned before).
  auto stub = Connect(o.servers.front(), -1);
  fusor::v1::Plan plan;
  grpc::Status s = RunTune(stub.get(), o.token, SmallTune(0, /*force=*/false), &plan);
  if (!s.ok()) {
    std::fprintf(stderr, "grpc_load: seeding Tune failed: %s\n", s.error_message().c_str());
    return 1;
  }
  fusor::v1::GetPlanRequest get;
  get.set_graph_hash(plan.graph_hash());
  get.set_target_id(plan.target_id());

  if (soak_seconds > 0) return Soak(o, get, soak_seconds, soak_clients, server_pid);
  std::printf(
      "| phase | client threads | requests | errors | QPS | p50 (ms) | p99 (ms) | max (ms) |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  Report("GetPlan (cache hit)", o.threads, GetPlanPhase(o, get));
  if (o.tune_graphs > 0) Report("Tune (distinct graphs)", o.tune_threads, TunePhase(o));
  return 0;
}
