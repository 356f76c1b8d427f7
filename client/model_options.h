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
  std::vector<std::string> shapes;  // "input=1x3x224x224"
  std::vector<std::string> dims;    // "batch=8"
  int64_t max_nodes = ValidationLimits{}.max_nodes;
  int64_t max_tensor_elements = ValidationLimits{}.max_tensor_elements;

  // Adds MODEL (positional), --shape, --dim, --max-nodes and --max-tensor-elements to `cmd`.
  void AddTo(CLI::App* cmd);
  // Imports the model with the parsed options.
  StatusOr<Graph> Import() const;
  // Imports it with the data of its weights (graph/onnx_import.h, ImportOnnxFileWithWeights).
  StatusOr<ImportedModel> ImportWithWeights() const;

 private:
  StatusOr<ImportOptions> Parsed() const;
};

}  // namespace fusor
