#include "runtime/model_weights.h"

#include <algorithm>

#include "runtime/reference.h"

namespace fusor {
namespace {

// The values of the folded weights, by name, computed from the initializers they read.
StatusOr<std::unordered_map<std::string, HostTensor>> LoadTimeValues(
    const Graph& load_time, const std::unordered_map<std::string, TensorData>& initializers) {
  std::unordered_map<std::string, HostTensor> by_name;
  if (load_time.num_nodes() == 0) return by_name;
  TensorValues leaves;
  for (TensorId id = 0; id < static_cast<TensorId>(load_time.num_tensors()); ++id) {
    const Tensor& t = load_time.tensor(id);
    if (t.kind == TensorKind::kConstant) {
      FUSOR_ASSIGN_OR_RETURN(leaves[id], ConstantValue(t));
    } else if (t.kind == TensorKind::kWeight) {
      auto it = initializers.find(t.name);
      if (it == initializers.end()) {
        return Status::NotFound("weight '" + t.name + "' has no data");
      }
      FUSOR_ASSIGN_OR_RETURN(leaves[id], ToHostTensor(it->second));
    }
  }
  auto out = RunReference(load_time, leaves);
  if (!out.ok()) return out.status().WithContext("computing the weights that import folded");
  for (auto& [id, value] : *out) by_name[load_time.tensor(id).name] = std::move(value);
  return by_name;
}

Status CheckMatches(const Tensor& t, const HostTensor& value) {
  if (value.dims != t.dims || value.is_float() != IsFloatingPoint(t.dtype)) {
    return Status::InvalidArgument("weight '" + t.name + "' holds " +
                                   std::string(DTypeName(value.dtype)) + " " +
                                   ShapeString(value.dims) + "; the graph needs " +
                                   std::string(DTypeName(t.dtype)) + " " + ShapeString(t.dims));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<HostTensor> ToHostTensor(TensorData d) {
  if (!IsSupportedDType(d.dtype)) {
    return Status::Unimplemented("tensor '" + d.name + "' has dtype " +
                                 std::string(DTypeName(d.dtype)) +
                                 "; the runtime supports float32 and integer tensors");
  }
  if (d.dtype == DType::kUInt64) {
    // Stored as int64, a uint64 above 2^63 - 1 reads as negative.
    auto beyond = std::find_if(d.i.begin(), d.i.end(), [](int64_t v) { return v < 0; });
    if (beyond != d.i.end()) {
      return Status::Unimplemented(
          "tensor '" + d.name + "' holds the uint64 value " +
          std::to_string(static_cast<uint64_t>(*beyond)) +
          ", above 2^63 - 1; the runtime computes uint64 tensors in int64");
    }
  }
  HostTensor h;
  h.dtype = d.dtype;
  h.dims = std::move(d.dims);
  h.f = std::move(d.f);
  h.i = std::move(d.i);
  if (static_cast<int64_t>(h.f.size() + h.i.size()) != h.num_elements()) {
    return Status::InvalidArgument(
        "tensor '" + d.name + "' holds " + std::to_string(h.f.size() + h.i.size()) +
        " values; its dims " + ShapeString(h.dims) + " need " + std::to_string(h.num_elements()));
  }
  return h;
}

StatusOr<TensorValues> ModelLeafValues(const Graph& g, ModelWeights weights, uint64_t input_seed) {
  FUSOR_ASSIGN_OR_RETURN(auto folded, LoadTimeValues(weights.load_time, weights.initializers));
  FUSOR_ASSIGN_OR_RETURN(TensorValues values, RandomLeafValues(g, input_seed, /*weights=*/false));
  for (TensorId id = 0; id < static_cast<TensorId>(g.num_tensors()); ++id) {
    const Tensor& t = g.tensor(id);
    if (t.kind != TensorKind::kWeight) continue;
    if (auto it = folded.find(t.name); it != folded.end()) {
      values[id] = std::move(it->second);
    } else if (auto init = weights.initializers.find(t.name); init != weights.initializers.end()) {
      FUSOR_ASSIGN_OR_RETURN(values[id], ToHostTensor(std::move(init->second)));
    } else {
      return Status::NotFound("weight '" + t.name + "' has no data in the model");
    }
    FUSOR_RETURN_IF_ERROR(CheckMatches(t, values[id]));
  }
  return values;
}

Status SetInputValue(const Graph& g, const std::string& name, TensorData value,
                     TensorValues* leaves) {
  auto id = g.FindTensor(name);
  if (!id || g.tensor(*id).kind != TensorKind::kGraphInput) {
    std::string known;
    for (TensorId in : g.inputs()) known += (known.empty() ? "'" : ", '") + g.tensor(in).name + "'";
    return Status::InvalidArgument("'" + name +
                                   "' is not an input of the model (its inputs: " + known + ")");
  }
  const Tensor& t = g.tensor(*id);
  if (value.dims != t.dims || value.is_float() != IsFloatingPoint(t.dtype)) {
    return Status::InvalidArgument("input '" + name + "' is given as " +
                                   std::string(DTypeName(value.dtype)) + " " +
                                   ShapeString(value.dims) + "; the model needs " +
                                   std::string(DTypeName(t.dtype)) + " " + ShapeString(t.dims));
  }
  value.dtype = t.dtype;  // Same kind and storage: an int32 file feeds an int64 input.
  FUSOR_ASSIGN_OR_RETURN((*leaves)[*id], ToHostTensor(std::move(value)));
  return Status::Ok();
}

TensorData ToTensorData(const std::string& name, const HostTensor& value) {
  TensorData d;
  d.name = name;
  d.dtype = value.dtype;
  d.dims = value.dims;
  d.f = value.f;
  d.i = value.i;
  return d;
}

}  // namespace fusor
