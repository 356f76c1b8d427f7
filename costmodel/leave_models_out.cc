#include "costmodel/leave_models_out.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "costmodel/sampled_suite.h"

namespace fusor {
namespace {

// A measured plan of several groups as one calibration sample: the later groups' times add.
CalibrationSample PlanSample(const Graph& g, const FusionPlan& plan,
                             const TargetFingerprint& target, const std::string& name,
                             double measured_ns) {
  std::vector<GroupFeatures> features = PlanFeatures(g, plan, target);
  CalibrationSample s{name, features.front(), measured_ns};
  s.features.then.assign(features.begin() + 1, features.end());
  return s;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

std::string ModelFamily(const std::string& model_name) {
  size_t end = 0;
  while (end < model_name.size() && model_name[end] != '_' &&
         !std::isdigit(static_cast<unsigned char>(model_name[end]))) {
    ++end;
  }
  return end == 0 ? model_name : model_name.substr(0, end);
}

std::map<std::string, int> AssignFolds(const std::vector<std::string>& models, int folds) {
  std::set<std::string> families;
  for (const std::string& m : models) families.insert(ModelFamily(m));
  std::map<std::string, int> family_fold;
  int i = 0;
  for (const std::string& f : families) family_fold[f] = i++ % std::max(folds, 1);
  std::map<std::string, int> out;
  for (const std::string& m : models) out[m] = family_fold[ModelFamily(m)];
  return out;
}

StatusOr<FoldModel> FitFold(int fold, const std::map<std::string, int>& folds,
                            const HardwareProfile& start, const FoldData& data,
                            const FoldFitOptions& options) {
  auto training = [&](const std::string& model) {
    auto it = folds.find(model);
    return it != folds.end() && it->second != fold;
  };
  FoldModel out;
  out.fold = fold;
  out.profile = start;
  std::vector<CalibrationSample> samples = data.calibration;
  if (options.sampled_benchmarks > 0) {
    std::vector<const Graph*> training_models;
    for (const Graph* g : data.models)
      if (training(g->model_name)) training_models.push_back(g);
    for (const CalibrationBenchmark& b :
         SampledCalibrationSuite(training_models, {.count = options.sampled_benchmarks})) {
      auto m = data.measure_benchmark(b.graph, b.plan);
      if (!m.ok() || m->unstable) continue;
      samples.push_back(PlanSample(b.graph, b.plan, start.target, b.name, m->median_ns));
      ++out.sampled_benchmarks;
    }
  }
  std::vector<std::pair<const HeldOutRegion*, std::vector<double>>> measured;
  std::vector<CalibrationSample> region_samples;
  AnalyticalCostModel unused(start);
  for (const HeldOutRegion& r : *data.regions) {
    if (!training(r.model)) continue;
    // One region at a time, so its items are its alternatives in order, with the rounds kept as
    // validation keeps them.
    auto report = ValidateCostModel({r}, unused, data.measure, {}, data.rounds);
    if (!report.ok() || report->items.size() != r.alternatives.size()) continue;
    std::vector<double> times;
    for (const ValidationItem& item : report->items) times.push_back(item.measured_ns);
    for (size_t a = 0; a < times.size(); ++a) {
      region_samples.push_back(PlanSample(r.graph, r.alternatives[a].second, start.target,
                                          r.model + " " + r.ops + " " + r.alternatives[a].first,
                                          times[a]));
    }
    measured.emplace_back(&r, std::move(times));
    ++out.training_regions;
  }
  if (options.refit_profile || out.sampled_benchmarks > 0) {
    HardwareProfile profile = start;
    if (options.refit_profile)
      samples.insert(samples.end(), region_samples.begin(), region_samples.end());
    FUSOR_ASSIGN_OR_RETURN(FitReport report, FitProfile(samples, &profile, options.fit_options));
    (void)report;
    out.profile = profile;
  }
  if (!options.residual) return out;
  AnalyticalCostModel base(out.profile);
  std::vector<ResidualSample> residual_samples;
  for (const auto& [r, times] : measured) {
    for (size_t a = 0; a < times.size(); ++a) {
      residual_samples.push_back(
          ResidualSampleOf(base, r->graph, r->alternatives[a].second, times[a]));
    }
  }
  for (const MeasuredWholePlan& p : data.plans) {
    if (!training(p.graph->model_name) || p.rounds_ns.empty()) continue;
    residual_samples.push_back(ResidualSampleOf(base, *p.graph, p.plan, Median(p.rounds_ns)));
    ++out.training_plans;
  }
  FUSOR_ASSIGN_OR_RETURN(out.residual, FitResidual(residual_samples, options.residual_options));
  return out;
}

CostTerms FoldedCostModel::GroupCost(const Graph& g, const FusionGroup& group,
                                     const std::vector<TensorId>& inputs,
                                     const std::vector<TensorId>& materialized,
                                     double leaf_footprint) const {
  return ModelOf(g).GroupCost(g, group, inputs, materialized, leaf_footprint);
}

double FoldedCostModel::InPlanNs(const Graph& g, const FusionPlan& plan) const {
  return ModelOf(g).InPlanNs(g, plan);
}

const CostModel& FoldedCostModel::ModelOf(const Graph& g) const {
  auto it = folds_.find(g.model_name);
  return *models_.at(it == folds_.end() ? 0 : it->second);
}

std::unique_ptr<CostModel> FoldCostModel(const FoldModel& m) {
  if (m.residual.empty()) return std::make_unique<AnalyticalCostModel>(m.profile);
  return std::make_unique<CorrectedCostModel>(m.profile, m.residual);
}

std::string RegionKind(const HeldOutRegion& r) {
  return GroupKindLabel(r.graph, r.alternatives.front().second.groups.front());
}

}  // namespace fusor
