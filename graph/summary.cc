#include "graph/summary.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "base/host_memory.h"
#include "graph/canonical.h"

namespace fusor {
namespace {

// "float32[1x3]"; a float of another width adds that the runtime computes it in float32.
std::string TypeString(const Tensor& t) {
  const bool widened = IsFloatingPoint(t.dtype) && t.dtype != DType::kFloat32;
  return std::string(DTypeName(t.dtype)) + "[" + ShapeString(t.dims) + "]" +
         (widened ? " (computed in float32)" : "");
}

// 1234567 -> "1.23 M"; keeps tables readable across 10 orders of magnitude.
std::string Human(double v, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (v >= 1000 && i < 5) {
    v /= 1000;
    ++i;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), i == 0 ? "%.0f %s%s" : "%.2f %s%s", v, prefixes[i], unit);
  return buf;
}

std::string CountTable(const std::map<std::string, int64_t>& counts) {
  std::vector<std::pair<std::string, int64_t>> rows(counts.begin(), counts.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [name, n] : rows) {
    char buf[128];
    std::snprintf(buf, sizeof(buf), "  %-22s %8lld\n", name.c_str(), static_cast<long long>(n));
    out += buf;
  }
  return out;
}

}  // namespace

std::string UnfusedOpsText(const std::map<std::string, int64_t>& unfused) {
  std::vector<std::pair<std::string, int64_t>> rows(unfused.begin(), unfused.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  int64_t total = 0;
  std::string list;
  for (const auto& [op, n] : rows) {
    total += n;
    list += (list.empty() ? "" : ", ") + op + " x" + std::to_string(n);
  }
  if (total == 0) return "";
  return std::to_string(total) + (total == 1 ? " node runs" : " nodes run") + " unfused: " + list;
}

GraphSummary Summarize(const Graph& g, std::map<std::string, int64_t> unfused_per_op) {
  GraphSummary s;
  s.model_name = g.model_name;
  s.canonical_hash = CanonicalHash(g);
  s.opset = g.opset;
  s.nodes = static_cast<int64_t>(g.num_nodes());
  s.tensors = static_cast<int64_t>(g.num_tensors());
  for (const Node& n : g.nodes()) {
    std::string op = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
    ++s.nodes_per_op[op];
    ++s.nodes_per_class[std::string(OpClassName(ClassifyNode(g, n)))];
    OpCost c = CostOfNode(g, n);
    s.flops += c.flops;
    s.transcendentals += c.transcendentals;
    s.bytes_read += c.bytes_read;
    s.bytes_written += c.bytes_written;
  }
  for (const Tensor& t : g.tensors()) {
    if (t.kind == TensorKind::kWeight) s.weight_bytes += t.bytes();
  }
  s.unfused_per_op = std::move(unfused_per_op);
  for (TensorId id : g.inputs()) s.inputs.emplace_back(g.tensor(id).name, TypeString(g.tensor(id)));
  for (TensorId id : g.outputs())
    s.outputs.emplace_back(g.tensor(id).name, TypeString(g.tensor(id)));
  return s;
}

nlohmann::json SummaryToJson(const GraphSummary& s) {
  nlohmann::json j;
  j["model"] = s.model_name;
  j["canonical_hash"] = s.canonical_hash;
  j["opset"] = s.opset;
  j["nodes"] = s.nodes;
  j["tensors"] = s.tensors;
  j["nodes_per_op"] = s.nodes_per_op;
  j["nodes_per_class"] = s.nodes_per_class;
  j["flops"] = s.flops;
  j["transcendentals"] = s.transcendentals;
  j["bytes_read"] = s.bytes_read;
  j["bytes_written"] = s.bytes_written;
  j["weight_bytes"] = s.weight_bytes;
  j["unfused_per_op"] = s.unfused_per_op;
  for (const auto& [name, type] : s.inputs) j["inputs"].push_back({{"name", name}, {"type", type}});
  for (const auto& [name, type] : s.outputs)
    j["outputs"].push_back({{"name", name}, {"type", type}});
  return j;
}

std::string SummaryToText(const GraphSummary& s) {
  std::string out;
  out += "model           " + s.model_name + "\n";
  out += "canonical hash  " + s.canonical_hash + "\n";
  out += "opset           " + std::to_string(s.opset) + "\n";
  out += "nodes           " + std::to_string(s.nodes) + "\n";
  for (const auto& [name, type] : s.inputs) out += "input           " + name + "  " + type + "\n";
  for (const auto& [name, type] : s.outputs) out += "output          " + name + "  " + type + "\n";
  out += "FLOPs           " + Human(s.flops, "FLOP") + " (+ " +
         Human(s.transcendentals, "transcendental") + ")\n";
  out += "bytes (unfused) " + ByteString(s.bytes_read) + " read, " + ByteString(s.bytes_written) +
         " written\n";
  out += "weights         " + ByteString(s.weight_bytes) + " (dims only; data not needed)\n";
  std::string unfused = UnfusedOpsText(s.unfused_per_op);
  if (!unfused.empty())
    out += "unfused         " + unfused + " (reference fallback unless marked)\n";
  out += "\nnodes per op class:\n" + CountTable(s.nodes_per_class);
  out += "\nnodes per op:\n" + CountTable(s.nodes_per_op);
  return out;
}

}  // namespace fusor
