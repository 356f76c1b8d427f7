#include "costmodel/cost_model.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "costmodel/in_plan.h"
#include "costmodel/loop_evaluation.h"
#include "graph/node_attrs.h"
#include "graph/op_registry.h"
#include "lowering/group_lowering.h"
#include "lowering/kernel_form.h"
#include "lowering/plan_legality.h"
#include "lowering/rnn_form.h"
#include "lowering/threading.h"

namespace fusor {
namespace {

ComputeClass ClassOfFlops(const Graph& g, const Node& n, OpClass c) {
  if (n.op_type == "Conv") {
    int64_t group = n.GetInt("group", 1);
    const Tensor& x = g.tensor(n.inputs[0]);
    bool depthwise = group > 1 && x.dims.size() > 1 && group == x.dims[1];
    return depthwise ? ComputeClass::kDepthwiseConv : ComputeClass::kConv;
  }
  if (n.op_type == "ConvTranspose") return ComputeClass::kConv;
  // An LSTM or GRU on oneDNN's RNN primitive (lowering/rnn_form.h): its gate products are GEMMs
  // (X's for every step at once, R's step by step) and its gate activations oneDNN's JIT eltwise.
  if (c == OpClass::kAnchor || RunsAsRnnPrimitive(g, n)) return ComputeClass::kMatMul;
  if (c == OpClass::kReduction) return ComputeClass::kReduction;
  return ComputeClass::kElementwise;
}

// An LSTM or GRU on oneDNN's RNN primitive, whose gate activations are its JIT eltwise kernels
// (on our recurrence loop they are vector_math.h's, our loops' rate).
bool RunsOnOneDnnRnn(const Graph& g, const Node& n) {
  return RunsAsRnnPrimitive(g, n) &&
         RnnPrimitiveForm(g, n)->implementation == RnnImplementation::kPrimitive;
}

// Elements at which a fused loop evaluates `t`, or its own size outside a loop.
double EvaluatedElements(const Graph& g, const LoopEvaluation* loop, TensorId t) {
  if (loop != nullptr) {
    auto it = loop->evaluated.find(t);
    if (it != loop->evaluated.end()) return it->second;
  }
  return static_cast<double>(g.tensor(t).num_elements());
}

// Whether node `i` of `nodes` is the Mul of a gated pair (lowering/plan_legality.h) whose gate
// comes just before it: in a oneDNN primitive the pair is one eltwise, so one post-op.
bool EndsGatedPair(const Graph& g, const std::vector<NodeId>& nodes, size_t i) {
  return i > 0 && GatedPairOf(g, g.node(nodes[i - 1]), g.node(nodes[i])) != GatedPair::kNone;
}

// A node's FLOPs once per element it is evaluated at (a fused loop may evaluate it more often
// than it has elements, or not at all).
// Transcendentals run in oneDNN's JIT kernels (`jit`) or in our loops. In oneDNN, x * Sigmoid(x)
// is one eltwise_swish (a primitive of its own or a post-op), measured 1.5x the time of
// eltwise_logistic on an AVX-512 EPYC, so it is priced on its own. Any other Sigmoid oneDNN runs
// is eltwise_logistic, a class of its own too: on an AVX2 EPYC it took 1.5x Exp's time (262K
// elements: 78 against 51 us), and pricing it at the rate shared with Exp put 12 of
// EfficientNet's Sigmoid+Mul decisions the wrong way round.
void AddCompute(const Graph& g, const FusionGroup& group, const LoopEvaluation* loop, bool jit,
                GroupFeatures* f) {
  ComputeClass transcendental =
      jit ? ComputeClass::kJitTranscendental : ComputeClass::kTranscendental;
  for (size_t i = 0; i < group.nodes.size(); ++i) {
    const NodeId id = group.nodes[i];
    const Node& n = g.node(id);
    OpCost cost = CostOfNode(g, n);
    double own = static_cast<double>(g.tensor(n.outputs[0]).num_elements());
    double scale = own > 0 ? EvaluatedElements(g, loop, n.outputs[0]) / own : 1.0;
    f->flops[static_cast<int>(ClassOfFlops(g, n, ClassifyNode(g, n)))] += cost.flops * scale;
    const bool swish = jit && i + 1 < group.nodes.size() &&
                       GatedPairOf(g, n, g.node(group.nodes[i + 1])) == GatedPair::kSwish;
    ComputeClass c = n.op_type == "Erf"              ? ComputeClass::kErf
                     : swish                         ? ComputeClass::kJitSwish
                     : jit && n.op_type == "Sigmoid" ? ComputeClass::kJitSigmoid
                     : RunsOnOneDnnRnn(g, n)         ? ComputeClass::kJitTranscendental
                                                     : transcendental;
    f->flops[static_cast<int>(c)] += cost.transcendentals * scale;
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

// The post-ops the record runs: a BatchNormalization is a per-channel scale and shift, two
// binary post-ops; a gated pair is one eltwise.
int PostOps(const Graph& g, const GroupLowering& lowering) {
  int n = 0;
  for (size_t i = 0; i < lowering.post_ops.size(); ++i) {
    if (EndsGatedPair(g, lowering.post_ops, i)) continue;  // Its gate's post-op covers it.
    n += g.node(lowering.post_ops[i]).op_type == "BatchNormalization" ? 2 : 1;
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
        one_core_{static_cast<double>(t.l1d_bytes), static_cast<double>(t.l2_bytes),
                  static_cast<double>(t.l3_bytes)},
        leaf_footprint_(leaf_footprint) {}

  MemoryLevel ReadLevel(const Tensor& t, double bytes) const {
    bool leaf = t.kind != TensorKind::kActivation;
    return LevelFor(leaf ? std::max(leaf_footprint_, bytes) : bytes);
  }
  MemoryLevel WriteLevel(double bytes) const { return LevelFor(bytes); }
  // Where data read again and again by one kernel on one core, and nothing else, stays: that
  // core's L1 and L2, or the shared L3.
  MemoryLevel HeldByOneCore(double bytes) const { return LevelFor(bytes, one_core_); }

 private:
  MemoryLevel LevelFor(double bytes) const { return LevelFor(bytes, capacity_); }
  static MemoryLevel LevelFor(double bytes, const std::array<double, 3>& capacity) {
    for (int l = 0; l < 3; ++l) {
      if (bytes <= capacity[l]) return static_cast<MemoryLevel>(l);
    }
    return MemoryLevel::kDram;
  }

  std::array<double, 3> capacity_;
  std::array<double, 3> one_core_;
  double leaf_footprint_;
};

// A kernel streams everything it reads and writes through the caches at once, so the level its
// traffic runs at is the one that holds its whole working set (not each tensor on its own: three
// 1.5 MB tensors do not stream at L2 speed through a 2 MB L2).
double WorkingSet(const Graph& g, const FusionGroup& group, const std::vector<TensorId>& inputs,
                  const std::vector<TensorId>& materialized) {
  double bytes = 0;
  for (TensorId t : inputs) {
    if (g.tensor(t).kind != TensorKind::kConstant) bytes += GroupReadBytes(g, group, t);
  }
  for (TensorId t : materialized) bytes += static_cast<double>(g.tensor(t).bytes());
  return bytes;
}

void AddMemory(const Graph& g, const FusionGroup& group, const std::vector<TensorId>& inputs,
               const std::vector<TensorId>& materialized, const Residency& residency,
               GroupFeatures* f) {
  double working_set = WorkingSet(g, group, inputs, materialized);
  for (TensorId t : inputs) {
    if (g.tensor(t).kind == TensorKind::kConstant) continue;  // Immediates in the kernel.
    double bytes = GroupReadBytes(g, group, t);
    f->read_bytes[static_cast<int>(residency.ReadLevel(g.tensor(t), working_set))] += bytes;
  }
  for (TensorId t : materialized) {
    double bytes = static_cast<double>(g.tensor(t).bytes());
    f->write_bytes[static_cast<int>(residency.WriteLevel(working_set))] += bytes;
  }
}

// Our recurrence loop (runtime/rnn_loop.h; see the header): the input projection is one matmul
// primitive (its FLOPs are the node's, with R's), whose output the steps read back; every step
// reads all of R, each thread its slice of the units from the level of its own core's caches that
// holds the slice (directions advance together, so a step is every direction's), has the fixed
// cost of a step, and ends in a team barrier (two for GRU without linear_before_reset), priced as
// a team wake-up (fork_ns): both are one synchronisation of the team.
void AddRecurrenceLoopSteps(const RnnPrimitive& p, double r_bytes, const Residency& residency,
                            GroupFeatures* f) {
  const double threads = std::max(1.0, f->threads), steps = static_cast<double>(p.seq);
  f->read_bytes[static_cast<int>(residency.HeldByOneCore(r_bytes / threads))] +=
      (steps - 1) * r_bytes;
  const double padded = static_cast<double>((p.hidden + 15) / 16 * 16);
  const double projection =
      4.0 * static_cast<double>(p.seq * p.batch * p.directions * p.gates()) * padded;
  const int level = static_cast<int>(residency.WriteLevel(projection));
  f->write_bytes[level] += projection;
  f->read_bytes[level] += projection;
  f->kernels += 1;
  f->rnn_steps = steps;
  if (threads > 1) f->forks += 1 + steps * (p.cell == RnnCell::kGru ? 2 : 1);
}

// A recurrent group runs its steps one after another. On oneDNN's RNN primitive (see the header)
// each step reads its direction's R (one gate product per step, the recurrence) from the level of
// the running core's caches that holds R alone, where it stays through the steps, and has the
// fixed cost of a step; our loop as above. AddMemory counts R's first read. Reads f->threads.
void AddRecurrentSteps(const Graph& g, const FusionGroup& group, const Residency& residency,
                       GroupFeatures* f) {
  if (group.nodes.size() != 1) return;
  StatusOr<RnnPrimitive> rnn = RnnPrimitiveForm(g, g.node(group.nodes[0]));
  if (!rnn.ok()) return;
  const double r_bytes = static_cast<double>(g.tensor(g.node(group.nodes[0]).inputs[2]).bytes());
  if (rnn->implementation == RnnImplementation::kLoop) {
    AddRecurrenceLoopSteps(*rnn, r_bytes, residency, f);
    return;
  }
  const double steps = static_cast<double>(rnn->seq);
  f->read_bytes[static_cast<int>(residency.HeldByOneCore(r_bytes / rnn->directions))] +=
      (steps - 1) * r_bytes;
  f->rnn_steps = steps * static_cast<double>(rnn->directions);
}

// A fused loop pulls each tile through per-thread buffers (runtime/fused_loop.h): every value
// computed inside the group and consumed inside it is written to, and read back from, L1 (a view
// or unit-dim transpose hands on its input's tile and has none of its own). A loop's output
// that its later nodes read too (layer norm's Sub, which the Pow squares and the Div divides) is
// computed straight into the output and read back from there: its write is the boundary write.
// oneDNN post-ops of an anchor stay in registers instead.
// The same when a value's one reader in the group is a view (or unit-dim transpose) that hands it
// on, through more of them, to a loop output: the output's buffer reaches the value through the
// views and the value is computed into it (FusedLoop::RunTile), unless its kind fills a buffer of
// its own (LoopStep::owns_buffer, lowering/loop_program.h).
bool ComputedIntoOutput(const Graph& g, const FusionGroup& group, TensorId t,
                        const std::vector<TensorId>& materialized, const LoopEvaluation& loop) {
  if (loop.own_buffers.count(t)) return false;
  auto in_group = [&](NodeId c) {
    return std::binary_search(group.nodes.begin(), group.nodes.end(), c);
  };
  while (true) {
    const auto& consumers = g.tensor(t).consumers;
    if (std::count_if(consumers.begin(), consumers.end(), in_group) != 1) return false;
    const Node& view = g.node(*std::find_if(consumers.begin(), consumers.end(), in_group));
    t = view.outputs[0];
    if (!loop.passed_through.count(t)) return false;
    if (std::find(materialized.begin(), materialized.end(), t) != materialized.end()) {
      return std::none_of(g.tensor(t).consumers.begin(), g.tensor(t).consumers.end(), in_group);
    }
  }
}

void AddTileTraffic(const Graph& g, const FusionGroup& group,
                    const std::vector<TensorId>& materialized, const LoopEvaluation* loop,
                    GroupFeatures* f) {
  if (loop == nullptr) return;
  for (NodeId id : group.nodes) {
    for (TensorId t : g.node(id).outputs) {
      double readers = 0;
      for (NodeId c : g.tensor(t).consumers) {
        readers += std::binary_search(group.nodes.begin(), group.nodes.end(), c) ? 1 : 0;
      }
      if (readers == 0 || loop->passed_through.count(t) || loop->chained.count(t)) continue;
      if (group.kind == GroupKind::kLoop && ComputedIntoOutput(g, group, t, materialized, *loop)) {
        continue;
      }
      double bytes = EvaluatedElements(g, loop, t) * 4;
      bool into_output =
          group.kind == GroupKind::kLoop &&
          std::find(materialized.begin(), materialized.end(), t) != materialized.end();
      f->tile_write_bytes += into_output ? 0 : bytes;
      f->tile_read_bytes += bytes * readers;
    }
  }
}

// Outputs of a loop that hand on one value through views (layer norm's result and its unit-dim
// transpose, both read after the group): the loop computes it into one of them and copies each
// tile to the others (FusedLoop::RunTile), reading it back from where the tile sits: L1 for the
// default tiles, L2 for a streaming loop's longer ones (64 KiB). BERT's [Add,Transpose] with both
// outputs ran 9.5 us against 6.0 for [Add] alone; charging the second write alone said 7.0
// against 5.0.
void AddOutputCopies(const Graph& g, const FusionGroup& group,
                     const std::vector<TensorId>& materialized, const LoopEvaluation* loop,
                     const TargetFingerprint& target, int threads, GroupFeatures* f) {
  if (loop == nullptr || group.kind != GroupKind::kLoop || materialized.size() < 2) return;
  auto in_group = [&](TensorId t) {
    NodeId p = g.tensor(t).producer;
    return p != kNoId && std::binary_search(group.nodes.begin(), group.nodes.end(), p);
  };
  std::map<TensorId, int> outputs_of;  // Source value -> outputs that hand it on.
  for (TensorId t : materialized) {
    TensorId source = t;
    while (loop->passed_through.count(source)) {
      const TensorId in = g.node(g.tensor(source).producer).inputs[0];
      if (!in_group(in)) break;
      source = in;
    }
    if (in_group(source)) ++outputs_of[source];
  }
  for (const auto& [source, outputs] : outputs_of) {
    if (outputs < 2) continue;
    const int64_t elements = g.tensor(source).num_elements();  // Its outputs' pass over tiles.
    const double tile_bytes =
        4.0 * static_cast<double>(loop->streams ? StreamingTileElements(elements, threads)
                                                : kLoopTileElements);
    double bytes = static_cast<double>(g.tensor(source).bytes()) * (outputs - 1);
    if (tile_bytes <= static_cast<double>(target.l1d_bytes)) {
      f->tile_read_bytes += bytes;
    } else {
      f->read_bytes[static_cast<int>(MemoryLevel::kL2)] += bytes;
    }
  }
}

// Whether the kernel that writes `node`'s output splits its work like an anchor: the node is an
// anchor, or an elementwise node that can be a post-op of one (its operand of the same shape is
// an anchor's output, or that of such a node, read by nothing else).
bool WrittenLikeAnAnchor(const Graph& g, NodeId node, int depth = 0) {
  const Node& n = g.node(node);
  OpClass c = ClassifyNode(g, n);
  if (c == OpClass::kAnchor) return true;
  if (depth >= 4 || (c != OpClass::kElementwise && c != OpClass::kBroadcast)) return false;
  for (TensorId t : n.inputs) {
    if (t == kNoId) continue;
    const Tensor& in = g.tensor(t);
    if (in.kind != TensorKind::kActivation || in.consumers.size() != 1) continue;
    if (in.dims != g.tensor(n.outputs[0]).dims) continue;
    if (WrittenLikeAnAnchor(g, in.producer, depth + 1)) return true;
  }
  return false;
}

// Computed inputs read from the cores' private caches (L1, L2) on a multi-core target: see the
// header's handoff. One that spilled to L3 or DRAM is priced by those levels' rates alone.
void AddHandoffs(const Graph& g, const FusionGroup& group, const std::vector<TensorId>& inputs,
                 const std::vector<TensorId>& materialized, const Residency& residency,
                 const TargetFingerprint& target, bool serial, GroupFeatures* f) {
  if (target.cores < 2) return;
  double working_set = WorkingSet(g, group, inputs, materialized);
  double remote = static_cast<double>(target.cores - 1) / target.cores;
  bool anchor = ClassifyNode(g, g.node(group.nodes.front())) == OpClass::kAnchor;
  for (TensorId t : inputs) {
    const Tensor& info = g.tensor(t);
    if (info.kind != TensorKind::kActivation) continue;
    // Written and read on the calling thread's core alone: nothing crosses. (The producer's group
    // is at least its node, so a node that runs in parallel on its own does in its group too.)
    bool producer_serial = RunsSerially(g, FusionGroup{GroupKind::kSingle, {info.producer}, {}});
    if (serial && producer_serial) continue;
    // Both on the whole team: loops and reductions split flat ranges alike, and anchors split by
    // blocks alike. One on the team and one on the calling thread alone share nothing of the
    // split: ResNet's Add+Relu in parallel, then its GlobalAveragePool on one core, took 13 us
    // run together against 7 us for the two groups timed apart. A tensor of at
    // most half of one core's L1 (layer norm's 128 per-row means, a squeeze-and-excite gate of
    // at most 4.5 KiB) crosses as a few lines whose latency hides: no handoff (measured: no
    // cost). One that fills L1 does not: SqueezeNet's squeeze Conv to 1x48x13x13
    // (31.7 KiB) then a serial Relu measured 4.4-4.9 us over the Conv with its Relu as a post-op,
    // MobileNetV2's 1x160x7x7 (30.6 KiB) residual Add 5.5 us, where no handoff predicted a tie.
    bool split_alike = WrittenLikeAnAnchor(g, info.producer) == anchor;
    if (serial == producer_serial ? split_alike
                                  : 2 * static_cast<int64_t>(info.bytes()) <= target.l1d_bytes) {
      continue;
    }
    MemoryLevel level = residency.ReadLevel(info, working_set);
    if (level != MemoryLevel::kL1 && level != MemoryLevel::kL2) continue;
    f->handoffs += 1;
    f->handoff_bytes += GroupReadBytes(g, group, t) * remote;
  }
}

// The record's reorders, each a kernel over its tensor (lowering/reorders.h).
void AddReorders(const Graph& g, const GroupLowering& lowering, GroupFeatures* f) {
  for (const LayoutReorder& r : lowering.reorders) {
    f->kernels += 1;
    (r.transposed ? f->transposed_bytes : f->reorder_bytes) +=
        static_cast<double>(g.tensor(r.tensor).bytes());
  }
}

// The same elementwise group as one oneDNN eltwise / binary primitive with post-ops.
GroupFeatures ChainPrimitiveFeatures(const Graph& g, const FusionGroup& group,
                                     const std::vector<TensorId>& inputs,
                                     const std::vector<TensorId>& materialized,
                                     const Residency& residency, double threads) {
  GroupFeatures f;
  f.kernels = 1;
  for (size_t i = 1; i < group.nodes.size(); ++i) {
    if (!EndsGatedPair(g, group.nodes, i)) ++f.post_ops;  // The head is the primitive itself.
  }
  AddCompute(g, group, nullptr, /*jit=*/true, &f);
  AddMemory(g, group, inputs, materialized, residency, &f);
  f.threads = threads;
  f.forks = threads > 1 ? 1 : 0;
  return f;
}

// Groups whose nodes the loop evaluation describes: our fused loops and row reductions, and a
// oneDNN reduction's prologue loop.
bool RunsThroughLoop(const GroupLowering& lowering) {
  return lowering.form == KernelForm::kFusedLoop || lowering.form == KernelForm::kRowReduction ||
         lowering.form == KernelForm::kReductionPrimitive;
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

namespace {

CostTerms EvaluateOne(const GroupFeatures& f, const HardwareProfile& p) {
  const Fitted* throughput[kNumComputeClasses] = {&p.conv_gflops,
                                                  &p.depthwise_conv_gflops,
                                                  &p.matmul_gflops,
                                                  &p.elementwise_gflops,
                                                  &p.transcendental_gflops,
                                                  &p.reduction_gflops,
                                                  &p.jit_transcendental_gflops,
                                                  &p.erf_gflops,
                                                  &p.jit_swish_gflops,
                                                  &p.jit_sigmoid_gflops};
  const Fitted* read_bw[kNumMemoryLevels] = {&p.l1_read_gbps, &p.l2_read_gbps, &p.l3_read_gbps,
                                             &p.dram_read_gbps};
  const Fitted* write_bw[kNumMemoryLevels] = {&p.l1_write_gbps, &p.l2_write_gbps, &p.l3_write_gbps,
                                              &p.dram_write_gbps};
  CostTerms t;
  // GFLOP/s is FLOP/ns and GB/s is B/ns, so each quotient is already in nanoseconds.
  for (int c = 0; c < kNumComputeClasses; ++c) t.flops_ns += f.flops[c] / throughput[c]->value;
  t.compute_ns = t.flops_ns;
  t.compute_ns += f.indexed_elements / p.indexed_gelems.value;
  t.compute_ns += f.remapped_elements / p.remap_gelems.value;
  t.compute_ns += f.strided_elements / p.strided_gelems.value;
  t.compute_ns += f.gathered_elements / p.gather_gelems.value;
  for (int l = 0; l < kNumMemoryLevels; ++l) {
    t.memory_ns += f.read_bytes[l] / read_bw[l]->value + f.write_bytes[l] / write_bw[l]->value;
  }
  // The profile's rates are the whole team's; a serial group has one core.
  double slowdown = std::max(1.0, static_cast<double>(p.target.cores) / std::max(1.0, f.threads));
  t.compute_ns *= slowdown;
  t.memory_ns *= slowdown;
  t.flops_ns *= slowdown;
  t.index_ns = t.compute_ns - t.flops_ns;
  t.boundary_ns = t.memory_ns;
  t.spill_ns = f.spilled_value_vectors * p.spill_ns_per_value.value * slowdown;
  t.launch_ns =
      f.kernels * p.dispatch_ns.value + f.loop_kernels * p.loop_dispatch_ns.value +
      f.forks * p.fork_ns.value + f.post_ops * p.post_op_ns.value +
      (f.eval_calls * p.loop_call_ns.value + f.run_calls * p.run_call_ns.value) * slowdown +
      f.rnn_steps * p.rnn_step_ns.value;
  t.reorder_ns =
      (f.reorder_bytes / p.reorder_gbps.value + f.transposed_bytes / p.transpose_gbps.value) *
      slowdown;
  t.overlap_ns = p.overlap_alpha.value * std::min(t.compute_ns, t.memory_ns);
  // The kernel waits for a handed-off tensor before it can overlap anything with it.
  t.handoff_ns = f.handoffs * p.handoff_ns.value + f.handoff_bytes / p.handoff_gbps.value;
  t.tile_ns =
      (f.tile_read_bytes / p.l1_read_gbps.value + f.tile_write_bytes / p.l1_write_gbps.value) *
      slowdown;
  t.chain_ns = f.chain_steps / p.chain_gsteps.value * slowdown;
  t.memory_ns += t.handoff_ns;
  t.memory_ns += t.tile_ns;
  t.compute_ns += t.chain_ns;
  t.total_ns = t.compute_ns + t.memory_ns - t.overlap_ns + t.spill_ns + t.launch_ns + t.reorder_ns;
  return t;
}

}  // namespace

CostTerms EvaluateFeatures(const GroupFeatures& f, const HardwareProfile& p) {
  CostTerms best = EvaluateOne(f, p);
  for (const GroupFeatures& other : f.or_else) {
    CostTerms t = EvaluateOne(other, p);
    if (t.total_ns < best.total_ns) best = t;
  }
  for (const GroupFeatures& next : f.then) best.Add(EvaluateFeatures(next, p));
  return best;
}

void CostTerms::Add(const CostTerms& o) {
  compute_ns += o.compute_ns;
  memory_ns += o.memory_ns;
  spill_ns += o.spill_ns;
  launch_ns += o.launch_ns;
  reorder_ns += o.reorder_ns;
  total_ns += o.total_ns;
  flops_ns += o.flops_ns;
  index_ns += o.index_ns;
  chain_ns += o.chain_ns;
  boundary_ns += o.boundary_ns;
  handoff_ns += o.handoff_ns;
  tile_ns += o.tile_ns;
  overlap_ns += o.overlap_ns;
  learned_ns += o.learned_ns;
}

std::vector<NamedTerm> NamedTerms(const CostTerms& t) {
  return {{"compute", t.flops_ns},    {"index", t.index_ns},     {"chains", t.chain_ns},
          {"memory", t.boundary_ns},  {"handoff", t.handoff_ns}, {"tiles", t.tile_ns},
          {"overlap", -t.overlap_ns}, {"spill", t.spill_ns},     {"launch", t.launch_ns},
          {"reorder", t.reorder_ns},  {"learned", t.learned_ns}};
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
  // A group of views alone (Reshape, Flatten, ...) is a copy: the runtime gives every group's
  // output a buffer of its own (an input of an in-place Concat is stored in the Concat's).
  GroupFeatures f;
  const GroupLowering lowering =
      LowerGroup(g, group, inputs, materialized, LayoutTargetForIsa(target.isa));
  // Its producers wrote every input into its slice of the output, priced with them: nothing runs.
  if (lowering.form == KernelForm::kInPlaceConcat) return f;
  f.kernels = lowering.primitives;
  f.loop_kernels = lowering.loops;
  // Arithmetic all inside oneDNN's JIT kernels, none in a loop of ours.
  const bool jit = lowering.primitives > 0 && lowering.loops == 0;
  f.post_ops = PostOps(g, lowering);
  const bool serial = lowering.serial;
  std::optional<LoopEvaluation> loop;
  if (RunsThroughLoop(lowering)) {
    // A loop over kept tensors' stored form runs, and is priced, over that view of the graph.
    const Graph& over = lowering.storage_view ? *lowering.storage_view : g;
    loop = EvaluateLoop(over, lowering, serial ? 1 : target.cores, target.l1d_bytes);
    f.indexed_elements = loop->indexed_elements;
    f.remapped_elements = loop->remapped_elements;
    f.strided_elements = loop->strided_elements;
    f.gathered_elements = loop->gathered_elements;
    f.eval_calls = loop->eval_calls;
    f.run_calls = loop->run_calls;
    f.chain_steps = loop->chain_steps;
  }
  const LoopEvaluation* lp = loop ? &*loop : nullptr;
  const Residency residency(target, leaf_footprint);
  AddCompute(g, group, lp, jit, &f);
  AddMemory(g, group, inputs, materialized, residency, &f);
  AddTileTraffic(g, group, materialized, lp, &f);
  AddOutputCopies(g, group, materialized, lp, target, serial ? 1 : target.cores, &f);
  AddHandoffs(g, group, inputs, materialized, residency, target, serial, &f);
  AddSpill(g, group, target, &f);
  AddReorders(g, lowering, &f);
  f.threads = serial ? 1 : target.cores;
  f.forks = lowering.parallel_regions;
  AddRecurrentSteps(g, group, residency, &f);
  if (lowering.alternative == KernelAlternative::kPrimitiveChain) {
    GroupFeatures chain =
        ChainPrimitiveFeatures(g, group, inputs, materialized, residency, f.threads);
    chain.kernels += f.kernels;  // The same reorders around it (a loop group has no others).
    chain.reorder_bytes = f.reorder_bytes;
    chain.transposed_bytes = f.transposed_bytes;
    chain.handoffs = f.handoffs;
    chain.handoff_bytes = f.handoff_bytes;
    f.or_else.push_back(chain);
  }
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

double CostModel::InPlanNs(const Graph&, const FusionPlan&) const { return 0; }

WholePlanCost CostModel::WholePlan(const Graph& g, const FusionPlan& plan) const {
  WholePlanCost out;
  out.groups = Cost(g, plan);
  out.in_plan_ns = InPlanNs(g, plan);
  out.total_ns = out.groups.total.total_ns + out.in_plan_ns;
  return out;
}

double AnalyticalCostModel::InPlanNs(const Graph& g, const FusionPlan& plan) const {
  const InPlanConstants& c = profile_.in_plan;
  if (std::all_of(c.ns_per_byte.begin(), c.ns_per_byte.end(), [](double v) { return v == 0; })) {
    return 0;  // Never fitted: skip the reuse distances.
  }
  return InPlanExtraNs(InPlanReadsOf(g, plan, profile_.target), c);
}

PlanCost CostModel::Cost(const Graph& g, const FusionPlan& plan) const {
  PlanCost cost;
  double footprint = LeafFootprint(g);
  auto inputs = AllGroupInputs(g, plan);
  auto materialized = AllMaterializedOutputs(g, plan);
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    CostTerms t = GroupCost(g, plan.groups[i], inputs[i], materialized[i], footprint);
    cost.total.Add(t);
    cost.groups.push_back(t);
  }
  cost.peak_activation_bytes = PeakActivationBytes(g, plan);
  return cost;
}

}  // namespace fusor
