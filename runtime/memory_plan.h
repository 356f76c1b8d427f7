// Memory planning for a plan's execution: every buffer a run needs (materialized tensors, graph
// inputs, per-group scratch) has a lifetime in group order, and buffers whose lifetimes do not
// overlap share bytes of one arena. Offsets are assigned greedily, largest buffer first, at the
// lowest offset free over its lifetime. The plan is computed before anything is allocated, so a
// plan over the memory budget is refused without touching memory. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/plan.h"

namespace fusor {

struct BufferLifetime {
  TensorId tensor = kNoId;  // kNoId for a group's scratch.
  int64_t bytes = 0;
  int first = 0;  // Index of the first group that needs the buffer...
  int last = 0;   // ...and of the last one, inclusive.
};

struct MemoryPlan {
  std::vector<BufferLifetime> buffers;
  std::vector<int64_t> offsets;  // Per buffer, into the arena (64-byte aligned).
  int64_t arena_bytes = 0;       // Allocated for activations, inputs and scratch.
  int64_t peak_live_bytes = 0;   // Largest sum of live buffers at one group: a lower bound.
  int64_t weight_bytes = 0;      // Weights, constants and their prepacked copies.
  int64_t total_bytes() const { return arena_bytes + weight_bytes; }
  std::string ToString() const;
};

// Bytes the runtime stores per element: 4 for float32, 8 for integers (held as int64).
int64_t StorageBytesPerElement(DType dtype);
int64_t StorageBytes(const Tensor& t);

// Lifetimes of the graph inputs and of every tensor the plan materializes, in plan order; graph
// inputs and outputs live for the whole run. An input of an in-place Concat
// (lowering/concat_in_place.h) has no buffer of its own: it is stored in its slice of the
// Concat's output (SliceOffsets), whose buffer lives from the first of its parts' writers to the
// last reader of any of them.
std::vector<BufferLifetime> PlanLifetimes(const Graph& g, const FusionPlan& plan);

// Where each in-place Concat input is stored: the tensor whose buffer holds it and its byte offset
// in that buffer.
struct SliceOffset {
  TensorId part = kNoId;
  TensorId whole = kNoId;
  int64_t byte_offset = 0;
};
std::vector<SliceOffset> SliceOffsets(const Graph& g, const FusionPlan& plan);

// Assigns arena offsets; `weight_bytes` is carried into the result.
MemoryPlan AssignOffsets(std::vector<BufferLifetime> buffers, int64_t weight_bytes);

// The memory a plan needs from the graph alone (plain layouts, no scratch, weights unpacked):
// what the cost model and the search use before anything is compiled.
MemoryPlan EstimatePlanMemory(const Graph& g, const FusionPlan& plan);

// ResourceExhausted naming the plan's peak and the budget when total_bytes() exceeds it.
Status CheckMemoryBudget(const MemoryPlan& m, int64_t budget_bytes);

}  // namespace fusor
