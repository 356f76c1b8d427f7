// LayeredCalibrationLog: the calibration logs of several databases seen as one, the layers
// ordered top first as LayeredPlanStore's are: a writable database on top of read-only ones.
//
// Calibration runs are read from every layer, newest first; run ids are per file, so a run is
// identified by (database, run_id). Appends go to the top layer only, which fails them if it was
// opened read-only. The learned residual's log and fits live in the top layer alone: snapshots
// carry plans, and sample ids are per file.
//
// Owns its layers. Safe to use from many threads when the layers are (SqlitePlanStore is).
#pragma once

#include <memory>
#include <vector>

#include "db/calibration_log.h"

namespace fusor::db {

class LayeredCalibrationLog final : public CalibrationLog {
 public:
  // layers[0] is the top; there must be at least one layer.
  explicit LayeredCalibrationLog(std::vector<std::unique_ptr<CalibrationLog>> layers);

  // Appends to the top layer.
  StatusOr<int64_t> AppendCalibrationRun(const CalibrationRun& run) override;
  // The newest runs over all layers (by run time; the higher layer first on a tie).
  StatusOr<std::vector<CalibrationRun>> CalibrationRuns(const CalibrationRunQuery& query) override;
  Status AppendResidualSamples(std::span<const ResidualSampleRow> rows) override;
  StatusOr<std::vector<ResidualSampleRow>> ResidualSamples(
      const ResidualSampleQuery& query) override;
  Status PutResidual(const StoredResidual& residual) override;
  StatusOr<StoredResidual> GetResidual(std::string_view target_id) override;

 private:
  const std::vector<std::unique_ptr<CalibrationLog>> layers_;
};

}  // namespace fusor::db
