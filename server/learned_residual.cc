#include "server/learned_residual.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "costmodel/hardware_profile.h"

namespace fusor {
namespace {

// The stored fit's newest row when it is of this cost model; 0 (every row is new) otherwise.
StatusOr<int64_t> LastFittedSample(db::CalibrationLog& log, const std::string& target_id) {
  StatusOr<db::StoredResidual> stored = log.GetResidual(target_id);
  if (!stored.ok()) {
    if (stored.status().code() == Status::Code::kNotFound) return int64_t{0};
    return stored.status();
  }
  return stored->cost_model_version == kCostModelVersion ? stored->last_sample_id : 0;
}

Status CheckFinite(const ResidualModel& r, const std::string& target_id) {
  for (size_t j = 0; j < r.weights.size(); ++j) {
    if (!std::isfinite(r.weights[j])) {
      return Status::Internal(fmt::format(
          "the residual fitted for target '{}' has a weight that is not finite ('{}'); the "
          "stored residual is kept",
          target_id, ResidualFeatureNames()[j]));
    }
  }
  return Status::Ok();
}

// True when the stored residual reads back and was fitted on exactly these rows: FitResidual is
// deterministic, so fitting them again would store the same weights.
bool StoredFitIsOf(db::CalibrationLog& log, const std::string& target_id,
                   const LoadedResidualSamples& loaded) {
  StatusOr<db::StoredResidual> stored = log.GetResidual(target_id);
  if (!stored.ok() || stored->cost_model_version != kCostModelVersion ||
      stored->last_sample_id != loaded.last_sample_id ||
      stored->training_samples != static_cast<int64_t>(loaded.samples.size())) {
    return false;
  }
  StatusOr<std::optional<UsableResidual>> usable = StoredResidualFor(log, target_id);
  return usable.ok() && usable->has_value();
}

}  // namespace

std::vector<db::ResidualSampleRow> ResidualRowsOf(const AnalyticalCostModel& base, const Graph& g,
                                                  const std::string& graph_hash,
                                                  const std::string& target_id,
                                                  const std::vector<TimedPlan>& timed) {
  std::vector<db::ResidualSampleRow> rows;
  for (const TimedPlan& t : timed) {
    const Graph& graph = t.region ? *t.region : g;
    ResidualSample sample = ResidualSampleOf(base, graph, t.plan, t.measured_ns);
    db::ResidualSampleRow row;
    row.target_id = target_id;
    row.cost_model_version = kCostModelVersion;
    row.graph_hash = graph_hash;
    row.source = t.what;
    row.features_version = ResidualFeaturesVersion();
    row.features_json = ResidualSampleToJson(sample).dump();
    row.measured_ns = t.measured_ns;
    rows.push_back(std::move(row));
  }
  return rows;
}

StatusOr<LoadedResidualSamples> LoadResidualSamples(db::CalibrationLog& log,
                                                    const std::string& target_id, int max_samples) {
  FUSOR_ASSIGN_OR_RETURN(std::vector<db::ResidualSampleRow> rows,
                         log.ResidualSamples({target_id, kCostModelVersion, 0, max_samples}));
  LoadedResidualSamples loaded;
  std::string other_version;
  for (const db::ResidualSampleRow& row : rows) {
    loaded.last_sample_id = std::max(loaded.last_sample_id, row.sample_id);
    if (row.features_version != ResidualFeaturesVersion()) {
      other_version = row.features_version;
      ++loaded.other_features;
      continue;
    }
    nlohmann::json j = nlohmann::json::parse(row.features_json, nullptr, false);
    StatusOr<ResidualSample> sample = j.is_discarded()
                                          ? Status::InvalidArgument("its features are not JSON")
                                          : ResidualSampleFromJson(j);
    if (!sample.ok()) {
      spdlog::warn("residual: skipping stored sample {} of target {} ({}): {}", row.sample_id,
                   target_id, row.source, sample.status().message());
      ++loaded.unreadable;
      continue;
    }
    sample->model = row.graph_hash.substr(0, 16) + " " + row.source;
    loaded.samples.push_back(*std::move(sample));
  }
  if (loaded.other_features > 0) {
    spdlog::info(
        "residual: skipped {} stored samples of target {} with features version '{}' (this fusor "
        "computes '{}')",
        loaded.other_features, target_id, other_version, ResidualFeaturesVersion());
  }
  return loaded;
}

StatusOr<int> NewResidualSamples(db::CalibrationLog& log, const std::string& target_id, int cap) {
  FUSOR_ASSIGN_OR_RETURN(int64_t last, LastFittedSample(log, target_id));
  FUSOR_ASSIGN_OR_RETURN(std::vector<db::ResidualSampleRow> rows,
                         log.ResidualSamples({target_id, kCostModelVersion, last, cap}));
  return static_cast<int>(rows.size());
}

StatusOr<db::StoredResidual> RefitResidual(db::CalibrationLog& log, const std::string& target_id,
                                           int max_samples) {
  FUSOR_ASSIGN_OR_RETURN(LoadedResidualSamples loaded,
                         LoadResidualSamples(log, target_id, max_samples));
  if (loaded.samples.empty()) {
    return Status::FailedPrecondition(fmt::format(
        "no usable timings of target '{}' under cost model {} to fit its residual on ({} of "
        "another features version, {} unreadable); tune on it first",
        target_id, kCostModelVersion, loaded.other_features, loaded.unreadable));
  }
  if (StoredFitIsOf(log, target_id, loaded)) return log.GetResidual(target_id);
  FUSOR_ASSIGN_OR_RETURN(ResidualModel fitted, FitResidual(loaded.samples));
  FUSOR_RETURN_IF_ERROR(CheckFinite(fitted, target_id));
  db::StoredResidual stored;
  stored.target_id = target_id;
  stored.cost_model_version = kCostModelVersion;
  stored.residual_json = ResidualToJson(fitted).dump();
  stored.training_samples = fitted.training_samples;
  stored.last_sample_id = loaded.last_sample_id;
  FUSOR_RETURN_IF_ERROR(log.PutResidual(stored));
  spdlog::info(
      "residual: fitted target={} samples={} rms_log_error {:.3f} -> {:.3f} (training set)",
      target_id, fitted.training_samples, fitted.train_rms_log_error_before,
      fitted.train_rms_log_error_after);
  return stored;
}

StatusOr<std::optional<UsableResidual>> StoredResidualFor(db::CalibrationLog& log,
                                                          const std::string& target_id) {
  StatusOr<db::StoredResidual> stored = log.GetResidual(target_id);
  if (!stored.ok()) {
    if (stored.status().code() == Status::Code::kNotFound) return std::optional<UsableResidual>();
    return stored.status();
  }
  if (stored->cost_model_version != kCostModelVersion) {
    return Status::FailedPrecondition(fmt::format(
        "the learned residual of target '{}' corrects cost model '{}', this fusor uses '{}'; it "
        "is not used until it is fitted again (fusor calibrate, or more tunes)",
        target_id, stored->cost_model_version, kCostModelVersion));
  }
  nlohmann::json j = nlohmann::json::parse(stored->residual_json, nullptr, false);
  StatusOr<ResidualModel> model =
      j.is_discarded() ? Status::InvalidArgument("it is not JSON") : ResidualFromJson(j);
  if (!model.ok()) {
    return Status::Corruption(fmt::format(
        "the learned residual stored for target '{}' in '{}' does not read back ({}); it is not "
        "used, and the next fit replaces it",
        target_id, stored->database, model.status().message()));
  }
  return std::optional<UsableResidual>(UsableResidual{*std::move(model), stored->residual_json});
}

}  // namespace fusor
