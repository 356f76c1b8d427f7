// Fuzz harness: plan JSON text -> PlanFromJson against a fixed graph (the bundled SqueezeNet 1.1),
// as `fusor run MODEL.onnx --plan PLAN.json` parses a hand-written plan. Accepted: the plan
// holds exactly the node ids the JSON gave (none wrapped into range), and converts to JSON and back
// to the same groups.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graph/canonical.h"
#include "graph/onnx_import.h"
#include "graph/plan_json.h"
#include "lowering/plan_legality.h"
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

// Whether the node ids of the JSON list `ids` are exactly `parsed` (none wrapped into range).
bool SameIds(const nlohmann::json& ids, const std::vector<fusor::NodeId>& parsed) {
  if (ids.size() != parsed.size()) return false;
  for (size_t i = 0; i < parsed.size(); ++i) {
    if (ids[i].is_number_unsigned() ? ids[i].get<uint64_t>() != static_cast<uint64_t>(parsed[i])
                                    : ids[i].get<int64_t>() != parsed[i]) {
      return false;
    }
  }
  return true;
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
  for (size_t i = 0; i < plan->groups.size(); ++i) {
    const nlohmann::json& group = j["groups"][i];
    FUZZ_CHECK(SameIds(group["nodes"], plan->groups[i].nodes),
               "group " + std::to_string(i) + " nodes " + group["nodes"].dump() + " were read as " +
                   nlohmann::json(plan->groups[i].nodes).dump());
    if (group.contains("recomputed")) {
      FUZZ_CHECK(SameIds(group["recomputed"], plan->groups[i].recomputed),
                 "group " + std::to_string(i) + " recomputed " + group["recomputed"].dump() +
                     " were read as " + nlohmann::json(plan->groups[i].recomputed).dump());
    }
  }
  auto back = fusor::PlanFromJson(g, fusor::PlanToJson(*plan, {fusor::CanonicalHash(g), ""}));
  FUZZ_CHECK(back.ok(), "PlanToJson of an accepted plan is refused: " + back.status().ToString());
  FUZZ_CHECK(SameGroups(*plan, *back), "PlanFromJson(PlanToJson(plan)) differs from the plan");
  fusor::fuzz::Accepted() = true;
  return 0;
}
