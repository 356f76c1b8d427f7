#include "server/calibration_log.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "costmodel/calibration.h"
#include "costmodel/cost_model.h"

namespace fusor {

StatusOr<CalibrationSample> SampleFromRow(const db::CalibrationSampleRow& row,
                                          const std::string& database) {
  std::string what = "calibration sample " + std::to_string(row.sample_id) + " (benchmark '" +
                     row.benchmark + "') in database '" + database + "'";
  nlohmann::json j = nlohmann::json::parse(row.features_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Status::InvalidArgument(what + ": its features are not JSON; expected the object " +
                                   "SampleToJson writes");
  }
  StatusOr<CalibrationSample> sample = SampleFromJson(j);
  if (!sample.ok()) return sample.status().WithContext(what);
  sample->benchmark = row.benchmark;
  sample->measured_ns = row.measured_ns;
  return sample;
}

StatusOr<LoggedSamples> LoadCalibrationLog(db::PlanStore& store,
                                           const db::CalibrationRunQuery& query) {
  FUSOR_ASSIGN_OR_RETURN(std::vector<db::CalibrationRun> runs, store.CalibrationRuns(query));
  LoggedSamples logged;
  for (const db::CalibrationRun& run : runs) {
    size_t before = logged.samples.size();
    for (const db::CalibrationSampleRow& row : run.samples) {
      StatusOr<CalibrationSample> sample = SampleFromRow(row, run.database);
      if (!sample.ok()) {
        spdlog::warn("calibrate: skipping a stored sample of run {}: {}", run.run_id,
                     sample.status().message());
        ++logged.skipped;
        continue;
      }
      logged.samples.push_back(*std::move(sample));
      logged.run_ids.push_back(run.run_id);
    }
    if (logged.samples.size() > before) ++logged.runs;
  }
  return logged;
}

db::CalibrationRun RunToAppend(const std::string& target_id, const std::string& cost_model_version,
                               std::span<const CalibrationSample> samples,
                               const std::map<std::string, double>& cv_by_benchmark) {
  db::CalibrationRun run;
  run.target_id = target_id;
  run.cost_model_version = cost_model_version;
  for (const CalibrationSample& s : samples) {
    auto cv = cv_by_benchmark.find(s.benchmark);
    run.samples.push_back({0, s.benchmark, SampleToJson(s).dump(), s.measured_ns,
                           cv == cv_by_benchmark.end() ? 0.0 : cv->second});
  }
  return run;
}

v1::FittedSample FittedSampleOf(const CalibrationSample& sample, int64_t run_id,
                                const HardwareProfile& fitted) {
  v1::FittedSample out;
  out.set_benchmark(sample.benchmark);
  out.set_run_id(run_id);
  out.set_measured_ns(sample.measured_ns);
  out.set_predicted_ns(EvaluateFeatures(sample.features, fitted).total_ns);
  out.set_features_json(SampleToJson(sample).dump());
  return out;
}

}  // namespace fusor
