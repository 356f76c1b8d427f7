// Fuzz harness: plan JSON text -> PlanFromJson against a fixed graph (the bundled SqueezeNet 1.1),
// as `fusor run MODEL.onnx --plan PLAN.json` parses a hand-written plan. Accepted: the plan
// converts to JSON and back to the same groups.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "graph/onnx_import.h"
#include "graph/plan_json.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

const fusor::Graph& TheGraph() {
  static const fusor::Graph g = [] {
    auto imported = fusor::ImportOnnxFile(FUSOR_MODELS_DIR "/squeezenet1_1.onnx");
    FUZZ_CHECK(imported.ok(),
               "cannot import the plan harness's graph: " + imported.status().ToString());
    return *std::move(imported);
  }();
  return g;
}

bool SameGroups(const fusor::FusionPlan& a, const fusor::FusionPlan& b) {
  if (a.groups.size() != b.groups.size()) return false;
  for (size_t i = 0; i < a.groups.size(); ++i) {
    const fusor::FusionGroup &x = a.groups[i], &y = b.groups[i];
    if (x.kind != y.kind || x.nodes != y.nodes || x.recomputed != y.recomputed) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fusor::fuzz::Accepted() = false;
  const fusor::Graph& g = TheGraph();
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  auto plan = fusor::PlanFromJson(g, j);
  if (!plan.ok()) {
    FUZZ_CHECK(!plan.status().message().empty(), "a plan error without a message");
    return 0;
  }
  auto back = fusor::PlanFromJson(g, fusor::PlanToJson(*plan));
  FUZZ_CHECK(back.ok(), "PlanToJson of an accepted plan is refused: " + back.status().ToString());
  FUZZ_CHECK(SameGroups(*plan, *back), "PlanFromJson(PlanToJson(plan)) differs from the plan");
  fusor::fuzz::Accepted() = true;
  return 0;
}
