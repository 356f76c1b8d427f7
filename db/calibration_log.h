// CalibrationLog: the tuning database's append-only logs of samples that cost models are fitted
// to, as the rest of Fusor sees them: the calibration log (every micro-benchmark sample of every
// calibration run, so fits can be rerun over all samples so far) and the learned residual's log
// (every plan or region a tune timed, with its features) with the fitted residual per target.
// Samples name a target of the PlanStore of the same database (plan_store.h), which must be
// stored before its samples are appended.
//
// SqlitePlanStore and PostgresPlanStore implement it (TuningDatabase, tuning_database.h);
// LayeredCalibrationLog reads it over several databases. The value types own their data.
// Implementations are safe to call from many threads at once; results are copies the caller owns.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace fusor::db {

// One micro-benchmark of a calibration run, as the calibration log keeps it. The features are the
// JSON object the cost model wrote (costmodel's SampleToJson); db/ stores the text and never reads
// it, since only the cost model that computed the features can.
struct CalibrationSampleRow {
  int64_t sample_id = 0;  // Row id, set when read, so a bad row can be named; ignored on append.
  std::string benchmark;
  std::string features_json;
  double measured_ns = 0;  // Median time.
  double cv = 0;           // Coefficient of variation of the timing.
};

// The samples one calibration of one target measured. Features computed by one cost-model version
// are not comparable with another's, so a run is read back only under its own version.
struct CalibrationRun {
  int64_t run_id = 0;  // Set by the store on append (increasing); local to its database file.
  std::string target_id;
  std::string cost_model_version;
  int64_t run_unix_ms = 0;  // When measured; 0 when appending means now.
  std::vector<CalibrationSampleRow> samples;
  std::string database;  // Path of the database file the run came from, set when read.
};

// Which runs CalibrationRuns returns: the newest max_runs of one target under one cost-model
// version. The cap keeps a long log from making every fit slower.
struct CalibrationRunQuery {
  std::string target_id;
  std::string cost_model_version;
  int32_t max_runs = 8;
};

// One timed plan or region of a tune, as the learned residual's log keeps it. features_json is
// the JSON the cost model wrote (costmodel's ResidualSampleToJson) and features_version the
// layout of its features (ResidualFeaturesVersion); db/ stores both and never reads the JSON.
struct ResidualSampleRow {
  int64_t sample_id = 0;  // Set by the store (increasing); ignored on append.
  std::string target_id;
  std::string cost_model_version;
  std::string graph_hash;  // The graph tuned (a region's too: the graph it was cut from).
  std::string source;      // What was timed: "plan", or "region Conv+Relu" and the like.
  std::string features_version;
  std::string features_json;
  double measured_ns = 0;        // Median time, finite and > 0.
  int64_t measured_unix_ms = 0;  // 0 when appending means now.
};

// Which samples ResidualSamples returns: the newest max_samples of one target under one
// cost-model version with a sample id above after_sample_id, oldest first.
struct ResidualSampleQuery {
  std::string target_id;
  std::string cost_model_version;
  int64_t after_sample_id = 0;
  int32_t max_samples = 4096;
};

// A target's fitted residual (one per target, replaced by each fit).
struct StoredResidual {
  std::string target_id;
  std::string cost_model_version;  // The cost model it corrects.
  std::string residual_json;       // costmodel's ResidualToJson; db/ does not read it.
  int64_t training_samples = 0;
  int64_t last_sample_id = 0;  // The newest sample the fit saw: later ones are new to it.
  int64_t fitted_unix_ms = 0;  // 0 when writing means now.
  std::string database;        // Set when read.
};

class CalibrationLog {
 public:
  virtual ~CalibrationLog() = default;

  // Appends one calibration run to the calibration log in one transaction and returns its run id.
  // The target must already be stored; the run needs at least one sample, each with a benchmark
  // name, a finite time > 0 and a finite cv >= 0. Samples are never updated or deleted.
  virtual StatusOr<int64_t> AppendCalibrationRun(const CalibrationRun& run) = 0;
  // The newest runs the query selects, newest first, each with its samples in the order appended.
  // A database older than the calibration log (schema version 1) has none.
  virtual StatusOr<std::vector<CalibrationRun>> CalibrationRuns(
      const CalibrationRunQuery& query) = 0;

  // Appends timed plans or regions to the learned residual's log in one transaction. Each row's
  // target must be stored, and it needs a cost-model version, a features version, features and a
  // finite time > 0. Rows are never updated or deleted.
  virtual Status AppendResidualSamples(std::span<const ResidualSampleRow> rows) = 0;
  // The samples the query selects. A database older than the log (schema version 4) has none.
  virtual StatusOr<std::vector<ResidualSampleRow>> ResidualSamples(
      const ResidualSampleQuery& query) = 0;
  // Stores a target's residual, replacing the one stored; the target must be stored.
  virtual Status PutResidual(const StoredResidual& residual) = 0;
  // The residual stored for a target, of whatever cost-model version; NotFound when none.
  virtual StatusOr<StoredResidual> GetResidual(std::string_view target_id) = 0;
};

}  // namespace fusor::db
