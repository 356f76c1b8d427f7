// Executor: runs one fusion plan of one graph on the CPU. Create() compiles once: it checks the
// plan, lowers every group to a GroupKernel (oneDNN primitives and fused loops, see
// group_kernel.h), plans memory (runtime/memory_plan.h) and refuses a plan over the budget before
// allocating anything, then allocates one arena, prepacks weights and binds every kernel. Run()
// then executes the groups in plan order as often as the caller likes.
//
// The executor owns copies of the graph and of the weight values it was given; the caller's
// objects may go away after Create. Graph inputs and outputs named in `caller_buffers` live in the
// caller's memory instead of the arena (IO binding): kernels read and write them there, and that
// memory must outlive the executor. Not thread-safe: one thread runs an executor at a time (each
// kernel itself uses all of the configured OpenMP threads, except small groups, which run on one:
// lowering/threading.h); executors of one graph share nothing and run at once from many threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/plan.h"
#include "lowering/rnn_form.h"
#include "runtime/group_builder.h"
#include "runtime/host_tensor.h"
#include "runtime/kernel_choice.h"
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

  // Graph inputs and outputs stored in the caller's memory (plain row-major, float32 for a
  // floating-point tensor, int64 for an integer or bool one). A tensor the plan cannot keep there
  // (stored channel-blocked, part of an in-place Concat, a folded constant) stays in the arena:
  // InCallerMemory says which are kept.
  std::unordered_map<TensorId, void*> caller_buffers;
  // The alternative each group runs as (Executor::alternatives() of another executor of the same
  // graph and plan), so that executors compute the same values; empty: each times both and keeps
  // the faster.
  std::vector<KernelAlternative> pinned_alternatives;

  BuildChoices build_choices() const { return {chain_backend, residual_add, lower_rnn}; }
};

// What one Run may be told: fewer threads than the executor's, a flag that stops it between
// groups, and whether the calling thread is bound to a core while it runs (thread_binding.h; a
// server running many executors at once from its own threads turns that off).
struct RunControl {
  int threads = 0;  // 0: the executor's; more than the executor's: the executor's.
  const std::atomic<bool>* cancel = nullptr;
  bool bind_caller = true;
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
  // Run() under `control`; false when the cancel flag stopped it (outputs are then undefined).
  bool Run(const RunControl& control);
  // Run(), with the time each group took in this run written to `seconds` (one per group): what a
  // group costs inside the plan, its inputs coming from the group before it, against what it
  // costs run again and again alone.
  void RunProfiled(std::vector<double>* seconds);
  void RunGroup(size_t index);  // The groups before it must have run since their inputs changed.

  size_t num_groups() const;
  // "anchor [Conv,Relu]: conv (jit:avx2), 1/1 chain nodes as post-ops, reorder in, reorder out".
  std::string DescribeGroup(size_t index) const;
  // oneDNN's implementation of group `index`'s anchor primitive and the ones it offered under
  // the same layouts and post-ops (runtime/kernel_choice.h); empty for other groups.
  const KernelImplementations& Implementations(size_t index) const;
  // Whether an elementwise group runs as oneDNN's eltwise / binary primitive with post-ops (kept
  // over our fused loop, ChainBackend), not as our loop.
  bool RunsPrimitiveChain(size_t index) const;
  // The record group `index` was built from, and the kernel it runs (whose reorders and post-ops
  // tests compare with the record's).
  const GroupLowering& GroupRecord(size_t index) const;
  const GroupKernel& RunningKernel(size_t index) const;

  // The value of a materialized tensor (any graph output) after a run.
  StatusOr<HostTensor> Read(TensorId t) const;
  StatusOr<TensorValues> ReadOutputs() const;
  // Read(t) written into `dst` (float32 or int64 by t's kind, NumElements(dims) of them) with no
  // intermediate copy.
  Status ReadInto(TensorId t, void* dst) const;
  // The arena buffer a graph input's value is copied into (SetInput does so from a HostTensor),
  // null when the input is in the caller's memory or is no graph input.
  void* InputBuffer(TensorId t);
  // Whether `t` lives in the memory ExecutorOptions::caller_buffers gave for it.
  bool InCallerMemory(TensorId t) const;
  // The alternative each group runs as, for ExecutorOptions::pinned_alternatives.
  std::vector<KernelAlternative> alternatives() const;

  const MemoryPlan& memory() const { return memory_; }
  const Graph& graph() const { return graph_; }

 private:
  Executor() = default;
  Status Compile(const FusionPlan& plan);
  Status Allocate();
  void* Buffer(TensorId t);
  void ChooseBackends();
  void KeepCallerBuffers(const std::vector<SliceOffset>& slices);

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
  std::vector<void*> caller_buffer_;     // Per tensor: the caller's memory holding it, or null.
  struct ArenaFree {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, ArenaFree> arena_;
  struct DnnlState;
  std::unique_ptr<DnnlState> dnnl_;
};

}  // namespace fusor
