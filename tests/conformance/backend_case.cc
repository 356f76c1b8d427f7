#include "tests/conformance/backend_case.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "graph/narrow_float.h"
#include "graph/onnx_import.h"
#include "graph/plan.h"
#include "graph/tensor_file.h"
#include "runtime/constant_evaluator.h"
#include "runtime/executor.h"
#include "runtime/model_weights.h"
#include "runtime/reference.h"
#include "search/plan_search.h"

namespace fusor::conformance {
namespace {

namespace fs = std::filesystem;

// ONNX's backend test runner (onnx/backend/test/runner) compares with numpy's assert_allclose at
// these tolerances.
constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-5;

CaseOutcome Refused(std::string category, const Status& s) {
  return {Verdict::kRefused, std::move(category), s.ToString()};
}

CaseOutcome Wrong(std::string category, std::string detail) {
  return {Verdict::kWrong, std::move(category), std::move(detail)};
}

std::string Flat(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  }
  return s;
}

// ONNX's TensorProto::DataType names, by number.
std::string OnnxTypeName(int type) {
  static const char* kNames[] = {"undefined",  "float32", "uint8",  "int8",   "uint16",
                                 "int16",      "int32",   "int64",  "string", "bool",
                                 "float16",    "float64", "uint32", "uint64", "complex64",
                                 "complex128", "bfloat16"};
  return type >= 0 && type <= 16 ? kNames[type] : "onnx-" + std::to_string(type);
}

// A short category for a refusal, stable across rewordings of the message's details: what kind
// of thing is unsupported and which.
std::string RefusalCategory(const Status& s) {
  const std::string& m = s.message();
  std::smatch match;
  if (std::regex_search(m, match,
                        std::regex("model uses opset (\\d+)(?:,| and its (?:op |node '[^']*' \\())?"
                                   "([A-Za-z0-9_]*)"))) {
    return "opset " + match[1].str() + (match[2].length() > 0 ? " op " + match[2].str() : "");
  }
  if (m.find("imports no opset for the default ONNX domain") != std::string::npos) {
    return "no default-domain opset";
  }
  if (std::regex_search(m, match, std::regex("has ONNX element type (\\d+)"))) {
    return "dtype " + OnnxTypeName(std::stoi(match[1].str()));
  }
  if (std::regex_search(m, match,
                        std::regex("dtype (float16|bfloat16|float64|uint16|uint32|"
                                   "uint64|string)"))) {
    return "dtype " + match[1].str();
  }
  if (m.find("has no nodes") != std::string::npos) return "no nodes";
  if (m.find("could not be inferred") != std::string::npos ||
      m.find("has no shape") != std::string::npos) {
    return "not a tensor";
  }
  if (std::regex_search(m, match, std::regex("node '[^']*' \\(([A-Za-z0-9_]+)\\)"))) {
    return (s.code() == Status::Code::kUnimplemented ? "op " : "node ") + match[1].str();
  }
  return "other";
}

bool Close(double want, double got) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return want == got;
  return std::abs(got - want) <= kAtol + kRtol * std::abs(want);
}

// Empty when `got` matches `want`; otherwise what differs.
std::string Mismatch(const TensorData& want, const HostTensor& got) {
  if (want.dims != got.dims) {
    return "dims " + ShapeString(got.dims) + ", expected " + ShapeString(want.dims);
  }
  for (int64_t e = 0; e < want.num_elements(); ++e) {
    double w = want.is_float() ? want.f[e] : static_cast<double>(want.i[e]);
    if (!Close(w, got.at(e))) {
      return "element " + std::to_string(e) + " is " + std::to_string(got.at(e)) + ", expected " +
             std::to_string(w);
    }
  }
  return "";
}

// ONNX's test data stores a bfloat16 tensor as uint16 bit patterns (NumPy has no bfloat16):
// such a file, for a tensor the model declares bfloat16, is read as the values those bits encode.
TensorData AsDeclared(const TensorData& file, DType declared) {
  if (declared != DType::kBFloat16 || file.dtype != DType::kUInt16) return file;
  TensorData t = file;
  t.dtype = DType::kBFloat16;
  t.f.clear();
  for (int64_t bits : file.i) t.f.push_back(BFloat16ToFloat(static_cast<uint16_t>(bits)));
  t.i.clear();
  return t;
}

