// Command-line options shared by every verb that reads a model: --shape, --dim and the limits.
// Owned by the CLI::App's subcommand for the life of the process.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/status.h"
#include "graph/onnx_import.h"

namespace fusor {

struct ModelOptions {
  std::string path;
  std::vector<std::string> shapes;        // "input=1x3x224x224"
  std::vector<std::string> dims;          // "batch=8", or "batch=1,8,32" for several bindings
  std::vector<std::string> const_inputs;  // "shape=shape.pb": a graph input fixed at import
  int64_t max_nodes = ValidationLimits{}.max_nodes;
  int64_t max_tensor_elements = ValidationLimits{}.max_tensor_elements;

  // Adds MODEL (positional), --shape, --dim, --const-input, --max-nodes and
  // --max-tensor-elements to `cmd`.
  void AddTo(CLI::App* cmd);
  // Imports the model with the parsed options; fails when --dim gives several values.
  StatusOr<Graph> Import() const;

  // One binding of the symbolic dims: its label ("batch=8,seq=128"; empty without --dim) and the
  // model imported with it. Each is its own graph, with its own hash.
  struct Bound {
    std::string label;
    Graph graph;
  };
  // The model imported once per combination of --dim values (`--dim batch=1,8 --dim seq=64,128`
  // gives four), in the order given.
  StatusOr<std::vector<Bound>> ImportEach() const;
  // Imports it with the data of its weights (graph/onnx_import.h, ImportOnnxFileWithWeights).
  StatusOr<ImportedModel> ImportWithWeights() const;

 private:
  // The import options of every combination of --dim values, with their labels.
  StatusOr<std::vector<std::pair<std::string, ImportOptions>>> Bindings() const;
  // The import options when the flags give one binding; InvalidArgument for several.
  StatusOr<ImportOptions> OneBinding() const;
};

}  // namespace fusor
