#include "graph/narrow_float.h"

#include <cmath>
#include <cstring>

namespace fusor {
namespace {

uint32_t Bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

float FromBits(uint32_t b) {
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}

}  // namespace

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu, mantissa = bits & 0x3FFu;
  if (exponent == 0x1F) return FromBits(sign | 0x7F800000u | (mantissa << 13));  // Inf, NaN.
  if (exponent != 0) return FromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in float32.
  const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  return sign ? -magnitude : magnitude;
}

uint16_t FloatToHalf(float v) {
  const uint32_t b = Bits(v);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  if (std::isnan(v)) return sign | 0x7E00u;
  const float a = std::fabs(v);
  if (a >= 65520.0f) return sign | 0x7C00u;  // Rounds past float16's largest, 65504.
  if (a < 6.103515625e-05f) {                // Below float16's smallest normal: subnormal steps.
    // nearbyint rounds ties to even under the default rounding mode.
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
  }
  const uint32_t ab = Bits(a);
  // Drop 13 mantissa bits with round to nearest, ties to even; a carry moves into the exponent.
  const uint32_t rounded = ab + 0xFFFu + ((ab >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded >> 13) - (112u << 10));
}

float BFloat16ToFloat(uint16_t bits) { return FromBits(static_cast<uint32_t>(bits) << 16); }

uint16_t FloatToBFloat16(float v) {
  const uint32_t b = Bits(v);
  if (std::isnan(v)) return static_cast<uint16_t>((b >> 16) | 0x40u);
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

float RoundToDType(float v, DType t) {
  if (t == DType::kFloat16) return HalfToFloat(FloatToHalf(v));
  if (t == DType::kBFloat16) return BFloat16ToFloat(FloatToBFloat16(v));
  return v;
}

}  // namespace fusor
