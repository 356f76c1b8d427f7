// The op registry: for every ONNX op Fusor understands, its op class (how it maps input elements to
// output elements, which decides what it may fuse with), its FLOPs and its bytes read and written,
// computed from the node's shapes, dtypes and attributes. Ops not in the registry are opaque:
// fusion barriers with a cost of their bytes only. The registry is immutable static data; all
// functions are safe to call from any thread.
//
// Counting conventions (the cost model relies on them):
//   - flops counts additions, multiplications, comparisons and selects; a multiply-add is 2.
//   - transcendentals counts evaluations of exp, log, erf, tanh, sqrt, pow and division-heavy
//     functions separately, because they run at a different throughput than cheap arithmetic.
//   - bytes_read / bytes_written assume the op runs alone as one kernel: every distinct input
//   tensor
//     is read once in full (Slice and Gather read only what they keep), every output written once.
//     Views (Reshape, Flatten, Squeeze, Unsqueeze) move no bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"

namespace fusor {

enum class OpClass : uint8_t {
  kElementwise = 0,  // One output element from the same-index input elements.
  kBroadcast = 1,    // Elementwise with at least one input broadcast along some axis.
  kInjective = 2,    // Reorganises elements without arithmetic (reshape, transpose, slice, ...).
  kReduction = 3,    // Combines many input elements into one (reduce, softmax, norms, pooling).
  kAnchor = 4,       // Compute-bound contraction (conv, matmul, gemm).
  kOpaque = 5,       // Unknown to Fusor or unfusable: a fusion barrier.
};
inline constexpr int kNumOpClasses = 6;
std::string_view OpClassName(OpClass c);

struct OpCost {
  double flops = 0;
  double transcendentals = 0;
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
};

// True when the op (default domain) has real semantics in Fusor.
bool IsKnownOp(std::string_view domain, std::string_view op_type);
// Every op_type the registry knows, sorted.
std::vector<std::string_view> KnownOps();

// The ops the reference interpreter (runtime/reference.h) has a kernel for, in the default
// domain: every op Fusor can run at all, fused or not, a superset of KnownOps. The interpreter
// refuses any other op by name. tests/conformance/reference_registry_test.cc runs ONNX's cases of
// each op against the kernels, so an op listed here without a kernel, or given a kernel without
// being listed, fails it.
bool HasReferenceKernel(std::string_view domain, std::string_view op_type);
// Every op with a reference kernel, sorted.
std::vector<std::string_view> ReferenceKernelOps();
// The op's reference kernel may write integer outputs (computed in int64); the kernels of the other
// ops compute in float only, and the interpreter refuses such a node with an integer output.
bool ReferenceKernelWritesIntegers(std::string_view op_type);

// Views (Reshape, Flatten, Squeeze, Unsqueeze): the output is the input's elements in the same
// order under another shape, so no bytes move and a kernel reads the input in place.
bool IsViewOp(std::string_view op_type);

// Unary elementwise ops (Relu, LeakyRelu, Sigmoid, Tanh, Exp, Log, Sqrt, Erf, HardSigmoid,
// HardSwish, Clip, Cast): one data input (Clip's bounds are parameters), each output element a
// function of the same-index input element and the attributes. The fused loop runs each as one
// unary step, and they are the unary nodes its single-pass chains may take.
bool IsUnaryElementwise(std::string_view op_type);

// Binary arithmetic (Add, Sub, Mul, Div, Pow): two operands that broadcast to the output.
bool IsBinaryArithmetic(std::string_view op_type);

// A Pow by a constant scalar exponent of 2, 0.5 or 1 is a unary op (x * x, a square root, a copy):
// its exponent, or nullopt for any other node. Every part that treats such a Pow as unary (the
// loop's lowering and its kernels) asks here.
std::optional<double> UnaryPowExponent(const Graph& g, const Node& n);

// The float attribute `attr` of `n`, or ONNX's default for the node's op when it is absent
// (LeakyRelu's alpha 0.01, HardSigmoid's alpha 0.2 and beta 0.5, Elu's, Celu's and
// ThresholdedRelu's alpha 1, Selu's alpha and gamma, Shrink's lambd and bias, Gemm's alpha and
// beta, LRN's alpha, beta and bias, the normalizations' epsilon 1e-5, BatchNormalization's
// momentum 0.9). 0 for an attribute the op has no default for.
double FloatAttrOrDefault(const Node& n, std::string_view attr);

// The op class of a node; elementwise ops whose inputs differ in shape from the output are
// kBroadcast, and a node only the reference interpreter computes (OnlyReferenceComputes,
// graph/node_attrs.h) is kOpaque.
OpClass ClassifyNode(const Graph& g, const Node& n);

// FLOPs and bytes of a node from its shapes and attributes. The graph must be linked and validated.
OpCost CostOfNode(const Graph& g, const Node& n);

// Checks that a node's output shapes follow from its input shapes and attributes, for ops whose
// shape rule the registry knows; other ops pass. The message names the node and the mismatch.
Status CheckNodeShapes(const Graph& g, const Node& n);

}  // namespace fusor
