#include "graph/constant_folding.h"

#include "graph/narrow_float.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace fusor {
namespace {

using onnx::TensorProto;
constexpr int64_t kMaxReadElements = kMaxConstantElements;

bool IsFloatType(int32_t t) {
  return t == TensorProto::FLOAT || t == TensorProto::DOUBLE || t == TensorProto::FLOAT16 ||
         t == TensorProto::BFLOAT16;
}

std::optional<int64_t> CheckedElements(const Shape& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > kMaxReadElements * 16 / d)) return std::nullopt;
    n *= d;
  }
  return n;
}

template <typename T>
void DecodeRaw(const std::string& raw, int64_t n, std::vector<int64_t>* ints,
               std::vector<double>* floats, bool is_float) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
    if (is_float) {
      floats->push_back(static_cast<double>(v));
    } else {
      ints->push_back(static_cast<int64_t>(v));
    }
  }
}

bool DecodeRawData(const TensorProto& t, int64_t n, ConstValue* v) {
  const std::string& raw = t.raw_data();
  auto fits = [&](size_t size) { return raw.size() == static_cast<size_t>(n) * size; };
  switch (t.data_type()) {
    case TensorProto::FLOAT:
      return fits(4) && (DecodeRaw<float>(raw, n, &v->ints, &v->floats, true), true);
    case TensorProto::DOUBLE:
      return fits(8) && (DecodeRaw<double>(raw, n, &v->ints, &v->floats, true), true);
    case TensorProto::INT64:
      return fits(8) && (DecodeRaw<int64_t>(raw, n, &v->ints, &v->floats, false), true);
    case TensorProto::UINT64:
      return fits(8) && (DecodeRaw<uint64_t>(raw, n, &v->ints, &v->floats, false), true);
    case TensorProto::INT32:
      return fits(4) && (DecodeRaw<int32_t>(raw, n, &v->ints, &v->floats, false), true);
    case TensorProto::UINT32:
      return fits(4) && (DecodeRaw<uint32_t>(raw, n, &v->ints, &v->floats, false), true);
    case TensorProto::INT16:
      return fits(2) && (DecodeRaw<int16_t>(raw, n, &v->ints, &v->floats, false), true);
    case TensorProto::UINT16:
      return fits(2) && (DecodeRaw<uint16_t>(raw, n, &v->ints, &v->floats, false), true);
    case TensorProto::INT8:
      return fits(1) && (DecodeRaw<int8_t>(raw, n, &v->ints, &v->floats, false), true);
    case TensorProto::UINT8:
    case TensorProto::BOOL:
      return fits(1) && (DecodeRaw<uint8_t>(raw, n, &v->ints, &v->floats, false), true);
    default:
      return false;
  }
}

bool DecodeTypedData(const TensorProto& t, int64_t n, ConstValue* v) {
  switch (t.data_type()) {
    case TensorProto::FLOAT:
      v->floats.assign(t.float_data().begin(), t.float_data().end());
      break;
    case TensorProto::DOUBLE:
      v->floats.assign(t.double_data().begin(), t.double_data().end());
      break;
    case TensorProto::INT64:
      v->ints.assign(t.int64_data().begin(), t.int64_data().end());
      break;
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      v->ints.assign(t.uint64_data().begin(), t.uint64_data().end());
      break;
    case TensorProto::INT32:
    case TensorProto::INT16:
    case TensorProto::UINT16:
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::BOOL:
      v->ints.assign(t.int32_data().begin(), t.int32_data().end());
      break;
    default:
      return false;
  }
  return v->size() == n;
}

// ---------------------------------------------------------------------------------------------
// Evaluation helpers

ConstValue Empty(int32_t type, Shape dims) {
  ConstValue v;
  v.onnx_type = type;
  v.dims = std::move(dims);
  v.is_float = IsFloatType(type);
  return v;
}

void Push(ConstValue* v, double x) {
  if (v->is_float) {
    v->floats.push_back(x);
  } else {
    v->ints.push_back(ToInt64(x));
  }
}

void PushFrom(ConstValue* out, const ConstValue& in, int64_t i) {
  if (out->is_float) {
    out->floats.push_back(in.AsDouble(i));
  } else {
    out->ints.push_back(in.AsInt(i));
  }
}

