#include "graph/dtype.h"

namespace fusor {

int64_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat16:
      return 2;
    case DType::kBFloat16:
      return 2;
    case DType::kFloat64:
      return 8;
    case DType::kInt8:
      return 1;
    case DType::kUInt8:
      return 1;
    case DType::kInt16:
      return 2;
    case DType::kUInt16:
      return 2;
    case DType::kInt32:
      return 4;
    case DType::kUInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kUInt64:
      return 8;
    case DType::kBool:
      return 1;
    case DType::kString:
    case DType::kUnspecified:
      return 0;
  }
  return 0;
}

bool IsFloatingPoint(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         t == DType::kFloat64;
}

bool IsInteger(DType t) {
  switch (t) {
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kBool:
      return true;
    default:
      return false;
  }
}

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat64:
      return "float64";
    case DType::kInt8:
      return "int8";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt16:
      return "int16";
    case DType::kUInt16:
      return "uint16";
    case DType::kInt32:
      return "int32";
    case DType::kUInt32:
      return "uint32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt64:
      return "uint64";
    case DType::kBool:
      return "bool";
    case DType::kString:
      return "string";
    case DType::kUnspecified:
      return "unspecified";
  }
  return "unspecified";
}

// ONNX TensorProto.DataType: FLOAT=1 UINT8=2 INT8=3 UINT16=4 INT16=5 INT32=6 INT64=7 STRING=8
// BOOL=9 FLOAT16=10 DOUBLE=11 UINT32=12 UINT64=13 (complex 14/15 unsupported) BFLOAT16=16.
DType DTypeFromOnnx(int32_t onnx_type) {
  switch (onnx_type) {
    case 1:
      return DType::kFloat32;
    case 2:
      return DType::kUInt8;
    case 3:
      return DType::kInt8;
    case 4:
      return DType::kUInt16;
    case 5:
      return DType::kInt16;
    case 6:
      return DType::kInt32;
    case 7:
      return DType::kInt64;
    case 8:
      return DType::kString;
    case 9:
      return DType::kBool;
    case 10:
      return DType::kFloat16;
    case 11:
      return DType::kFloat64;
    case 12:
      return DType::kUInt32;
    case 13:
      return DType::kUInt64;
    case 16:
      return DType::kBFloat16;
    default:
      return DType::kUnspecified;
  }
}

}  // namespace fusor
