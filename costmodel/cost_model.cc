#include "costmodel/cost_model.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "graph/op_registry.h"

namespace fusor {
namespace {

bool IsView(const Node& n) {
  return n.domain.empty() && (n.op_type == "Reshape" || n.op_type == "Flatten" ||
                              n.op_type == "Squeeze" || n.op_type == "Unsqueeze");
}

ComputeClass ClassOfFlops(const Graph& g, const Node& n, OpClass c) {
  if (n.op_type == "Conv") {
    int64_t group = n.GetInt("group", 1);
    const Tensor& x = g.tensor(n.inputs[0]);
    bool depthwise = group > 1 && x.dims.size() > 1 && group == x.dims[1];
    return depthwise ? ComputeClass::kDepthwiseConv : ComputeClass::kConv;
  }
  if (n.op_type == "ConvTranspose") return ComputeClass::kConv;
  if (c == OpClass::kAnchor) return ComputeClass::kMatMul;
  if (c == OpClass::kReduction) return ComputeClass::kReduction;
  return ComputeClass::kElementwise;
}

void AddCompute(const Graph& g, const FusionGroup& group, GroupFeatures* f) {
  for (NodeId id : group.nodes) {
    const Node& n = g.node(id);
    OpCost cost = CostOfNode(g, n);
    f->flops[static_cast<int>(ClassOfFlops(g, n, ClassifyNode(g, n)))] += cost.flops;
    f->flops[static_cast<int>(ComputeClass::kTranscendental)] += cost.transcendentals;
  }
}

// Bytes of `t` that node `n` actually reads: Slice and Gather touch only what they keep.
double BytesReadOf(const Graph& g, const Node& n, TensorId t) {
  bool partial =
      n.domain.empty() && (n.op_type == "Slice" || n.op_type == "Gather") && n.input(0) == t;
  if (!partial) return static_cast<double>(g.tensor(t).bytes());
  return static_cast<double>(g.tensor(n.outputs[0]).bytes());
}

double GroupReadBytes(const Graph& g, const FusionGroup& group, TensorId t) {
  double bytes = 0;
  for (NodeId id : group.nodes) {
    for (TensorId in : g.node(id).inputs) {
      if (in == t) {
        bytes = std::max(bytes, BytesReadOf(g, g.node(id), t));
        break;
      }
    }
  }
  return std::min(bytes, static_cast<double>(g.tensor(t).bytes()));
}

int PostOps(const Graph& g, const FusionGroup& group) {
  if (group.kind != GroupKind::kAnchor && group.kind != GroupKind::kReduction) return 0;
  int n = 0;
  for (size_t i = 1; i < group.nodes.size(); ++i) {
    const Node& node = g.node(group.nodes[i]);
    if (ClassifyNode(g, node) == OpClass::kReduction) continue;
    // BatchNormalization is a per-channel scale and shift: two binary post-ops.
    n += node.op_type == "BatchNormalization" ? 2 : 1;
  }
  return n;
}

double OutputElements(const Graph& g, const FusionGroup& group) {
  double elements = 0;
  for (TensorId t : g.node(group.nodes.back()).outputs) {
    elements = std::max(elements, static_cast<double>(g.tensor(t).num_elements()));
  }
  return elements;
}

// Where a tensor is when a group reads or writes it (see the header).
class Residency {
 public:
  Residency(const TargetFingerprint& t, double leaf_footprint)
      : capacity_{static_cast<double>(t.l1d_bytes) * t.cores,
                  static_cast<double>(t.l2_bytes) * t.cores, static_cast<double>(t.l3_bytes)},
        leaf_footprint_(leaf_footprint) {}

  MemoryLevel ReadLevel(const Tensor& t, double bytes) const {
    bool leaf = t.kind != TensorKind::kActivation;
    return LevelFor(leaf ? std::max(leaf_footprint_, bytes) : bytes);
  }
  MemoryLevel WriteLevel(double bytes) const { return LevelFor(bytes); }

 private:
  MemoryLevel LevelFor(double bytes) const {
    for (int l = 0; l < 3; ++l) {
      if (bytes <= capacity_[l]) return static_cast<MemoryLevel>(l);
    }
    return MemoryLevel::kDram;
  }

