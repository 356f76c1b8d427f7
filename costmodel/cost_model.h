// The analytical cost model: predicts, without running it, how long each group of a fusion plan
// takes on a target, by following how the runtime lowers it. A group is first reduced to named
// features, then the profile's constants turn features into separately reported terms:
//
//   compute = sum_c flops_c / throughput_c            (per class; oneDNN's JIT transcendentals
//             + indexed / indexed_gelems                and our loops' apart)
//             + gathered / gather_gelems + remapped / remap_gelems     (fused-loop index work)
//             + strided / strided_gelems
//   memory  = sum_level read_bytes / read_bw + write_bytes / write_bw
//   handoff = handoffs * handoff_ns + handoff_bytes / handoff_gbps      (counted as memory)
//   tiles   = tile_read_bytes / l1_read_gbps + tile_write_bytes / l1_write_gbps   (as memory)
//   chains  = chain_steps / chain_gsteps                                (counted as compute)
//   spill   = spilled_value_vectors * spill_ns_per_value
//   launch  = kernels * dispatch_ns + loop_kernels * loop_dispatch_ns + forks * fork_ns
//             + post_ops * post_op_ns + eval_calls * loop_call_ns + run_calls * run_call_ns
//             + rnn_steps * rnn_step_ns
//   reorder = reorder_bytes / reorder_gbps + transposed_bytes / transpose_gbps
//   total   = compute + memory - alpha * min(compute, memory) + handoff + tiles + chains + spill
//             + launch + reorder
//
// The profile's rates are the whole thread team's; a group small enough to run on one thread
// (lowering/threading.h) has compute, memory, spill and reorder scaled by the core count and wakes
// no team. A fused loop evaluates each node at the elements its consumers ask for
// (costmodel/loop_evaluation.h): FLOPs and tile traffic scale with that, and broadcasts,
// transposes, concats and gathers add index work. An elementwise group that oneDNN can also run as
// one eltwise / binary primitive with post-ops carries that alternative in `or_else`: the runtime
// times both and keeps the faster, so the prediction is the least of them.
//
// Which level holds a tensor: an activation a group reads was written by the group that produced it
// (usually just before), so it is read from the smallest level that holds it, and a group's output
// is written to the smallest level that holds it; weights and graph inputs were last touched one
// inference ago, so they sit in the smallest level that holds the model's whole footprint. This
// makes a group's cost depend only on the group and which of its outputs leave it, so a plan's cost
// is the sum of its groups' costs and the search can compare groups independently. Inside a fused
// loop (or a reduction's fused prologue) an intermediate goes through per-thread tile buffers, one
// L1 write and one L1 read per internal consumer, unless it is computed inside its one reader's
// single-pass chain (costmodel/loop_evaluation.h): then it costs a chain step instead.
//
// An LSTM or GRU on a recurrent kernel (lowering/rnn_form.h) runs its time steps one after
// another. Besides its FLOPs (X's gate products for all steps at once, at the matmul rate; R's at
// the same rate) each step reads R again and has a fixed cost, rnn_step_ns, fitted from
// calibration benchmarks of short and long recurrences (costmodel/calibration.h). On our
// recurrence loop (runtime/rnn_loop.h) the input projection is a matmul kernel whose output the
// steps read back, each thread reads its slice of R (R / threads) from the level of its own
// core's caches that holds it, both directions share a step, and on the thread team each step
// ends in a barrier priced as a team wake-up (fork_ns); its gate activations run at our loops'
// rate. On oneDNN's RNN primitive (one thread) each step is one direction's, per step a GEMM of
// the hidden state by R (a GEMV at batch 1) and the JIT gate kernel, R read from the level of one
// core's caches that holds it.
//
// A node that runs through the reference fallback (an opaque node oneDNN has no lowering for:
// lowering/unfused_ops.h) is priced by a stated rule, not measured alone: one loop launch, its
// op-registry FLOPs at the elementwise rate and its transcendentals at our loops' rate, on one
// core, and the bytes it reads and writes. The reference loops are slower than that rule (they are
// written to be right, not fast), so the rule underprices them; since such a group is never fused,
// the error shifts every plan of a model alike and does not change which plan the search picks.
//
// A handoff: on more than one core, a tensor the previous group just computed sits, part by part,
// in the private caches of the cores that wrote it, and the next group's kernel splits its work
// differently (a conv by channel blocks, an eltwise by flat ranges), so about (cores - 1) / cores
// of it crosses between cores. On a 2-vCPU EPYC guest that made a Relu over a conv's 43 KiB
// output cost 13 us after the conv against 3 us on one core (docs/costmodel.md, handoffs);
// calibration groups read graph inputs every core already holds, so it is its own term, fitted
// from benchmarks of two groups (a conv, then an elementwise group reading its output).
//
// CostModel is an interface so another model (a learned one) can be slotted in. Implementations are
// immutable after construction and safe to use from many threads.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "costmodel/hardware_profile.h"
#include "graph/graph.h"
#include "graph/plan.h"

