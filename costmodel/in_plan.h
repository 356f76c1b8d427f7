// What a plan adds to its groups' times: a group timed alone runs again and again, so its weights
// and inputs are warm in the caches its own working set fits in; inside a plan, every tensor it
// reads was last touched some groups ago (a weight one inference ago), and the bytes the other
// groups touched in between decide which level it is read from. On EfficientNet-B0 the groups
// take 1.20x longer in the plan than alone, almost all in weight-bound groups (the classifier
// Gemm's 5 MB of weights 2.9x; docs/costmodel.md, "Whole plans").
//
// The reuse distance of a read is the bytes of the distinct tensors the plan's groups touch
// (read or write) between the previous access to the tensor and this read, the plan taken as a
// cycle (one inference after another). The read comes from the smallest level that holds that
// distance plus the tensor, where alone it comes from the level that holds the group's working
// set. Each level a read falls below its alone level costs a fitted time per byte
// (`InPlanConstants`, fitted on the in-plan minus alone times of groups), and a whole plan's
// prediction adds the same on top of its group costs: their constants are fitted on groups timed
// alone, whose weights were warm, so a weight the plan finds colder is not in them (counted
// instead only below the level the group cost's footprint rule names, the term predicted the
// idle recording's held-out plans 15.1% off against 12.7%: docs/costmodel.md). The model depends
// on the plan's order of groups, so it is priced on the whole plan, never inside a group's cost
// (the search's groups stay independent).
//
// Stateless functions; thread-safe.
#pragma once

#include <array>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "costmodel/cost_model.h"
#include "graph/graph.h"
#include "graph/plan.h"

namespace fusor {

// kColdSteps (costmodel/hardware_profile.h): the steps between the memory levels.
static_assert(kColdSteps == kNumMemoryLevels - 1);

// One tensor a group reads, with where it is found inside the plan and alone.
struct InPlanRead {
  TensorId tensor = kNoId;
  bool leaf = false;       // A weight or graph input (last touched one inference ago).
  double bytes = 0;        // The tensor's bytes.
  double reuse_bytes = 0;  // Distinct bytes touched since its previous access in the plan.
  MemoryLevel in_plan = MemoryLevel::kL1;
  MemoryLevel alone = MemoryLevel::kL1;
};

// A group's reads inside a plan, and the bytes that fall each step below their alone level:
// cold_bytes[s] counts every byte whose in-plan level is below step s's upper level while its
// alone level is not (a read from DRAM that alone is in L2 counts in steps 1 and 2): what the
// constants are fitted on, and what a whole plan's prediction adds.
struct InPlanGroupReads {
  std::vector<InPlanRead> reads;
  std::array<double, kColdSteps> cold_bytes{};
  double weight_bytes = 0;  // Leaf bytes the group reads (weights and graph inputs).
  double input_bytes = 0;   // Activation bytes the group reads.
};

// Every group's reads in the plan's order.
std::vector<InPlanGroupReads> InPlanReadsOf(const Graph& g, const FusionPlan& plan,
                                            const TargetFingerprint& target);

// The time the plan adds to one group beyond its cost: its cold_bytes at the constants.
double InPlanExtraNs(const InPlanGroupReads& r, const InPlanConstants& c);
// The time the plan adds to all its groups.
double InPlanExtraNs(const std::vector<InPlanGroupReads>& groups, const InPlanConstants& c);

// A group timed inside a plan and alone.
struct InPlanSample {
  std::array<double, kColdSteps> cold_bytes{};
  double in_plan_ns = 0;
  double alone_ns = 0;
};

// Least squares of in_plan_ns - alone_ns over the samples on the cold bytes, every constant at
// least 0 (a cold read never makes a group faster). An error when no sample reads a cold byte.
StatusOr<InPlanConstants> FitInPlanConstants(const std::vector<InPlanSample>& samples);

}  // namespace fusor
