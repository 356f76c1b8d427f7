// Synthetic graphs for scaling tests and benchmarks: a stack of transformer encoder layers shaped
// like the ONNX export of the bundled BERT encoder (LayerNorm decomposed into ReduceMean / Sub /
// Pow / Sqrt / Div, attention with Slice / Reshape / Transpose, GELU through Erf), about 55 nodes
// per layer. Deterministic; returns a linked, validated graph in canonical order.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "graph/graph.h"

namespace fusor {

struct TransformerShape {
  int layers = 12;
  int64_t sequence = 128;
  int64_t hidden = 768;
  int64_t heads = 12;
};

StatusOr<Graph> SyntheticTransformer(const TransformerShape& shape);

}  // namespace fusor
