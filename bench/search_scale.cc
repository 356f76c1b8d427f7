// Search time against graph size: predicted-cost-only tuning (default search: greedy, then exact
// regions) of the bundled BERT-base encoder and of synthetic transformer stacks from ~1k to ~100k
// nodes, with peak resident memory. Prints a table; growth should be close to linear in nodes.
//   build/bench/search_scale [--max-layers N]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "graph/onnx_import.h"
#include "graph/synthetic.h"
#include "search/plan_search.h"

namespace {

double PeakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

void Row(const char* name, const fusor::Graph& g) {
  fusor::AnalyticalCostModel model{fusor::HardwareProfile{}};
  auto t0 = std::chrono::steady_clock::now();
  auto r = fusor::SearchPlan(g, model);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok()) {
    std::printf("%-28s %8zu  error: %s\n", name, g.num_nodes(), r.status().ToString().c_str());
    return;
  }
  std::printf("%-28s %8zu %8zu %10.3f %12.2f %10.0f %10.1f\n", name, g.num_nodes(),
              r->plan.groups.size(), s, 1e6 * s / static_cast<double>(g.num_nodes()), PeakRssMiB(),
              r->stats.candidates_ms);
}

}  // namespace

int main(int argc, char** argv) {
  int max_layers = 2000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--max-layers")) max_layers = std::atoi(argv[i + 1]);
  }
  std::printf("%-28s %8s %8s %10s %12s %10s %10s\n", "graph", "nodes", "groups", "search s",
              "us per node", "peak MiB", "cand. ms");
  auto bert = fusor::ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/bert_base_encoder.onnx");
  if (bert.ok()) Row("bert_base_encoder", *bert);
  for (int layers : {20, 50, 100, 200, 500, 1000, 2000}) {
    if (layers > max_layers) break;
    auto g = fusor::SyntheticTransformer({layers, 128, 768, 12});
    if (!g.ok()) return 1;
    Row(("transformer x" + std::to_string(layers)).c_str(), *g);
  }
  return 0;
}