  std::array<double, 3> capacity_;
  double leaf_footprint_;
};

void AddMemory(const Graph& g, const FusionGroup& group, const std::vector<TensorId>& inputs,
               const std::vector<TensorId>& materialized, const Residency& residency,
               GroupFeatures* f) {
  for (TensorId t : inputs) {
    if (g.tensor(t).kind == TensorKind::kConstant) continue;  // Immediates in the kernel.
    double bytes = GroupReadBytes(g, group, t);
    f->read_bytes[static_cast<int>(residency.ReadLevel(g.tensor(t), bytes))] += bytes;
  }
  for (TensorId t : materialized) {
    double bytes = static_cast<double>(g.tensor(t).bytes());
    f->write_bytes[static_cast<int>(residency.WriteLevel(bytes))] += bytes;
  }
}

// A fused loop pulls each tile through per-thread buffers (runtime/fused_loop.h): every value
// computed inside the group and consumed inside it is written to, and read back from, L1. oneDNN
// post-ops of an anchor stay in registers instead.
void AddTileTraffic(const Graph& g, const FusionGroup& group, GroupFeatures* f) {
  if (group.kind == GroupKind::kAnchor) return;
  for (NodeId id : group.nodes) {
    for (TensorId t : g.node(id).outputs) {
      double readers = 0;
      for (NodeId c : g.tensor(t).consumers) {
        readers += std::binary_search(group.nodes.begin(), group.nodes.end(), c) ? 1 : 0;
      }
      if (readers == 0) continue;
      double bytes = static_cast<double>(g.tensor(t).num_elements()) * 4;
      f->write_bytes[static_cast<int>(MemoryLevel::kL1)] += bytes;
      f->read_bytes[static_cast<int>(MemoryLevel::kL1)] += bytes * readers;
    }
  }
}

// The runtime keeps tensors in plain layouts between groups: a Conv or ConvTranspose, and a 4-D
// pooling whose channels divide by 8, reorder their input to oneDNN's blocked layout and their
// output back (each a kernel of its own), and a per-element binary post-op operand of a Conv is
// reordered too.
void AddReorders(const Graph& g, const FusionGroup& group, GroupFeatures* f) {
  // The group's anchor or reduction: the first node, or the one after a reduction's prologue.
  NodeId primary = group.nodes.front();
  for (NodeId id : group.nodes) {
    OpClass c = ClassifyNode(g, g.node(id));
    if (c == OpClass::kAnchor || c == OpClass::kReduction) {
      primary = id;
      break;
    }
  }
  const Node& head = g.node(primary);
  const Shape& in = head.inputs.empty() ? Shape{} : g.tensor(head.inputs[0]).dims;
  bool conv = head.op_type == "Conv" || head.op_type == "ConvTranspose";
  bool pooling = (head.op_type == "MaxPool" || head.op_type == "AveragePool") && in.size() == 4 &&
                 in[1] % 8 == 0;
  if (!conv && !pooling) return;
  f->kernels += 2;
  f->reorder_bytes +=
      static_cast<double>(g.tensor(head.inputs[0]).bytes() + g.tensor(head.outputs[0]).bytes());
  if (!conv) return;
  for (size_t i = 1; i < group.nodes.size(); ++i) {
    for (TensorId t : g.node(group.nodes[i]).inputs) {
      if (t == kNoId || g.tensor(t).producer == group.nodes[i - 1]) continue;
      if (group.nodes[i] < primary) continue;
      if (g.tensor(t).dims == g.tensor(head.outputs[0]).dims) {
        f->kernels += 1;
        f->reorder_bytes += static_cast<double>(g.tensor(t).bytes());
      }
    }
  }
}

// How the runtime lowers a group: anchors, and reductions without a prologue, are oneDNN
// primitives; everything else (loops, reductions with a fused prologue) is one of our loops.
bool RunsAsPrimitive(const Graph& g, const FusionGroup& group) {
  OpClass head = ClassifyNode(g, g.node(group.nodes.front()));
  return head == OpClass::kAnchor || head == OpClass::kReduction;
}

// Broadcast and injective nodes of a fused loop map each element's index to their input's.
void AddIndexing(const Graph& g, const FusionGroup& group, GroupFeatures* f) {
  if (group.kind == GroupKind::kAnchor) return;
  for (NodeId id : group.nodes) {
    const Node& n = g.node(id);
    OpClass c = ClassifyNode(g, n);
    if ((c != OpClass::kBroadcast && c != OpClass::kInjective) || IsView(n)) continue;
    for (TensorId t : n.outputs)
      f->indexed_elements += static_cast<double>(g.tensor(t).num_elements());
  }
}

void AddSpill(const Graph& g, const FusionGroup& group, const TargetFingerprint& t,
              GroupFeatures* f) {
  int excess = LiveVectorValues(g, group) - t.vector_registers;
  if (excess <= 0) return;
  double lanes = std::max(1, t.vector_width_bits / 32);
  f->spilled_value_vectors = excess * OutputElements(g, group) / lanes;
}

}  // namespace

std::string_view MemoryLevelName(MemoryLevel l) {
  switch (l) {
    case MemoryLevel::kL1:
      return "L1";
    case MemoryLevel::kL2:
      return "L2";
    case MemoryLevel::kL3:
      return "L3";
    case MemoryLevel::kDram:
      return "DRAM";
  }
  return "?";
}

CostTerms EvaluateFeatures(const GroupFeatures& f, const HardwareProfile& p) {
  const Fitted* throughput[kNumComputeClasses] = {
      &p.conv_gflops,        &p.depthwise_conv_gflops, &p.matmul_gflops,
      &p.elementwise_gflops, &p.transcendental_gflops, &p.reduction_gflops};
  const Fitted* read_bw[kNumMemoryLevels] = {&p.l1_read_gbps, &p.l2_read_gbps, &p.l3_read_gbps,
                                             &p.dram_read_gbps};
  const Fitted* write_bw[kNumMemoryLevels] = {&p.l1_write_gbps, &p.l2_write_gbps, &p.l3_write_gbps,
                                              &p.dram_write_gbps};
  CostTerms t;
  // GFLOP/s is FLOP/ns and GB/s is B/ns, so each quotient is already in nanoseconds.
  for (int c = 0; c < kNumComputeClasses; ++c) t.compute_ns += f.flops[c] / throughput[c]->value;
  for (int l = 0; l < kNumMemoryLevels; ++l) {
    t.memory_ns += f.read_bytes[l] / read_bw[l]->value + f.write_bytes[l] / write_bw[l]->value;
  }
  t.spill_ns = f.spilled_value_vectors * p.spill_ns_per_value.value;
  t.launch_ns = f.kernels * p.dispatch_ns.value + f.loop_kernels * p.loop_dispatch_ns.value +
                f.post_ops * p.post_op_ns.value;
  t.compute_ns += f.indexed_elements / p.indexed_gelems.value;
  t.reorder_ns = f.reorder_bytes / p.reorder_gbps.value;
  double overlap = p.overlap_alpha.value * std::min(t.compute_ns, t.memory_ns);
  t.total_ns = t.compute_ns + t.memory_ns - overlap + t.spill_ns + t.launch_ns + t.reorder_ns;
  return t;
}

// Values are born when first loaded (group inputs) or computed, and die after their last use in
// the group, with nodes evaluated in the group's order.
int LiveVectorValues(const Graph& g, const FusionGroup& group) {
  std::unordered_map<TensorId, NodeId> last_use;
  for (NodeId id : group.nodes) {
    for (TensorId t : g.node(id).inputs) {
      if (t != kNoId) last_use[t] = id;
    }
  }
  std::unordered_set<TensorId> live;
  size_t peak = 0;
  for (NodeId id : group.nodes) {
    for (TensorId t : g.node(id).inputs) {
      if (t != kNoId) live.insert(t);
    }
    for (TensorId t : g.node(id).outputs) live.insert(t);
    peak = std::max(peak, live.size());
    for (TensorId t : g.node(id).inputs) {
      if (t != kNoId && last_use[t] == id) live.erase(t);
    }
    for (TensorId t : g.node(id).outputs) {
      if (!last_use.count(t)) live.erase(t);
    }
  }
  return static_cast<int>(peak) + 2;
}

double LeafFootprint(const Graph& g) {
  double bytes = 0;
  for (const Tensor& t : g.tensors()) {
    if (t.kind != TensorKind::kConstant) bytes += static_cast<double>(t.bytes());
  }
  return bytes;
}

GroupFeatures GroupFeaturesOf(const Graph& g, const FusionGroup& group,
                              const std::vector<TensorId>& inputs,
                              const std::vector<TensorId>& materialized,
                              const TargetFingerprint& target, double leaf_footprint) {
  GroupFeatures f;
  bool views_only = std::all_of(group.nodes.begin(), group.nodes.end(),
                                [&](NodeId id) { return IsView(g.node(id)); });
  if (views_only) return f;  // An alias of its input: no kernel, no traffic.
  (RunsAsPrimitive(g, group) ? f.kernels : f.loop_kernels) = 1;
  f.post_ops = PostOps(g, group);
  AddCompute(g, group, &f);
  AddMemory(g, group, inputs, materialized, Residency(target, leaf_footprint), &f);
  AddTileTraffic(g, group, &f);
  AddSpill(g, group, target, &f);
  AddReorders(g, group, &f);
  AddIndexing(g, group, &f);
  return f;
}

std::vector<GroupFeatures> PlanFeatures(const Graph& g, const FusionPlan& plan,
                                        const TargetFingerprint& target) {
  double footprint = LeafFootprint(g);
  auto inputs = AllGroupInputs(g, plan);
  auto materialized = AllMaterializedOutputs(g, plan);
  std::vector<GroupFeatures> out;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    out.push_back(
        GroupFeaturesOf(g, plan.groups[i], inputs[i], materialized[i], target, footprint));
  }
  return out;
}

