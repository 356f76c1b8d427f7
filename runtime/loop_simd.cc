#include "runtime/loop_simd.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "lowering/loop_lowering.h"
#include "runtime/vector_math.h"

namespace fusor {

namespace loop_simd {

// op applied to x, a float or a vector of 16 (the chains): one formula for both kernels. Log,
// Trunc and Bool exist as floats only (they never chain).
template <typename T>
FUSOR_INLINE T UnaryValue(UnaryOp op, float a, float b, T x) {
  using vector_math::Max;
  using vector_math::Min;
  using vector_math::Select;
  using vector_math::Splat;
  const T zero = Splat<T>(0.0f), one = Splat<T>(1.0f);
  switch (op) {
    case UnaryOp::kRelu:
      return Select<T>(x > zero, x, zero);
    case UnaryOp::kLeakyRelu:
      return Select<T>(x >= zero, x, a * x);
    case UnaryOp::kSigmoid:
      return vector_math::Sigmoid(x);
    case UnaryOp::kTanh:
      return vector_math::Tanh(x);
    case UnaryOp::kExp:
      return vector_math::Exp(x);
    case UnaryOp::kSqrt:
      return vector_math::Sqrt(x);
    case UnaryOp::kErf:
      return vector_math::Erf(x);
    case UnaryOp::kHardSigmoid:
      return Min(Max(a * x + b, zero), one);
    case UnaryOp::kHardSwish:
      return x * Min(Max(x * (1.0f / 6) + 0.5f, zero), one);
    case UnaryOp::kShrink:  // a = lambd, b = bias.
      return Select<T>(x < zero - Splat<T>(a), x + Splat<T>(b),
                       Select<T>(x > Splat<T>(a), x - Splat<T>(b), zero));
    case UnaryOp::kClip:
      return Min(Max(x, Splat<T>(a)), Splat<T>(b));
    case UnaryOp::kSquare:
      return x * x;
    default:
      break;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (op == UnaryOp::kLog) return std::log(x);
    if (op == UnaryOp::kTrunc) return std::trunc(x);
    if (op == UnaryOp::kBool) return x != 0 ? 1.0f : 0.0f;
  }
  return x;  // kCopy.
}

// y[i] = kOp(x[i]): the op a constant, so each loop is the op's formula alone, vectorised.
template <UnaryOp kOp>
FUSOR_INLINE void UnaryLoop(float a, float b, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = UnaryValue(kOp, a, b, x[i]);
}

FUSOR_VECTOR_CLONES void Unary(UnaryOp op, float a, float b, const float* x, float* y, int64_t n) {
  switch (op) {
#define FUSOR_UNARY_CASE(k) \
  case UnaryOp::k:          \
    return UnaryLoop<UnaryOp::k>(a, b, x, y, n);
    FUSOR_UNARY_CASE(kCopy)
    FUSOR_UNARY_CASE(kRelu)
    FUSOR_UNARY_CASE(kLeakyRelu)
    FUSOR_UNARY_CASE(kSigmoid)
    FUSOR_UNARY_CASE(kTanh)
    FUSOR_UNARY_CASE(kExp)
    FUSOR_UNARY_CASE(kLog)
    FUSOR_UNARY_CASE(kSqrt)
    FUSOR_UNARY_CASE(kErf)
    FUSOR_UNARY_CASE(kHardSigmoid)
    FUSOR_UNARY_CASE(kHardSwish)
    FUSOR_UNARY_CASE(kShrink)
    FUSOR_UNARY_CASE(kClip)
    FUSOR_UNARY_CASE(kTrunc)
    FUSOR_UNARY_CASE(kBool)
    FUSOR_UNARY_CASE(kSquare)
#undef FUSOR_UNARY_CASE
  }
}

FUSOR_VECTOR_CLONES void Binary(BinaryOp op, const float* x, const float* y, float* z, int64_t n) {
  switch (op) {
    case BinaryOp::kAdd:
      for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
      break;
    case BinaryOp::kSub:
      for (int64_t i = 0; i < n; ++i) z[i] = x[i] - y[i];
      break;
    case BinaryOp::kMul:
      for (int64_t i = 0; i < n; ++i) z[i] = x[i] * y[i];
      break;
    case BinaryOp::kDiv:
      for (int64_t i = 0; i < n; ++i) z[i] = x[i] / y[i];
      break;
    case BinaryOp::kDivTrunc:
      for (int64_t i = 0; i < n; ++i) z[i] = std::trunc(x[i] / y[i]);
      break;
    case BinaryOp::kPow:
      for (int64_t i = 0; i < n; ++i) z[i] = std::pow(x[i], y[i]);
      break;
  }
}

// z = x op c (or c op x when `scalar_first`): a binary node with one scalar operand, without
// filling a tile with copies of the scalar first.
FUSOR_VECTOR_CLONES void BinaryScalar(BinaryOp op, const float* x, float c, bool scalar_first,
                                      float* z, int64_t n) {
  switch (op) {
    case BinaryOp::kAdd:
      for (int64_t i = 0; i < n; ++i) z[i] = x[i] + c;
      return;
    case BinaryOp::kMul:
      for (int64_t i = 0; i < n; ++i) z[i] = x[i] * c;
      return;
    case BinaryOp::kSub:
      if (scalar_first) {
        for (int64_t i = 0; i < n; ++i) z[i] = c - x[i];
      } else {
        for (int64_t i = 0; i < n; ++i) z[i] = x[i] - c;
      }
      return;
    case BinaryOp::kDiv:
      if (scalar_first) {
        for (int64_t i = 0; i < n; ++i) z[i] = c / x[i];
      } else {
        // A multiply by the reciprocal, as oneDNN's eltwise_linear does: a vector divide has a
        // fraction of a multiply's throughput (GELU's x / sqrt(2) in our loop cost 24 us over
        // 393K elements, against 12 us as a separate oneDNN primitive). Within 1.5 ulp of x / c.
        const float r = 1.0f / c;
        for (int64_t i = 0; i < n; ++i) z[i] = x[i] * r;
      }
      return;
    default: {  // Truncating division and Pow: rare with a scalar, keep one code path.
      for (int64_t i = 0; i < n; ++i) {
        float a = scalar_first ? c : x[i], b = scalar_first ? x[i] : c;
        Binary(op, &a, &b, &z[i], 1);
      }
      return;
    }
  }
}

FUSOR_VECTOR_CLONES void BatchNorm(const float* x, const float* scale, const float* bias,
                                   const float* mean, const float* var, float eps, float* y,
                                   int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = (x[i] - mean[i]) / std::sqrt(var[i] + eps) * scale[i] + bias[i];
  }
}

namespace {

template <typename V>
[[gnu::always_inline]] inline V ApplyBinary(const ChainOp& op, V a, V b) {
  switch (op.b) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return op.side_first ? b - a : a - b;
    case BinaryOp::kMul:
      return a * b;
    default:  // kDiv; a constant divisor was turned into its reciprocal.
      if (op.side == ChainSide::kConstant && !op.side_first) return a * b;
      return op.side_first ? b / a : a / b;
  }
}

// The step `op` applied to each of the W vectors in `a` (the switch taken once for all of them).
// The loops over the W vectors are unrolled so that `a` lives in registers, not on the stack.
template <typename V, int W>
FUSOR_INLINE void UnaryEach(const ChainOp& op, V* a) {
  switch (op.u) {
#define FUSOR_UNARY_EACH(k)                                \
  case UnaryOp::k:                                         \
    _Pragma("GCC unroll 16") for (int w = 0; w < W; ++w) { \
      a[w] = UnaryValue(UnaryOp::k, op.p, op.q, a[w]);     \
    }                                                      \
    return;
    FUSOR_UNARY_EACH(kRelu)
    FUSOR_UNARY_EACH(kLeakyRelu)
    FUSOR_UNARY_EACH(kSigmoid)
    FUSOR_UNARY_EACH(kTanh)
    FUSOR_UNARY_EACH(kExp)
    FUSOR_UNARY_EACH(kSqrt)
    FUSOR_UNARY_EACH(kErf)
    FUSOR_UNARY_EACH(kHardSigmoid)
    FUSOR_UNARY_EACH(kHardSwish)
    FUSOR_UNARY_EACH(kShrink)
    FUSOR_UNARY_EACH(kClip)
    FUSOR_UNARY_EACH(kSquare)
#undef FUSOR_UNARY_EACH
    default:
      return;  // kCopy (the others never chain).
  }
}

// W vectors of V at offset i: src[i..], streamed sides at side[s][i..]. The vectors are
// independent, so a step's latency (a sigmoid is ~20 dependent instructions) overlaps across
// them: with two, a chain of 16 Tanh/Sigmoid steps over 128K floats took 615 us, 1.7x the time
// of 16 passes of the vectorised one-op loop, whose iterations the core overlaps.
template <typename V, int W, bool kSaves>
FUSOR_INLINE void ChainBlock(const ChainOp* ops, int k, const V* constants, const float* src,
                             const float* const* side, int64_t i, float* out) {
  constexpr int kL = vector_math::kLanes<V>;
  V a[W], saved[W];
  _Pragma("GCC unroll 16") for (int w = 0; w < W; ++w) {
    std::memcpy(&a[w], src + i + kL * w, sizeof(V));
    if constexpr (kSaves) saved[w] = a[w];  // Set again after the first step, which no side reads.
  }
  for (int s = 0; s < k; ++s) {
    const ChainOp& op = ops[s];
    if (op.unary) {
      UnaryEach<V, W>(op, a);
    } else {
      V b[W];
      _Pragma("GCC unroll 16") for (int w = 0; w < W; ++w) { b[w] = constants[s]; }
      if (op.side == ChainSide::kStream) {
        _Pragma("GCC unroll 16") for (int w = 0; w < W; ++w) {
          std::memcpy(&b[w], side[s] + i + kL * w, sizeof(V));
        }
      }
      if constexpr (kSaves) {
        if (op.side == ChainSide::kSaved) {
          _Pragma("GCC unroll 16") for (int w = 0; w < W; ++w) { b[w] = saved[w]; }
        }
      }
      _Pragma("GCC unroll 16") for (int w = 0; w < W; ++w) { a[w] = ApplyBinary(op, a[w], b[w]); }
    }
    if constexpr (kSaves) {
      if (s == 0) {
        _Pragma("GCC unroll 16") for (int w = 0; w < W; ++w) { saved[w] = a[w]; }
      }
    }
  }
  _Pragma("GCC unroll 16") for (int w = 0; w < W; ++w) {
    std::memcpy(out + i + kL * w, &a[w], sizeof(V));
  }
}

// Chain (below) in blocks of W vectors of V, then single vectors, then a tail through buffers.
// kSaves: a step reads the value after the first step again (kSaved).
template <typename V, int W, bool kSaves>
FUSOR_INLINE void ChainWith(const ChainOp* ops, int k, const float* src, const float* const* side,
                            float* out, int64_t n) {
  constexpr int kL = vector_math::kLanes<V>;
  V constants[kMaxChain];
  for (int s = 0; s < k; ++s) {
    if (ops[s].side != ChainSide::kConstant) continue;
    float c = side[s][0];
    if (ops[s].b == BinaryOp::kDiv && !ops[s].side_first) c = 1.0f / c;
    constants[s] = vector_math::Splat<V>(c);
  }
  int64_t i = 0;
  for (; i + kL * W <= n; i += kL * W) {
    ChainBlock<V, W, kSaves>(ops, k, constants, src, side, i, out);
  }
  for (; i + kL <= n; i += kL) ChainBlock<V, 1, kSaves>(ops, k, constants, src, side, i, out);
  if (i == n) return;
  // The unused lanes of the tail compute on zeros (and ones for streamed sides), harmlessly.
  const int64_t r = n - i;
  float in[kL] = {}, res[kL];
  float tails[kMaxChain][kL];
  const float* tail_side[kMaxChain];
  std::memcpy(in, src + i, r * sizeof(float));
  for (int s = 0; s < k; ++s) {
    tail_side[s] = side[s];
    if (ops[s].side != ChainSide::kStream) continue;
    std::fill(tails[s], tails[s] + kL, 1.0f);
    std::memcpy(tails[s], side[s] + i, r * sizeof(float));
    tail_side[s] = tails[s];
  }
  ChainBlock<V, 1, kSaves>(ops, k, constants, in, tail_side, 0, res);
  std::memcpy(out + i, res, r * sizeof(float));
}

template <typename V, int W>
FUSOR_INLINE void ChainOf(const ChainOp* ops, int k, const float* src, const float* const* side,
                          float* out, int64_t n) {
  bool saves = false;
  for (int s = 0; s < k; ++s) saves = saves || ops[s].side == ChainSide::kSaved;
  if (saves) {
    ChainWith<V, W, true>(ops, k, src, side, out, n);
  } else {
    ChainWith<V, W, false>(ops, k, src, side, out, n);
  }
}

// Chain at each ISA level, in its own register width, with 8 vectors in flight. On the AVX-512
// EPYC host, 8 zmm vectors took a chain of 16 Tanh/Sigmoid steps over 128K floats from 615 us (2
// vectors) to 310, and 16 Relu steps from 39 to 32 (16 vectors were no quicker). The AVX2 build,
// timed on the same host, had carried 16-float vectors it cannot hold in registers: 185 us a
// Tanh/Sigmoid step and 57 a Relu step, now 38 and 3.9 with 8 ymm vectors (4 vectors: 39 and 4.9).
constexpr int kChainVectors = 8;

[[gnu::target("arch=x86-64-v4")]] void ChainAvx512(const ChainOp* ops, int k, const float* src,
                                                   const float* const* side, float* out,
                                                   int64_t n) {
  ChainOf<vector_math::F16, kChainVectors>(ops, k, src, side, out, n);
}
[[gnu::target("arch=x86-64-v3")]] void ChainAvx2(const ChainOp* ops, int k, const float* src,
                                                 const float* const* side, float* out, int64_t n) {
  ChainOf<vector_math::F8, kChainVectors>(ops, k, src, side, out, n);
}
void ChainSse(const ChainOp* ops, int k, const float* src, const float* const* side, float* out,
              int64_t n) {
  ChainOf<vector_math::F4, kChainVectors>(ops, k, src, side, out, n);
}

using ChainFn = void (*)(const ChainOp*, int, const float*, const float* const*, float*, int64_t);

ChainFn ChainFor(ChainIsa isa) {
  switch (isa) {
    case ChainIsa::kAvx512:
      return &ChainAvx512;
    case ChainIsa::kAvx2:
      return &ChainAvx2;
    case ChainIsa::kSse:
      break;
  }
  return &ChainSse;
}

std::atomic<ChainFn> chain_in_use{ChainFor(BestChainIsa())};

}  // namespace

void Chain(const ChainOp* ops, int k, const float* src, const float* const* side, float* out,
           int64_t n) {
  chain_in_use.load(std::memory_order_relaxed)(ops, k, src, side, out, n);
}
}  // namespace loop_simd

// The x86-64-v3 and -v4 levels the kernels are compiled for, asked feature by feature: clang 14
// (the fuzzing build's compiler) knows no level names in __builtin_cpu_supports, nor f16c, lzcnt
// or movbe, which every CPU with AVX2 and BMI2 has.
ChainIsa BestChainIsa() {
  __builtin_cpu_init();
  const bool v3 = __builtin_cpu_supports("avx") && __builtin_cpu_supports("avx2") &&
                  __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
                  __builtin_cpu_supports("bmi2");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl");
  if (v4) return ChainIsa::kAvx512;
  if (v3) return ChainIsa::kAvx2;
  return ChainIsa::kSse;
}

void UseChainIsa(ChainIsa isa) {
  loop_simd::chain_in_use.store(loop_simd::ChainFor(std::min(isa, BestChainIsa())),
                                std::memory_order_relaxed);
}

}  // namespace fusor