// Empty when every output matches.
std::string OutputsMismatch(const Graph& g, const std::vector<TensorData>& want,
                            const TensorValues& got) {
  if (g.outputs().size() != want.size()) {
    return std::to_string(g.outputs().size()) + " outputs, expected " + std::to_string(want.size());
  }
  for (size_t k = 0; k < want.size(); ++k) {
    auto it = got.find(g.outputs()[k]);
    if (it == got.end()) return "output " + std::to_string(k) + " missing";
    std::string why = Mismatch(AsDeclared(want[k], g.tensor(g.outputs()[k]).dtype), it->second);
    if (!why.empty()) return "output " + std::to_string(k) + ": " + why;
  }
  return "";
}

// The names of the model's graph inputs that are not initializers, in file order: input_K.pb
// is the K-th of them.
StatusOr<std::vector<std::string>> ModelInputNames(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::ModelProto model;
  if (!in || !model.ParseFromIstream(&in)) return Status::IOError("cannot parse " + path);
  std::unordered_set<std::string> inits;
  for (const auto& t : model.graph().initializer()) inits.insert(t.name());
  std::vector<std::string> names;
  for (const auto& v : model.graph().input()) {
    if (!inits.count(v.name())) names.push_back(v.name());
  }
  return names;
}

// The tensors of files `prefix`_0.pb, _1.pb, ... in `dir`, named after the model's inputs when
// `names` is given.
StatusOr<std::vector<TensorData>> ReadNumbered(const fs::path& dir, const std::string& prefix,
                                               const std::vector<std::string>* names) {
  std::vector<TensorData> out;
  for (size_t k = 0;; ++k) {
    fs::path p = dir / (prefix + "_" + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    FUSOR_ASSIGN_OR_RETURN(TensorData t, ReadTensorFile(p.string()));
    if (names != nullptr && k < names->size()) t.name = (*names)[k];
    out.push_back(std::move(t));
  }
  return out;
}

struct CaseData {
  std::vector<TensorData> inputs, outputs;
};

StatusOr<CaseData> ReadCaseData(const std::string& dir) {
  FUSOR_ASSIGN_OR_RETURN(std::vector<std::string> names, ModelInputNames(dir + "/model.onnx"));
  fs::path data = fs::path(dir) / "test_data_set_0";
  CaseData d;
  FUSOR_ASSIGN_OR_RETURN(d.inputs, ReadNumbered(data, "input", &names));
  FUSOR_ASSIGN_OR_RETURN(d.outputs, ReadNumbered(data, "output", nullptr));
  return d;
}

// The case's input that an error says to fix at import ("--const-input NAME=FILE": an input
// that decides a shape or an op's parameter), or null.
const TensorData* InputToFix(const std::string& message, const CaseData& data) {
  std::smatch m;
  static const std::regex kWhich("--const-input ([^ =]+)=FILE");
  if (!std::regex_search(message, m, kWhich)) return nullptr;
  for (const TensorData& t : data.inputs) {
    if (t.name == m[1].str()) return &t;
  }
  return nullptr;
}

StatusOr<ImportedModel> Import(const std::string& dir, const CaseData* data,
                               const std::map<std::string, TensorData>& fixed) {
  ImportOptions options = WithConstantFolding({});
  if (data != nullptr) {
    for (const TensorData& t : data->inputs) {
      if (!fixed.count(t.name)) options.input_shapes[t.name] = t.dims;
    }
  }
  options.constant_inputs = fixed;
  return ImportOnnxFileWithWeights(dir + "/model.onnx", options);
}

StatusOr<TensorValues> Leaves(const Graph& g, ModelWeights weights, const CaseData& data) {
  FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, ModelLeafValues(g, std::move(weights), 1));
  for (const TensorData& t : data.inputs) {
    std::optional<TensorId> id = g.FindTensor(t.name);
    if (!id || g.tensor(*id).kind != TensorKind::kGraphInput) continue;  // Unread: dropped.
    FUSOR_RETURN_IF_ERROR(SetInputValue(g, t.name, AsDeclared(t, g.tensor(*id).dtype), &leaves));
  }
  return leaves;
}

