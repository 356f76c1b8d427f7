#include "runtime/host_tensor.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>

#include "base/host_memory.h"
#include "graph/op_registry.h"
#include "runtime/memory_plan.h"

namespace fusor {
namespace {

// Seeded anchor biases lie in [-kAnchorBiasBound, kAnchorBiasBound]: small and centred, as trained
// biases are. Biases in [0.5, 1.5] added a constant to every layer that, after SqueezeNet's final
// average pool, left its outputs for two inputs 0.7% apart.
constexpr float kAnchorBiasBound = 0.1f;

// Fan-in of a weight used as an anchor's weight operand, or 0 when it is not one.
int64_t AnchorFanIn(const Graph& g, TensorId w) {
  for (NodeId c : g.tensor(w).consumers) {
    const Node& n = g.node(c);
    const Shape& d = g.tensor(w).dims;
    if (n.input(1) != w || d.empty()) continue;
    if (n.op_type == "Conv") return NumElements(d) / d[0];
    if (n.op_type == "ConvTranspose") return d[0];
    if (n.op_type == "Gemm") return n.GetInt("transB", 0) ? d[1] : d[0];
    if (n.op_type == "MatMul") return d.size() >= 2 ? d[d.size() - 2] : d[0];
  }
  return 0;
}

// He's gain for the weight of an anchor (2: ReLU passes half the variance on), or 3 when the
// anchor's output goes into a smooth gate (SiLU as x * Sigmoid(x), HardSwish, Tanh), which passes
// on about a third: with 2, EfficientNet-B0's activations shrink layer by layer until its outputs
// for two inputs are 0.15% apart. tools/fill_weights.py applies the same rule.
float AnchorGain(const Graph& g, TensorId w) {
  static const std::set<std::string> kSmoothGates = {"Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
                                                     "Mul"};
  for (NodeId c : g.tensor(w).consumers) {
    const Node& anchor = g.node(c);
    if (anchor.input(1) != w) continue;
    for (TensorId out : anchor.outputs) {
      for (NodeId r : g.tensor(out).consumers) {
        if (kSmoothGates.count(g.node(r).op_type)) return 3.0f;
      }
    }
  }
  return 2.0f;
}

// True for a weight an anchor adds as its bias (Conv, ConvTranspose, Gemm input 2).
bool IsAnchorBias(const Graph& g, TensorId w) {
  for (NodeId c : g.tensor(w).consumers) {
    const Node& n = g.node(c);
    bool anchor = n.op_type == "Conv" || n.op_type == "ConvTranspose" || n.op_type == "Gemm";
    if (anchor && n.input(2) == w) return true;
  }
  return false;
}

// Exclusive upper bound for an integer input: the gathered axis when some Gather indexes with it.
int64_t IndexBound(const Graph& g, TensorId t) {
  int64_t bound = 10;
  for (NodeId c : g.tensor(t).consumers) {
    const Node& n = g.node(c);
    if (n.op_type != "Gather" || n.input(1) != t) continue;
    const Shape& data = g.tensor(n.input(0)).dims;
    int64_t axis = n.GetInt("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(data.size());
    bound = std::min(bound == 10 ? data[axis] : bound, data[axis]);
  }
  return std::max<int64_t>(bound, 1);
}

HostTensor RandomTensor(const Graph& g, TensorId id, std::mt19937_64& rng) {
  const Tensor& t = g.tensor(id);
  HostTensor h = HostTensor::Zeros(t.dtype, t.dims);
  if (!h.is_float()) {
    std::uniform_int_distribution<int64_t> dist(0, IndexBound(g, id) - 1);
    for (auto& v : h.i) v = t.dtype == DType::kBool ? dist(rng) % 2 : dist(rng);
    return h;
  }
  float lo = -1, hi = 1;
  if (t.kind == TensorKind::kWeight) {
    int64_t fan_in = AnchorFanIn(g, id);
    float bound = fan_in > 0 ? std::sqrt(3 * AnchorGain(g, id) / static_cast<float>(fan_in))
                  : IsAnchorBias(g, id) ? kAnchorBiasBound
                                        : 0;
    lo = bound > 0 ? -bound : 0.5f;
    hi = bound > 0 ? bound : 1.5f;
  }
  std::uniform_real_distribution<float> dist(lo, hi);
  for (auto& v : h.f) v = dist(rng);
  return h;
}

}  // namespace

HostTensor HostTensor::Zeros(DType dtype, Shape dims) {
  HostTensor h;
  h.dtype = dtype;
  h.dims = std::move(dims);
  if (h.is_float()) {
    h.f.assign(h.num_elements(), 0.0f);
  } else {
    h.i.assign(h.num_elements(), 0);
  }
  return h;
}

bool IsSupportedDType(DType t) { return IsFloatingPoint(t) || IsInteger(t); }

StatusOr<HostTensor> ConstantValue(const Tensor& t) {
  if (!IsSupportedDType(t.dtype)) {
    return Status::Unimplemented("constant '" + t.name + "' has dtype " +
                                 std::string(DTypeName(t.dtype)) +
                                 "; the runtime supports floating-point and integer tensors");
  }
  HostTensor h = HostTensor::Zeros(t.dtype, t.dims);
  int64_t n = h.num_elements();
  size_t have = h.is_float() ? t.float_data.size() : t.int_data.size();
  if (have != static_cast<size_t>(n) && have != 1) {
    return Status::InvalidArgument("constant '" + t.name + "' has " + std::to_string(have) +
                                   " values for shape " + ShapeString(t.dims));
  }
  for (int64_t e = 0; e < n; ++e) {
    size_t src = have == 1 ? 0 : static_cast<size_t>(e);
    if (h.is_float()) {
      h.f[e] = static_cast<float>(t.float_data[src]);
    } else {
      h.i[e] = t.int_data[src];
    }
  }
  return h;
}

const HostTensor* ConstantValues::operator()(TensorId t) {
  if (t == kNoId || g_.tensor(t).kind != TensorKind::kConstant) return nullptr;
  auto it = values_.find(t);
  if (it == values_.end()) {
    auto v = ConstantValue(g_.tensor(t));
    if (!v.ok()) return nullptr;
    it = values_.emplace(t, std::move(v).value()).first;
  }
  return &it->second;
}

StatusOr<TensorValues> RandomLeafValues(const Graph& g, uint64_t seed, bool weights) {
  int64_t bytes = 0;
  for (TensorId id = 0; id < static_cast<TensorId>(g.num_tensors()); ++id) {
    const Tensor& t = g.tensor(id);
    if (t.kind == TensorKind::kActivation || (!weights && t.kind == TensorKind::kWeight)) continue;
    bytes += StorageBytes(t);
  }
  FUSOR_RETURN_IF_ERROR(
      CheckHostMemory(bytes, "model '" + g.model_name + "': its inputs, weights and constants"));
  TensorValues values;
  for (TensorId id = 0; id < static_cast<TensorId>(g.num_tensors()); ++id) {
    const Tensor& t = g.tensor(id);
    if (t.kind == TensorKind::kActivation || (!weights && t.kind == TensorKind::kWeight)) continue;
    if (!IsSupportedDType(t.dtype)) {
      return Status::Unimplemented("tensor '" + t.name + "' has dtype " +
                                   std::string(DTypeName(t.dtype)) +
                                   "; the runtime supports floating-point and integer tensors");
    }
    if (t.kind == TensorKind::kConstant) {
      FUSOR_ASSIGN_OR_RETURN(values[id], ConstantValue(t));
      continue;
    }
    // One generator per tensor, seeded by (seed, id): values do not depend on iteration order.
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(id));
    values[id] = RandomTensor(g, id, rng);
  }
  return values;
}

std::string Closeness::ToString() const {
  return "worst error ratio " + std::to_string(worst_ratio) + " at element " +
         std::to_string(worst_index) + " (expected " + std::to_string(expected) + ", got " +
         std::to_string(actual) + ")";
}

StatusOr<Closeness> Compare(const HostTensor& expected, const HostTensor& actual, double rtol,
                            double rel_atol) {
  if (expected.dims != actual.dims) {
    return Status::InvalidArgument("shape " + ShapeString(actual.dims) + " differs from expected " +
                                   ShapeString(expected.dims));
  }
  double max_abs = 0;
  for (int64_t e = 0; e < expected.num_elements(); ++e) {
    max_abs = std::max(max_abs, std::abs(expected.at(e)));
  }
  double atol = std::max(rel_atol * max_abs, 1e-30);
  Closeness c;
  for (int64_t e = 0; e < expected.num_elements(); ++e) {
    double want = expected.at(e), got = actual.at(e);
    double ratio = std::abs(want - got) / (atol + rtol * std::abs(want));
    if (std::isnan(got) != std::isnan(want) || std::isnan(ratio)) ratio = INFINITY;
    if (std::isnan(got) && std::isnan(want)) ratio = 0;
    if (ratio > c.worst_ratio || c.worst_index < 0) {
      c = {ratio, e, want, got};
    }
  }
  return c;
}

double RelativeDifference(const TensorValues& a, const TensorValues& b) {
  double diff = 0, scale = 0;
  for (const auto& [t, value] : a) {
    const HostTensor& other = b.at(t);
    for (int64_t e = 0; e < value.num_elements(); ++e) {
      diff = std::max(diff, std::abs(value.at(e) - other.at(e)));
      scale = std::max(scale, std::abs(value.at(e)));
    }
  }
  return scale > 0 ? diff / scale : 0;
}

}  // namespace fusor
