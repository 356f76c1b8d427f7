#include "graph/tensor_file.h"

#include "graph/narrow_float.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace fusor {
namespace {

namespace fs = std::filesystem;
constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr int64_t kMaxTensorFileBytes = int64_t{1} << 32;

struct NpyType {
  const char* descr;  // Without the byte-order character.
  DType dtype;
  int size;
};
constexpr NpyType kNpyTypes[] = {
    {"f4", DType::kFloat32, 4}, {"f8", DType::kFloat64, 8}, {"i8", DType::kInt64, 8},
    {"i4", DType::kInt32, 4},   {"i2", DType::kInt16, 2},   {"i1", DType::kInt8, 1},
    {"u1", DType::kUInt8, 1},   {"u2", DType::kUInt16, 2},  {"u4", DType::kUInt32, 4},
    {"b1", DType::kBool, 1},    {"f2", DType::kFloat16, 2},
};

std::string Extension(const std::string& path) { return fs::path(path).extension().string(); }

Status UnknownFormat(const std::string& path) {
  return Status::InvalidArgument("'" + path +
                                 "': tensor files are ONNX TensorProto (.pb) or NumPy (.npy)");
}

StatusOr<std::string> ReadAll(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return Status::NotFound("tensor file '" + path + "' does not exist");
  }
  auto size = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec || size > kMaxTensorFileBytes) {
    return Status::InvalidArgument("tensor file '" + path + "' is unreadable or over 4 GiB");
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!in.read(bytes.data(), size)) return Status::IOError("cannot read '" + path + "'");
  return bytes;
}

// The header dictionary of a .npy file: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
StatusOr<TensorData> ParseNpyHeader(const std::string& header, const std::string& path, int* size) {
  std::smatch m;
  static const std::regex descr(R"('descr'\s*:\s*'([<>|=])([a-z]\d+)')");
  static const std::regex order(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape(R"('shape'\s*:\s*\(([^)]*)\))");
  if (!std::regex_search(header, m, descr)) {
    return Status::InvalidArgument("'" + path + "': the .npy header has no 'descr'");
  }
  if (m[1] == ">" && m[2] != "b1" && m[2] != "i1" && m[2] != "u1") {
    return Status::Unimplemented("'" + path + "' is big-endian; write it little-endian ('<')");
  }
  TensorData t;
  for (const auto& type : kNpyTypes) {
    if (m[2] == type.descr) t.dtype = type.dtype, *size = type.size;
  }
  if (t.dtype == DType::kUnspecified) {
    return Status::Unimplemented("'" + path + "' holds NumPy type '" + m[2].str() +
                                 "'; Fusor reads float32/64, integers and bool");
  }
  if (!std::regex_search(header, m, order) || m[1] == "True") {
    return Status::Unimplemented("'" + path + "' is in Fortran order; save it in C order");
  }
  if (!std::regex_search(header, m, shape)) {
    return Status::InvalidArgument("'" + path + "': the .npy header has no 'shape'");
  }
  std::stringstream dims(m[1].str());
  for (std::string d; std::getline(dims, d, ',');) {
    if (d.find_first_not_of(" ") == std::string::npos) continue;
    try {
      t.dims.push_back(std::stoll(d));
    } catch (const std::exception&) {
      return Status::InvalidArgument("'" + path + "': shape entry '" + d + "' is not a number");
    }
    if (t.dims.back() < 0) return Status::InvalidArgument("'" + path + "': negative dim");
  }
  return t;
}

StatusOr<TensorData> ReadNpy(const std::string& path) {
  FUSOR_ASSIGN_OR_RETURN(std::string bytes, ReadAll(path));
  if (bytes.size() < 10 || bytes.compare(0, 6, kNpyMagic, 6) != 0) {
    return Status::InvalidArgument("'" + path + "' is not a NumPy .npy file (no magic string)");
  }
  int version = static_cast<uint8_t>(bytes[6]);
  size_t len_bytes = version == 1 ? 2 : 4;
  size_t header_len = 0;
  for (size_t b = 0; b < len_bytes && 8 + b < bytes.size(); ++b) {
    header_len |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + b])) << (8 * b);
  }
  size_t data_at = 8 + len_bytes + header_len;
  if (version < 1 || version > 3 || data_at > bytes.size()) {
    return Status::InvalidArgument("'" + path + "': truncated or unknown .npy header");
  }
  int size = 0;
  FUSOR_ASSIGN_OR_RETURN(TensorData t,
                         ParseNpyHeader(bytes.substr(8 + len_bytes, header_len), path, &size));
  int64_t n = t.num_elements();
  if (static_cast<int64_t>(bytes.size() - data_at) != n * size) {
    return Status::InvalidArgument(
        "'" + path + "' holds " + std::to_string(bytes.size() - data_at) +
        " data bytes; its shape " + ShapeString(t.dims) + " needs " + std::to_string(n * size));
  }
  DecodeLittleEndian(t.dtype, bytes.data() + data_at, n, &t);
  return t;
}

