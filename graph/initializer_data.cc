#include "graph/initializer_data.h"

#include "graph/narrow_float.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>

#include "base/input_file.h"

namespace fusor {
namespace {

using onnx::TensorProto;
namespace fs = std::filesystem;

std::string Who(const TensorProto& t) {
  std::string dims;
  for (int64_t d : t.dims()) dims += (dims.empty() ? "" : "x") + std::to_string(d);
  return "initializer '" + t.name() + "' (" + (dims.empty() ? "scalar" : dims) + ")";
}

// The element count of the dims, or an error for negative dims or an overflowing product.
StatusOr<int64_t> CheckedCount(const TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && n > (int64_t{1} << 40) / d)) {
      return Status::InvalidArgument(Who(t) + " has dims that are negative or too large");
    }
    n *= d;
  }
  return n;
}

// Bytes per element in raw form, 0 for types the runtime does not compute with.
int64_t RawElementSize(int32_t type) {
  switch (type) {
    case TensorProto::FLOAT:
    case TensorProto::INT32:
    case TensorProto::UINT32:
      return 4;
    case TensorProto::DOUBLE:
    case TensorProto::INT64:
    case TensorProto::UINT64:
      return 8;
    case TensorProto::INT16:
    case TensorProto::UINT16:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      return 2;
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::BOOL:
      return 1;
    default:
      return 0;
  }
}

template <typename T, typename Out>
void DecodeAs(const char* raw, int64_t n, std::vector<Out>* out) {
  out->resize(n);
  for (int64_t e = 0; e < n; ++e) {
    T v;
    std::memcpy(&v, raw + e * static_cast<int64_t>(sizeof(T)), sizeof(T));
    (*out)[e] = static_cast<Out>(v);
  }
}

// 16-bit float patterns as float32 values (`decode` is HalfToFloat or BFloat16ToFloat).
template <typename Bits>
void DecodeNarrowFloat(const Bits& bits, float (*decode)(uint16_t), std::vector<float>* out) {
  out->clear();
  for (auto b : bits) out->push_back(decode(static_cast<uint16_t>(b)));
}

// The typed field that holds values of this type, as ONNX's proto defines it (float16 and
// bfloat16 as bit patterns in int32_data).
void DecodeTyped(const TensorProto& t, TensorData* d) {
  switch (t.data_type()) {
    case TensorProto::FLOAT16:
      return DecodeNarrowFloat(t.int32_data(), HalfToFloat, &d->f);
    case TensorProto::BFLOAT16:
      return DecodeNarrowFloat(t.int32_data(), BFloat16ToFloat, &d->f);
    case TensorProto::FLOAT:
      d->f.assign(t.float_data().begin(), t.float_data().end());
      return;
    case TensorProto::DOUBLE:
      d->f.assign(t.double_data().begin(), t.double_data().end());
      return;
    case TensorProto::INT64:
      d->i.assign(t.int64_data().begin(), t.int64_data().end());
      return;
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      d->i.assign(t.uint64_data().begin(), t.uint64_data().end());
      return;
    default:
      d->i.assign(t.int32_data().begin(), t.int32_data().end());
      return;
  }
}

struct ExternalRef {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
};

StatusOr<ExternalRef> ParseExternalRef(const TensorProto& t) {
  ExternalRef ref;
  for (const auto& kv : t.external_data()) {
    char* end = nullptr;
    if (kv.key() == "location") {
      ref.location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      long long v = std::strtoll(kv.value().c_str(), &end, 10);
      if (kv.value().empty() || *end != '\0' || v < 0) {
        return Status::InvalidArgument(Who(t) + ": external data " + kv.key() + " '" + kv.value() +
                                       "' is not a non-negative integer");
      }
      (kv.key() == "offset" ? ref.offset : ref.length) = v;
    }
  }
  if (ref.location.empty()) {
    return Status::InvalidArgument(Who(t) + " is external but names no location");
  }
  return ref;
}

// The external data file of `t`, which must lie inside the model's directory (ONNX's rule: a
// model must not make its reader open files elsewhere).
StatusOr<fs::path> ExternalPath(const TensorProto& t, const std::string& location,
                                const std::string& model_dir) {
  if (model_dir.empty()) {
    return Status::InvalidArgument(Who(t) +
                                   " has external data, which needs the model's file path to "
                                   "find; load the model from its file");
  }
  fs::path rel(location);
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(fs::path(model_dir), ec);
  fs::path full = fs::weakly_canonical(dir / rel, ec);
  fs::path inside = full.lexically_relative(dir);
  if (rel.is_absolute() || ec || inside.empty() || *inside.begin() == "..") {
    return Status::PermissionDenied(Who(t) + ": external data location '" + location +
                                    "' leaves the model's directory '" + model_dir +
                                    "'; it must be a path inside it");
  }
  if (!fs::is_regular_file(full, ec)) {
    return Status::NotFound(Who(t) + ": external data file '" + full.string() + "' does not exist");
  }
  return full;
}

