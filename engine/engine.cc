#include "fusor/engine.h"

#include <mutex>
#include <optional>

#include "engine/plan_source.h"
#include "graph/onnx_import.h"
#include "graph/plan.h"
#include "runtime/constant_evaluator.h"
#include "runtime/executor.h"
#include "runtime/model_weights.h"

namespace fusor {

struct Engine::State {
  Graph graph;
  std::string plan_source;
  std::mutex mu;                   // Serialises runs of the one executor.
  std::unique_ptr<Executor> exec;  // Guarded by mu.
};

namespace {

// The plan to compile and where it came from: the plan JSON, else the database's plan, else the
// rules plan with the reason the others did not apply. A plan JSON that does not apply (another
// graph's, another target's, illegal) is named in that reason, not run.
StatusOr<SourcedPlan> ChoosePlan(const Graph& g, const EngineOptions& options) {
  if (options.plan_json_path.empty() && options.plan_database_path.empty()) {
    return RulesPlanBecause(g, "no plan JSON or plan database given");
  }
  FUSOR_ASSIGN_OR_RETURN(std::string target, PlanTargetId(options.target_id));
  if (!options.plan_json_path.empty()) {
    auto plan = PlanFromJsonFile(g, options.plan_json_path, target);
    if (!plan.ok()) return RulesPlanBecause(g, plan.status().message());
    if (!plan->warning.empty()) plan->source += "; warning: " + plan->warning;
    return plan;
  }
  std::string reason;
  FUSOR_ASSIGN_OR_RETURN(std::optional<SourcedPlan> plan,
                         PlanFromDatabase(g, options.plan_database_path, target, &reason));
  if (plan) return *std::move(plan);
  return RulesPlanBecause(g, reason);
}

EngineTensor Describe(const Tensor& t) {
  EngineTensor e;
  e.name = t.name;
  e.dtype = DTypeName(t.dtype);
  e.dims = t.dims;
  return e;
}

}  // namespace

Engine::Engine(std::unique_ptr<State> state) : state_(std::move(state)) {}
Engine::~Engine() = default;

StatusOr<std::unique_ptr<Engine>> Engine::Load(const std::string& model_path,
                                               const EngineOptions& options) {
  // The import `fusor tune` does (nodes over constants folded by the reference interpreter), so
  // the graph and its hash are the ones plans are stored under.
  ImportOptions io;
  io.dims = options.dims;
  FUSOR_ASSIGN_OR_RETURN(ImportedModel m,
                         ImportOnnxFileWithWeights(model_path, WithConstantFolding(io)));
  auto state = std::make_unique<State>();
  state->graph = std::move(m.graph);
  const Graph& g = state->graph;
  FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, ModelLeafValues(g, std::move(m.weights), 1));
  FUSOR_ASSIGN_OR_RETURN(SourcedPlan plan, ChoosePlan(g, options));
  state->plan_source = std::move(plan.source);
  ExecutorOptions eo;
  eo.threads = options.threads;
  FUSOR_ASSIGN_OR_RETURN(state->exec, Executor::Create(g, plan.plan, leaves, eo));
  return std::unique_ptr<Engine>(new Engine(std::move(state)));
}

const std::string& Engine::plan_source() const { return state_->plan_source; }

std::vector<EngineTensor> Engine::inputs() const {
  std::vector<EngineTensor> out;
  for (TensorId t : state_->graph.inputs()) out.push_back(Describe(state_->graph.tensor(t)));
  return out;
}

std::vector<EngineTensor> Engine::outputs() const {
  std::vector<EngineTensor> out;
  for (TensorId t : state_->graph.outputs()) out.push_back(Describe(state_->graph.tensor(t)));
  return out;
}

StatusOr<std::vector<EngineTensor>> Engine::Run(const std::vector<EngineTensor>& inputs) {
  const Graph& g = state_->graph;
  TensorValues given;
  for (const EngineTensor& in : inputs) {
    // The kind follows the values given; SetInputValue checks it against the model's.
    DType kind = in.floats.empty() && !in.ints.empty() ? DType::kInt64 : DType::kFloat32;
    TensorData d{in.name, kind, in.dims, in.floats, in.ints};
    FUSOR_RETURN_IF_ERROR(SetInputValue(g, in.name, std::move(d), &given));
  }
  for (TensorId t : g.inputs()) {
    if (!given.count(t)) {
      return Status::InvalidArgument("input '" + g.tensor(t).name + "' is not given");
    }
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  for (auto& [t, value] : given) FUSOR_RETURN_IF_ERROR(state_->exec->SetInput(t, value));
  state_->exec->Run();
  std::vector<EngineTensor> out;
  for (TensorId t : g.outputs()) {
    FUSOR_ASSIGN_OR_RETURN(HostTensor value, state_->exec->Read(t));
    out.push_back({g.tensor(t).name, std::string(DTypeName(value.dtype)), value.dims,
                   std::move(value.f), std::move(value.i)});
  }
  return out;
}

}  // namespace fusor
