// The embeddable inference engine: what a deployment links to run a model with its own weights
// under a tuned fusion plan. Load() imports the model and its weights (initializer data or
// external data files next to it; LoadFromBuffer takes the model's bytes, with its weights inside
// them), takes the plan from a plan JSON (`fusor tune --save-plan`) or from a tuning database or
// deployment snapshot (`fusor db export`) by the model's graph hash and this CPU's target, falling
// back to the rules plan with the reason when none applies, and compiles it once (oneDNN
// primitives, fused loops, one memory arena). Run() then runs it as often as the caller likes.
//
// This is the in-tree C++ API (the Python binding, tests); applications use the stable C API over
// it (include/fusor/fusor_c_api.h) or its header-only C++ wrapper (fusor_cxx_api.h).
//
// Ownership: an Engine owns its graph, weights, plan and contexts; the model file or buffer may go
// away after Load. A context is one compiled executor with its arena (and its own copy of the
// prepacked weights); Run takes an idle one for the call, so runs of one Engine from many threads
// proceed at once, up to EngineOptions::max_concurrent_runs contexts (more callers wait for one).
// An IoBinding is a context of its own bound to the caller's input and output memory: its Run
// copies nothing, and it runs on one thread at a time (a mutex). Every context computes the same
// values (the backend choices of the first are pinned for all). Errors are fusor::Status values
// naming what is wrong.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "graph/dtype.h"

namespace fusor {

// A dense row-major tensor: float32 values in `floats`, or integer / bool values in `ints`.
struct EngineTensor {
  std::string name;
  std::string dtype;  // "float32", "int64", ...: the model's type; floats or ints by its kind.
  std::vector<int64_t> dims;
  std::vector<float> floats;
  std::vector<int64_t> ints;
};

// A tensor in the caller's memory: `bytes` bytes at `data`, row-major, of `dtype` (any type of the
// tensor's kind: floating point for a floating-point tensor, integer or bool for an integer one).
// float32 and int64 (the runtime's storage types) are used in place; other types convert.
struct TensorView {
  std::string_view name;
  DType dtype = DType::kFloat32;
  std::span<const int64_t> dims;
  void* data = nullptr;
  size_t bytes = 0;
};

struct EngineOptions {
  // Where the plan comes from, first match wins: a plan JSON for this model (`fusor tune MODEL
  // --save-plan PLAN.json`); else the best current plan in a tuning database or a deployment
  // snapshot (`fusor db export`; a SQLite file or postgresql://...), opened read-only, for the
  // model's graph hash on `target_id`; else the rules plan. Plans for another graph or CPU, or
  // scored by another cost model, are never used.
  std::string plan_json_path;
  std::string plan_database_path;
  // The target whose plans are wanted; empty: this CPU's (as `fusor targets list` shows it).
  std::string target_id;
  // Values for the model's symbolic dims by name ("batch" -> 8), as `fusor tune --dim`: each
  // binding is its own graph hash, so bind the dims the plan was tuned for.
  std::map<std::string, int64_t> dims;
  // OpenMP threads for every kernel; 0 keeps the process default.
  int threads = 0;
  // How many Run calls proceed at once, each on its own context; further callers wait.
  int max_concurrent_runs = 1;
  // Bind the calling thread to one core while it runs (runtime/thread_binding.h): repeatable
  // timings for one caller. A server running from several threads at once turns it off.
  bool bind_caller_thread = true;
};

struct RunOptions {
  int threads = 0;                            // At most the engine's; 0: the engine's.
  const std::atomic<bool>* cancel = nullptr;  // Checked between groups: Status kCancelled.
};

class IoBinding;

class Engine {
 public:
  static StatusOr<std::unique_ptr<Engine>> Load(const std::string& model_path,
                                                const EngineOptions& options = {});
  // The model from its serialized bytes; its weights must be inside them (external data files
  // have no directory to be found in).
  static StatusOr<std::unique_ptr<Engine>> LoadFromBuffer(std::string_view model_bytes,
                                                          const EngineOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Where the plan came from: "plan JSON PATH (N groups)" (followed by "; warning: ..." for a
  // version-1 plan JSON, which names no graph or target), "tuning database PATH, target T, tuned
  // TIME (N groups)", or "rules plan (N groups): REASON" (a plan JSON for another graph or
  // target is named in the reason, never run).
  const std::string& plan_source() const;
  // The graph inputs and outputs: names, dtypes and dims, values empty.
  std::vector<EngineTensor> inputs() const;
  std::vector<EngineTensor> outputs() const;
  // The same, as the model's dtypes.
  std::vector<DType> input_dtypes() const;
  std::vector<DType> output_dtypes() const;

  // Runs the model on `inputs` (every graph input, by name) and returns every graph output in
  // the model's order. An input with the wrong name, dims or kind is an error naming it.
  StatusOr<std::vector<EngineTensor>> Run(const std::vector<EngineTensor>& inputs);

  // Runs the model on `inputs` (every graph input, by name) and writes the `outputs` named (any
  // subset of the graph outputs) into the caller's memory. The values are copied into and out of
  // a context's arena; an IoBinding avoids that.
  Status Run(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
             const RunOptions& run = {});

  // A context bound to the caller's memory for every graph input and the `outputs` named: the
  // memory must stay valid (and the input values are read at each IoBinding::Run) until the
  // binding is destroyed, and it must not outlive the Engine.
  StatusOr<std::unique_ptr<IoBinding>> Bind(std::span<const TensorView> inputs,
                                            std::span<const TensorView> outputs);

  struct State;

 private:
  explicit Engine(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class IoBinding {
 public:
  ~IoBinding();
  // Runs the model on the bound inputs' current values into the bound outputs. Inputs and outputs
  // of float32 / int64 (the runtime's storage types) are read and written in place; others are
  // converted, as are outputs the plan keeps elsewhere (a channel-blocked or folded output).
  Status Run(const RunOptions& run = {});
  // Bytes the last Run copied between the caller's memory and the arena: 0 when every bound
  // tensor is in place.
  int64_t copied_bytes() const;

  struct State;
  explicit IoBinding(std::unique_ptr<State> state);

 private:
  std::unique_ptr<State> state_;
};

}  // namespace fusor
