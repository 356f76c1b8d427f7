#include "graph/tensor_file.h"

#include "graph/narrow_float.h"

#include <onnx/onnx_pb.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <vector>

#include "base/input_file.h"

namespace fusor {
namespace {

namespace fs = std::filesystem;
constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr int64_t kMaxTensorFileBytes = int64_t{1} << 32;
// numpy refuses longer headers (numpy.lib.format, max_header_size) since 1.24.
constexpr size_t kMaxNpyHeaderBytes = 10000;

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
  return ReadInputFile(path, "tensor file", kMaxTensorFileBytes);
}

// A reader of the .npy header, a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// by hand rather than with a regular expression, whose backtracking recurses once per character
// (a 30 KB header overflowed the stack). It accepts what numpy's writer produces and its own
// reader accepts: exactly the three keys, string keys and descr in either quote, the shape a
// tuple of non-negative integers.
class NpyHeaderReader {
 public:
  NpyHeaderReader(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  Status Read(std::string* descr, bool* fortran_order, std::vector<int64_t>* shape) {
    FUSOR_RETURN_IF_ERROR(Expect('{'));
    bool seen[3] = {false, false, false};
    while (!Peek('}')) {
      FUSOR_ASSIGN_OR_RETURN(std::string key, String());
      FUSOR_RETURN_IF_ERROR(Expect(':'));
      int k = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
      if (k < 0 || seen[k]) return Error("key '" + key + "' is unknown or repeated");
      seen[k] = true;
      FUSOR_RETURN_IF_ERROR(Value(k, descr, fortran_order, shape));
      if (!Peek('}')) FUSOR_RETURN_IF_ERROR(Expect(','));
    }
    FUSOR_RETURN_IF_ERROR(Expect('}'));
    SkipSpace();
    if (at_ != text_.size()) return Error("text follows the dictionary");
    if (!seen[0] || !seen[1] || !seen[2]) {
      return Error("it needs the keys 'descr', 'fortran_order' and 'shape'");
    }
    return Status::Ok();
  }

 private:
  Status Value(int key, std::string* descr, bool* fortran_order, std::vector<int64_t>* shape) {
    if (key == 0) {
      FUSOR_ASSIGN_OR_RETURN(*descr, String());
    } else if (key == 1) {
      FUSOR_ASSIGN_OR_RETURN(*fortran_order, Bool());
    } else {
      FUSOR_ASSIGN_OR_RETURN(*shape, Tuple());
    }
    return Status::Ok();
  }
  Status Error(const std::string& what) const {
    return Status::InvalidArgument("'" + path_ + "': the .npy header is not numpy's: " + what +
                                   " (at byte " + std::to_string(at_) + " of the header)");
  }
  void SkipSpace() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\t'))
      ++at_;
  }
  bool Peek(char c) {
    SkipSpace();
    return at_ < text_.size() && text_[at_] == c;
  }
  Status Expect(char c) {
    if (!Peek(c)) return Error(std::string("'") + c + "' expected");
    ++at_;
    return Status::Ok();
  }
  StatusOr<std::string> String() {
    SkipSpace();
    char quote = at_ < text_.size() ? text_[at_] : '\0';
    if (quote != '\'' && quote != '"') return Error("a quoted string expected");
    size_t end = text_.find(quote, at_ + 1);
    if (end == std::string_view::npos) return Error("a string is not closed");
    std::string out(text_.substr(at_ + 1, end - at_ - 1));
    at_ = end + 1;
    return out;
  }
  StatusOr<bool> Bool() {
    SkipSpace();
    for (bool v : {true, false}) {
      std::string_view word = v ? "True" : "False";
      if (text_.substr(at_, word.size()) == word) {
        at_ += word.size();
        return v;
      }
    }
    return Error("True or False expected");
  }
  StatusOr<int64_t> Integer() {
    SkipSpace();
    int64_t v = 0;
    size_t begin = at_;
    for (; at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9'; ++at_) {
      if (v > (INT64_MAX - 9) / 10) return Error("a dim is too large");
      v = v * 10 + (text_[at_] - '0');
    }
    if (at_ == begin) return Error("a non-negative integer expected in the shape");
    if (at_ < text_.size() && text_[at_] == 'L') ++at_;  // Python 2's long suffix.
    return v;
  }
  StatusOr<std::vector<int64_t>> Tuple() {
    FUSOR_RETURN_IF_ERROR(Expect('('));
    std::vector<int64_t> dims;
    while (!Peek(')')) {
      FUSOR_ASSIGN_OR_RETURN(int64_t d, Integer());
      dims.push_back(d);
      if (!Peek(')')) FUSOR_RETURN_IF_ERROR(Expect(','));
    }
    FUSOR_RETURN_IF_ERROR(Expect(')'));
    return dims;
  }