int64_t PeakActivationBytes(const Graph& g, const FusionPlan& plan) {
  const size_t n = plan.groups.size();
  std::unordered_map<TensorId, size_t> last_read;
  auto inputs = AllGroupInputs(g, plan);
  auto materialized = AllMaterializedOutputs(g, plan);
  for (size_t i = 0; i < n; ++i) {
    for (TensorId t : inputs[i]) last_read[t] = i;
  }
  std::vector<int64_t> delta(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    for (TensorId t : materialized[i]) {
      size_t end = g.IsGraphOutput(t) ? n - 1 : std::max(i, last_read.count(t) ? last_read[t] : i);
      delta[i] += g.tensor(t).bytes();
      delta[end + 1] -= g.tensor(t).bytes();
    }
  }
  int64_t live = 0, peak = 0;
  for (size_t i = 0; i < n; ++i) {
    live += delta[i];
    peak = std::max(peak, live);
  }
  return peak;
}

CostTerms AnalyticalCostModel::GroupCost(const Graph& g, const FusionGroup& group,
                                         const std::vector<TensorId>& inputs,
                                         const std::vector<TensorId>& materialized,
                                         double leaf_footprint) const {
  return EvaluateFeatures(
      GroupFeaturesOf(g, group, inputs, materialized, profile_.target, leaf_footprint), profile_);
}

PlanCost CostModel::Cost(const Graph& g, const FusionPlan& plan) const {
  PlanCost cost;
  double footprint = LeafFootprint(g);
  auto inputs = AllGroupInputs(g, plan);
  auto materialized = AllMaterializedOutputs(g, plan);
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    CostTerms t = GroupCost(g, plan.groups[i], inputs[i], materialized[i], footprint);
    cost.total.compute_ns += t.compute_ns;
    cost.total.memory_ns += t.memory_ns;
    cost.total.spill_ns += t.spill_ns;
    cost.total.launch_ns += t.launch_ns;
    cost.total.reorder_ns += t.reorder_ns;
    cost.total.total_ns += t.total_ns;
    cost.groups.push_back(t);
  }
  cost.peak_activation_bytes = PeakActivationBytes(g, plan);
  return cost;
}

}  // namespace fusor
