// The embeddable inference engine: what a deployment links to run a model with its own weights
// under a tuned fusion plan. Load() imports the model and its weights (initializer data or
// external data files next to it), takes the plan from a plan JSON (`fusor tune --save-plan`) or
// from a tuning database or deployment snapshot (`fusor db export`) by the model's graph hash and
// this CPU's target, falling back to the rules plan with the reason when none applies, and
// compiles it once (oneDNN primitives, fused loops, one memory arena). Run() then runs it as
// often as the caller likes.
//
// Ownership: an Engine owns its graph, weights, plan and buffers; the model file may go away
// after Load. Thread-safety: Run() may be called from several threads; runs of one Engine are
// serialised by an internal mutex (each run already uses the configured OpenMP threads). For
// parallel runs, load one Engine per thread. Errors are fusor::Status values naming what is wrong.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace fusor {

// A dense row-major tensor: float32 values in `floats`, or integer / bool values in `ints`.
struct EngineTensor {
  std::string name;
  std::string dtype;  // "float32", "int64", ...: the model's type; floats or ints by its kind.
  std::vector<int64_t> dims;
  std::vector<float> floats;
  std::vector<int64_t> ints;
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
};

class Engine {
 public:
  static StatusOr<std::unique_ptr<Engine>> Load(const std::string& model_path,
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

  // Runs the model on `inputs` (every graph input, by name) and returns every graph output in
  // the model's order. An input with the wrong name, dims or kind is an error naming it.
  StatusOr<std::vector<EngineTensor>> Run(const std::vector<EngineTensor>& inputs);

 private:
  struct State;
  explicit Engine(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace fusor
