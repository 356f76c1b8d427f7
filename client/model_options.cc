#include "client/model_options.h"

namespace fusor {

void ModelOptions::AddTo(CLI::App* cmd) {
  cmd->add_option("model", path, "ONNX model file")->required();
  cmd->add_option("--shape", shapes, "Bind a graph input's shape: NAME=DxDx... (repeatable)");
  cmd->add_option("--dim", dims, "Bind a symbolic dim: NAME=N, e.g. batch=8 (repeatable)");
  cmd->add_option("--max-nodes", max_nodes, "Refuse graphs with more nodes than this")
      ->capture_default_str();
  cmd->add_option("--max-tensor-elements", max_tensor_elements,
                  "Refuse graphs with a tensor larger than this")
      ->capture_default_str();
}

StatusOr<ImportOptions> ModelOptions::Parsed() const {
  ImportOptions options;
  for (const auto& s : shapes) FUSOR_RETURN_IF_ERROR(ParseShapeBinding(s, &options));
  for (const auto& d : dims) FUSOR_RETURN_IF_ERROR(ParseDimBinding(d, &options));
  options.limits.max_nodes = max_nodes;
  options.limits.max_tensor_elements = max_tensor_elements;
  return options;
}

StatusOr<Graph> ModelOptions::Import() const {
  FUSOR_ASSIGN_OR_RETURN(ImportOptions options, Parsed());
  return ImportOnnxFile(path, options);
}

StatusOr<ImportedModel> ModelOptions::ImportWithWeights() const {
  FUSOR_ASSIGN_OR_RETURN(ImportOptions options, Parsed());
  return ImportOnnxFileWithWeights(path, options);
}

}  // namespace fusor