std::vector<int64_t> Strides(const Shape& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

std::optional<Shape> BroadcastDims(const std::vector<const ConstValue*>& ins) {
  size_t rank = 0;
  for (auto* v : ins) rank = std::max(rank, v->dims.size());
  Shape out(rank, 1);
  for (auto* v : ins) {
    for (size_t i = 0; i < v->dims.size(); ++i) {
      int64_t d = v->dims[i];
      int64_t& o = out[rank - v->dims.size() + i];
      if (d != o && d != 1 && o != 1) return std::nullopt;
      if (o == 1) o = d;
    }
  }
  return out;
}

// Flat index into `in` for output coordinate `flat` under broadcasting.
int64_t SourceIndex(const ConstValue& in, const Shape& out_dims, int64_t flat) {
  int64_t src = 0, stride = 1;
  size_t offset = out_dims.size() - in.dims.size();
  for (int i = static_cast<int>(out_dims.size()) - 1; i >= 0; --i) {
    int64_t coord = flat % out_dims[i];
    flat /= out_dims[i];
    if (i >= static_cast<int>(offset)) {
      int64_t d = in.dims[i - offset];
      if (d != 1) src += coord * stride;
      stride *= d;
    }
  }
  return src;
}

bool TooBig(const Shape& dims) {
  auto n = CheckedElements(dims);
  return !n || *n > kMaxFoldElements;
}

using Inputs = std::vector<const ConstValue*>;
using Evaluator = std::function<std::optional<ConstValue>(const onnx::NodeProto&, const Inputs&)>;

std::optional<ConstValue> Elementwise(const Inputs& ins, int32_t out_type,
                                      const std::function<double(const std::vector<double>&)>& f) {
  auto dims = BroadcastDims(ins);
  if (!dims || TooBig(*dims)) return std::nullopt;
  ConstValue out = Empty(out_type, *dims);
  int64_t n = NumElements(*dims);
  std::vector<double> args(ins.size());
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < ins.size(); ++k)
      args[k] = ins[k]->AsDouble(SourceIndex(*ins[k], *dims, i));
    Push(&out, f(args));
  }
  return out;
}

Evaluator Binary(std::function<double(double, double)> f, bool boolean_result = false) {
  return
      [f, boolean_result](const onnx::NodeProto&, const Inputs& ins) -> std::optional<ConstValue> {
        if (ins.size() != 2) return std::nullopt;
        int32_t type = boolean_result ? TensorProto::BOOL : ins[0]->onnx_type;
        bool integer = !ins[0]->is_float;
        return Elementwise(ins, type, [f, integer](const std::vector<double>& a) {
          if (integer && a[1] == 0 && !std::isfinite(f(a[0], 1.0))) return 0.0;
          return f(a[0], a[1]);
        });
      };
}

Evaluator Unary(std::function<double(double)> f) {
  return [f](const onnx::NodeProto&, const Inputs& ins) -> std::optional<ConstValue> {
    if (ins.size() != 1) return std::nullopt;
    return Elementwise(ins, ins[0]->onnx_type,
                       [f](const std::vector<double>& a) { return f(a[0]); });
  };
}

