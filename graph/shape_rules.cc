#include "graph/shape_rules.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <vector>

#include "graph/constant_folding.h"
#include "graph/einsum.h"
#include "graph/unique_values.h"

namespace fusor {
namespace {

struct KnownValue {
  int32_t elem_type = 0;
  std::optional<Shape> dims;  // Set when static.
  const onnx::TensorProto* initializer = nullptr;
};

std::optional<Shape> StaticDims(const onnx::ValueInfoProto& v) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return std::nullopt;
  Shape dims;
  for (const auto& d : v.type().tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return std::nullopt;
    dims.push_back(d.dim_value());
  }
  return dims;
}

KnownValue Lookup(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer()) {
    if (t.name() == name) return {t.data_type(), Shape(t.dims().begin(), t.dims().end()), &t};
  }
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()}) {
    for (const auto& v : *list) {
      if (v.name() == name) return {v.type().tensor_type().elem_type(), StaticDims(v), nullptr};
    }
  }
  return {};
}

int64_t AxisAttr(const onnx::NodeProto& n, int64_t fallback) {
  for (const auto& a : n.attribute()) {
    if (a.name() == "axis") return a.i();
  }
  return fallback;
}

bool HasAxis(const onnx::NodeProto& n) {
  for (const auto& a : n.attribute()) {
    if (a.name() == "axis") return true;
  }
  return false;
}

// OneHot: the indices' dims with depth inserted at `axis` (default -1, counted in the output's
// rank); the values' element type.
std::optional<KnownValue> OneHotOutput(const onnx::GraphProto& g, const onnx::NodeProto& n) {
  if (n.input_size() < 3) return std::nullopt;
  KnownValue indices = Lookup(g, n.input(0)), depth = Lookup(g, n.input(1));
  KnownValue values = Lookup(g, n.input(2));
  if (!indices.dims || depth.initializer == nullptr || values.elem_type == 0) return std::nullopt;
  std::optional<ConstValue> d = ReadConstValue(*depth.initializer);
  if (!d || d->size() != 1 || d->AsInt(0) < 1) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(indices.dims->size()) + 1;
  int64_t axis = AxisAttr(n, -1);
  if (axis < -rank || axis >= rank) return std::nullopt;
  if (axis < 0) axis += rank;
  Shape out = *indices.dims;
  out.insert(out.begin() + axis, d->AsInt(0));
  return KnownValue{values.elem_type, out, nullptr};
}

// Compress: the input's dims with `axis` cut to the true entries of the condition (without axis:
// the flattened input's true entries, 1-D); the input's element type.
std::optional<KnownValue> CompressOutput(const onnx::GraphProto& g, const onnx::NodeProto& n) {
  if (n.input_size() < 2) return std::nullopt;
  KnownValue input = Lookup(g, n.input(0)), condition = Lookup(g, n.input(1));
  if (!input.dims || condition.initializer == nullptr) return std::nullopt;
  std::optional<ConstValue> c = ReadConstValue(*condition.initializer);
  if (!c) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(input.dims->size());
  int64_t axis = AxisAttr(n, 0);
  if (HasAxis(n) && (axis < -rank || axis >= rank)) return std::nullopt;
  if (axis < 0) axis += rank;
  const int64_t length = HasAxis(n) ? (*input.dims)[axis] : NumElements(*input.dims);
  int64_t kept = 0;
  for (int64_t e = 0; e < std::min(length, c->size()); ++e) kept += c->AsDouble(e) != 0;
  Shape out = HasAxis(n) ? *input.dims : Shape{};
  if (HasAxis(n)) {
    out[axis] = kept;
  } else {
    out.push_back(kept);
  }
  return KnownValue{input.elem_type, out, nullptr};
}

// Einsum: the output dims its equation gives from the operands' dims (ONNX's rule gives the rank
// only); the first operand's element type.
std::optional<KnownValue> EinsumOutput(const onnx::GraphProto& g, const onnx::NodeProto& n) {
  std::vector<Shape> shapes;
  int32_t elem_type = 0;
  for (const auto& name : n.input()) {
    KnownValue v = Lookup(g, name);
    if (!v.dims) return std::nullopt;
    shapes.push_back(*v.dims);
    if (elem_type == 0) elem_type = v.elem_type;
  }
  std::string equation;
  for (const auto& a : n.attribute()) {
    if (a.name() == "equation") equation = a.s();
  }
  StatusOr<EinsumSpec> spec = ParseEinsum(equation, shapes);
  if (!spec.ok()) return std::nullopt;
  return KnownValue{elem_type, spec->output_dims(), nullptr};
}

