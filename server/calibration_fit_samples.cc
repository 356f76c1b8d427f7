#include "server/calibration_fit_samples.h"

#include <algorithm>

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

StatusOr<LoggedSamples> LoadCalibrationLog(db::CalibrationLog& log,
                                           const db::CalibrationRunQuery& query) {
  FUSOR_ASSIGN_OR_RETURN(std::vector<db::CalibrationRun> runs, log.CalibrationRuns(query));
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

std::vector<RunSlowdown> CompareCalibrationRuns(const LoggedSamples& earlier,
                                                std::span<const CalibrationSample> run,
                                                int64_t run_id) {
  std::map<std::string, double> now;
  for (const CalibrationSample& s : run) now[s.benchmark] = s.measured_ns;
  // Per earlier run, each shared benchmark's time over this run's.
  std::map<int64_t, std::vector<double>> ratios;
  for (size_t i = 0; i < earlier.samples.size(); ++i) {
    const CalibrationSample& s = earlier.samples[i];
    auto it = now.find(s.benchmark);
    if (it != now.end() && it->second > 0)
      ratios[earlier.run_ids[i]].push_back(s.measured_ns / it->second);
  }
  std::vector<RunSlowdown> out = {{run_id, 1.0}};
  for (auto& [id, r] : ratios) {
    if (static_cast<int>(r.size()) < kMinSharedBenchmarks) continue;
    std::nth_element(r.begin(), r.begin() + r.size() / 2, r.end());
    out.push_back({id, r[r.size() / 2]});
  }
  if (out.size() == 1) return {};
  double quickest = 1.0;
  for (const RunSlowdown& r : out) quickest = std::min(quickest, r.slowdown);
  for (RunSlowdown& r : out) r.slowdown /= quickest;
  return out;
}

namespace {

// The samples of `logged` that `keep(i)` keeps, runs recounted (a run's samples are contiguous,
// as LoadCalibrationLog reads them).
template <typename Keep>
LoggedSamples Kept(const LoggedSamples& logged, Keep keep) {
  LoggedSamples kept;
  kept.skipped = logged.skipped;
  for (size_t i = 0; i < logged.samples.size(); ++i) {
    if (!keep(i)) continue;
    if (kept.run_ids.empty() || kept.run_ids.back() != logged.run_ids[i]) ++kept.runs;
    kept.samples.push_back(logged.samples[i]);
    kept.run_ids.push_back(logged.run_ids[i]);
  }
  return kept;
}

}  // namespace

LoggedSamples WithoutRuns(const LoggedSamples& logged, const std::vector<int64_t>& runs) {
  return Kept(logged, [&](size_t i) {
    return std::find(runs.begin(), runs.end(), logged.run_ids[i]) == runs.end();
  });
}

LoggedSamples WithoutSlowTimings(const LoggedSamples& logged, std::vector<std::string>* dropped) {
  std::map<std::string, double> quickest;
  for (const CalibrationSample& s : logged.samples) {
    auto [it, inserted] = quickest.emplace(s.benchmark, s.measured_ns);
    if (!inserted) it->second = std::min(it->second, s.measured_ns);
  }
  return Kept(logged, [&](size_t i) {
    const CalibrationSample& s = logged.samples[i];
    bool slow = s.measured_ns > kSlowCalibrationRun * quickest.at(s.benchmark);
    if (slow) dropped->push_back(s.benchmark);
    return !slow;
  });
}

FitSamples ChooseFitSamples(const LoggedSamples& all, int64_t run_id) {
  FitSamples out;
  std::vector<CalibrationSample> run;
  for (size_t i = 0; i < all.samples.size(); ++i) {
    if (all.run_ids[i] == run_id) run.push_back(all.samples[i]);
  }
  out.compared = CompareCalibrationRuns(WithoutRuns(all, {run_id}), run, run_id);
  std::vector<int64_t> slow_ids;
  for (const RunSlowdown& r : out.compared) {
    if (r.slowdown <= kSlowCalibrationRun) continue;
    out.slow.push_back(r);
    slow_ids.push_back(r.run_id);
  }
  out.used = WithoutSlowTimings(WithoutRuns(all, slow_ids), &out.slow_timings);
  return out;
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
