// GroupKernel: one fusion group lowered to what runs it on the CPU: oneDNN primitives (with
// post-ops, reorders and prepacked weights), our fused loops, or both. Kernels are built in two
// steps so that a plan's memory is known before any of it is allocated: Build* creates primitive
// descriptors and reports scratch and weight bytes; Bind (after the executor's budget check)
// allocates weights, binds tensor buffers and scratch, and creates the primitives; Run executes.
//
// Lowering per group kind (docs/decisions.md, "Plans and their legality"):
//   anchor    Conv / ConvTranspose (deconvolution) / Gemm / MatMul primitive (a 1-D MatMul
//             operand promoted as ONNX says); the elementwise chain after it as post-ops (eltwise,
//             binary per-tensor/per-channel/per-element), BatchNormalization right after a Conv or
//             ConvTranspose folded into its weights; chain nodes oneDNN cannot express (and all
//             after them) run as a fused loop in place on the output. (De)convolution layout:
//             format_tag::any. A tensor kept blocked between groups (lowering/layout.h) is read and
//             written in its stored layout; a plain one is reordered inside the group, so the
//             reorder counts in its time.
//   reduction the oneDNN pooling / reduction / softmax / layer-norm primitive, epilogue as post-ops
//             where accepted, else an in-place fused loop; with a prologue, a fused row reduction
//             (trailing-axis reductions and softmax) or the prologue loop into scratch, then the
//             primitive.
//   loop      one FusedLoop; or, for a chain oneDNN can express, an eltwise/binary primitive with
//             post-ops (the executor may time both and keep the faster).
//
// A kernel is owned by its executor; Run is not reentrant (one thread calls it at a time).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "base/status.h"
#include "graph/graph.h"
#include "lowering/group_lowering.h"
#include "lowering/layout.h"
#include "runtime/fused_loop.h"
#include "runtime/kernel_choice.h"

namespace fusor {

class GroupKernel {
 public:
  using TensorBuffer = std::function<void*(TensorId)>;
  virtual ~GroupKernel() = default;
  // Per-run scratch: reorder targets, oneDNN scratchpads, prologue temporaries.
  virtual int64_t scratch_bytes() const { return 0; }
  // Constant data the kernel owns once bound: prepacked weights, folded biases.
  virtual int64_t weight_bytes() const { return 0; }
  virtual Status Bind(const TensorBuffer& tensor, void* scratch) = 0;
  virtual void Run() = 0;
  // "conv jit:avx2 +2 post-ops, reorder in/out, tail loop of 1 node", for logs and `fusor run`.
  virtual std::string Describe() const = 0;
  // Inputs stored blocked (KernelContext::stored) that the kernel reads in that layout. The
  // executor gives it a plain copy of every other blocked input (layout_adapter.h).
  virtual std::vector<TensorId> NativeLayouts() const { return {}; }
  // Outputs the kernel writes in a blocked layout (only ones KernelContext::KeepsBlocked allows);
  // every other output is plain.
  virtual std::vector<std::pair<TensorId, dnnl::memory::desc>> BlockedOutputs() const { return {}; }
  // The reorders between layouts the kernel runs, as its group's record lists the ones it should
  // (GroupLowering::reorders; the cost model prices those).
  virtual std::vector<LayoutReorder> Reorders() const { return {}; }
  // The chain nodes after its anchor or reduction the kernel runs as oneDNN post-ops (a
  // BatchNormalization folded into a conv's weights among them): GroupLowering::post_ops.
  virtual size_t PostOpNodes() const { return 0; }
  // oneDNN's implementation of the group's main primitive and the ones it offered
  // (runtime/kernel_choice.h); both empty for a kernel with no such choice (loops, reductions).
  const KernelImplementations& implementations() const { return implementations_; }
  void set_implementations(KernelImplementations i) { implementations_ = std::move(i); }

