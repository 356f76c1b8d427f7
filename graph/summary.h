// A summary of an imported graph for people and scripts: node counts per op and per op class, total
// FLOPs and bytes (each op run alone), weights, inputs and outputs, and the canonical hash. Built
// by `fusor inspect`. Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace fusor {

struct GraphSummary {
  std::string model_name;
  std::string canonical_hash;
  int64_t opset = 0;
  int64_t nodes = 0;
  int64_t tensors = 0;
  std::map<std::string, int64_t> nodes_per_op;
  std::map<std::string, int64_t> nodes_per_class;  // Keyed by OpClassName.
  double flops = 0;
  double transcendentals = 0;
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  int64_t weight_bytes = 0;  // Sum of weight tensor sizes (dims only; the data is never read).
  std::vector<std::pair<std::string, std::string>> inputs;   // name, "float32[1x3x224x224]"
  std::vector<std::pair<std::string, std::string>> outputs;  // name, "float32[1x1000]"
  // Opaque nodes per op, as lowering/unfused_ops.h counts them: each runs as a group of its own.
  std::map<std::string, int64_t> unfused_per_op;
};

// `unfused_per_op`: lowering/unfused_ops.h's UnfusedOps(g) (how a node runs is the lowering's
// decision, not the graph's).
GraphSummary Summarize(const Graph& g, std::map<std::string, int64_t> unfused_per_op);
// "3 nodes run unfused: LSTM x2, InstanceNormalization x1", or "" when there are none.
std::string UnfusedOpsText(const std::map<std::string, int64_t>& unfused);
nlohmann::json SummaryToJson(const GraphSummary& s);
std::string SummaryToText(const GraphSummary& s);

}  // namespace fusor
