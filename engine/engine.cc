#include "engine/engine.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "engine/plan_source.h"
#include "engine/tensor_copy.h"
#include "graph/onnx_import.h"
#include "graph/plan.h"
#include "runtime/constant_evaluator.h"
#include "runtime/executor.h"
#include "runtime/host_tensor.h"
#include "runtime/model_weights.h"

namespace fusor {

// What every context of one model is made from, and the idle contexts Run takes turns on.
struct Engine::State {
  Graph graph;
  FusionPlan plan;
  TensorValues leaves;
  ExecutorOptions executor;  // With the first context's backend choices pinned.
  std::string plan_source;
  int max_contexts = 1;
  bool bind_caller = true;

  std::mutex mu;
  std::condition_variable idle_or_room;
  std::vector<std::unique_ptr<Executor>> idle;  // Guarded by mu.
  int contexts = 0;                             // Guarded by mu: idle plus running.

  StatusOr<std::unique_ptr<Executor>> NewContext(
      std::unordered_map<TensorId, void*> caller_buffers = {}) const {
    ExecutorOptions eo = executor;
    eo.caller_buffers = std::move(caller_buffers);
    return Executor::Create(graph, plan, leaves, eo);
  }
  StatusOr<std::unique_ptr<Executor>> Acquire();
  void Release(std::unique_ptr<Executor> context);
};

struct IoBinding::State {
  // One tensor the binding moves between the caller's memory and the arena at each run.
  struct Copied {
    TensorId id;
    DType dtype;
    void* data;
    int64_t elements;
  };
  const Engine::State* engine = nullptr;
  std::mutex mu;                   // Serialises runs of the one bound context.
  std::unique_ptr<Executor> exec;  // Guarded by mu.
  std::vector<Copied> copy_in, copy_out;
  int64_t copied_bytes = 0;  // Guarded by mu.
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

// Compiles the first context, whose backend choices every later one takes.
StatusOr<std::unique_ptr<Engine::State>> Compile(ImportedModel m, const EngineOptions& options) {
  if (options.max_concurrent_runs < 1) {
    return Status::InvalidArgument("max_concurrent_runs is " +
                                   std::to_string(options.max_concurrent_runs) +
                                   "; it must be at least 1");
  }
  auto state = std::make_unique<Engine::State>();
  state->graph = std::move(m.graph);
  FUSOR_ASSIGN_OR_RETURN(state->leaves, ModelLeafValues(state->graph, std::move(m.weights), 1));
  FUSOR_ASSIGN_OR_RETURN(SourcedPlan plan, ChoosePlan(state->graph, options));
  state->plan = std::move(plan.plan);
  state->plan_source = std::move(plan.source);
  state->executor.threads = options.threads;
  state->max_contexts = options.max_concurrent_runs;
  state->bind_caller = options.bind_caller_thread;
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<Executor> first, state->NewContext());
  state->executor.pinned_alternatives = first->alternatives();
  state->idle.push_back(std::move(first));
  state->contexts = 1;
  return state;
}

// The import `fusor tune` does (nodes over constants folded by the reference interpreter), so
// the graph and its hash are the ones plans are stored under.
ImportOptions EngineImport(const EngineOptions& options) {
  ImportOptions io;
  io.dims = options.dims;
  return WithConstantFolding(io);
}

// The graph input (or output) `view` names, checked against it: dims, a dtype of its kind, and
// the size of the caller's memory.
StatusOr<TensorId> Match(const Graph& g, const TensorView& view, bool input) {
  const std::vector<TensorId>& ids = input ? g.inputs() : g.outputs();
  const char* what = input ? "input" : "output";
  auto it = std::find_if(ids.begin(), ids.end(),
                         [&](TensorId t) { return g.tensor(t).name == view.name; });
  if (it == ids.end()) {
    std::string names;
    for (TensorId t : ids) names += (names.empty() ? "'" : ", '") + g.tensor(t).name + "'";
    return Status::InvalidArgument("'" + std::string(view.name) + "' is not an " + what +
                                   " of the model (its " + what + "s: " + names + ")");
  }
  const Tensor& t = g.tensor(*it);
  const Shape dims(view.dims.begin(), view.dims.end());
  const bool kind_matches = IsFloatingPoint(view.dtype) == IsFloatingPoint(t.dtype) &&
                            IsSupportedDType(view.dtype) && view.dtype != DType::kString;
  if (dims != t.dims || !kind_matches) {
    return Status::InvalidArgument(
        std::string(what) + " '" + t.name + "' needs " + std::string(DTypeName(t.dtype)) + "[" +
        ShapeString(t.dims) + "] (or another " +
        (IsFloatingPoint(t.dtype) ? "floating-point" : "integer") + " type), got " +
        std::string(DTypeName(view.dtype)) + "[" + ShapeString(dims) + "]");
  }
  const int64_t need = NumElements(dims) * DTypeSize(view.dtype);
  if (!view.data || static_cast<int64_t>(view.bytes) != need) {
    return Status::InvalidArgument(
        std::string(what) + " '" + t.name + "' is given " + std::to_string(view.bytes) + " bytes" +
        (view.data ? "" : " at a null pointer") + "; " + std::string(DTypeName(view.dtype)) + "[" +
        ShapeString(dims) + "] needs " + std::to_string(need));
  }
  return *it;
}

// Each view's graph input (or output), none twice.
StatusOr<std::vector<TensorId>> MatchEach(const Graph& g, std::span<const TensorView> views,
                                          bool input) {
  std::vector<TensorId> ids;
  for (const TensorView& v : views) {
    FUSOR_ASSIGN_OR_RETURN(TensorId t, Match(g, v, input));
    if (std::find(ids.begin(), ids.end(), t) != ids.end()) {
      return Status::InvalidArgument(std::string(input ? "input '" : "output '") +
                                     std::string(v.name) + "' is given twice");
    }
    ids.push_back(t);
  }
  return ids;
}

// Every graph input, each once, matched to its view.
StatusOr<std::vector<TensorId>> MatchInputs(const Graph& g, std::span<const TensorView> inputs) {
  FUSOR_ASSIGN_OR_RETURN(std::vector<TensorId> ids, MatchEach(g, inputs, true));
  for (TensorId t : g.inputs()) {
    if (std::find(ids.begin(), ids.end(), t) == ids.end()) {
      return Status::InvalidArgument("input '" + g.tensor(t).name + "' is not given");
    }
  }
  return ids;
}

// A stored value of `t` converted into the caller's `dtype` at `data`.
Status ReadConverted(const Executor& exec, const Graph& g, TensorId t, DType dtype, void* data) {
  const int64_t n = NumElements(g.tensor(t).dims);
  if (dtype == StorageDType(dtype)) return exec.ReadInto(t, data);
  std::vector<int64_t> stored(static_cast<size_t>(n));  // 8 bytes an element holds either type.
  FUSOR_RETURN_IF_ERROR(exec.ReadInto(t, stored.data()));
  FromStorage(dtype, stored.data(), n, data);
  return Status::Ok();
}

Status RunContext(Executor* exec, const RunOptions& run, bool bind_caller, const Graph& g) {
  RunControl control;
  control.threads = run.threads;
  control.cancel = run.cancel;
  control.bind_caller = bind_caller;
  if (!exec->Run(control)) {
    return Status::Cancelled("run of model '" + g.model_name +
                             "' stopped between groups: its run options' cancel flag is set");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Executor>> Engine::State::Acquire() {
  std::unique_lock<std::mutex> lock(mu);
  idle_or_room.wait(lock, [this] { return !idle.empty() || contexts < max_contexts; });
  if (!idle.empty()) {
    std::unique_ptr<Executor> context = std::move(idle.back());
    idle.pop_back();
    return context;
  }
  ++contexts;
  lock.unlock();
  auto context = NewContext();
  if (!context.ok()) {
    lock.lock();
    --contexts;
    idle_or_room.notify_one();
  }
  return context;
}

void Engine::State::Release(std::unique_ptr<Executor> context) {
  std::lock_guard<std::mutex> lock(mu);
  idle.push_back(std::move(context));
  idle_or_room.notify_one();
}

Engine::Engine(std::unique_ptr<State> state) : state_(std::move(state)) {}
Engine::~Engine() = default;

StatusOr<std::unique_ptr<Engine>> Engine::Load(const std::string& model_path,
                                               const EngineOptions& options) {
  FUSOR_ASSIGN_OR_RETURN(ImportedModel m,
                         ImportOnnxFileWithWeights(model_path, EngineImport(options)));
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<State> state, Compile(std::move(m), options));
  return std::unique_ptr<Engine>(new Engine(std::move(state)));
}

StatusOr<std::unique_ptr<Engine>> Engine::LoadFromBuffer(std::string_view model_bytes,
                                                         const EngineOptions& options) {
  auto m = ImportOnnxBytesWithWeights(model_bytes, EngineImport(options));
  if (!m.ok()) return m.status().WithContext("model buffer");
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<State> state, Compile(std::move(*m), options));
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

std::vector<DType> Engine::input_dtypes() const {
  std::vector<DType> out;
  for (TensorId t : state_->graph.inputs()) out.push_back(state_->graph.tensor(t).dtype);
  return out;
}

std::vector<DType> Engine::output_dtypes() const {
  std::vector<DType> out;
  for (TensorId t : state_->graph.outputs()) out.push_back(state_->graph.tensor(t).dtype);
  return out;
}

StatusOr<std::vector<EngineTensor>> Engine::Run(const std::vector<EngineTensor>& inputs) {
  std::vector<TensorView> in;
  for (const EngineTensor& t : inputs) {
    // The kind follows the values given; Run checks it against the model's.
    const bool ints = t.floats.empty() && !t.ints.empty();
    void* data = ints ? static_cast<void*>(const_cast<int64_t*>(t.ints.data()))
                      : const_cast<float*>(t.floats.data());
    size_t bytes = ints ? t.ints.size() * sizeof(int64_t) : t.floats.size() * sizeof(float);
    in.push_back({t.name, ints ? DType::kInt64 : DType::kFloat32, t.dims, data, bytes});
  }
  std::vector<EngineTensor> out = outputs();
  const std::vector<DType> dtypes = output_dtypes();
  std::vector<TensorView> views;
  for (size_t o = 0; o < out.size(); ++o) {
    EngineTensor& t = out[o];
    const bool is_float = IsFloatingPoint(dtypes[o]);
    const size_t n = static_cast<size_t>(NumElements(t.dims));
    void* data = is_float ? (t.floats.resize(n), static_cast<void*>(t.floats.data()))
                          : (t.ints.resize(n), static_cast<void*>(t.ints.data()));
    views.push_back({t.name, is_float ? DType::kFloat32 : DType::kInt64, t.dims, data,
                     n * (is_float ? sizeof(float) : sizeof(int64_t))});
  }
  FUSOR_RETURN_IF_ERROR(Run(in, views));
  return out;
}

Status Engine::Run(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
                   const RunOptions& run) {
  const Graph& g = state_->graph;
  FUSOR_ASSIGN_OR_RETURN(std::vector<TensorId> in, MatchInputs(g, inputs));
  FUSOR_ASSIGN_OR_RETURN(std::vector<TensorId> out, MatchEach(g, outputs, false));
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec, state_->Acquire());
  // The context goes back to the idle list on every path out.
  struct Return {
    State* state;
    std::unique_ptr<Executor>* exec;
    ~Return() { state->Release(std::move(*exec)); }
  } give_back{state_.get(), &exec};
  for (size_t i = 0; i < in.size(); ++i) {
    ToStorage(inputs[i].dtype, inputs[i].data, NumElements(g.tensor(in[i]).dims),
              exec->InputBuffer(in[i]));
  }
  FUSOR_RETURN_IF_ERROR(RunContext(exec.get(), run, state_->bind_caller, g));
  for (size_t i = 0; i < out.size(); ++i) {
    FUSOR_RETURN_IF_ERROR(ReadConverted(*exec, g, out[i], outputs[i].dtype, outputs[i].data));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<IoBinding>> Engine::Bind(std::span<const TensorView> inputs,
                                                  std::span<const TensorView> outputs) {
  const Graph& g = state_->graph;
  FUSOR_ASSIGN_OR_RETURN(std::vector<TensorId> in, MatchInputs(g, inputs));
  FUSOR_ASSIGN_OR_RETURN(std::vector<TensorId> out, MatchEach(g, outputs, false));
  std::unordered_map<TensorId, void*> caller;
  for (size_t i = 0; i < in.size(); ++i) {
    if (inputs[i].dtype == StorageDType(inputs[i].dtype)) caller[in[i]] = inputs[i].data;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    // A graph input that is also an output stays the caller's input; the output gets a copy.
    const bool is_input = g.tensor(out[i]).kind == TensorKind::kGraphInput;
    if (outputs[i].dtype == StorageDType(outputs[i].dtype) && !is_input) {
      caller[out[i]] = outputs[i].data;
    }
  }
  auto state = std::make_unique<IoBinding::State>();
  state->engine = state_.get();
  FUSOR_ASSIGN_OR_RETURN(state->exec, state_->NewContext(std::move(caller)));
  for (size_t i = 0; i < in.size(); ++i) {
    if (state->exec->InCallerMemory(in[i])) continue;
    state->copy_in.push_back(
        {in[i], inputs[i].dtype, inputs[i].data, NumElements(g.tensor(in[i]).dims)});
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (state->exec->InCallerMemory(out[i])) continue;
    state->copy_out.push_back(
        {out[i], outputs[i].dtype, outputs[i].data, NumElements(g.tensor(out[i]).dims)});
  }
  return std::make_unique<IoBinding>(std::move(state));
}

IoBinding::IoBinding(std::unique_ptr<State> state) : state_(std::move(state)) {}
IoBinding::~IoBinding() = default;

Status IoBinding::Run(const RunOptions& run) {
  std::lock_guard<std::mutex> lock(state_->mu);
  const Graph& g = state_->engine->graph;
  Executor& exec = *state_->exec;
  state_->copied_bytes = 0;
  for (const State::Copied& c : state_->copy_in) {
    ToStorage(c.dtype, c.data, c.elements, exec.InputBuffer(c.id));
    state_->copied_bytes += c.elements * DTypeSize(c.dtype);
  }
  FUSOR_RETURN_IF_ERROR(RunContext(&exec, run, state_->engine->bind_caller, g));
  for (const State::Copied& c : state_->copy_out) {
    FUSOR_RETURN_IF_ERROR(ReadConverted(exec, g, c.id, c.dtype, c.data));
    state_->copied_bytes += c.elements * DTypeSize(c.dtype);
  }
  return Status::Ok();
}

int64_t IoBinding::copied_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->copied_bytes;
}

}  // namespace fusor
