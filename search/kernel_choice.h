// The tuner's choice of each anchor group's kernel among oneDNN's implementations
// (runtime/kernel_choice.h), by measurement on the target. For each group of the plan that runs
// a Conv, ConvTranspose, MatMul or Gemm primitive (an anchor group, or one of those ops alone)
// whose primitive oneDNN offers two or more implementations under the layouts and post-ops the
// group runs with (reference ones left out: they are never the fastest), the group is cut from
// the graph and timed alone with each, side by side (Measurer::MeasurePlans). oneDNN's first
// choice stays unless another is measured faster by more than `noise_margin`; either way the
// group records the winner's name (FusionGroup::kernel), which every run then builds. Groups
// with the same region (canonical hash: ops, attributes, dims) share one timing, largest
// predicted time first, at most `max_regions` of them; groups left untimed (budget, deadline,
// a measurer with no implementations to offer) keep an empty kernel, oneDNN's first choice.
// Uses the runtime through the Measurer seam; not thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "costmodel/cost_model.h"
#include "graph/graph.h"
#include "graph/plan.h"
#include "runtime/measurer.h"

namespace fusor {

struct KernelChoiceOptions {
  int max_regions = 16;        // Distinct group regions timed, largest predicted first.
  double noise_margin = 0.03;  // Relative gain another implementation needs over the first.
};

struct KernelTrial {
  std::string ops;  // "MatMul+Add"
  std::string kernel;
  double measured_ns = 0;  // 0 when the timing was unstable.
  bool chosen = false;
};

struct KernelChoice {
  // The plans given, with FusionGroup::kernel set where a choice was timed.
  std::vector<FusionPlan> plans;
  std::vector<KernelTrial> trials;
  int regions_timed = 0;
  int measurements = 0;  // Plans timed (one per implementation of each region).
};

// Chooses for each of `plans` (the tuner's whole-plan candidates, so that whichever wins carries
// its kernels), one timing per distinct region across them all, the plans in the order given.
// `may_measure(n)`: whether n more plans may be timed now (deadline, cancellation).
StatusOr<KernelChoice> ChooseKernels(const Graph& g, const std::vector<FusionPlan>& plans,
                                     const CostModel& model, Measurer* measurer,
                                     const KernelChoiceOptions& options,
                                     const std::function<bool(int)>& may_measure);

}  // namespace fusor
