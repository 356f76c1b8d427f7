// The reference interpreter: runs a graph one op at a time in plain C++, each op written as
// directly as its ONNX definition allows. It is what every fused execution is compared against, and
// its ops are themselves checked against hand-computed values (tests/runtime/reference_test.cc), so
// the comparison rests on something other than oneDNN. Contractions use a cache-blocked loop (not
// oneDNN) so BERT and ResNet run in seconds, summing in double: the reference judges float32
// runtimes, and its own float32 sums would carry errors of their size (docs/benchmarks.md,
// "Parity and float32"). Ops it does not know give Unimplemented naming the
// node. Stateless functions; safe to call from several threads on different TensorValues.
#pragma once

#include "base/status.h"
#include "graph/graph.h"
#include "runtime/host_tensor.h"

namespace fusor {

// Ok when the op registry lists a reference kernel for node `id`'s op (HasReferenceKernel,
// graph/op_registry.h) and the kernel computes its dtypes; otherwise Unimplemented naming the node
// and the op.
Status CheckReferenceKernel(const Graph& g, NodeId id);

// Computes the outputs of node `id` from the values of its inputs in *values and stores them there.
Status RunReferenceNode(const Graph& g, NodeId id, TensorValues* values);

// RunReferenceNode's kernel dispatch without CheckReferenceKernel: an op the dispatch has no
// kernel for is Unimplemented "op is not supported by the runtime". Only for the test that
// compares the registry's list of reference ops with the kernels (a node the check would refuse
// may crash it).
Status RunReferenceKernel(const Graph& g, NodeId id, TensorValues* values);

// Runs every node in id order. `leaves` must hold every graph input, weight and constant. Returns
// the values of the graph outputs (intermediates are freed as soon as their last reader ran).
StatusOr<TensorValues> RunReference(const Graph& g, const TensorValues& leaves);

// C[m, n] = sum_k A[m, k] * B[k, n] (+ C when `accumulate`), row-major with leading dims, summed
// in double and rounded to float once; the contraction kernel of the reference, exposed for its
// unit test.
void ReferenceGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                   int64_t ldb, float* c, int64_t ldc, bool accumulate);

}  // namespace fusor
