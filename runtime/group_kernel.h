// GroupKernel: one fusion group lowered to what runs it on the CPU: oneDNN primitives (with
// post-ops, reorders and prepacked weights), our fused loops, or both. Kernels are built in two
// steps so that a plan's memory is known before any of it is allocated: Build* creates primitive
// descriptors and reports scratch and weight bytes; Bind (after the executor's budget check)
// allocates weights, binds tensor buffers and scratch, and creates the primitives; Run executes.
//
// Lowering per group kind (see DESIGN.md "group"):
//   anchor    Conv / ConvTranspose (deconvolution) / Gemm / MatMul primitive (a 1-D MatMul
//             operand promoted as ONNX says); the elementwise chain after it as post-ops (eltwise,
//             binary per-tensor/per-channel/per-element), BatchNormalization right after a Conv or
//             ConvTranspose folded into its weights; chain nodes oneDNN cannot express (and all
//             after them) run as a fused loop in place on the output. (De)convolution layout:
//             format_tag::any, with reorders from and to the plain buffers inside the group, so
//             they count in its time.
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
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "base/status.h"
#include "graph/graph.h"
#include "runtime/fused_loop.h"

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
};

struct KernelContext {
  const Graph* g = nullptr;
  dnnl::engine* engine = nullptr;
  dnnl::stream* stream = nullptr;
  FusedLoop::Lookup known;        // Values of weights and constants.
  std::vector<TensorId> outputs;  // Tensors the group materializes.
};

StatusOr<std::unique_ptr<GroupKernel>> BuildAnchorKernel(const KernelContext& ctx, NodeId anchor,
                                                         const std::vector<NodeId>& chain);
StatusOr<std::unique_ptr<GroupKernel>> BuildReductionKernel(const KernelContext& ctx,
                                                            const std::vector<NodeId>& prologue,
                                                            NodeId reduction,
                                                            const std::vector<NodeId>& epilogue);
// A fused row reduction (trailing-axis Reduce*, GlobalAveragePool, last-axis Softmax) evaluating
// the prologue inside the reduction; Unimplemented for other reductions.
StatusOr<std::unique_ptr<GroupKernel>> BuildRowReductionKernel(const KernelContext& ctx,
                                                               const std::vector<NodeId>& prologue,
                                                               NodeId reduction,
                                                               const std::vector<NodeId>& epilogue);
StatusOr<std::unique_ptr<GroupKernel>> BuildLoopKernel(const KernelContext& ctx,
                                                       const std::vector<NodeId>& nodes);
// An eltwise or binary primitive with post-ops for a chain of elementwise/broadcast nodes, or
// Unimplemented when the chain has no such form.
StatusOr<std::unique_ptr<GroupKernel>> BuildChainPrimitiveKernel(const KernelContext& ctx,
                                                                 const std::vector<NodeId>& nodes);

}  // namespace fusor