const onnx::AttributeProto* Attr(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t IntAttr(const onnx::NodeProto& n, const char* name, int64_t fallback) {
  const auto* a = Attr(n, name);
  return a ? a->i() : fallback;
}

// Axes from the attribute (older opsets) or the second input (opset 13+).
std::optional<std::vector<int64_t>> Axes(const onnx::NodeProto& n, const Inputs& ins,
                                         size_t input) {
  if (const auto* a = Attr(n, "axes"))
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  if (ins.size() > input && ins[input]) return ins[input]->ints;
  return std::vector<int64_t>{};
}

std::optional<ConstValue> EvalConstant(const onnx::NodeProto& n, const Inputs&) {
  if (const auto* a = Attr(n, "value")) return ReadConstValue(a->t());
  if (const auto* a = Attr(n, "value_int")) {
    ConstValue v = Empty(TensorProto::INT64, {});
    v.ints = {a->i()};
    return v;
  }
  if (const auto* a = Attr(n, "value_ints")) {
    ConstValue v = Empty(TensorProto::INT64, {a->ints_size()});
    v.ints.assign(a->ints().begin(), a->ints().end());
    return v;
  }
  if (const auto* a = Attr(n, "value_float")) {
    ConstValue v = Empty(TensorProto::FLOAT, {});
    v.floats = {a->f()};
    return v;
  }
  if (const auto* a = Attr(n, "value_floats")) {
    ConstValue v = Empty(TensorProto::FLOAT, {a->floats_size()});
    v.floats.assign(a->floats().begin(), a->floats().end());
    return v;
  }
  return std::nullopt;
}

std::optional<ConstValue> EvalCast(const onnx::NodeProto& n, const Inputs& ins) {
  int32_t to = static_cast<int32_t>(IntAttr(n, "to", 0));
  // bfloat16 is left to the runtime, which refuses the Cast (runtime/reference.cc says why).
  if (to == 0 || to == TensorProto::STRING || to == TensorProto::BFLOAT16) return std::nullopt;
  ConstValue out = Empty(to, ins[0]->dims);
  for (int64_t i = 0; i < ins[0]->size(); ++i) {
    double x = ins[0]->AsDouble(i);
    if (to == TensorProto::FLOAT) x = static_cast<float>(x);
    if (to == TensorProto::FLOAT16) x = RoundToDType(static_cast<float>(x), DType::kFloat16);
    Push(&out, to == TensorProto::BOOL ? (x != 0) : x);
  }
  return out;
}

std::optional<ConstValue> EvalGather(const onnx::NodeProto& n, const Inputs& ins) {
  const ConstValue& data = *ins[0];
  const ConstValue& idx = *ins[1];
  int64_t rank = static_cast<int64_t>(data.dims.size());
  int64_t axis = IntAttr(n, "axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  Shape out_dims(data.dims.begin(), data.dims.begin() + axis);
  out_dims.insert(out_dims.end(), idx.dims.begin(), idx.dims.end());
  out_dims.insert(out_dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  if (TooBig(out_dims)) return std::nullopt;
  int64_t outer = NumElements(Shape(data.dims.begin(), data.dims.begin() + axis));
  int64_t inner = NumElements(Shape(data.dims.begin() + axis + 1, data.dims.end()));
  ConstValue out = Empty(data.onnx_type, out_dims);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < idx.size(); ++k) {
      int64_t j = idx.AsInt(k);
      if (j < 0) j += data.dims[axis];
      if (j < 0 || j >= data.dims[axis]) return std::nullopt;
      for (int64_t i = 0; i < inner; ++i)
        PushFrom(&out, data, (o * data.dims[axis] + j) * inner + i);
    }
  }
  return out;
}

std::optional<ConstValue> WithDims(const ConstValue& in, Shape dims) {
  if (NumElements(dims) != in.size()) return std::nullopt;
  ConstValue out = in;
  out.dims = std::move(dims);
  return out;
}

std::optional<ConstValue> EvalUnsqueeze(const onnx::NodeProto& n, const Inputs& ins) {
  auto axes = Axes(n, ins, 1);
  if (!axes) return std::nullopt;
  int64_t rank = static_cast<int64_t>(ins[0]->dims.size() + axes->size());
  std::vector<bool> inserted(rank, false);
  for (int64_t a : *axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return std::nullopt;
    inserted[a] = true;
  }
  Shape dims;
  size_t src = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (inserted[i]) {
      dims.push_back(1);
    } else if (src < ins[0]->dims.size()) {
      dims.push_back(ins[0]->dims[src++]);
    }
  }
  return WithDims(*ins[0], dims);
}

std::optional<ConstValue> EvalSqueeze(const onnx::NodeProto& n, const Inputs& ins) {
  auto axes = Axes(n, ins, 1);
  if (!axes) return std::nullopt;
  int64_t rank = static_cast<int64_t>(ins[0]->dims.size());
  std::vector<bool> drop(rank, axes->empty());
  for (int64_t a : *axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return std::nullopt;
    drop[a] = true;
  }
  Shape dims;
  for (int64_t i = 0; i < rank; ++i) {
    if (!(drop[i] && ins[0]->dims[i] == 1)) dims.push_back(ins[0]->dims[i]);
  }
  return WithDims(*ins[0], dims);
}

std::optional<ConstValue> EvalReshape(const onnx::NodeProto& n, const Inputs& ins) {
  const ConstValue& shape = *ins[1];
  bool allowzero = IntAttr(n, "allowzero", 0) != 0;
  Shape dims;
  int64_t known = 1, infer_at = -1;
  for (int64_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape.AsInt(i);
    if (d == 0 && !allowzero && i < static_cast<int64_t>(ins[0]->dims.size())) d = ins[0]->dims[i];
    if (d == -1) {
      infer_at = i;
      d = 1;
    } else {
      known *= d;
    }
    dims.push_back(d);
  }
  if (infer_at >= 0 && known > 0) dims[infer_at] = ins[0]->size() / known;
  return WithDims(*ins[0], dims);
}