 private:
  KernelImplementations implementations_;
};

// Row-major float32 layout of `dims` (a scalar as [1]): how tensors are stored unless kept blocked.
dnnl::memory::desc PlainLayout(const Shape& dims);
// oneDNN's channel-blocked layout of 4-D `dims` for this CPU: nChw16c on AVX-512 when the
// channels divide by 16, else nChw8c.
dnnl::memory::desc ChannelBlocked(const Shape& dims);
// Dense NHWC of 4-D `dims`: how a tensor written by a conv that runs channels-last is kept.
dnnl::memory::desc ChannelsLast(const Shape& dims);
// The layout the layout rules store kept tensor `t` in on `target` (lowering/layout.h
// StoredChannelsLast): ChannelsLast or ChannelBlocked of its dims.
dnnl::memory::desc StoredLayoutOf(const Graph& g, TensorId t, const LayoutTarget& target);

// Primitive attributes with a user scratchpad: every kernel hands each primitive a slice of the
// group's scratch (the executor's arena) rather than letting oneDNN allocate per call.
dnnl::primitive_attr UserScratchpadAttr();

// Output `i` of node `id` when the group materializes it (something reads it), else kNoId.
TensorId MaterializedOutput(const Graph& g, NodeId id, const std::vector<TensorId>& materialized,
                            size_t i);

// The error of a kernel of node `id` that finds no buffer for tensor `t` when bound.
Status NoBufferFor(const Graph& g, NodeId id, TensorId t);

struct KernelContext {
  const Graph* g = nullptr;
  dnnl::engine* engine = nullptr;
  dnnl::stream* stream = nullptr;
  FusedLoop::Lookup known;        // Values of weights and constants.
  std::vector<TensorId> outputs;  // Tensors the group materializes.
  // The layout of an input stored blocked between groups, null for a plain row-major one.
  // Unset: all plain.
  std::function<const dnnl::memory::desc*(TensorId)> stored;
  // The layout rules' target (lowering/layout.h): which outputs may be written blocked
  // (KeptBlocked) and which form a conv runs in (ConvRunsChannelsLast) are decided there; block 0
  // keeps every output plain and leaves a conv's form to oneDNN.
  LayoutTarget layout;
  // The implementation of the anchor primitive the plan names (FusionGroup::kernel); empty:
  // oneDNN's first choice.
  std::string kernel;
  const dnnl::memory::desc* Stored(TensorId t) const { return stored ? stored(t) : nullptr; }
  bool KeepsBlocked(TensorId t) const { return layout.block > 0 && KeptBlocked(*g, t, layout); }
};

StatusOr<std::unique_ptr<GroupKernel>> BuildAnchorKernel(const KernelContext& ctx, NodeId anchor,
                                                         const std::vector<NodeId>& chain);
// The same Conv group with a per-element Add right after the conv (BatchNormalization folded) run
// as oneDNN's sum post-op on a copy of the residual in dst; Unimplemented without such an Add or
// when oneDNN takes no sum there. oneDNN 2.6 has implementations (brgconv on AVX-512) that take a
// sum but not a per-element binary post-op; the executor times both kernels and keeps the faster.
StatusOr<std::unique_ptr<GroupKernel>> BuildResidualSumKernel(const KernelContext& ctx,
                                                              NodeId anchor,
                                                              const std::vector<NodeId>& chain);
// A oneDNN reduction, pooling or softmax primitive (the record's `center`), the record's prologue
// program (if any) run first as our loop into scratch and the epilogue (`after`) as post-ops
// where oneDNN takes them; a blocked pooling after a prologue reads its input in the layout the
// record reorders it into.
StatusOr<std::unique_ptr<GroupKernel>> BuildReductionPrimitiveKernel(const KernelContext& ctx,
                                                                     const GroupLowering& record);
// A fused row reduction (trailing-axis Reduce*, GlobalAveragePool, last-axis Softmax) evaluating
// the prologue inside the reduction; Unimplemented for other reductions. The prologue and epilogue
// loops are the record's programs (GroupLowering::prologue, loop).
StatusOr<std::unique_ptr<GroupKernel>> BuildRowReductionKernel(const KernelContext& ctx,
                                                               const GroupLowering& record);
// oneDNN's linear resampling primitive for a Resize node (lowering/kernel_form.h RunsAsResampling),
// reading and writing plain layouts.
StatusOr<std::unique_ptr<GroupKernel>> BuildResamplingKernel(const KernelContext& ctx, NodeId id);
// oneDNN's layer normalization over each (image, channel) plane, then a binary primitive applying
// the per-channel scale and shift, for an InstanceNormalization node (lowering/kernel_form.h
// RunsAsInstanceNormPrimitive), reading and writing plain layouts.
StatusOr<std::unique_ptr<GroupKernel>> BuildInstanceNormKernel(const KernelContext& ctx, NodeId id);
// A Concat whose inputs its producers wrote into their slices of its output
// (lowering/concat_in_place.h): it runs nothing; Bind checks that every input is at its slice.
StatusOr<std::unique_ptr<GroupKernel>> BuildInPlaceConcatKernel(const KernelContext& ctx,
                                                                NodeId concat);
// Our fused loop as its program names it (GroupLowering::loop).
StatusOr<std::unique_ptr<GroupKernel>> BuildLoopKernel(const KernelContext& ctx,
                                                       const LoopProgram& program);
// An eltwise or binary primitive with post-ops for a chain of elementwise/broadcast nodes, or
// Unimplemented when the chain has no such form.
StatusOr<std::unique_ptr<GroupKernel>> BuildChainPrimitiveKernel(const KernelContext& ctx,
                                                                 const std::vector<NodeId>& nodes);

}  // namespace fusor
