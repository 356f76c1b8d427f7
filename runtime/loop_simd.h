// Vector kernels of our fused loops (runtime/fused_loop.h): unary, binary and batch-norm
// arithmetic over float arrays, compiled for AVX-512, AVX2 and the x86-64 baseline (the CPU picks
// a clone at load time), and the single-pass chains, compiled per ISA and picked at run time.
// Pure functions over caller memory, safe from any thread; UseChainIsa is not safe while a loop
// runs.
#pragma once

#include <cstdint>

namespace fusor {

enum class UnaryOp : uint8_t {
  kCopy,
  kRelu,
  kLeakyRelu,
  kSigmoid,
  kTanh,
  kExp,
  kLog,
  kSqrt,
  kErf,
  kHardSigmoid,
  kHardSwish,
  kShrink,
  kClip,
  kTrunc,
  kBool,
  kSquare
};
enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kDivTrunc, kPow };

// The instruction set the single-pass chains are compiled for and run with: the best the CPU has,
// unless a caller picks a lower one (tests check that every build computes the same values).
enum class ChainIsa : uint8_t { kSse, kAvx2, kAvx512 };
ChainIsa BestChainIsa();
// Chains run at `isa`, or the best the CPU has if that is lower. Not safe while a loop runs.
void UseChainIsa(ChainIsa isa);

namespace loop_simd {

// y[i] = op(x[i]) with parameters a, b (alpha / beta, clip bounds); y may be x.
void Unary(UnaryOp op, float a, float b, const float* x, float* y, int64_t n);
// z[i] = x[i] op y[i]; z may be x or y.
void Binary(BinaryOp op, const float* x, const float* y, float* z, int64_t n);
// z[i] = x[i] op c, or c op x[i] when `scalar_first`.
void BinaryScalar(BinaryOp op, const float* x, float c, bool scalar_first, float* z, int64_t n);
// y[i] = (x[i] - mean[i]) / sqrt(var[i] + eps) * scale[i] + bias[i].
void BatchNorm(const float* x, const float* scale, const float* bias, const float* mean,
               const float* var, float eps, float* y, int64_t n);

// A chain of unary and binary arithmetic nodes evaluated in one pass: each block of 8 vectors
// is loaded once, carried through every step in vector registers and stored once. Evaluating the
// nodes pass by pass over a tile stores every intermediate to an L1 buffer and loads it back; on
// the AVX-512 EPYC host the stores are what binds: x * w + b over 1x128x768 took 15.6 us in two
// passes and 12.3 us as a chain (a loop hand-written for x * w + b: 9.6 us; oneDNN's two
// binaries: 18 us).
// A step's side: streamed at the step's elements, a scalar, or the value after the chain's first
// step, which the chain keeps in registers for steps that read it again (LoopValue::saved_input).
enum class ChainSide : uint8_t { kNone, kStream, kConstant, kSaved };
struct ChainOp {
  bool unary = true;
  UnaryOp u = UnaryOp::kCopy;
  BinaryOp b = BinaryOp::kAdd;
  bool side_first = false;  // side op acc rather than acc op side.
  float p = 0, q = 0;       // Unary parameters.
  ChainSide side = ChainSide::kNone;
};

// out[e] = the chain `ops` applied to src[e], e < n. A step's side is read at side[s][e] (kStream)
// or is the scalar side[s][0] (kConstant). out may be src or a streamed side (each block is read
// before it is written).
void Chain(const ChainOp* ops, int k, const float* src, const float* const* side, float* out,
           int64_t n);

}  // namespace loop_simd
}  // namespace fusor