std::optional<ConstValue> EvalConcat(const onnx::NodeProto& n, const Inputs& ins) {
  int64_t rank = static_cast<int64_t>(ins[0]->dims.size());
  int64_t axis = IntAttr(n, "axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  Shape dims = ins[0]->dims;
  dims[axis] = 0;
  for (auto* in : ins) {
    if (static_cast<int64_t>(in->dims.size()) != rank) return std::nullopt;
    dims[axis] += in->dims[axis];
  }
  int64_t outer = NumElements(Shape(dims.begin(), dims.begin() + axis));
  ConstValue out = Empty(ins[0]->onnx_type, dims);
  for (int64_t o = 0; o < outer; ++o) {
    for (auto* in : ins) {
      int64_t chunk = in->size() / std::max<int64_t>(outer, 1);
      for (int64_t i = 0; i < chunk; ++i) PushFrom(&out, *in, o * chunk + i);
    }
  }
  return out;
}

std::optional<ConstValue> EvalSlice(const onnx::NodeProto&, const Inputs& ins) {
  if (ins.size() < 3) return std::nullopt;
  const ConstValue& data = *ins[0];
  int64_t rank = static_cast<int64_t>(data.dims.size());
  std::vector<int64_t> start(rank, 0), step(rank, 1), count = data.dims;
  for (int64_t k = 0; k < ins[1]->size(); ++k) {
    int64_t axis = ins.size() > 3 && ins[3] ? ins[3]->AsInt(k) : k;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return std::nullopt;
    int64_t d = data.dims[axis];
    int64_t s = ins[1]->AsInt(k), e = ins[2]->AsInt(k);
    int64_t st = ins.size() > 4 && ins[4] ? ins[4]->AsInt(k) : 1;
    if (st == 0) return std::nullopt;
    if (s < 0) s += d;
    if (e < 0) e += d;
    s = st > 0 ? std::clamp<int64_t>(s, 0, d) : std::clamp<int64_t>(s, 0, d - 1);
    e = st > 0 ? std::clamp<int64_t>(e, 0, d) : std::clamp<int64_t>(e, -1, d - 1);
    start[axis] = s;
    step[axis] = st;
    count[axis] = st > 0 ? std::max<int64_t>(0, (e - s + st - 1) / st)
                         : std::max<int64_t>(0, (s - e - st - 1) / -st);
  }
  ConstValue out = Empty(data.onnx_type, count);
  std::vector<int64_t> strides = Strides(data.dims);
  int64_t n = NumElements(count);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t rem = flat, src = 0;
    for (int64_t i = rank - 1; i >= 0; --i) {
      int64_t c = rem % count[i];
      rem /= count[i];
      src += (start[i] + c * step[i]) * strides[i];
    }
    PushFrom(&out, data, src);
  }
  return out;
}

// Transpose of a constant: Swin-style exports permute the pads they compute from the input's
// shape (Concat -> Reshape -> Slice -> Transpose -> Reshape -> Pad).
std::optional<ConstValue> EvalTranspose(const onnx::NodeProto& n, const Inputs& ins) {
  const ConstValue& data = *ins[0];
  const int64_t rank = static_cast<int64_t>(data.dims.size());
  std::vector<int64_t> perm(rank);
  if (const auto* a = Attr(n, "perm")) {
    perm.assign(a->ints().begin(), a->ints().end());
  } else {
    for (int64_t i = 0; i < rank; ++i) perm[i] = rank - 1 - i;
  }
  if (static_cast<int64_t>(perm.size()) != rank) return std::nullopt;
  std::vector<bool> used(rank, false);
  Shape dims(rank);
  for (int64_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= rank || used[perm[i]]) return std::nullopt;
    used[perm[i]] = true;
    dims[i] = data.dims[perm[i]];
  }
  const std::vector<int64_t> strides = Strides(data.dims);
  ConstValue out = Empty(data.onnx_type, dims);
  const int64_t count = NumElements(dims);
  for (int64_t flat = 0; flat < count; ++flat) {
    int64_t rem = flat, src = 0;
    for (int64_t i = rank - 1; i >= 0; --i) {
      src += (rem % dims[i]) * strides[perm[i]];
      rem /= dims[i];
    }
    PushFrom(&out, data, src);
  }
  return out;
}

