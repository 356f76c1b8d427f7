// float16 and bfloat16 values as float32: decoding their 16-bit patterns, encoding back, and
// rounding a float32 to the nearest value the narrow type holds (round to nearest, ties to even;
// too large for float16 gives infinity; NaN stays NaN). Fusor stores and computes every
// floating-point tensor as float32 (runtime/host_tensor.h); these convert at the edges (weights,
// input and output files) and at Cast. Stateless and thread-safe.
#pragma once

#include <cstdint>

#include "graph/dtype.h"

namespace fusor {

float HalfToFloat(uint16_t bits);
uint16_t FloatToHalf(float v);
float BFloat16ToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float v);

// `v` rounded to `t`'s precision: float16 and bfloat16 round, float64 and float32 keep `v`.
float RoundToDType(float v, DType t);

}  // namespace fusor
