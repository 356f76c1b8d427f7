// Element types of tensors. The numeric values match fusor.v1.DataType so conversion is a cast.
#pragma once

#include <cstdint>
#include <string_view>

namespace fusor {

enum class DType : uint8_t {
  kUnspecified = 0,
  kFloat32 = 1,
  kFloat16 = 2,
  kBFloat16 = 3,
  kFloat64 = 4,
  kInt8 = 5,
  kUInt8 = 6,
  kInt16 = 7,
  kUInt16 = 8,
  kInt32 = 9,
  kUInt32 = 10,
  kInt64 = 11,
  kUInt64 = 12,
  kBool = 13,
  kString = 14,
};
inline constexpr int kMaxDType = 14;

// Bytes per element; 0 for kUnspecified and kString (which Fusor never moves).
int64_t DTypeSize(DType t);
bool IsFloatingPoint(DType t);
bool IsInteger(DType t);              // Integers and bool.
std::string_view DTypeName(DType t);  // "float32", "int64", ...

// Maps ONNX's TensorProto::DataType numbering; returns kUnspecified for types Fusor does not know.
DType DTypeFromOnnx(int32_t onnx_type);

}  // namespace fusor