std::optional<ConstValue> EvalExpand(const onnx::NodeProto&, const Inputs& ins) {
  ConstValue shape_as_dims =
      Empty(TensorProto::INT64, Shape(ins[1]->ints.begin(), ins[1]->ints.end()));
  auto dims = BroadcastDims({ins[0], &shape_as_dims});
  if (!dims || TooBig(*dims)) return std::nullopt;
  ConstValue out = Empty(ins[0]->onnx_type, *dims);
  for (int64_t i = 0; i < NumElements(*dims); ++i)
    PushFrom(&out, *ins[0], SourceIndex(*ins[0], *dims, i));
  return out;
}

std::optional<ConstValue> EvalConstantOfShape(const onnx::NodeProto& n, const Inputs& ins) {
  Shape dims(ins[0]->ints.begin(), ins[0]->ints.end());
  if (TooBig(dims)) return std::nullopt;
  ConstValue fill = Empty(TensorProto::FLOAT, {1});
  fill.floats = {0.0};
  if (const auto* a = Attr(n, "value")) {
    auto v = ReadConstValue(a->t());
    if (!v || v->size() != 1) return std::nullopt;
    fill = *v;
  }
  ConstValue out = Empty(fill.onnx_type, dims);
  for (int64_t i = 0; i < NumElements(dims); ++i) PushFrom(&out, fill, 0);
  return out;
}

std::optional<ConstValue> EvalRange(const onnx::NodeProto&, const Inputs& ins) {
  double start = ins[0]->AsDouble(0), limit = ins[1]->AsDouble(0), delta = ins[2]->AsDouble(0);
  if (delta == 0) return std::nullopt;
  double count = std::max(0.0, std::ceil((limit - start) / delta));
  if (count > kMaxFoldElements) return std::nullopt;
  ConstValue out = Empty(ins[0]->onnx_type, {static_cast<int64_t>(count)});
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) Push(&out, start + i * delta);
  return out;
}

std::optional<ConstValue> EvalWhere(const onnx::NodeProto&, const Inputs& ins) {
  if (ins.size() != 3) return std::nullopt;
  return Elementwise(ins, ins[1]->onnx_type,
                     [](const std::vector<double>& a) { return a[0] != 0 ? a[1] : a[2]; });
}

// ReduceSum / ReduceProd / ReduceMin / ReduceMax over shape vectors (a product of dims, a
// largest dim), over the given axes or all of them.
Evaluator Reduce(double init, std::function<double(double, double)> f) {
  return [init, f](const onnx::NodeProto& n, const Inputs& ins) -> std::optional<ConstValue> {
    const ConstValue& x = *ins[0];
    auto axes = Axes(n, ins, 1);
    int64_t rank = static_cast<int64_t>(x.dims.size());
    std::vector<bool> reduced(rank, axes->empty() && IntAttr(n, "noop_with_empty_axes", 0) == 0);
    for (int64_t a : *axes) {
      if (a < 0) a += rank;
      if (a < 0 || a >= rank) return std::nullopt;
      reduced[a] = true;
    }
    bool keep = IntAttr(n, "keepdims", 1) != 0;
    Shape kept = x.dims, out_dims;
    for (int64_t i = 0; i < rank; ++i) {
      if (reduced[i]) kept[i] = 1;
      if (!reduced[i] || keep) out_dims.push_back(kept[i]);
    }
    std::vector<double> acc(NumElements(kept), init);
    std::vector<int64_t> kept_strides = Strides(kept);
    for (int64_t e = 0; e < x.size(); ++e) {
      int64_t rem = e, o = 0;
      for (int64_t i = rank - 1; i >= 0; --i) {
        int64_t c = rem % x.dims[i];
        rem /= x.dims[i];
        if (!reduced[i]) o += c * kept_strides[i];
      }
      acc[o] = f(acc[o], x.AsDouble(e));
    }
    ConstValue out = Empty(x.onnx_type, out_dims);
    for (double v : acc) Push(&out, v);
    return out;
  };
}

double IntDiv(double a, double b) { return b == 0 ? 0 : std::trunc(a / b); }

