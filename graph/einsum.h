// Einsum's equation, parsed against its operands' shapes: which label each dim of each operand and
// of the output carries, and each label's length. Letters are labels 0-51; the dims an ellipsis
// stands for are labels from kEllipsisLabel on, right-aligned across operands and broadcast (a
// length-1 dim stretches). Without "->", the output is the ellipsis dims then the letters used
// once, in alphabetical order (numpy's rule). Read by the import's shape rule
// (graph/shape_rules.h) and the reference interpreter's kernel. Stateless; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"

namespace fusor {

inline constexpr int kEllipsisLabel = 52;

struct EinsumSpec {
  std::vector<std::vector<int>> operands;  // Per operand, per dim: its label.
  std::vector<int> output;                 // Per output dim: its label.
  std::vector<int64_t> label_dims;         // Per label: its length (0 when unused).
  Shape output_dims() const;
};

// InvalidArgument naming the equation and what does not fit: a character that is not a letter, a
// term count other than the operand count, a term whose letters do not match its operand's rank,
// a label with two lengths, an output label no operand has.
StatusOr<EinsumSpec> ParseEinsum(const std::string& equation, const std::vector<Shape>& operands);

}  // namespace fusor
