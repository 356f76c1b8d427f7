#include "engine/tensor_copy.h"

#include <cstring>

#include "graph/initializer_data.h"
#include "graph/narrow_float.h"

namespace fusor {
namespace {

template <typename To, typename From, typename Fn>
void Convert(const void* src, int64_t n, void* dst, Fn convert) {
  const From* in = static_cast<const From*>(src);
  To* out = static_cast<To*>(dst);
  for (int64_t e = 0; e < n; ++e) out[e] = convert(in[e]);
}

template <typename To, typename From>
void Cast(const void* src, int64_t n, void* dst) {
  Convert<To, From>(src, n, dst, [](From v) { return static_cast<To>(v); });
}

}  // namespace

DType StorageDType(DType dtype) { return IsFloatingPoint(dtype) ? DType::kFloat32 : DType::kInt64; }

void ToStorage(DType from, const void* src, int64_t n, void* dst) {
  const size_t bytes = static_cast<size_t>(n) * 8;
  if (from == DType::kFloat32 || from == DType::kInt64) {
    std::memcpy(dst, src, from == DType::kFloat32 ? bytes / 2 : bytes);
    return;
  }
  TensorData d;
  d.dtype = from;
  DecodeLittleEndian(from, static_cast<const char*>(src), n, &d);
  if (IsFloatingPoint(from)) {
    std::memcpy(dst, d.f.data(), bytes / 2);
  } else {
    std::memcpy(dst, d.i.data(), bytes);
  }
}

void FromStorage(DType to, const void* src, int64_t n, void* dst) {
  switch (to) {
    case DType::kFloat32:
      return Cast<float, float>(src, n, dst);
    case DType::kFloat64:
      return Cast<double, float>(src, n, dst);
    case DType::kFloat16:
      return Convert<uint16_t, float>(src, n, dst, FloatToHalf);
    case DType::kBFloat16:
      return Convert<uint16_t, float>(src, n, dst, FloatToBFloat16);
    case DType::kInt64:
      return Cast<int64_t, int64_t>(src, n, dst);
    case DType::kUInt64:
      return Cast<uint64_t, int64_t>(src, n, dst);
    case DType::kInt32:
      return Cast<int32_t, int64_t>(src, n, dst);
    case DType::kUInt32:
      return Cast<uint32_t, int64_t>(src, n, dst);
    case DType::kInt16:
      return Cast<int16_t, int64_t>(src, n, dst);
    case DType::kUInt16:
      return Cast<uint16_t, int64_t>(src, n, dst);
    case DType::kInt8:
      return Cast<int8_t, int64_t>(src, n, dst);
    case DType::kBool:
      return Convert<uint8_t, int64_t>(src, n, dst, [](int64_t v) -> uint8_t { return v != 0; });
    default:  // kUInt8.
      return Cast<uint8_t, int64_t>(src, n, dst);
  }
}

}  // namespace fusor