StatusOr<TensorData> ReadPb(const std::string& path) {
  FUSOR_ASSIGN_OR_RETURN(std::string bytes, ReadAll(path));
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) {
    return Status::InvalidArgument("'" + path + "' is not an ONNX TensorProto file");
  }
  auto t = ReadTensorProtoData(proto, fs::path(path).parent_path().string());
  if (!t.ok()) return t.status().WithContext(path);
  return t;
}

template <typename T>
void Append(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out->append(b, sizeof(T));
}

// The values of `t` in its dtype's binary form, little-endian.
std::string RawBytes(const TensorData& t) {
  std::string out;
  for (float v : t.f) {
    if (t.dtype == DType::kFloat64)
      Append<double>(&out, v);
    else if (t.dtype == DType::kFloat16)
      Append<uint16_t>(&out, FloatToHalf(v));
    else if (t.dtype == DType::kBFloat16)
      Append<uint16_t>(&out, FloatToBFloat16(v));
    else
      Append<float>(&out, v);
  }
  for (int64_t v : t.i) {
    switch (DTypeSize(t.dtype)) {
      case 1:
        Append<int8_t>(&out, static_cast<int8_t>(v));
        break;
      case 2:
        Append<int16_t>(&out, static_cast<int16_t>(v));
        break;
      case 4:
        Append<int32_t>(&out, static_cast<int32_t>(v));
        break;
      default:
        Append<int64_t>(&out, v);
    }
  }
  return out;
}

StatusOr<std::string> NpyBytes(const TensorData& t) {
  std::string descr;
  for (const auto& type : kNpyTypes) {
    if (type.dtype == t.dtype) descr = std::string(type.size == 1 ? "|" : "<") + type.descr;
  }
  if (descr.empty()) {
    return Status::Unimplemented("tensor '" + t.name + "' has dtype " +
                                 std::string(DTypeName(t.dtype)) + ", which .npy output lacks");
  }
  std::string shape;  // NumPy's own form: "()", "(4,)", "(2, 3)".
  for (int64_t d : t.dims) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  if (t.dims.size() == 1) shape += ",";
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string out(kNpyMagic, 6);
  out += '\x01';
  out += '\x00';
  Append<uint16_t>(&out, static_cast<uint16_t>(header.size()));
  return out + header + RawBytes(t);
}

StatusOr<std::string> PbBytes(const TensorData& t) {
  onnx::TensorProto proto;
  proto.set_name(t.name);
  // DType numbers are Fusor's (fusor.v1.DataType); ONNX's are found through DTypeFromOnnx.
  for (int32_t onnx_type = onnx::TensorProto::FLOAT; onnx_type <= onnx::TensorProto::BFLOAT16;
       ++onnx_type) {
    if (DTypeFromOnnx(onnx_type) == t.dtype) proto.set_data_type(onnx_type);
  }
  if (proto.data_type() == 0) {
    return Status::Unimplemented("tensor '" + t.name + "' has dtype " +
                                 std::string(DTypeName(t.dtype)) + ", which .pb output lacks");
  }
  for (int64_t d : t.dims) proto.add_dims(d);
  proto.set_raw_data(RawBytes(t));
  return proto.SerializeAsString();
}

}  // namespace

StatusOr<std::string> TensorProtoBytes(const TensorData& t) { return PbBytes(t); }

StatusOr<TensorData> ReadTensorFile(const std::string& path) {
  std::string ext = Extension(path);
  if (ext == ".npy") return ReadNpy(path);
  if (ext == ".pb") return ReadPb(path);
  return UnknownFormat(path);
}

Status WriteTensorFile(const std::string& path, const TensorData& t) {
  std::string ext = Extension(path), bytes;
  if (ext == ".npy") {
    FUSOR_ASSIGN_OR_RETURN(bytes, NpyBytes(t));
  } else if (ext == ".pb") {
    FUSOR_ASSIGN_OR_RETURN(bytes, PbBytes(t));
  } else {
    return UnknownFormat(path);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    return Status::IOError("cannot write '" + path + "'");
  }
  return Status::Ok();
}

}  // namespace fusor