const std::unordered_map<std::string, Evaluator>& Evaluators() {
  static const auto* table = new std::unordered_map<std::string, Evaluator>{
      {"Constant", EvalConstant},
      {"Identity",
       [](const onnx::NodeProto&, const Inputs& ins) { return std::optional(*ins[0]); }},
      {"Cast", EvalCast},
      {"Gather", EvalGather},
      {"Unsqueeze", EvalUnsqueeze},
      {"Squeeze", EvalSqueeze},
      {"Reshape", EvalReshape},
      {"Concat", EvalConcat},
      {"Slice", EvalSlice},
      {"Transpose", EvalTranspose},
      {"Expand", EvalExpand},
      {"ConstantOfShape", EvalConstantOfShape},
      {"Range", EvalRange},
      {"Where", EvalWhere},
      {"Neg", Unary([](double x) { return -x; })},
      {"Abs", Unary([](double x) { return std::fabs(x); })},
      {"Sqrt", Unary([](double x) { return std::sqrt(x); })},
      {"Reciprocal", Unary([](double x) { return 1.0 / x; })},
      {"Floor", Unary([](double x) { return std::floor(x); })},
      {"Ceil", Unary([](double x) { return std::ceil(x); })},
      {"Not", Unary([](double x) { return x == 0 ? 1.0 : 0.0; })},
      {"Add", Binary([](double a, double b) { return a + b; })},
      {"Sub", Binary([](double a, double b) { return a - b; })},
      {"Mul", Binary([](double a, double b) { return a * b; })},
      {"Div", Binary([](double a, double b) { return a / b; })},
      {"Mod", Binary([](double a, double b) { return b == 0 ? 0 : std::fmod(a, b); })},
      {"Pow", Binary([](double a, double b) { return std::pow(a, b); })},
      {"Min", Binary([](double a, double b) { return std::min(a, b); })},
      {"Max", Binary([](double a, double b) { return std::max(a, b); })},
      {"Equal", Binary([](double a, double b) { return a == b ? 1.0 : 0.0; }, true)},
      {"Less", Binary([](double a, double b) { return a < b ? 1.0 : 0.0; }, true)},
      {"Greater", Binary([](double a, double b) { return a > b ? 1.0 : 0.0; }, true)},
      {"And", Binary([](double a, double b) { return (a != 0 && b != 0) ? 1.0 : 0.0; }, true)},
      {"Or", Binary([](double a, double b) { return (a != 0 || b != 0) ? 1.0 : 0.0; }, true)},
      {"Xor", Binary([](double a, double b) { return (a != 0) != (b != 0) ? 1.0 : 0.0; }, true)},
      {"LessOrEqual", Binary([](double a, double b) { return a <= b ? 1.0 : 0.0; }, true)},
      {"GreaterOrEqual", Binary([](double a, double b) { return a >= b ? 1.0 : 0.0; }, true)},
      {"Sign", Unary([](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); })},
      {"ReduceSum", Reduce(0, [](double a, double b) { return a + b; })},
      {"ReduceProd", Reduce(1, [](double a, double b) { return a * b; })},
      {"ReduceMin", Reduce(INFINITY, [](double a, double b) { return std::min(a, b); })},
      {"ReduceMax", Reduce(-INFINITY, [](double a, double b) { return std::max(a, b); })},
  };
  return *table;
}

// The inputs an evaluator reads without checking (ONNX's required inputs). A node with fewer, or
// with one of them empty, is malformed: it stays unfolded, and shape inference or validation names
// the problem.
size_t RequiredInputs(const std::string& op) {
  if (op == "Constant") return 0;
  if (op == "Gather" || op == "Reshape" || op == "Expand") return 2;
  if (op == "Slice" || op == "Range" || op == "Where") return 3;
  return 1;
}

// Integer Div in ONNX truncates; the generic evaluator divides in double, so fix it up here.
std::optional<ConstValue> Evaluate(const onnx::NodeProto& n, const Inputs& ins) {
  auto it = Evaluators().find(n.op_type());
  if (it == Evaluators().end()) return std::nullopt;
  const size_t required = RequiredInputs(n.op_type());
  if (ins.size() < required) return std::nullopt;
  // Only the optional inputs of Slice (axes, steps) and (Un)Squeeze (axes) may be empty.
  const bool optional_may_be_empty =
      n.op_type() == "Slice" || n.op_type() == "Squeeze" || n.op_type() == "Unsqueeze";
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i] == nullptr && (i < required || !optional_may_be_empty)) return std::nullopt;
  }
  auto out = it->second(n, ins);
  if (out && n.op_type() == "Div" && !out->is_float) {
    for (int64_t i = 0; i < out->size(); ++i) {
      int64_t a = ins[0]->AsInt(SourceIndex(*ins[0], out->dims, i));
      int64_t b = ins[1]->AsInt(SourceIndex(*ins[1], out->dims, i));
      out->ints[i] = static_cast<int64_t>(IntDiv(static_cast<double>(a), static_cast<double>(b)));
    }
  }
  return out;
}

