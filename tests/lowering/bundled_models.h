// The bundled models (models/*.onnx) for tests that check every one: their names, and each
// imported with batch 1 and sequence 128 where it has those dims.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/op_registry.h"
#include "graph/plan.h"
#include "lowering/plan_legality.h"
#include "runtime/constant_evaluator.h"
#include "runtime/host_tensor.h"

namespace fusor::testing {

inline std::vector<std::string> BundledModels() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(FUSOR_MODELS_DIR)) {
    if (e.path().extension() == ".onnx") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Imported with batch 1 and sequence 128 where the model has those dims.
inline StatusOr<Graph> ImportBundledModel(const std::string& name) {
  ImportOptions options = WithConstantFolding({});
  options.dims = {{"batch", 1}, {"seq", 128}};
  return ImportOnnxFileWithDimsItHas(std::string(FUSOR_MODELS_DIR) + "/" + name + ".onnx",
                                     std::move(options));
}

// The plans each model is checked under: unfused, most fused, and two random legal ones.
inline std::vector<FusionPlan> PlansToCheck(const Graph& g) {
  std::vector<FusionPlan> plans = {UnfusedPlan(g), MaxFusionPlan(g)};
  for (uint64_t seed : {1, 2}) plans.push_back(RandomLegalPlan(g, seed));
  return plans;
}

// Elementwise, broadcast and injective nodes only: a group that runs as our fused loop.
inline bool PlainLoop(const Graph& g, const FusionGroup& group) {
  for (NodeId id : group.nodes) {
    const OpClass c = ClassifyNode(g, g.node(id));
    if (c == OpClass::kAnchor || c == OpClass::kOpaque || c == OpClass::kReduction) return false;
  }
  return true;
}

inline std::string GroupText(const Graph& g, const FusionGroup& group) {
  std::string ops;
  for (NodeId id : group.nodes) ops += (ops.empty() ? "" : "+") + g.node(id).op_type;
  return "'" + g.node(group.nodes[0]).name + "' (" + ops + ")";
}

}  // namespace fusor::testing
