// Structural validation of a linked graph. Everything that reaches the search, the runtime or the
// database has passed Validate(); every rejection names the node or tensor and what is wrong.
// Pure function of its inputs; thread-safe.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "graph/graph.h"

namespace fusor {

struct ValidationLimits {
  int64_t max_nodes = 1'000'000;                   // More nodes than this is refused.
  int64_t max_tensor_elements = int64_t{1} << 32;  // Any one tensor above this is refused.
  int64_t max_node_attributes = 1024;              // ONNX's ops have a few dozen at most.
};

// Checks, in order: node and tensor counts; duplicate tensor names; tensor references in range;
// every tensor has a known dtype and dims >= 1 (0 allowed only for constants, which may be empty);
// element counts neither overflow int64 nor pass the cap; each tensor has at most one producer and
// activations have exactly one; graph inputs/outputs are well formed; no cycle; every node's shapes
// agree with its op's shape rule (op_registry.h).
Status Validate(const Graph& g, const ValidationLimits& limits = {});

}  // namespace fusor
