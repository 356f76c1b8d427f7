#include "client/model_options.h"

#include <algorithm>

#include "graph/tensor_file.h"
#include "runtime/constant_evaluator.h"

namespace fusor {

void ModelOptions::AddTo(CLI::App* cmd) {
  cmd->add_option("model", path, "ONNX model file")->required();
  cmd->add_option("--shape", shapes, "Bind a graph input's shape: NAME=DxDx... (repeatable)");
  cmd->add_option("--dim", dims,
                  "Bind a symbolic dim: NAME=N, e.g. batch=8 (repeatable; `tune` takes "
                  "several values, batch=1,8,32, and tunes each binding)");
  cmd->add_option("--const-input", const_inputs,
                  "Fix a graph input's value at import: NAME=FILE (.pb or .npy), for inputs that "
                  "decide a shape, such as Reshape's shape or Resize's scales (repeatable)");
  cmd->add_option("--max-nodes", max_nodes, "Refuse graphs with more nodes than this")
      ->capture_default_str();
  cmd->add_option("--max-tensor-elements", max_tensor_elements,
                  "Refuse graphs with a tensor larger than this")
      ->capture_default_str();
}

StatusOr<std::vector<std::pair<std::string, ImportOptions>>> ModelOptions::Bindings() const {
  ImportOptions base = WithConstantFolding({});
  for (const auto& s : shapes) FUSOR_RETURN_IF_ERROR(ParseShapeBinding(s, &base));
  for (const auto& c : const_inputs) {
    const size_t eq = c.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == c.size()) {
      return Status::InvalidArgument("--const-input " + c + ": expected NAME=FILE (.pb or .npy)");
    }
    auto value = ReadTensorFile(c.substr(eq + 1));
    if (!value.ok()) return value.status().WithContext("--const-input " + c);
    base.constant_inputs[c.substr(0, eq)] = std::move(value).value();
  }
  base.limits.max_nodes = max_nodes;
  base.limits.max_tensor_elements = max_tensor_elements;
  std::vector<std::pair<std::string, ImportOptions>> out = {{"", base}};
  for (const auto& d : dims) {
    size_t eq = d.rfind('=');
    if (eq == std::string::npos) FUSOR_RETURN_IF_ERROR(ParseDimBinding(d, &base));  // Says why.
    std::string name = d.substr(0, eq), values = d.substr(eq + 1);
    std::vector<std::pair<std::string, ImportOptions>> next;
    for (size_t start = 0; start <= values.size();) {
      size_t comma = std::min(values.find(',', start), values.size());
      std::string one = name + "=" + values.substr(start, comma - start);
      for (const auto& [label, options] : out) {
        ImportOptions o = options;
        FUSOR_RETURN_IF_ERROR(ParseDimBinding(one, &o));
        next.push_back({label.empty() ? one : label + "," + one, o});
      }
      start = comma + 1;
    }
    out = std::move(next);
  }
  return out;
}

StatusOr<ImportOptions> ModelOptions::OneBinding() const {
  FUSOR_ASSIGN_OR_RETURN(auto bindings, Bindings());
  if (bindings.size() > 1) {
    return Status::InvalidArgument("--dim gives " + std::to_string(bindings.size()) +
                                   " bindings; only `fusor tune` takes several values per dim");
  }
  return bindings[0].second;
}

StatusOr<Graph> ModelOptions::Import() const {
  FUSOR_ASSIGN_OR_RETURN(ImportOptions options, OneBinding());
  return ImportOnnxFile(path, options);
}

StatusOr<std::vector<ModelOptions::Bound>> ModelOptions::ImportEach() const {
  FUSOR_ASSIGN_OR_RETURN(auto bindings, Bindings());
  std::vector<Bound> out;
  for (const auto& [label, options] : bindings) {
    auto g = ImportOnnxFile(path, options);
    if (!g.ok()) return label.empty() ? g.status() : g.status().WithContext(label);
    out.push_back({label, std::move(g).value()});
  }
  return out;
}

StatusOr<ImportedModel> ModelOptions::ImportWithWeights() const {
  FUSOR_ASSIGN_OR_RETURN(ImportOptions options, OneBinding());
  return ImportOnnxFileWithWeights(path, options);
}

}  // namespace fusor
