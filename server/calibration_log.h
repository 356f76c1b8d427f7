// The calibration log as the tuning service uses it: a calibration's new samples become a
// db::CalibrationRun to append, and a target's stored runs become CalibrationSamples again for the
// next fit (fits are rerun over all samples so far, see costmodel/fit.h). The features of a stored
// sample are the JSON the cost model wrote (SampleToJson); a row whose features do not read back is
// skipped with a warning naming the row, its benchmark and the database, and counted, so one bad
// row never makes calibration impossible.
//
// Stateless functions; thread-safe when the store is.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "costmodel/fit.h"
#include "costmodel/hardware_profile.h"
#include "db/plan_store.h"
#include "proto/tuner.pb.h"

namespace fusor {

// Samples read back from the log, newest run first.
struct LoggedSamples {
  std::vector<CalibrationSample> samples;
  std::vector<int64_t> run_ids;  // run_ids[i]: the run samples[i] was measured in.
  int runs = 0;                  // Runs that gave at least one sample.
  int skipped = 0;               // Rows whose features did not read back.
};

// The usable samples of the runs the query selects.
StatusOr<LoggedSamples> LoadCalibrationLog(db::PlanStore& store,
                                           const db::CalibrationRunQuery& query);

// One stored row as a sample (benchmark and time from their columns, features from the JSON).
// InvalidArgument naming the row and the benchmark when the features are not SampleToJson's.
StatusOr<CalibrationSample> SampleFromRow(const db::CalibrationSampleRow& row,
                                          const std::string& database);

// A run of `samples` to append for target under cost_model_version; cv_by_benchmark holds each
// benchmark's timing cv (0 when absent).
db::CalibrationRun RunToAppend(const std::string& target_id, const std::string& cost_model_version,
                               std::span<const CalibrationSample> samples,
                               const std::map<std::string, double>& cv_by_benchmark);

// A sample the fit used, with what the fitted profile predicts for it.
v1::FittedSample FittedSampleOf(const CalibrationSample& sample, int64_t run_id,
                                const HardwareProfile& fitted);

}  // namespace fusor
