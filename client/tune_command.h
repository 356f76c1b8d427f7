// `fusor tune MODEL.onnx`: converts the model to the graph proto locally (weights never leave the
// machine), tunes it through a TunerApi (in-process, or a fusord with --server), shows progress
// (a bar on a terminal, plain lines otherwise) and a summary; `--save-plan` writes the plan in
// the JSON form `fusor run --plan` reads. TuneGraph is the request and result handling both the
// CLI and the Python package (python/) call, so a tune from either asks the tuner the same thing.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "graph/graph.h"
#include "proto/tuner.pb.h"
#include "server/tuner_api.h"

namespace fusor {

void AddTuneCommand(CLI::App& app, int* exit_code);

// What a tune asks for besides the graph; zeros and empties mean the tuner's defaults.
struct TuneSettings {
  std::string algorithm;  // none, rules, greedy, optimal or default.
  int budget = 0;         // Measurements to spend.
  double time_limit_s = 0;
  uint64_t seed = 1;
  int64_t memory_budget = 0;      // Peak activation bytes allowed.
  std::string target;             // Target id; empty: the tuner's own CPU.
  bool force = false;             // Tune again even if a current plan is stored.
  bool no_residual = false;       // Score with the analytical cost model alone.
  bool no_kernel_choice = false;  // Keep oneDNN's first choice of each anchor's implementation.
};

using ProgressSink = std::function<void(const v1::TuneEvent::Progress&)>;

// Tunes `g` through `api` with `s`, handing each progress event to `on_progress` (may be empty)
// on the thread the tuner sends it from, and returns the one result; stops with Cancelled soon
// after *cancelled (if given) becomes true.
StatusOr<v1::TuneEvent::Result> TuneGraph(TunerApi& api, const Graph& g, const TuneSettings& s,
                                          const ProgressSink& on_progress,
                                          const std::atomic<bool>* cancelled);

}  // namespace fusor