void WriteTensor(const std::string& name, const ConstValue& v, TensorProto* t) {
  t->Clear();
  t->set_name(name);
  t->set_data_type(v.onnx_type);
  for (int64_t d : v.dims) t->add_dims(d);
  switch (v.onnx_type) {
    case TensorProto::FLOAT:
      for (double x : v.floats) t->add_float_data(static_cast<float>(x));
      break;
    case TensorProto::DOUBLE:
      for (double x : v.floats) t->add_double_data(x);
      break;
    case TensorProto::INT64:
      for (int64_t x : v.ints) t->add_int64_data(x);
      break;
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      for (int64_t x : v.ints) t->add_uint64_data(static_cast<uint64_t>(x));
      break;
    default:
      for (int64_t x : v.ints) t->add_int32_data(static_cast<int32_t>(x));
      break;
  }
}

// Static shapes known after shape inference, by tensor name.
std::unordered_map<std::string, Shape> StaticShapes(const onnx::GraphProto& g) {
  std::unordered_map<std::string, Shape> shapes;
  auto add = [&](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
    Shape dims;
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value()) return;
      dims.push_back(d.dim_value());
    }
    shapes[v.name()] = dims;
  };
  for (const auto& v : g.input()) add(v);
  for (const auto& v : g.value_info()) add(v);
  for (const auto& v : g.output()) add(v);
  for (const auto& t : g.initializer()) shapes[t.name()] = Shape(t.dims().begin(), t.dims().end());
  return shapes;
}

ConstValue ShapeValue(const onnx::NodeProto& n, const Shape& dims) {
  int64_t rank = static_cast<int64_t>(dims.size());
  int64_t start = IntAttr(n, "start", 0), end = IntAttr(n, "end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  ConstValue v = Empty(TensorProto::INT64, {end - start});
  v.ints.assign(dims.begin() + start, dims.begin() + end);
  return v;
}

// Evaluates one node if everything it needs is known.
std::optional<ConstValue> TryFold(const onnx::NodeProto& n,
                                  const std::unordered_map<std::string, ConstValue>& values,
                                  const std::unordered_map<std::string, Shape>& shapes) {
  if ((!n.domain().empty() && n.domain() != "ai.onnx") || n.output_size() != 1) return std::nullopt;
  if (n.op_type() == "Shape" || n.op_type() == "Size") {
    auto it = n.input_size() == 1 ? shapes.find(n.input(0)) : shapes.end();
    if (it == shapes.end()) return std::nullopt;
    if (n.op_type() == "Shape") return ShapeValue(n, it->second);
    ConstValue v = Empty(TensorProto::INT64, {});
    v.ints = {NumElements(it->second)};
    return v;
  }
  Inputs ins;
  for (const auto& name : n.input()) {
    if (name.empty()) {
      ins.push_back(nullptr);
      continue;
    }
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    ins.push_back(&it->second);
  }
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i] == nullptr && i == 0) return std::nullopt;
  }
  return Evaluate(n, ins);
}

// ONNX shape inference types an initializer from its value_info entry when it has one, so the
// entry that inference wrote while the tensor was still computed (with symbolic dims such as
// 'unk__27' where the data was unknown then) would hide the folded value's static shape from every
// consumer: a Concat of two folded [49, 49, 1] masks stayed [unk, unk, 2].
void DropValueInfo(onnx::GraphProto* graph, const std::unordered_set<std::string>& names) {
  if (names.empty()) return;
  auto* infos = graph->mutable_value_info();
  for (int i = infos->size() - 1; i >= 0; --i) {
    if (names.count(infos->Get(i).name())) infos->DeleteSubrange(i, 1);
  }
}

}  // namespace

std::optional<ConstValue> ReadConstValue(const TensorProto& t) {
  if (t.data_location() == TensorProto::EXTERNAL) return std::nullopt;
  Shape dims(t.dims().begin(), t.dims().end());
  auto n = CheckedElements(dims);
  if (!n || *n > kMaxReadElements) return std::nullopt;
  ConstValue v = Empty(t.data_type(), dims);
  if (t.data_type() == TensorProto::FLOAT16 || t.data_type() == TensorProto::BFLOAT16)
    return std::nullopt;
  bool ok = !t.raw_data().empty() ? DecodeRawData(t, *n, &v) : DecodeTypedData(t, *n, &v);
  if (!ok && *n != 0) return std::nullopt;
  return v;
}

bool CarriedAsConstant(const ConstValue& v) {
  return v.is_float ? v.size() <= 1 : v.size() <= kMaxIntConstantElements;
}

