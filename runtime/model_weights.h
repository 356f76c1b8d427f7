// The leaf values that run a graph with its model's own weights (graph/initializer_data.h): the
// weights from the initializers' data, the weights import folded computed from that data by the
// reference interpreter (as an engine computes them once at load time), the constants from the
// graph, and seeded random graph inputs (RandomLeafValues' values for the same seed) that the
// caller may replace. Stateless; safe to call from several threads.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/initializer_data.h"
#include "runtime/host_tensor.h"

namespace fusor {

// Moves `d`'s data into a HostTensor; fails for dtypes the runtime does not compute with, and for
// a uint64 value above 2^63 - 1 (uint64 is computed in int64).
StatusOr<HostTensor> ToHostTensor(TensorData d);

// Every leaf value of `g` (ready for Executor::Create and RunReference). A weight whose value is
// missing or whose dims or dtype differ from the graph's is an error naming it. Consumes
// `weights`, whose data moves into the result.
StatusOr<TensorValues> ModelLeafValues(const Graph& g, ModelWeights weights, uint64_t input_seed);

// Sets the value of the graph input named `name` in `leaves` to `value`, which must have the
// input's dims and a dtype of its kind (floating point for a float input, any integer or bool for
// an integer one); otherwise the error names the input and what it needs.
Status SetInputValue(const Graph& g, const std::string& name, TensorData value,
                     TensorValues* leaves);

// `value` as plain data named `name`, for writing to a tensor file.
TensorData ToTensorData(const std::string& name, const HostTensor& value);

}  // namespace fusor
