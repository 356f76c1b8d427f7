// Leave-models-out validation: the cost model judged only on models that nothing of it was fitted
// to. Models are put in folds by family (near-copies such as resnet18 and resnet18_dynamic_batch
// share one, so one is never judged by the other's measurements); for each fold, the profile and
// the learned residual are fitted on the calibration samples and on the measured regions and whole
// plans of the other folds' models only, and the fold's own models are then predicted. The
// measurements are the caller's (in practice a recording replayed: bench/costmodel_lab), so a model
// change is judged on fixed data, never by measuring again until a run passes.
//
// Stateless functions; thread-safe if the measure function is.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "costmodel/calibration.h"
#include "costmodel/cost_model.h"
#include "costmodel/fit.h"
#include "costmodel/residual.h"
#include "costmodel/validation.h"

namespace fusor {

// The family of a model: its name up to the first '_' or digit ("resnet18_dynamic_batch" ->
// "resnet", "efficientnet_v2_s" -> "efficientnet").
std::string ModelFamily(const std::string& model_name);

// Fold of each model: families in name order, the i-th in fold i % folds.
std::map<std::string, int> AssignFolds(const std::vector<std::string>& models, int folds);

// A whole plan of a model, measured in rounds (side by side with the model's other plans).
struct MeasuredWholePlan {
  const Graph* graph = nullptr;  // Not owned; outlives the call.
  std::string name;              // "none", "rules", "tuned".
  FusionPlan plan;
  std::vector<double> rounds_ns;
};

// The recorded measurements a fold may fit on (every model's: FitFold reads only the training
// folds' ones). Pointers are not owned and outlive the call.
struct FoldData {
  std::vector<CalibrationSample> calibration;  // The hand-picked suite's samples.
  const std::vector<HeldOutRegion>* regions = nullptr;
  MeasureAlternativesFn measure;  // Each region's alternatives, `rounds` times.
  int rounds = 1;
  std::vector<MeasuredWholePlan> plans;
  std::vector<const Graph*> models;  // The models the sampled suite is drawn from.
  MeasureFn measure_benchmark;       // Times a sampled benchmark (unstable: left out).
};

// What a fold fits besides the calibration suite.
struct FoldFitOptions {
  // Add benchmarks sampled from the training models (costmodel/sampled_suite.h) to the
  // calibration samples; 0 for none.
  int sampled_benchmarks = 0;
  // Refit the profile's constants on the calibration samples plus the training models' regions.
  bool refit_profile = false;
  // Fit the residual on the training models' regions and whole plans.
  bool residual = false;
  ResidualFitOptions residual_options;
  FitOptions fit_options;
};

// The model fitted for one fold.
struct FoldModel {
  int fold = 0;
  HardwareProfile profile;
  ResidualModel residual;  // Empty unless FoldFitOptions::residual.
  int training_regions = 0, training_plans = 0, sampled_benchmarks = 0;
};

// Fits the model for `fold`: every region, whole plan and sampled benchmark whose model is in
// another fold (by `folds`) is training data; the fold's own are never read. `start` is the
// profile fitted on the calibration samples alone (its target and starting values). Regions are
// scored by the median of their kept rounds, as ValidateCostModel keeps them.
StatusOr<FoldModel> FitFold(int fold, const std::map<std::string, int>& folds,
                            const HardwareProfile& start, const FoldData& data,
                            const FoldFitOptions& options);

// Predicts a group with the model of the fold its graph's model is in.
class FoldedCostModel final : public CostModel {
 public:
  FoldedCostModel(std::map<std::string, int> folds, std::vector<std::unique_ptr<CostModel>> models)
      : folds_(std::move(folds)), models_(std::move(models)) {}
  std::string version() const override { return models_.at(0)->version(); }
  CostTerms GroupCost(const Graph& g, const FusionGroup& group, const std::vector<TensorId>& inputs,
                      const std::vector<TensorId>& materialized,
                      double leaf_footprint) const override;
  double InPlanNs(const Graph& g, const FusionPlan& plan) const override;

 private:
  const CostModel& ModelOf(const Graph& g) const;
  std::map<std::string, int> folds_;
  std::vector<std::unique_ptr<CostModel>> models_;
};

// A fold's cost model: the analytical model with its profile, and the residual when it has one.
std::unique_ptr<CostModel> FoldCostModel(const FoldModel& m);

// The kind of a region for reports: its fused group's GroupKindLabel ("anchor:Conv", "loop").
std::string RegionKind(const HeldOutRegion& r);

}  // namespace fusor