StatusOr<bool> FoldConstants(onnx::GraphProto* graph,
                             const std::unordered_set<std::string>& weights) {
  std::unordered_map<std::string, ConstValue> values;
  for (const auto& init : graph->initializer()) {
    auto v = ReadConstValue(init);
    if (!v || (weights.count(init.name()) > 0 && !CarriedAsConstant(*v))) continue;
    if (v->size() <= kMaxConstantElements) values[init.name()] = *v;
  }
  auto shapes = StaticShapes(*graph);
  std::vector<int> folded;
  std::unordered_map<std::string, int> folded_output;
  for (int i = 0; i < graph->node_size(); ++i) {
    const auto& n = graph->node(i);
    auto v = TryFold(n, values, shapes);
    // A Constant node's value is only read; computed values stay small.
    int64_t cap = n.op_type() == "Constant" ? kMaxConstantElements : kMaxFoldElements;
    if (!v || v->size() > cap) continue;
    values[n.output(0)] = *v;
    shapes[n.output(0)] = v->dims;
    folded.push_back(i);
    folded_output[n.output(0)] = i;
  }
  if (folded.empty()) return false;
  // Outputs of folded nodes that something still reads become initializers.
  std::vector<bool> is_folded(graph->node_size(), false);
  for (int i : folded) is_folded[i] = true;
  std::unordered_set<std::string> needed;
  for (int i = 0; i < graph->node_size(); ++i) {
    if (is_folded[i]) continue;
    for (const auto& in : graph->node(i).input()) needed.insert(in);
  }
  for (const auto& out : graph->output()) needed.insert(out.name());
  std::unordered_set<std::string> written;
  for (const auto& [name, index] : folded_output) {
    if (!needed.count(name)) continue;
    WriteTensor(name, values[name], graph->add_initializer());
    written.insert(name);
  }
  DropValueInfo(graph, written);
  auto* nodes = graph->mutable_node();
  for (auto it = folded.rbegin(); it != folded.rend(); ++it) nodes->DeleteSubrange(*it, 1);
  return true;
}

namespace {

// Whether node `n` reads only tensors whose values the IR carries (and writes no graph output,
// which the runtime must produce).
bool ReadsOnlyConstants(const Graph& g, const Node& n) {
  for (TensorId t : n.outputs) {
    if (g.IsGraphOutput(t)) return false;
  }
  bool any = false;
  for (TensorId t : n.inputs) {
    if (t == kNoId) continue;
    if (g.tensor(t).kind != TensorKind::kConstant) return false;
    any = true;
  }
  return any && !n.outputs.empty();
}

// Whether FoldConstantNodes tries to fold `n`: it reads only constants and its output is within
// kMaxFoldedElements.
bool Foldable(const Graph& g, const Node& n) {
  return ReadsOnlyConstants(g, n) && g.tensor(n.outputs[0]).num_elements() <= kMaxFoldedElements;
}

bool FitsAsConstant(const Tensor& out, const AttrTensor& v) {
  int64_t n = static_cast<int64_t>(v.int_data.size() + v.float_data.size());
  return v.dims == out.dims && n == out.num_elements() && n <= kMaxFoldedElements;
}

}  // namespace

NodeId FirstFoldableNode(const Graph& g) {
  for (NodeId id = 0; id < static_cast<NodeId>(g.num_nodes()); ++id) {
    if (Foldable(g, g.node(id))) return id;
  }
  return kNoId;
}

StatusOr<int> FoldConstantNodes(Graph* g, const ConstantNodeEvaluator& evaluate) {
  std::vector<NodeId> keep;
  int folded = 0;
  for (NodeId id = 0; id < static_cast<NodeId>(g->num_nodes()); ++id) {
    const Node& n = g->node(id);
    if (!Foldable(*g, n)) {
      keep.push_back(id);
      continue;
    }
    StatusOr<std::vector<AttrTensor>> values = evaluate(*g, id);
    bool fits = values.ok() && values->size() == n.outputs.size();
    for (size_t i = 0; fits && i < n.outputs.size(); ++i) {
      fits = FitsAsConstant(g->tensor(n.outputs[i]), (*values)[i]);
    }
    if (!fits) {
      keep.push_back(id);
      continue;
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      Tensor& out = g->mutable_tensor(n.outputs[i]);
      out.kind = TensorKind::kConstant;
      out.int_data = std::move((*values)[i].int_data);
      out.float_data = std::move((*values)[i].float_data);
    }
    ++folded;
  }
  if (folded > 0) *g = g->Compacted(keep);
  return folded;
}

}  // namespace fusor
