// Moving values between a caller's tensor (engine.h TensorView: any dtype of the tensor's kind) and
// the runtime's storage (float32 for a floating-point tensor, int64 for an integer or bool one,
// runtime/host_tensor.h). A caller's tensor already of the storage type is copied as bytes; others
// convert (float16 and bfloat16 round to nearest even, integers wrap as a C cast does). Stateless
// and thread-safe.
#pragma once

#include <cstdint>

#include "graph/dtype.h"

namespace fusor {

// The storage type of a tensor of `dtype`: kFloat32 or kInt64.
DType StorageDType(DType dtype);

// `n` values of `from` at `src` into storage of StorageDType(from) at `dst`.
void ToStorage(DType from, const void* src, int64_t n, void* dst);
// `n` stored values (StorageDType(to)) at `src` into `n` values of `to` at `dst`.
void FromStorage(DType to, const void* src, int64_t n, void* dst);

}  // namespace fusor