// The values of an initializer, as doubles, or nullopt.
std::optional<std::vector<double>> Values(const KnownValue& v) {
  if (v.initializer == nullptr) return std::nullopt;
  std::optional<ConstValue> c = ReadConstValue(*v.initializer);
  if (!c) return std::nullopt;
  std::vector<double> values;
  for (int64_t e = 0; e < c->size(); ++e) values.push_back(c->AsDouble(e));
  return values;
}

// NonZero: [rank, the count of non-zero elements], int64.
std::vector<KnownValue> NonZeroOutputs(const onnx::GraphProto& g, const onnx::NodeProto& n) {
  KnownValue input = Lookup(g, n.input(0));
  std::optional<std::vector<double>> values = Values(input);
  if (!input.dims || !values) return {};
  const int64_t count =
      std::count_if(values->begin(), values->end(), [](double v) { return v != 0; });
  return {
      {onnx::TensorProto::INT64, Shape{static_cast<int64_t>(input.dims->size()), count}, nullptr}};
}

// Unique: Y (the input's dims with the axis, or the flattened input, cut to the unique count),
// then indices, inverse_indices and counts (int64).
std::vector<KnownValue> UniqueOutputs(const onnx::GraphProto& g, const onnx::NodeProto& n) {
  KnownValue input = Lookup(g, n.input(0));
  std::optional<std::vector<double>> values = Values(input);
  if (!input.dims || !values) return {};
  const int64_t rank = static_cast<int64_t>(input.dims->size());
  std::optional<int64_t> axis;
  if (HasAxis(n)) {
    axis = AxisAttr(n, 0);
    if (*axis < -rank || *axis >= rank) return {};
    if (*axis < 0) *axis += rank;
  }
  const UniqueSlices u = FindUniqueSlices(*values, *input.dims, axis, true);
  const int64_t unique = static_cast<int64_t>(u.first.size());
  Shape y = {unique};
  if (axis) {
    y = *input.dims;
    y[*axis] = unique;
  }
  const int32_t i64 = onnx::TensorProto::INT64;
  return {{input.elem_type, y, nullptr},
          {i64, Shape{unique}, nullptr},
          {i64, Shape{static_cast<int64_t>(u.inverse.size())}, nullptr},
          {i64, Shape{unique}, nullptr}};
}

// MaxUnpool with its output_shape input: those dims; the input's element type.
std::optional<KnownValue> MaxUnpoolOutput(const onnx::GraphProto& g, const onnx::NodeProto& n) {
  if (n.input_size() < 3 || n.input(2).empty()) return std::nullopt;
  KnownValue input = Lookup(g, n.input(0));
  std::optional<std::vector<double>> shape = Values(Lookup(g, n.input(2)));
  if (!shape || shape->empty()) return std::nullopt;
  Shape dims;
  for (double d : *shape) {
    if (!(d >= 1)) return std::nullopt;
    dims.push_back(static_cast<int64_t>(d));
  }
  return KnownValue{input.elem_type, dims, nullptr};
}

std::vector<KnownValue> OutputsOf(const onnx::GraphProto& g, const onnx::NodeProto& n) {
  std::optional<KnownValue> out;
  if (n.op_type() == "OneHot") out = OneHotOutput(g, n);
  if (n.op_type() == "Compress") out = CompressOutput(g, n);
  if (n.op_type() == "Einsum") out = EinsumOutput(g, n);
  if (n.op_type() == "MaxUnpool") out = MaxUnpoolOutput(g, n);
  if (out) return {*out};
  if (n.op_type() == "NonZero" && n.input_size() == 1) return NonZeroOutputs(g, n);
  if (n.op_type() == "Unique" && n.input_size() == 1) return UniqueOutputs(g, n);
  return {};
}

// Gives value `name` the element type and dims of `known` in g's value_info (or its output).
void SetShape(onnx::GraphProto* g, const std::string& name, const KnownValue& known) {
  onnx::ValueInfoProto* v = nullptr;
  for (auto& existing : *g->mutable_value_info()) {
    if (existing.name() == name) v = &existing;
  }
  for (auto& existing : *g->mutable_output()) {
    if (existing.name() == name) v = &existing;
  }
  if (v == nullptr) v = g->add_value_info();
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(known.elem_type);
  tt->clear_shape();
  for (int64_t d : *known.dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

}  // namespace

bool AddShapesFromConstantOperands(onnx::GraphProto* g) {
  bool added = false;
  for (const auto& n : g->node()) {
    if (n.output_size() < 1 || Lookup(*g, n.output(0)).dims) continue;
    const std::vector<KnownValue> outs = OutputsOf(*g, n);
    for (size_t k = 0; k < outs.size() && k < static_cast<size_t>(n.output_size()); ++k) {
      if (n.output(k).empty()) continue;
      SetShape(g, n.output(k), outs[k]);
      added = true;
    }
  }
  return added;
}

}  // namespace fusor
