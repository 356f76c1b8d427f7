#include "db/layered_calibration_log.h"

#include "db/newest_over_layers.h"

namespace fusor::db {

LayeredCalibrationLog::LayeredCalibrationLog(std::vector<std::unique_ptr<CalibrationLog>> layers)
    : layers_(std::move(layers)) {}

StatusOr<int64_t> LayeredCalibrationLog::AppendCalibrationRun(const CalibrationRun& run) {
  return layers_.front()->AppendCalibrationRun(run);
}

StatusOr<std::vector<CalibrationRun>> LayeredCalibrationLog::CalibrationRuns(
    const CalibrationRunQuery& query) {
  return NewestOverLayers<CalibrationRun>(
      layers_, [&](CalibrationLog& layer) { return layer.CalibrationRuns(query); },
      [](const CalibrationRun& r) { return r.run_unix_ms; }, query.max_runs);
}

Status LayeredCalibrationLog::AppendResidualSamples(std::span<const ResidualSampleRow> rows) {
  return layers_.front()->AppendResidualSamples(rows);
}

StatusOr<std::vector<ResidualSampleRow>> LayeredCalibrationLog::ResidualSamples(
    const ResidualSampleQuery& query) {
  return layers_.front()->ResidualSamples(query);
}

Status LayeredCalibrationLog::PutResidual(const StoredResidual& residual) {
  return layers_.front()->PutResidual(residual);
}

StatusOr<StoredResidual> LayeredCalibrationLog::GetResidual(std::string_view target_id) {
  return layers_.front()->GetResidual(target_id);
}

}  // namespace fusor::db
