// Imports an ONNX model file into the graph IR with every shape static. Steps: parse (size-capped),
// bind symbolic dims from the caller, ONNX shape inference with data propagation, folding of
// constant sub-graphs (Shape -> Gather -> Unsqueeze -> Concat -> Reshape and the like) to a
// fixpoint, removal of Identity and inference-mode Dropout, a check that every dim is known (else
// an error naming the node that lost one and why), conversion to the IR, validation,
// folding of nodes over constants with the caller's evaluator, and reordering into the canonical
// order. Initializers need dims only: data that is external or missing is fine. Stateless; safe to
// call from many threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"
#include "graph/constant_folding.h"
#include "graph/graph.h"
#include "graph/initializer_data.h"
#include "graph/validate.h"

namespace fusor {

struct ImportOptions {
  // Values for symbolic dims by name ("batch" -> 8), applied wherever the name appears.
  std::map<std::string, int64_t> dims;
  // Full shapes for graph inputs by name; overrides whatever the file says.
  std::map<std::string, Shape> input_shapes;
  // Values fixed at import for graph inputs, by name: each input becomes an initializer with that
  // value, so an input that decides a shape (Reshape's shape, Resize's scales, Slice's starts)
  // folds like a constant (the CLI's --const-input NAME=FILE).
  std::map<std::string, TensorData> constant_inputs;
  // Model name to record; empty uses the ONNX graph name, then the file stem.
  std::string model_name;
  // Limits applied by the final validation.
  ValidationLimits limits;
  // Files larger than this are refused before parsing.
  int64_t max_file_bytes = int64_t{1} << 31;
  // Folds every node whose inputs are all constants (Trilu over a mask, Where, Range, ...) after
  // conversion to the IR. Every Fusor tool folds them, and the graph hash that finds a stored plan
  // is the hash of the folded graph, so callers pass EvaluateConstantNode, the reference
  // interpreter (runtime/constant_evaluator.h WithConstantFolding; graph/ may not depend on
  // runtime/). Unset, a model with such a node is refused, naming it, unless
  // `keep_constant_nodes` says the caller wants them kept (tests of the unfolded graph): a
  // forgotten evaluator fails loudly instead of giving a graph whose hash no stored plan has.
  ConstantNodeEvaluator evaluate_constants;
  bool keep_constant_nodes = false;
};

// Parses "--shape input=1x3x224x224" values ("input=1x3x224x224") and "--dim batch=8" values.
Status ParseShapeBinding(std::string_view text, ImportOptions* options);
Status ParseDimBinding(std::string_view text, ImportOptions* options);

StatusOr<Graph> ImportOnnxFile(const std::string& path, const ImportOptions& options = {});
// ImportOnnxFile with only those of `options.dims` the model has: a binding of a dim it lacks is
// dropped and the model imported again (tools that import many models with one set of defaults).
StatusOr<Graph> ImportOnnxFileWithDimsItHas(const std::string& path, ImportOptions options);
StatusOr<Graph> ImportOnnxBytes(std::string_view bytes, const ImportOptions& options = {});

// A model imported to run with its own weights: `graph` is exactly what ImportOnnxFile gives for
// the same file and options (same hash, so stored plans apply), `weights` what computes the values
// of its weights (graph/initializer_data.h). Fails naming the tensor when a weight's data is
// missing, stripped, outside the model's directory or of the wrong size.
struct ImportedModel {
  Graph graph;
  ModelWeights weights;
};
StatusOr<ImportedModel> ImportOnnxFileWithWeights(const std::string& path,
                                                  const ImportOptions& options = {});
// The same from a model's bytes (a model loaded from memory): its weights must be inside them, as
// there is no directory to find external data files in.
StatusOr<ImportedModel> ImportOnnxBytesWithWeights(std::string_view bytes,
                                                   const ImportOptions& options = {});

}  // namespace fusor
