// The learned residual as the tuning service keeps it (costmodel/residual.h): what a tune timed
// becomes rows of the database's residual log, each with its groups' analytical predictions and
// features; a target's stored rows become ResidualSamples again for a fit; a fit is stored per
// target with the cost-model version it corrects, its training set's size and the newest row it
// saw; and the stored residual is read back for a tune, or refused with a reason.
//
// A row is read back only under the features version it was written with
// (ResidualFeaturesVersion) and the cost model that priced it: a row of another features version
// is skipped and counted (one log line per load, with the count), never misread, and so is a row
// whose JSON does not read back (a warning naming the row and the database).
//
// Stateless functions; thread-safe when the log is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "costmodel/cost_model.h"
#include "costmodel/residual.h"
#include "db/calibration_log.h"
#include "graph/graph.h"
#include "search/autotune.h"

namespace fusor {

// Rows for every stable timing of a tune of `g` (hash `graph_hash`) on `target_id`, priced by the
// analytical model `base` as the residual sees them (ResidualSampleOf).
std::vector<db::ResidualSampleRow> ResidualRowsOf(const AnalyticalCostModel& base, const Graph& g,
                                                  const std::string& graph_hash,
                                                  const std::string& target_id,
                                                  const std::vector<TimedPlan>& timed);

struct LoadedResidualSamples {
  std::vector<ResidualSample> samples;
  int64_t last_sample_id = 0;  // The newest row read, used or skipped.
  int other_features = 0;      // Rows of another features version, skipped.
  int unreadable = 0;          // Rows whose JSON did not read back, skipped.
};

// The newest `max_samples` rows of the target under the current cost model, as samples.
StatusOr<LoadedResidualSamples> LoadResidualSamples(db::CalibrationLog& log,
                                                    const std::string& target_id, int max_samples);

// Rows appended for the target under the current cost model since its stored fit (since the
// first row when none is stored), counted up to `cap`.
StatusOr<int> NewResidualSamples(db::CalibrationLog& log, const std::string& target_id, int cap);

// Fits the target's residual over its newest `max_samples` rows (FitResidual, deterministic) and
// stores it. FailedPrecondition when no row is usable; any error leaves the stored residual as it
// was.
StatusOr<db::StoredResidual> RefitResidual(db::CalibrationLog& log, const std::string& target_id,
                                           int max_samples);

// The residual stored for a target, ready to score with.
struct UsableResidual {
  ResidualModel model;
  std::string json;  // As stored (fusor.residual.v1), for the plan to carry.
};

// The residual a tune on the target uses: nullopt when none is stored; FailedPrecondition when
// it corrects another cost-model version; Corruption naming the target and the database when it
// does not read back.
StatusOr<std::optional<UsableResidual>> StoredResidualFor(db::CalibrationLog& log,
                                                          const std::string& target_id);

}  // namespace fusor