  std::string_view text_;
  const std::string& path_;
  size_t at_ = 0;
};

StatusOr<TensorData> ParseNpyHeader(std::string_view header, const std::string& path, int* size) {
  std::string descr;
  bool fortran_order = false;
  TensorData t;
  FUSOR_RETURN_IF_ERROR(NpyHeaderReader(header, path).Read(&descr, &fortran_order, &t.dims));
  char order = descr.empty() ? '\0' : descr[0];
  std::string type = descr.empty() ? "" : descr.substr(1);
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    return Status::InvalidArgument("'" + path + "': descr '" + descr +
                                   "' does not start with a byte order (<, >, | or =)");
  }
  if (order == '>' && type != "b1" && type != "i1" && type != "u1") {
    return Status::Unimplemented("'" + path + "' is big-endian; write it little-endian ('<')");
  }
  for (const auto& known : kNpyTypes) {
    if (type == known.descr) t.dtype = known.dtype, *size = known.size;
  }
  if (t.dtype == DType::kUnspecified) {
    return Status::Unimplemented("'" + path + "' holds NumPy type '" + type +
                                 "'; Fusor reads float32/64, integers and bool");
  }
  if (fortran_order) {
    return Status::Unimplemented("'" + path + "' is in Fortran order; save it in C order");
  }
  return t;
}

// The bytes the data of `t` takes, or -1 when the count passes int64.
int64_t DataBytes(const std::vector<int64_t>& dims, int size) {
  int64_t bytes = size;
  for (int64_t d : dims) {
    if (d != 0 && bytes > INT64_MAX / d) return -1;
    bytes *= d;
  }
  return bytes;
}

StatusOr<TensorData> ParseNpy(std::string_view bytes, const std::string& path) {
  if (bytes.size() < 10 || bytes.compare(0, 6, kNpyMagic, 6) != 0) {
    return Status::InvalidArgument("'" + path + "' is not a NumPy .npy file (no magic string)");
  }
  int version = static_cast<uint8_t>(bytes[6]);
  size_t len_bytes = version == 1 ? 2 : 4;
  if (version < 1 || version > 3 || bytes.size() < 8 + len_bytes) {
    return Status::InvalidArgument("'" + path + "': truncated .npy header or unknown version " +
                                   std::to_string(version) + " (Fusor reads versions 1 to 3)");
  }
  size_t header_len = 0;
  for (size_t b = 0; b < len_bytes; ++b) {
    header_len |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + b])) << (8 * b);
  }
  if (header_len > kMaxNpyHeaderBytes) {
    return Status::InvalidArgument("'" + path + "': the .npy header is " +
                                   std::to_string(header_len) + " bytes; numpy's limit is " +
                                   std::to_string(kMaxNpyHeaderBytes));
  }
  size_t data_at = 8 + len_bytes + header_len;
  if (data_at > bytes.size()) {
    return Status::InvalidArgument("'" + path + "': the .npy header passes the end of the file");
  }
  int size = 0;
  FUSOR_ASSIGN_OR_RETURN(TensorData t,
                         ParseNpyHeader(bytes.substr(8 + len_bytes, header_len), path, &size));
  int64_t need = DataBytes(t.dims, size);
  int64_t have = static_cast<int64_t>(bytes.size() - data_at);
  if (need != have) {
    return Status::InvalidArgument("'" + path + "' holds " + std::to_string(have) +
                                   " data bytes; its shape " + ShapeString(t.dims) + " needs " +
                                   (need < 0 ? "more than 2^63" : std::to_string(need)));
  }
  DecodeLittleEndian(t.dtype, bytes.data() + data_at, t.num_elements(), &t);
  return t;
}

StatusOr<TensorData> ParsePb(std::string_view bytes, const std::string& path) {
  onnx::TensorProto proto;
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return Status::InvalidArgument("'" + path + "' is over 2 GiB, protobuf's limit for a .pb");
  }
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
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

StatusOr<TensorData> ParseTensorFile(std::string_view bytes, const std::string& path) {
  std::string ext = Extension(path);
  if (ext == ".npy") return ParseNpy(bytes, path);
  if (ext == ".pb") return ParsePb(bytes, path);
  return UnknownFormat(path);
}

StatusOr<TensorData> ReadTensorFile(const std::string& path) {
  std::string ext = Extension(path);
  if (ext != ".npy" && ext != ".pb") return UnknownFormat(path);
  FUSOR_ASSIGN_OR_RETURN(std::string bytes, ReadAll(path));
  return ParseTensorFile(bytes, path);
}

StatusOr<std::string> TensorFileBytes(const TensorData& t, const std::string& path) {
  std::string ext = Extension(path);
  if (ext == ".npy") return NpyBytes(t);
  if (ext == ".pb") return PbBytes(t);
  return UnknownFormat(path);
}

Status WriteTensorFile(const std::string& path, const TensorData& t) {
  FUSOR_ASSIGN_OR_RETURN(std::string bytes, TensorFileBytes(t, path));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    return Status::IOError("cannot write '" + path + "'");
  }
  return Status::Ok();
}

}  // namespace fusor
