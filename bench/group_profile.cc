// Fusor's side of the per-node profile (bench/peers/profile.py reads what it writes and puts ONNX
// Runtime's profile beside it; bench/peers/README.md):
//
//   group_profile [--threads T] [--runs N] [--unfused] --dir DIR MODEL.onnx[=PLAN.json][@dim=V,...]
//
// Loads the model, its weights and its plan as peer_bench does (bench/peer_model.h; --unfused
// runs every op alone instead), writes the seeded graph inputs to DIR/in/<input name>.npy and
// the outputs of one run to DIR/fusor_out/output_<k>.npy (graph output order), then, after
// ~200 ms of untimed runs, N profiled runs (Executor::RunProfiled, T OpenMP threads, the OpenMP
// environment as the user has it) into DIR/fusor.json (version 1):
//   {"version": 1, "model": NAME, "plan": PLAN_NAME, "threads": T,
//    "run_ms": [one whole profiled run's wall time per run],
//    "groups": [{"kind": "anchor", "lowering": Executor::DescribeGroup,
//                "nodes": [{"name": ONNX node name, "op": op type}, ...],
//                "ms": [the group's time per run]}, ...]}   (plan order)
// Node names are the ONNX model's (unnamed nodes get OP_INDEX, graph/onnx_import.cc); nodes the
// import folded or removed are in no group.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/peer_model.h"
#include "graph/tensor_file.h"
#include "runtime/executor.h"
#include "runtime/measurer.h"
#include "runtime/model_weights.h"

namespace fusor {
namespace {

namespace fs = std::filesystem;

inline constexpr int kFormatVersion = 1;
inline constexpr double kWarmMs = 200;

struct Options {
  int threads = 2;
  int runs = 20;
  bool unfused = false;
  std::string dir;
  std::string model;
};

Status WriteOutputs(const Graph& g, const Executor& exec, const fs::path& dir) {
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    TensorId t = g.outputs()[k];
    FUSOR_ASSIGN_OR_RETURN(HostTensor value, exec.Read(t));
    FUSOR_RETURN_IF_ERROR(WriteTensorFile((dir / ("output_" + std::to_string(k) + ".npy")).string(),
                                          ToTensorData(g.tensor(t).name, value)));
  }
  return Status::Ok();
}

nlohmann::json GroupJson(const Graph& g, const FusionGroup& group, const Executor& exec,
                         size_t index) {
  nlohmann::json nodes = nlohmann::json::array();
  for (NodeId n : group.nodes) {
    nodes.push_back({{"name", g.node(n).name}, {"op", g.node(n).op_type}});
  }
  return {{"kind", GroupKindName(group.kind)},
          {"lowering", exec.DescribeGroup(index)},
          {"nodes", nodes},
          {"ms", nlohmann::json::array()}};
}

// ~kWarmMs of untimed runs, then o.runs profiled ones, recorded into `out`.
void Profile(Executor& exec, const Options& o, nlohmann::json* out) {
  using Clock = std::chrono::steady_clock;
  for (auto start = Clock::now();
       std::chrono::duration<double, std::milli>(Clock::now() - start).count() < kWarmMs;) {
    exec.Run();
  }
  std::vector<double> seconds;
  for (int r = 0; r < o.runs; ++r) {
    auto t0 = Clock::now();
    exec.RunProfiled(&seconds);
    (*out)["run_ms"].push_back(
        std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    for (size_t i = 0; i < seconds.size(); ++i)
      (*out)["groups"][i]["ms"].push_back(seconds[i] * 1e3);
  }
}

Status Run(const Options& o) {
  FUSOR_ASSIGN_OR_RETURN(PeerModel m, LoadPeerModel(o.model));
  if (o.unfused) {
    m.plan = UnfusedPlan(m.graph);
    m.plan_name = "every op alone (--unfused)";
  }
  const fs::path dir = o.dir;
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "fusor_out");
  FUSOR_RETURN_IF_ERROR(WriteInputs(m, dir / "in"));
  ExecutorOptions eo;
  eo.threads = o.threads;
  FUSOR_ASSIGN_OR_RETURN(auto exec, Executor::Create(m.graph, m.plan, m.leaves, eo));
  exec->Run();
  FUSOR_RETURN_IF_ERROR(WriteOutputs(m.graph, *exec, dir / "fusor_out"));
  nlohmann::json out = {{"version", kFormatVersion},
                        {"model", m.graph.model_name},
                        {"plan", m.plan_name},
                        {"threads", o.threads},
                        {"run_ms", nlohmann::json::array()}};
  for (size_t i = 0; i < m.plan.groups.size(); ++i) {
    out["groups"].push_back(GroupJson(m.graph, m.plan.groups[i], *exec, i));
  }
  SettleHost(kSettleHostMaxMs, "group profile");
  Profile(*exec, o, &out);
  std::ofstream(dir / "fusor.json") << out.dump(1) << "\n";
  return Status::Ok();
}

int Usage() {
  std::fprintf(stderr,
               "usage: group_profile [--threads T] [--runs N] [--unfused] --dir DIR "
               "MODEL.onnx[=PLAN.json][@dim=V,...]\n");
  return 2;
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) {
  fusor::Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      o.threads = std::atoi(argv[++i]);
    } else if (a == "--runs" && i + 1 < argc) {
      o.runs = std::atoi(argv[++i]);
    } else if (a == "--dir" && i + 1 < argc) {
      o.dir = argv[++i];
    } else if (a == "--unfused") {
      o.unfused = true;
    } else if (a.rfind("--", 0) == 0 || !o.model.empty()) {
      return fusor::Usage();
    } else {
      o.model = a;
    }
  }
  if (o.model.empty() || o.dir.empty() || o.runs < 1 || o.threads < 1) return fusor::Usage();
  fusor::Status s = fusor::Run(o);
  if (!s.ok()) {
    std::fprintf(stderr, "group_profile: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}
