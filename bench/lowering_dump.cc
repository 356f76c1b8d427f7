// lowering_dump: what the cost model predicts and what the runtime's fused loops decide, group by
// group, for every model, as text two builds can be diffed on. No timing and no calibration: the
// cost model runs with the default hardware profile, so the output depends only on the code and
// the models. For each model, the unfused, max-fusion and greedy plans: each group's predicted
// time (every bit, %a) and, for each loop group, the fused loop's chained values and whether it
// streams. `--isa` prices on a target of that oneDNN ISA name ("avx2", "avx512_core_bf16"), so
// that the layout rules (blocked tensors, reorders) take part; by default the target has none.
//
//   lowering_dump [--isa NAME] [--dim NAME=N]... [MODEL.onnx...]   (default: every model in
//   models/)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "costmodel/cost_model.h"
#include "graph/onnx_import.h"
#include "graph/plan.h"
#include "lowering/plan_legality.h"
#include "runtime/constant_evaluator.h"
#include "runtime/fused_loop.h"
#include "runtime/host_tensor.h"
#include "search/plan_search.h"

namespace fusor {
namespace {

void PrintPlan(const Graph& g, const CostModel& model, const char* name, const FusionPlan& plan) {
  ConstantValues constants(g);
  const PlanCost cost = model.Cost(g, plan);
  std::printf("  plan %s: %zu groups, predicted %a ns\n", name, plan.groups.size(),
              cost.total.total_ns);
  const double footprint = LeafFootprint(g);
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const FusionGroup& group = plan.groups[i];
    const std::vector<TensorId> outputs = MaterializedOutputs(g, plan, i);
    const CostTerms terms = model.GroupCost(g, group, GroupInputs(g, plan, i), outputs, footprint);
    std::printf("    group %zu (%zu nodes, first '%s'): %a ns", i, group.nodes.size(),
                g.node(group.nodes[0]).name.c_str(), terms.total_ns);
    if (group.kind == GroupKind::kLoop) {
      auto loop = FusedLoop::Build(
          g, group.nodes, outputs, [&](TensorId t) { return constants(t); },
          FusedLoop::Tiles::kLongerWhenStreaming);
      if (loop.ok()) {
        std::printf(", loop: %d chained, streams %d", (*loop)->chained_values(),
                    (*loop)->streams() ? 1 : 0);
      } else {
        std::printf(", loop: %s", loop.status().message().c_str());
      }
    }
    std::printf("\n");
  }
}

Status Dump(const std::string& path, ImportOptions options, const std::string& isa) {
  StatusOr<Graph> g = ImportOnnxFileWithDimsItHas(path, std::move(options));
  if (!g.ok()) return g.status();
  HardwareProfile profile;
  profile.target.isa = isa;
  AnalyticalCostModel model{profile};
  PrintPlan(*g, model, "unfused", UnfusedPlan(*g));
  PrintPlan(*g, model, "max-fusion", MaxFusionPlan(*g));
  SearchOptions so;
  so.algorithm = SearchAlgorithm::kGreedy;
  FUSOR_ASSIGN_OR_RETURN(SearchResult greedy, SearchPlan(*g, model, so));
  PrintPlan(*g, model, "greedy", greedy.plan);
  return Status::Ok();
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) {
  using namespace fusor;
  ImportOptions options = WithConstantFolding({});
  options.dims = {{"batch", 1}, {"seq", 128}};
  std::vector<std::string> paths;
  std::string isa;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--isa" && i + 1 < argc) {
      isa = argv[++i];
    } else if (arg == "--dim" && i + 1 < argc) {
      Status s = ParseDimBinding(argv[++i], &options);
      if (!s.ok()) return std::fprintf(stderr, "%s\n", s.message().c_str()), 2;
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
  for (const std::string& path : paths) {
    std::printf("%s\n", std::filesystem::path(path).stem().c_str());
    Status s = Dump(path, options, isa);
    if (!s.ok()) std::printf("  error: %s\n", s.message().c_str());
    std::fflush(stdout);
  }
  return 0;
}
