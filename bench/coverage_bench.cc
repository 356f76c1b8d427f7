// Coverage of real exports, end to end: for every model given (default: every .onnx in models/),
// import (with the CLI's constant folding), a rules plan and a greedy plan, a run of each through
// the real runtime, and the outputs of both compared with the reference interpreter on the same
// random inputs and weights. Prints one row per model (import / tune / run / equal, unfused node
// count, the worst output's distance from the reference, times) and exits 1 if any model fails a
// step. Symbolic dims are bound with --dim NAME=N (default batch=1, seq=128).
//
//   ./build/bench/coverage_bench [--dim seq=64] [models/*.onnx]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/summary.h"
#include "lowering/unfused_ops.h"
#include "runtime/constant_evaluator.h"
#include "runtime/executor.h"
#include "runtime/reference.h"
#include "search/plan_search.h"

namespace fusor {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

struct Row {
  std::string model, import = "-", tune = "-", run = "-", equal = "-", unfused, note;
  double worst = 0, reference_s = 0, run_s = 0;
};

// Runs `plan` and compares its outputs with `want`; returns the worst ratio, or an error.
StatusOr<double> RunAndCompare(const Graph& g, const FusionPlan& plan, const TensorValues& leaves,
                               const TensorValues& want, double* seconds) {
  ExecutorOptions eo;
  eo.chain_backend = ChainBackend::kFusedLoop;
  FUSOR_ASSIGN_OR_RETURN(auto exec, Executor::Create(g, plan, leaves, eo));
  auto start = std::chrono::steady_clock::now();
  exec->Run();
  *seconds = Seconds(start);
  FUSOR_ASSIGN_OR_RETURN(TensorValues got, exec->ReadOutputs());
  double worst = 0;
  for (const auto& [t, value] : want) {
    FUSOR_ASSIGN_OR_RETURN(Closeness c, Compare(value, got.at(t)));
    worst = std::max(worst, c.worst_ratio);
  }
  return worst;
}

Row Check(const std::string& path, const ImportOptions& options) {
  Row row;
  row.model = std::filesystem::path(path).stem().string();
  ImportOptions o = options;
  auto g = ImportOnnxFile(path, o);
  if (!g.ok()) {
    row.import = "FAIL";
    row.note = g.status().message();
    return row;
  }
  row.import = "ok";
  std::string unfused = UnfusedOpsText(UnfusedOps(*g));
  row.unfused = unfused.empty() ? "0" : unfused.substr(0, unfused.find(' '));
  auto leaves = RandomLeafValues(*g, 11);
  auto start = std::chrono::steady_clock::now();
  auto want = leaves.ok() ? RunReference(*g, *leaves) : StatusOr<TensorValues>(leaves.status());
  row.reference_s = Seconds(start);
  AnalyticalCostModel model{HardwareProfile{}};
  row.tune = row.run = row.equal = "ok";
  for (auto algorithm : {SearchAlgorithm::kRules, SearchAlgorithm::kGreedy}) {
    SearchOptions so;
    so.algorithm = algorithm;
    auto searched = SearchPlan(*g, model, so);
    if (!searched.ok()) {
      row.tune = "FAIL";
      row.note = searched.status().message();
      return row;
    }
    if (!want.ok()) {
      row.run = row.equal = "FAIL";
      row.note = "reference: " + want.status().message();
      return row;
    }
    double seconds = 0;
    auto worst = RunAndCompare(*g, searched->plan, *leaves, *want, &seconds);
    if (!worst.ok()) {
      row.run = row.equal = "FAIL";
      row.note = std::string(AlgorithmName(algorithm)) + ": " + worst.status().message();
      return row;
    }
    row.run_s = std::max(row.run_s, seconds);
    row.worst = std::max(row.worst, *worst);
    if (*worst > 1.0) row.equal = "FAIL";
  }
  return row;
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) {
  using namespace fusor;
  ImportOptions options = WithConstantFolding({});
  options.dims = {{"batch", 1}, {"seq", 128}};
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--dim" && i + 1 < argc) {
      Status s = ParseDimBinding(argv[++i], &options);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.message().c_str());
        return 2;
      }
    } else {
      paths.push_back(arg);
    }
  }
  if (paths.empty()) {
    for (const auto& e : std::filesystem::directory_iterator(FUSOR_MODELS_DIR)) {
      if (e.path().extension() == ".onnx") paths.push_back(e.path().string());
    }
    std::sort(paths.begin(), paths.end());
  }
  std::printf("%-24s %-6s %-5s %-5s %-6s %-8s %9s %9s %8s  %s\n", "model", "import", "tune", "run",
              "equal", "unfused", "worst", "ref s", "run ms", "note");
  int failed = 0;
  for (const std::string& path : paths) {
    // Each model is bound with the default dims it has: a dim it lacks is dropped and it is
    // imported again.
    ImportOptions o = options;
    Row row = Check(path, o);
    const std::string unused = "--dim names '";
    for (size_t at; row.import == "FAIL" && (at = row.note.find(unused)) != std::string::npos;) {
      size_t begin = at + unused.size();
      if (o.dims.erase(row.note.substr(begin, row.note.find('\'', begin) - begin)) == 0) break;
      row = Check(path, o);
    }
    bool ok = row.import == "ok" && row.tune == "ok" && row.run == "ok" && row.equal == "ok";
    failed += ok ? 0 : 1;
    std::printf("%-24s %-6s %-5s %-5s %-6s %-8s %9.3g %9.2f %8.2f  %s\n", row.model.c_str(),
                row.import.c_str(), row.tune.c_str(), row.run.c_str(), row.equal.c_str(),
                row.unfused.c_str(), row.worst, row.reference_s, row.run_s * 1e3, row.note.c_str());
    std::fflush(stdout);
  }
  std::printf("%d of %zu models pass every step\n", static_cast<int>(paths.size()) - failed,
              paths.size());
  return failed == 0 ? 0 : 1;
}
