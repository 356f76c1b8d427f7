// The samples a calibration fits over, and their way into and out of the database's calibration
// log (db/calibration_log.h, which stores rows and never reads their features): a calibration's
// new samples become a db::CalibrationRun to append, a target's stored runs become
// CalibrationSamples again for the next fit (fits are rerun over all samples so far, see
// costmodel/fit.h), and of those the fit keeps all but slow runs and slow timings
// (ChooseFitSamples). The features of a stored sample are the JSON the cost model wrote
// (SampleToJson); a row whose features do not read back is skipped with a warning naming the row,
// its benchmark and the database, and counted, so one bad row never makes calibration impossible.
//
// Stateless functions; thread-safe when the log is.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "costmodel/fit.h"
#include "costmodel/hardware_profile.h"
#include "db/calibration_log.h"
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
StatusOr<LoggedSamples> LoadCalibrationLog(db::CalibrationLog& log,
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

// How much slower a calibration run timed the suite than the quickest run compared: the median,
// over the benchmarks the two share, of its time over the quickest's (1 for the quickest).
struct RunSlowdown {
  int64_t run_id = 0;
  double slowdown = 1;
};

// A run this much slower than the quickest is left out of the fit. A shared host can stay in a
// slow state for a whole calibration (every conv and matmul ~1.85x slower: conv fitted at 130
// GFLOP/s instead of 232) while each benchmark's spread and the cross-core probe look normal;
// only another run shows it. Run-to-run drift on a quiet host stays within ~1.2x.
inline constexpr double kSlowCalibrationRun = 1.35;
// Runs that share fewer benchmarks than this with the others are not compared.
inline constexpr int kMinSharedBenchmarks = 20;

// `run` (id run_id) against the runs of `earlier`: one entry per run compared, this one first;
// empty when no earlier run shares enough benchmarks with it.
std::vector<RunSlowdown> CompareCalibrationRuns(const LoggedSamples& earlier,
                                                std::span<const CalibrationSample> run,
                                                int64_t run_id);

// `logged` without the samples of the runs in `runs`.
LoggedSamples WithoutRuns(const LoggedSamples& logged, const std::vector<int64_t>& runs);

// `logged` without the timings of a benchmark more than kSlowCalibrationRun times its quickest
// timing in `logged`: a slow state over part of a run (convs timed 2.2x slower in two of four runs
// while the median benchmark moved 8%) only adds time, so the quickest is the machine's. Their
// names, one per timing dropped, in `dropped`.
LoggedSamples WithoutSlowTimings(const LoggedSamples& logged, std::vector<std::string>* dropped);

// What a calibration fits: `all` (run `run_id`, just measured, and the earlier runs loaded) less a
// run over kSlowCalibrationRun times slower than the quickest (this one or an earlier one), then
// less any timing over that times its benchmark's quickest.
struct FitSamples {
  LoggedSamples used;
  std::vector<RunSlowdown> compared;      // CompareCalibrationRuns: every run compared.
  std::vector<RunSlowdown> slow;          // The runs left out.
  std::vector<std::string> slow_timings;  // The benchmark of each timing left out.
};
FitSamples ChooseFitSamples(const LoggedSamples& all, int64_t run_id);

// A sample the fit used, with what the fitted profile predicts for it.
v1::FittedSample FittedSampleOf(const CalibrationSample& sample, int64_t run_id,
                                const HardwareProfile& fitted);

}  // namespace fusor