// Runs `plan` on the executor: the outputs, or the refusal / error.
StatusOr<TensorValues> RunPlan(const Graph& g, const FusionPlan& plan, const TensorValues& leaves) {
  ExecutorOptions options;
  options.memory_budget_bytes = int64_t{1} << 30;
  FUSOR_ASSIGN_OR_RETURN(auto exec, Executor::Create(g, plan, leaves, options));
  exec->Run();
  return exec->ReadOutputs();
}

// One run of the case with the inputs in `fixed` fixed at import.
CaseOutcome RunWithFixedInputs(const std::string& dir, const StatusOr<CaseData>& data,
                               const std::map<std::string, TensorData>& fixed) {
  StatusOr<ImportedModel> model = Import(dir, data.ok() ? &*data : nullptr, fixed);
  if (!model.ok()) return Refused(RefusalCategory(model.status()), model.status());
  if (!data.ok()) return Refused(RefusalCategory(data.status()), data.status());
  Graph& g = model->graph;
  StatusOr<TensorValues> leaves = Leaves(g, std::move(model->weights), *data);
  if (!leaves.ok()) return Refused(RefusalCategory(leaves.status()), leaves.status());
  StatusOr<TensorValues> want = RunReference(g, *leaves);
  if (!want.ok()) return Refused(RefusalCategory(want.status()), want.status());
  if (std::string why = OutputsMismatch(g, data->outputs, *want); !why.empty()) {
    return Wrong("reference", why);
  }
  const std::pair<const char*, FusionPlan> plans[] = {{"unfused", UnfusedPlan(g)},
                                                      {"rules", RulesPlan(g, 64)}};
  for (const auto& [name, plan] : plans) {
    StatusOr<TensorValues> got = RunPlan(g, plan, *leaves);
    if (!got.ok()) return Refused(RefusalCategory(got.status()), got.status());
    if (std::string why = OutputsMismatch(g, data->outputs, *got); !why.empty()) {
      return Wrong(name, why);
    }
  }
  return {Verdict::kPass, "", ""};
}

}  // namespace

// As a user of `fusor run` would: when an error says to fix an input at import with
// --const-input, the case runs again with that input fixed to its value.
CaseOutcome RunBackendCase(const std::string& dir) {
  const StatusOr<CaseData> data = ReadCaseData(dir);
  std::map<std::string, TensorData> fixed;
  for (;;) {
    CaseOutcome o = RunWithFixedInputs(dir, data, fixed);
    const TensorData* fix =
        o.verdict != Verdict::kRefused || !data.ok() ? nullptr : InputToFix(o.detail, *data);
    if (fix == nullptr || fixed.count(fix->name)) return o;
    fixed[fix->name] = *fix;
  }
}

StatusOr<LoadedCase> LoadBackendCase(const std::string& dir) {
  FUSOR_ASSIGN_OR_RETURN(CaseData data, ReadCaseData(dir));
  std::map<std::string, TensorData> fixed;
  StatusOr<ImportedModel> model = Import(dir, &data, fixed);
  // As RunBackendCase does: an input the import says to fix is fixed to its value.
  for (const TensorData* fix = nullptr;
       !model.ok() && (fix = InputToFix(model.status().message(), data)) != nullptr &&
       !fixed.count(fix->name);) {
    fixed[fix->name] = *fix;
    model = Import(dir, &data, fixed);
  }
  if (!model.ok()) return model.status();
  LoadedCase loaded;
  FUSOR_ASSIGN_OR_RETURN(loaded.leaves, Leaves(model->graph, std::move(model->weights), data));
  loaded.graph = std::move(model->graph);
  return loaded;
}

std::string OutcomeText(const CaseOutcome& o) {
  static const char* kVerdicts[] = {"pass", "refused", "wrong", "crash"};
  std::string text = kVerdicts[static_cast<int>(o.verdict)];
  if (!o.category.empty()) text += " " + Flat(o.category);
  return text;
}

}  // namespace fusor::conformance