namespace fusor {

enum class ComputeClass : uint8_t {
  kConv,
  kDepthwiseConv,
  kMatMul,
  kElementwise,
  kTranscendental,  // In our fused loops (runtime/vector_math.h).
  kReduction,
  kJitTranscendental,  // In oneDNN's JIT eltwise kernels and post-ops.
  kErf,                // Erf (GELU's), which only our loops run: an exp and a rational polynomial.
  kJitSwish,           // The sigmoid of x * Sigmoid(x) as oneDNN's one eltwise_swish primitive.
  kJitSigmoid,         // Any other Sigmoid in oneDNN's JIT kernels: eltwise_logistic, post-ops.
};
inline constexpr int kNumComputeClasses = 10;

enum class MemoryLevel : uint8_t { kL1, kL2, kL3, kDram };
inline constexpr int kNumMemoryLevels = 4;
std::string_view MemoryLevelName(MemoryLevel l);

struct GroupFeatures {
  std::array<double, kNumComputeClasses> flops{};
  std::array<double, kNumMemoryLevels> read_bytes{};
  std::array<double, kNumMemoryLevels> write_bytes{};
  // A fused loop's values handed between its passes through the per-thread tile buffers, priced
  // at the L1 rates. The loop runs pass after pass over a tile (runtime/fused_loop.h), so this
  // traffic overlaps nothing: GELU's Div+Erf+Add+Mul+Mul over 1x128x3072 took 201, 219, 244 and
  // 247 us as each cheap pass joined the Erf (183 us alone), where overlapping it with the Erf's
  // compute predicts ~+1 us a pass.
  double tile_read_bytes = 0;
  double tile_write_bytes = 0;
  // Values a fused loop carries through its single-pass chains, times their elements (every value
  // of a chain, its head included): per element and step, the chain kernel dispatches and
  // computes in registers, and like tile traffic this overlaps nothing.
  double chain_steps = 0;
  double kernels = 0;       // oneDNN primitives launched (reorders included).
  double loop_kernels = 0;  // Fused loops launched.
  double post_ops = 0;
  double spilled_value_vectors = 0;
  double reorder_bytes = 0;
  // Reorders between plain and channels-last (lowering/layout.h: a conv oneDNN runs channels-last,
  // a kept tensor stored so): transposes, several times slower than those of the blocked layout.
  double transposed_bytes = 0;
  double indexed_elements = 0;   // Elements fused loops read through index maps, run by run.
  double gathered_elements = 0;  // Elements fused loops index one at a time.
  double remapped_elements = 0;  // Element-dimensions re-indexed through index lists.
  double strided_elements = 0;   // Strided reads whose cache lines stay in L1 (loop_evaluation.h).
  double eval_calls = 0;         // Values a fused loop pulls, times its tiles (or row chunks).
  double run_calls = 0;          // Calls on one run of a broadcast operand or a Concat input.
  double forks = 0;              // Thread teams woken (one per kernel of a parallel group).
  double rnn_steps = 0;          // Sequential steps of an RNN primitive (time steps x directions).
  double threads = 0;            // Threads the group runs on (1: serial, lowering/threading.h).
  // Tensors another group of the plan just computed that this one reads from the cores' private
  // caches, and their bytes that sit in another core's cache ((cores - 1) / cores of each).
  double handoffs = 0;
  double handoff_bytes = 0;
  // Other ways the runtime may run the same group, timed when it compiles: it keeps the fastest,
  // so the predicted time is the least over these and this one.
  std::vector<GroupFeatures> or_else;
  // Groups measured after this one in the same calibration benchmark (a plan of several groups):
  // their times add to this one's.
  std::vector<GroupFeatures> then;
};

// A group's predicted time and the terms it is the sum of. compute_ns and memory_ns are the two
// sides of the overlap; the named terms below split them as EvaluateFeatures adds them, so that
//   total = flops + index + chains + boundary + handoff + tiles - overlap + spill + launch +
//   reorder + learned
// (to rounding; NamedTerms lists them in this order). learned is the residual's correction
// (costmodel/residual.h), 0 for the analytical model alone.
struct CostTerms {
  double compute_ns = 0;  // flops_ns + index_ns + chain_ns.
  double memory_ns = 0;   // boundary_ns + handoff_ns + tile_ns.
  double spill_ns = 0;
  double launch_ns = 0;
  double reorder_ns = 0;
  double total_ns = 0;
  double flops_ns = 0;     // FLOPs at their class's rate (conv, matmul, elementwise, ...).
  double index_ns = 0;     // A fused loop's index work (indexed, remapped, strided, gathered).
  double chain_ns = 0;     // A fused loop's single-pass chain steps.
  double boundary_ns = 0;  // Bytes crossing the group's boundary, at their level's bandwidth.
  double handoff_ns = 0;   // Tensors handed over from the cores that wrote them.
  double tile_ns = 0;      // A fused loop's tile-buffer traffic in L1.
  double overlap_ns = 0;   // Subtracted: alpha * min(flops + index, boundary).
  double learned_ns = 0;   // The learned residual's correction (costmodel/residual.h).

