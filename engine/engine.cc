#include "fusor/engine.h"

#include <mutex>
#include <optional>

#include "base/input_file.h"
#include "costmodel/hardware_profile.h"
#include "db/sqlite_plan_store.h"
#include "graph/canonical.h"
#include "graph/onnx_import.h"
#include "graph/plan.h"
#include "graph/plan_json.h"
#include "runtime/constant_evaluator.h"
#include "runtime/executor.h"
#include "runtime/model_weights.h"
#include "runtime/onednn_info.h"
#include "search/plan_search.h"

namespace fusor {

struct Engine::State {
  Graph graph;
  std::string plan_source;
  std::mutex mu;                   // Serialises runs of the one executor.
  std::unique_ptr<Executor> exec;  // Guarded by mu.
};

namespace {

StatusOr<FusionPlan> PlanFromFile(const Graph& g, const std::string& path) {
  FUSOR_ASSIGN_OR_RETURN(std::string text, ReadInputFile(path, "plan file", kMaxPlanFileBytes));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("'" + path + "' is not valid JSON");
  return PlanFromJson(g, j);
}

// The best current plan for g's graph hash on the target from the database at path (a tuning
// database or a snapshot, opened read-only); nullopt with *reason when it holds none. A database
// that cannot be read, or a stored plan that does not fit the graph of its own hash, is an error.
StatusOr<std::optional<FusionPlan>> PlanFromDatabase(const Graph& g, const EngineOptions& options,
                                                     std::string* source, std::string* reason) {
  const std::string& path = options.plan_database_path;
  std::string target = options.target_id;
  if (target.empty()) {
    FUSOR_ASSIGN_OR_RETURN(TargetFingerprint local, DetectTarget(OneDnnIsa(), OneDnnVersion()));
    target = local.Id();
  }
  auto store = db::SqlitePlanStore::Open(path, {.read_only = true});
  if (!store.ok()) {
    return store.status().WithContext("plan database '" + path + "'");
  }
  const std::string hash = CanonicalHash(g);
  auto best = (*store)->BestPlan(hash, target, kCostModelVersion);
  if (!best.ok()) {
    if (best.status().code() != Status::Code::kNotFound) return best.status();
    *reason = "no current plan in '" + path + "' for graph " + hash.substr(0, 16) + " on target " +
              target + " (tune it there: fusor tune MODEL)";
    return std::optional<FusionPlan>();
  }
  auto plan = PlanFromProto(g, best->plan);
  if (!plan.ok()) {
    return Status::Corruption("plan database '" + path + "': the plan for graph " +
                              hash.substr(0, 16) +
                              " does not fit that graph: " + plan.status().message());
  }
  *source = "tuning database " + path + ", target " + target + " (" +
            std::to_string(plan->groups.size()) + " groups)";
  return std::optional<FusionPlan>(*std::move(plan));
}

// The plan to compile and where it came from: the plan JSON, else the database's plan, else the
// rules plan with the reason the others did not apply.
StatusOr<FusionPlan> ChoosePlan(const Graph& g, const EngineOptions& options, std::string* source) {
  std::string reason = "no plan JSON or plan database given";
  if (!options.plan_json_path.empty()) {
    auto plan = PlanFromFile(g, options.plan_json_path);
    if (plan.ok()) {
      *source = "plan JSON " + options.plan_json_path + " (" + std::to_string(plan->groups.size()) +
                " groups)";
      return *std::move(plan);
    }
    reason = plan.status().message();
  } else if (!options.plan_database_path.empty()) {
    FUSOR_ASSIGN_OR_RETURN(std::optional<FusionPlan> plan,
                           PlanFromDatabase(g, options, source, &reason));
    if (plan) return *std::move(plan);
  }
  FusionPlan rules = RulesPlan(g, SearchOptions{}.max_group_nodes);
  *source = "rules plan (" + std::to_string(rules.groups.size()) + " groups): " + reason;
  return rules;
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
  FUSOR_ASSIGN_OR_RETURN(FusionPlan plan, ChoosePlan(g, options, &state->plan_source));
  ExecutorOptions eo;
  eo.threads = options.threads;
  FUSOR_ASSIGN_OR_RETURN(state->exec, Executor::Create(g, plan, leaves, eo));
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
