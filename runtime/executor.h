// Executor: runs one fusion plan of one graph on the CPU. Create() compiles once: it checks the
// plan, lowers every group to a GroupKernel (oneDNN primitives and fused loops, see
// group_kernel.h), plans memory (runtime/memory_plan.h) and refuses a plan over the budget before
// allocating anything, then allocates one arena, prepacks weights and binds every kernel. Run()
// then executes the groups in plan order as often as the caller likes.
//
// The executor owns copies of the graph and of the weight values it was given; the caller's
// objects may go away after Create. Not thread-safe: one thread runs an executor at a time (each
// kernel itself uses all of the configured OpenMP threads, except small groups, which run on one:
// lowering/threading.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/plan.h"
#include "lowering/rnn_form.h"
#include "runtime/group_builder.h"
#include "runtime/host_tensor.h"
#include "runtime/memory_plan.h"

namespace fusor {

class GroupKernel;

struct ExecutorOptions {
  int threads = 0;  // OpenMP threads for every kernel; 0 keeps the process default.
  int64_t memory_budget_bytes = int64_t{16} << 30;
  ChainBackend chain_backend = ChainBackend::kAuto;
  ResidualAdd residual_add = ResidualAdd::kTimed;
  // Keep tensors between convolutions in oneDNN's blocked layout (lowering/layout.h); false stores
  // every tensor plain and reorders inside each conv group (for measuring what that saves).
  bool keep_blocked = true;
  // Run LSTM and GRU nodes on a recurrent kernel (runtime/rnn_kernel.h); false runs them
  // through the reference fallback (for measuring what the lowering saves).
  bool lower_rnn = true;
  // The recurrent kernel every LSTM and GRU runs on, with the threads lowering/threading.h gives
  // it; unset, the lowering's choice (lowering/rnn_form.h). For benchmarks comparing them.
  std::optional<RnnImplementation> rnn_implementation;

  BuildChoices build_choices() const { return {chain_backend, residual_add, lower_rnn}; }
};

class Executor {
 public:
  // `leaves` must hold a value for every graph input, weight and constant (RandomLeafValues).
  static StatusOr<std::unique_ptr<Executor>> Create(const Graph& g, const FusionPlan& plan,
                                                    const TensorValues& leaves,
                                                    const ExecutorOptions& options = {});
  ~Executor();

  // Replaces a graph input's value for the following runs.
  Status SetInput(TensorId t, const HostTensor& value);

  void Run();
  // Run(), with the time each group took in this run written to `seconds` (one per group): what a
  // group costs inside the plan, its inputs coming from the group before it, against what it
  // costs run again and again alone.
  void RunProfiled(std::vector<double>* seconds);
  void RunGroup(size_t index);  // The groups before it must have run since their inputs changed.

  size_t num_groups() const;
  // "anchor [Conv,Relu]: conv (jit:avx2), 1/1 chain nodes as post-ops, reorder in, reorder out".
  std::string DescribeGroup(size_t index) const;
  // Whether an elementwise group runs as oneDNN's eltwise / binary primitive with post-ops (kept
  // over our fused loop, ChainBackend), not as our loop.
  bool RunsPrimitiveChain(size_t index) const;

  // The value of a materialized tensor (any graph output) after a run.
  StatusOr<HostTensor> Read(TensorId t) const;
  StatusOr<TensorValues> ReadOutputs() const;

  const MemoryPlan& memory() const { return memory_; }
  const Graph& graph() const { return graph_; }

 private:
  Executor() = default;
  Status Compile(const FusionPlan& plan);
  Status Allocate();
  void* Buffer(TensorId t);
  void ChooseBackends();

  Graph graph_;
  ExecutorOptions options_;
  TensorValues leaves_;  // Weights and constants (read by kernels), and graph inputs' first values.
  struct Group;
  // Sets the OpenMP threads `group` runs with: one for a small group, else threads_.
  void UseThreads(const Group& group) const;

  std::vector<Group> groups_;
  int threads_ = 1;  // The configured team size.
  MemoryPlan memory_;
  std::vector<int64_t> tensor_offset_;   // Arena offset per tensor, -1 when not in the arena.
  std::vector<int64_t> scratch_offset_;  // Per group.
  struct ArenaFree {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, ArenaFree> arena_;
  struct DnnlState;
  std::unique_ptr<DnnlState> dnnl_;
};

}  // namespace fusor