  // Adds every term of `other` (the groups of a calibration benchmark, of a plan).
  void Add(const CostTerms& other);
};

// The named terms of a prediction, in the order they add to total_ns (overlap negative).
struct NamedTerm {
  std::string_view name;
  double ns;
};
std::vector<NamedTerm> NamedTerms(const CostTerms& t);

struct PlanCost {
  std::vector<CostTerms> groups;
  CostTerms total;
  int64_t peak_activation_bytes = 0;
};

// A whole plan's prediction (CostModel::WholePlan).
struct WholePlanCost {
  PlanCost groups;        // Each group's terms, and their sum: exactly additive.
  double in_plan_ns = 0;  // What the plan adds to that sum (costmodel/in_plan.h).
  double total_ns = 0;    // groups.total.total_ns + in_plan_ns.
};

// Turns features into terms with the profile's constants.
CostTerms EvaluateFeatures(const GroupFeatures& f, const HardwareProfile& p);

// Bytes of every weight, input and activation of the graph: where leaves are found (see above).
double LeafFootprint(const Graph& g);

// Features of one group that reads `inputs` and writes `materialized` to memory.
GroupFeatures GroupFeaturesOf(const Graph& g, const FusionGroup& group,
                              const std::vector<TensorId>& inputs,
                              const std::vector<TensorId>& materialized,
                              const TargetFingerprint& target, double leaf_footprint);

// Features of every group of a legal plan, in order.
std::vector<GroupFeatures> PlanFeatures(const Graph& g, const FusionPlan& plan,
                                        const TargetFingerprint& target);

// Vector registers a fused loop body needs at its peak: the most values (loaded inputs and computed
// intermediates) alive at once when the group's nodes run in order, plus two temporaries.
int LiveVectorValues(const Graph& g, const FusionGroup& group);

// Peak bytes of activation buffers while the plan runs (weights and graph inputs excluded): each
// materialized tensor lives from the group that writes it to the last group that reads it.
int64_t PeakActivationBytes(const Graph& g, const FusionPlan& plan);

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string version() const = 0;
  // Predicted time of one group that reads `inputs` and writes `materialized`.
  virtual CostTerms GroupCost(const Graph& g, const FusionGroup& group,
                              const std::vector<TensorId>& inputs,
                              const std::vector<TensorId>& materialized,
                              double leaf_footprint) const = 0;
  // The sum over the plan's groups, and the plan's peak activation memory.
  PlanCost Cost(const Graph& g, const FusionPlan& plan) const;
  // What running the groups one after another in the plan adds to the sum of their times
  // (costmodel/in_plan.h); 0 for a model without in-plan constants.
  virtual double InPlanNs(const Graph& g, const FusionPlan& plan) const;
  // The whole plan's predicted time: Cost, and what the plan adds on top. The one rule for the
  // time of a whole plan (a tune's predicted and unfused times, `plan explain`'s total, the
  // choice among measured plans, validation's alternatives); the search compares groups by Cost,
  // whose groups stay independent of each other.
  WholePlanCost WholePlan(const Graph& g, const FusionPlan& plan) const;
};

class AnalyticalCostModel final : public CostModel {
 public:
  explicit AnalyticalCostModel(HardwareProfile profile) : profile_(std::move(profile)) {}
  std::string version() const override { return kCostModelVersion; }
  CostTerms GroupCost(const Graph& g, const FusionGroup& group, const std::vector<TensorId>& inputs,
                      const std::vector<TensorId>& materialized,
                      double leaf_footprint) const override;
  double InPlanNs(const Graph& g, const FusionPlan& plan) const override;
  const HardwareProfile& profile() const { return profile_; }

 private:
  HardwareProfile profile_;
};

}  // namespace fusor
