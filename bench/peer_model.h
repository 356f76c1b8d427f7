// The model a peer bench tool runs Fusor on (bench/peer_bench.cc, bench/group_profile.cc), named
// as "MODEL.onnx[=PLAN.json][@name=V,...]": the model with its weights (tools/fill_weights.py
// fills stripped ones), the values of its symbolic dims after '@' (as `fusor tune --dim`; ONNX
// Runtime takes them from the inputs), and its plan: PLAN.json's (`fusor tune --save-plan`), or
// the default cost model's greedy plan without one. The graph inputs get the seeded values (seed
// 1) that WriteInputs hands to ONNX Runtime's side, so both runtimes compute the same thing.
// Plain data and pure functions; thread-safe.
#pragma once

#include <filesystem>
#include <string>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/plan.h"
#include "runtime/host_tensor.h"

namespace fusor {

struct PeerModel {
  std::string path;  // MODEL.onnx, as ONNX Runtime loads it.
  Graph graph;
  TensorValues leaves;  // The model's weights and the seeded graph inputs.
  FusionPlan plan;
  std::string plan_name;  // PLAN.json's file name, or what the plan is without one.
};

StatusOr<PeerModel> LoadPeerModel(std::string spec);

// Each graph input's value as DIR/<input name>.npy, where ONNX Runtime's side reads it.
Status WriteInputs(const PeerModel& m, const std::filesystem::path& dir);

}  // namespace fusor
