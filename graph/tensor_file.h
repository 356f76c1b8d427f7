// Tensor files for model inputs and outputs: ONNX `TensorProto` files (.pb, the layout of ONNX's
// test data sets: test_data_set_0/input_0.pb) and NumPy arrays (.npy, format version 1-3,
// little-endian, C order). The format follows the file's extension. Errors name the file and what
// is wrong with it. Stateless; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "graph/initializer_data.h"

namespace fusor {

// Reads a .pb or .npy file (through ReadInputFile, base/input_file.h). A .npy file has no tensor
// name: `name` is left empty.
StatusOr<TensorData> ReadTensorFile(const std::string& path);

// `t` as a serialized ONNX TensorProto named after it (float32/64, integers, bool).
StatusOr<std::string> TensorProtoBytes(const TensorData& t);

// The tensor in `bytes`, the content of the file at `path` (its extension says the format; a .pb
// file's external data is looked for beside it).
StatusOr<TensorData> ParseTensorFile(std::string_view bytes, const std::string& path);

// The bytes WriteTensorFile writes for `t` at `path`.
StatusOr<std::string> TensorFileBytes(const TensorData& t, const std::string& path);

// Writes `t` (its name goes into a .pb file) in the format of the path's extension.
Status WriteTensorFile(const std::string& path, const TensorData& t);

}  // namespace fusor
