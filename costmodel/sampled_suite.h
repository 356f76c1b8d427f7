// The calibration benchmarks drawn from models: groups cut out of the models' structural fusion
// plans, binned by kind (GroupKindLabel) and sampled with a seed, so the suite's shapes and group
// kinds follow the statistics of real models rather than a hand-picked list. Each bin gets a share
// of the benchmarks proportional to the square root of its number of distinct groups (at least one
// while the count allows), so a rare kind is still timed and a common one does not crowd out the
// rest. The hand-picked suite (CalibrationSuite) still pins what models do not isolate (each cache
// level, dispatch and fork costs); these benchmarks are added to it.
// Stateless functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "graph/graph.h"
#include "graph/plan.h"

namespace fusor {

// "anchor:Conv", "anchor:MatMul", "loop", "reduction", "single:Softmax", "opaque": a group's kind,
// with the anchor's op type for anchor groups and the op type for a single op.
std::string GroupKindLabel(const Graph& g, const FusionGroup& group);

struct SampledSuiteOptions {
  int count = 32;     // Benchmarks drawn in all.
  int max_ops = 6;    // Ops per group, at most (a group's first ops when it has more).
  uint64_t seed = 1;  // Which groups are drawn.
};

// Benchmarks of one group each, named "sampled:<model>:<kind>:<first node>"; deterministic for
// the models (in order) and options.
std::vector<CalibrationBenchmark> SampledCalibrationSuite(const std::vector<const Graph*>& models,
                                                          const SampledSuiteOptions& options = {});

}  // namespace fusor
