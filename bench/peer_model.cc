#include "bench/peer_model.h"

#include <fstream>
#include <utility>

#include "graph/onnx_import.h"
#include "graph/plan_json.h"
#include "graph/tensor_file.h"
#include "lowering/plan_legality.h"
#include "runtime/constant_evaluator.h"
#include "runtime/model_weights.h"
#include "search/plan_search.h"

namespace fusor {
namespace {

StatusOr<FusionPlan> LoadPlan(const Graph& g, const std::string& path, std::string* name) {
  if (path.empty()) {
    *name = "greedy (default profile, untuned)";
    AnalyticalCostModel model{HardwareProfile{}};
    SearchOptions o;
    o.algorithm = SearchAlgorithm::kGreedy;
    FUSOR_ASSIGN_OR_RETURN(SearchResult r, SearchPlan(g, model, o));
    return r.plan;
  }
  *name = std::filesystem::path(path).filename().string();
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("'" + path + "' is not valid JSON");
  return PlanFromJson(g, j);
}

// "@name=V,name=V" cut off the end of `spec` into `io`.
Status TakeDims(std::string* spec, ImportOptions* io) {
  size_t at = spec->rfind('@');
  if (at == std::string::npos) return Status::Ok();
  std::string dims = spec->substr(at + 1);
  spec->resize(at);
  for (size_t b = 0; b <= dims.size();) {
    size_t e = std::min(dims.find(',', b), dims.size());
    FUSOR_RETURN_IF_ERROR(ParseDimBinding(dims.substr(b, e - b), io));
    b = e + 1;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<PeerModel> LoadPeerModel(std::string spec) {
  ImportOptions io;
  FUSOR_RETURN_IF_ERROR(TakeDims(&spec, &io));
  size_t eq = spec.find('=');
  PeerModel m;
  m.path = spec.substr(0, eq);
  const std::string plan_path = eq == std::string::npos ? "" : spec.substr(eq + 1);
  FUSOR_ASSIGN_OR_RETURN(ImportedModel imported,
                         ImportOnnxFileWithWeights(m.path, WithConstantFolding(io)));
  m.graph = std::move(imported.graph);
  FUSOR_ASSIGN_OR_RETURN(m.leaves, ModelLeafValues(m.graph, std::move(imported.weights), 1));
  FUSOR_ASSIGN_OR_RETURN(m.plan, LoadPlan(m.graph, plan_path, &m.plan_name));
  return m;
}

Status WriteInputs(const PeerModel& m, const std::filesystem::path& dir) {
  for (TensorId in : m.graph.inputs()) {
    const std::string& name = m.graph.tensor(in).name;
    FUSOR_RETURN_IF_ERROR(
        WriteTensorFile((dir / (name + ".npy")).string(), ToTensorData(name, m.leaves.at(in))));
  }
  return Status::Ok();
}

}  // namespace fusor
