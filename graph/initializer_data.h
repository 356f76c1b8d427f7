// The data of a model's weights, read for execution (`fusor run --weights`, the parity and peer
// benches). Import itself never reads weight data (tuning needs dims only, and stripped models
// tune); this file reads it when a caller wants to run the model with its own weights.
//
// Where a weight's values come from: an initializer's raw_data, its typed fields (float_data,
// int64_data, ...), or an external data file next to the model (ONNX's `location` / `offset` /
// `length` keys, the location relative to the model's directory). A location that leaves that
// directory, a missing file, or a size that disagrees with the dims is an error naming the
// tensor. Weight-only nodes that import folds away (a Transpose of a weight) are returned as a
// small graph, `load_time`, that the runtime evaluates on the real data.
//
// Plain values: not synchronised; the functions are stateless and thread-safe. libonnx stays a
// private dependency of graph/: the declarations taking ONNX types are for graph/'s own files.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"

namespace onnx {
class GraphProto;
class TensorProto;
}  // namespace onnx

namespace fusor {

// A dense row-major tensor as plain data, in the runtime's storage convention (HostTensor):
// floating-point values as float32 in `f`, integers and bools as int64 in `i`.
struct TensorData {
  std::string name;
  DType dtype = DType::kUnspecified;
  Shape dims;
  std::vector<float> f;
  std::vector<int64_t> i;

  bool is_float() const { return IsFloatingPoint(dtype); }
  int64_t num_elements() const { return NumElements(dims); }
};

// Everything needed to compute the values of an imported graph's weights.
struct ModelWeights {
  // The data of every initializer that the graph or `load_time` reads as a weight, by name.
  std::unordered_map<std::string, TensorData> initializers;
  // The weight-only nodes import folded, in an order that runs them: its leaves are initializers
  // (by name) and constants, its outputs the graph's weights that no initializer holds. Empty when
  // import folded none.
  Graph load_time;
};

// Decodes `n` little-endian values of `dtype` (float16/32/64, bfloat16, integers, bool: the types
// with a raw form here) from `bytes` into `t->f` or `t->i`.
void DecodeLittleEndian(DType dtype, const char* bytes, int64_t n, TensorData* t);

// Reads one tensor's data. `model_dir` is where external data files are looked up; empty refuses
// external data (the model came as bytes, not as a file).
StatusOr<TensorData> ReadTensorProtoData(const onnx::TensorProto& t, const std::string& model_dir);

// Reads the initializers of `graph` named in `names`; a name with no initializer, or one that
// carries no data (stripped weights), is an error naming it.
StatusOr<std::unordered_map<std::string, TensorData>> ReadInitializers(
    const onnx::GraphProto& graph, const std::vector<std::string>& names,
    const std::string& model_dir);

}  // namespace fusor
