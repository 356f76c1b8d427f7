// HostTensor: a dense row-major tensor in ordinary memory, the currency between the runtime and its
// callers (inputs fed in, outputs read back, reference values compared). Floating-point tensors
// hold float32 values; every integer and bool tensor holds int64 values, whatever its declared
// width. TensorValues maps tensor ids of one graph to their values. Plain values: not synchronised.
//
// The bundled models carry dims only, so runs use seeded random inputs and weights
// (RandomLeafValues); the same seed gives the same values on every machine.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"

namespace fusor {

struct HostTensor {
  DType dtype = DType::kFloat32;
  Shape dims;
  std::vector<float> f;    // float32 tensors.
  std::vector<int64_t> i;  // Integer and bool tensors.

  bool is_float() const { return IsFloatingPoint(dtype); }
  int64_t num_elements() const { return NumElements(dims); }
  // Element e as a double, whatever the storage.
  double at(int64_t e) const { return is_float() ? f[e] : static_cast<double>(i[e]); }

  static HostTensor Zeros(DType dtype, Shape dims);
};

using TensorValues = std::unordered_map<TensorId, HostTensor>;

// True for the dtypes the runtime computes with: every floating-point type, stored and computed
// as float32 (float16 and bfloat16 values stay exact; float64 ones round to float32), and
// integers/bool stored as int64 (uint64 too: values up to 2^63 - 1, ToHostTensor).
bool IsSupportedDType(DType t);

// The values of a kConstant tensor, from its int_data / float_data (a single value broadcasts).
StatusOr<HostTensor> ConstantValue(const Tensor& t);

// The values of `g`'s constants, each decoded (ConstantValue) on first use and kept: a lookup for
// kernels built without weights, which decode parameters once (Pow exponents, Clip bounds); null
// for any other tensor. Not thread-safe; `g` must outlive it.
class ConstantValues {
 public:
  explicit ConstantValues(const Graph& g) : g_(g) {}
  const HostTensor* operator()(TensorId t);

 private:
  const Graph& g_;
  TensorValues values_;
};

// Values for every graph input, weight and constant of `g`. Weights feeding an anchor's weight
// operand get He-uniform values, with a larger gain before a smooth gate such as SiLU (so
// activations keep their scale through deep networks, and the
// outputs depend on the input: tests/search/weights_parity_test.cc); an anchor's bias is uniform in
// [-0.1, 0.1]; other weights are uniform in [0.5, 1.5] (safe for Div, Sqrt, Log); float inputs
// uniform in [-1, 1];
// integer inputs that index a Gather stay inside the gathered axis, others lie in [0, 10).
// `weights` false leaves weights out (a caller with the model's own weights adds them); inputs get
// the same values either way.
StatusOr<TensorValues> RandomLeafValues(const Graph& g, uint64_t seed, bool weights = true);

// How far `actual` is from `expected`: the largest |a - e| / (atol + rtol * |e|), where atol is
// `rel_atol` times the largest |e|. A result <= 1 means within tolerance. Shapes must match.
struct Closeness {
  double worst_ratio = 0;  // <= 1 when close.
  int64_t worst_index = -1;
  double expected = 0, actual = 0;
  std::string ToString() const;
};
StatusOr<Closeness> Compare(const HostTensor& expected, const HostTensor& actual,
                            double rtol = 1e-3, double rel_atol = 1e-4);

// How far apart two runs' values are for their scale: the largest |a - b| over the largest |a|,
// across every tensor of `a` (each must be in `b`, with the same dims). Two unrelated inputs give
// outputs differing by well over 1e-2 in a network whose weights let the input through; a parity
// check on weights that wash it out sees only the last layers.
double RelativeDifference(const TensorValues& a, const TensorValues& b);
// The RelativeDifference below which two unrelated inputs give "the same" outputs: a parity check
// at 1e-4 could then pass with the network's body computing garbage. The weights parity test and
// the peer bench hold their weights to it.
inline constexpr double kMinInputSensitivity = 1e-2;

}  // namespace fusor
