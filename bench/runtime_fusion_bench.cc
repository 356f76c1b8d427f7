// Median latency of each bundled model unfused vs with every legal fusion applied (MaxFusionPlan),
// and of the fused plan with every tensor stored plain between groups (no blocked-layout
// propagation, lowering/layout.h), measured in one run: the executors are compiled up front, then
// timed in alternating rounds so that drift in machine load hits all alike. Prints a Markdown
// table for docs/benchmarks.md.
//
// Usage: runtime_fusion_bench [--threads N] [--rounds R] [--min-time-ms T] [MODEL ...]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/plan.h"
#include "lowering/plan_legality.h"
#include "runtime/executor.h"
#include "runtime/measurer.h"

namespace fusor {
namespace {

struct BenchOptions {
  int threads = 2;
  int rounds = 5;
  double min_time_ms = 300;
  std::vector<std::string> models = {"resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0",
                                     "bert_base_encoder"};
};

struct Row {
  std::string model;
  size_t unfused_groups = 0, fused_groups = 0;
  double unfused_ms = 0, fused_ms = 0, fused_plain_ms = 0;
  double worst_cv = 0;
  bool unstable = false;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

StatusOr<Row> BenchModel(const std::string& name, const BenchOptions& o) {
  FUSOR_ASSIGN_OR_RETURN(Graph g,
                         ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + name + ".onnx"));
  FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, RandomLeafValues(g, 1));
  ExecutorOptions eo;
  eo.threads = o.threads;
  FusionPlan unfused = UnfusedPlan(g), fused = MaxFusionPlan(g);
  FUSOR_ASSIGN_OR_RETURN(auto a, Executor::Create(g, unfused, leaves, eo));
  FUSOR_ASSIGN_OR_RETURN(auto b, Executor::Create(g, fused, leaves, eo));
  ExecutorOptions plain = eo;
  plain.keep_blocked = false;
  FUSOR_ASSIGN_OR_RETURN(auto c, Executor::Create(g, fused, leaves, plain));
  TimingOptions t;
  t.min_total_ns = static_cast<int64_t>(o.min_time_ms * 1e6);
  t.quiet_wait_ms = 250;  // Each timing starts with the host in its quiet state (measurer.h).
  Row row{name, unfused.groups.size(), fused.groups.size()};
  std::vector<double> ua, fb, fc;
  for (int r = 0; r < o.rounds; ++r) {
    Measurement mu = TimeRepeated([&] { a->Run(); }, t);
    Measurement mf = TimeRepeated([&] { b->Run(); }, t);
    Measurement mp = TimeRepeated([&] { c->Run(); }, t);
    ua.push_back(static_cast<double>(mu.median_ns) / 1e6);
    fb.push_back(static_cast<double>(mf.median_ns) / 1e6);
    fc.push_back(static_cast<double>(mp.median_ns) / 1e6);
    row.worst_cv = std::max({row.worst_cv, mu.cv, mf.cv, mp.cv});
    row.unstable = row.unstable || mu.unstable || mf.unstable || mp.unstable;
  }
  row.unfused_ms = Median(ua);
  row.fused_ms = Median(fb);
  row.fused_plain_ms = Median(fc);
  return row;
}

BenchOptions Parse(int argc, char** argv) {
  BenchOptions o;
  std::vector<std::string> models;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool has_value = i + 1 < argc;
    if (arg == "--threads" && has_value) {
      o.threads = std::atoi(argv[++i]);
    } else if (arg == "--rounds" && has_value) {
      o.rounds = std::atoi(argv[++i]);
    } else if (arg == "--min-time-ms" && has_value) {
      o.min_time_ms = std::atof(argv[++i]);
    } else {
      models.push_back(arg);
    }
  }
  if (!models.empty()) o.models = models;
  return o;
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) {
  fusor::BenchOptions o = fusor::Parse(argc, argv);
  std::printf(
      "| model | groups unfused | groups fused | unfused median (ms) | max fusion median "
      "(ms) | speedup | max fusion, all plain (ms) | blocked-layout gain | worst cv |\n"
      "|---|---|---|---|---|---|---|---|---|\n");
  int failures = 0;
  for (const auto& name : o.models) {
    auto row = fusor::BenchModel(name, o);
    if (!row.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), row.status().ToString().c_str());
      ++failures;
      continue;
    }
    std::printf("| %s | %zu | %zu | %.2f | %.2f | %.2fx | %.2f | %.2fx | %.1f%%%s |\n",
                name.c_str(), row->unfused_groups, row->fused_groups, row->unfused_ms,
                row->fused_ms, row->unfused_ms / row->fused_ms, row->fused_plain_ms,
                row->fused_plain_ms / row->fused_ms, row->worst_cv * 100,
                row->unstable ? " (unstable)" : "");
    std::fflush(stdout);
  }
  std::printf("\n%d threads, %d alternating rounds, >= %.0f ms of timed runs per round and plan\n",
              o.threads, o.rounds, o.min_time_ms);
  return failures == 0 ? 0 : 1;
}