StatusOr<std::string> ReadExternal(const TensorProto& t, int64_t need,
                                   const std::string& model_dir) {
  FUSOR_ASSIGN_OR_RETURN(ExternalRef ref, ParseExternalRef(t));
  FUSOR_ASSIGN_OR_RETURN(fs::path path, ExternalPath(t, ref.location, model_dir));
  if (ref.length >= 0 && ref.length != need) {
    return Status::InvalidArgument(Who(t) + ": external data length is " +
                                   std::to_string(ref.length) + " bytes, its dims and type need " +
                                   std::to_string(need));
  }
  auto bytes = ReadInputFileRange(path.string(), "external data file", ref.offset, need);
  if (!bytes.ok()) return bytes.status().WithContext(Who(t));
  return bytes;
}

int64_t TypedCount(const TensorProto& t) {
  return t.float_data_size() + t.double_data_size() + t.int64_data_size() + t.uint64_data_size() +
         t.int32_data_size();
}

}  // namespace

void DecodeLittleEndian(DType dtype, const char* bytes, int64_t n, TensorData* t) {
  switch (dtype) {
    case DType::kFloat32:
      t->f.resize(n);
      std::memcpy(t->f.data(), bytes, static_cast<size_t>(n) * 4);
      return;
    case DType::kFloat64:
      return DecodeAs<double>(bytes, n, &t->f);
    case DType::kFloat16:
    case DType::kBFloat16: {
      std::vector<uint16_t> bits;
      DecodeAs<uint16_t>(bytes, n, &bits);
      return DecodeNarrowFloat(bits, dtype == DType::kFloat16 ? HalfToFloat : BFloat16ToFloat,
                               &t->f);
    }
    case DType::kInt64:
      return DecodeAs<int64_t>(bytes, n, &t->i);
    case DType::kUInt64:
      return DecodeAs<uint64_t>(bytes, n, &t->i);
    case DType::kInt32:
      return DecodeAs<int32_t>(bytes, n, &t->i);
    case DType::kUInt32:
      return DecodeAs<uint32_t>(bytes, n, &t->i);
    case DType::kInt16:
      return DecodeAs<int16_t>(bytes, n, &t->i);
    case DType::kUInt16:
      return DecodeAs<uint16_t>(bytes, n, &t->i);
    case DType::kInt8:
      return DecodeAs<int8_t>(bytes, n, &t->i);
    default:  // kUInt8, kBool.
      return DecodeAs<uint8_t>(bytes, n, &t->i);
  }
}

StatusOr<TensorData> ReadTensorProtoData(const TensorProto& t, const std::string& model_dir) {
  TensorData d;
  d.name = t.name();
  d.dtype = DTypeFromOnnx(t.data_type());
  d.dims.assign(t.dims().begin(), t.dims().end());
  int64_t size = RawElementSize(t.data_type());
  if (size == 0) {
    return Status::Unimplemented(
        Who(t) + " has ONNX element type " + std::to_string(t.data_type()) +
        "; weights are read as float32, float16, bfloat16, float64, integers or bool");
  }
  FUSOR_ASSIGN_OR_RETURN(int64_t n, CheckedCount(t));
  if (t.data_location() == TensorProto::EXTERNAL) {
    FUSOR_ASSIGN_OR_RETURN(std::string bytes, ReadExternal(t, n * size, model_dir));
    DecodeLittleEndian(d.dtype, bytes.data(), n, &d);
    return d;
  }
  if (!t.raw_data().empty()) {
    if (static_cast<int64_t>(t.raw_data().size()) != n * size) {
      return Status::InvalidArgument(Who(t) + " has " + std::to_string(t.raw_data().size()) +
                                     " bytes of raw_data; its dims and type need " +
                                     std::to_string(n * size));
    }
    DecodeLittleEndian(d.dtype, t.raw_data().data(), n, &d);
    return d;
  }
  if (n > 0 && TypedCount(t) == 0) {
    return Status::FailedPrecondition(
        Who(t) +
        " carries no data (the model's weights are stripped); fill them "
        "(tools/fill_weights.py) or run without weights");
  }
  DecodeTyped(t, &d);
  int64_t have = static_cast<int64_t>(d.f.size() + d.i.size());
  if (have != n) {
    return Status::InvalidArgument(Who(t) + " holds " + std::to_string(have) +
                                   " values; its dims need " + std::to_string(n));
  }
  return d;
}

StatusOr<std::unordered_map<std::string, TensorData>> ReadInitializers(
    const onnx::GraphProto& graph, const std::vector<std::string>& names,
    const std::string& model_dir) {
  std::unordered_map<std::string, const TensorProto*> by_name;
  for (const auto& init : graph.initializer()) by_name.emplace(init.name(), &init);
  std::unordered_map<std::string, TensorData> out;
  for (const auto& name : names) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return Status::NotFound("weight '" + name + "' has no initializer in the model");
    }
    FUSOR_ASSIGN_OR_RETURN(out[name], ReadTensorProtoData(*it->second, model_dir));
  }
  return out;
}

}  // namespace fusor
