// Evaluates a node over constants with the reference interpreter, for the import's folding of
// such nodes (graph/constant_folding.h FoldConstantNodes): graph/ may not depend on runtime/, so
// the import takes this function as ImportOptions::evaluate_constants. Stateless; thread-safe.
#pragma once

#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/onnx_import.h"

namespace fusor {

// The values of node `id`'s outputs, in the order of Node::outputs; every input of the node must
// be a kConstant tensor. Unimplemented for an op the reference interpreter does not run.
StatusOr<std::vector<AttrTensor>> EvaluateConstantNode(const Graph& g, NodeId id);

// `options` with evaluate_constants set to EvaluateConstantNode.
ImportOptions WithConstantFolding(ImportOptions options);

// Folds `g`'s nodes over constants as the import does (FoldConstantNodes with
// EvaluateConstantNode): for graphs that arrive already converted (a fusor.v1.Graph from a
// client that did not fold), so that they hash as the tools' imports do.
Status FoldNodesOverConstants(Graph* g);

}  // namespace fusor
