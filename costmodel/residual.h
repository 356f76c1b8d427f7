// The learned residual: a correction factor on the analytical prediction of a group, fitted to
// measured times of whole plans and groups. The analytical terms stay the explanation; the
// residual only scales a group's predicted time by exp(w . x), where x describes the group as the
// analytical model sees it (its predicted time, each term's share of it, its kind, its FLOPs by
// class, its size) and w is a ridge fit of log(measured / predicted) over plans measured on the
// target. A plan's measured time is the sum of its groups' times, so the fit is on
// log(sum_g predicted_g * exp(w . x_g)) against log(measured), by Gauss-Newton; the ridge term
// pulls every weight but the bias toward 0, so a kind of group the training plans lack keeps the
// analytical prediction (times the bias). The factor is clamped to [1/3, 3]: the residual
// corrects, it does not replace.
//
// ResidualModel is a value; CorrectedCostModel is immutable after construction and safe to use
// from many threads.
#pragma once

#include <array>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "costmodel/cost_model.h"
#include "graph/graph.h"
#include "graph/plan.h"

namespace fusor {

inline constexpr int kResidualFeatures = 29;
using ResidualFeatureVector = std::array<double, kResidualFeatures>;

// The names of the features, in order (for reports and the JSON form).
const std::array<const char*, kResidualFeatures>& ResidualFeatureNames();

// x for one group: `terms` are the analytical model's for `features` of `group` in `g`.
ResidualFeatureVector ResidualFeaturesOf(const Graph& g, const FusionGroup& group,
                                         const GroupFeatures& features, const CostTerms& terms);

// One measured plan: each group's analytical time and x, and the measured time of them all.
struct ResidualSample {
  std::vector<double> predicted_ns;
  std::vector<ResidualFeatureVector> x;
  double measured_ns = 0;
  std::string model;  // The model the plan came from (leave-models-out folds), may be empty.
};

// The sample for `plan` of `g` measured at `measured_ns`, priced by `base`.
ResidualSample ResidualSampleOf(const AnalyticalCostModel& base, const Graph& g,
                                const FusionPlan& plan, double measured_ns);

struct ResidualFitOptions {
  // Ridge weight on every weight but the bias, against the mean squared log error.
  double ridge = 0.01;
  int iterations = 30;
};

struct ResidualModel {
  std::vector<double> weights;  // kResidualFeatures of them; empty: no correction.
  int training_samples = 0;
  double train_rms_log_error_before = 0, train_rms_log_error_after = 0;

  bool empty() const { return weights.empty(); }
  // exp(w . x), clamped to [1/3, 3]; 1 when empty.
  double Factor(const ResidualFeatureVector& x) const;
};

// Fits w over `samples` (at least one); deterministic.
StatusOr<ResidualModel> FitResidual(const std::vector<ResidualSample>& samples,
                                    const ResidualFitOptions& options = {});

// JSON form "fusor.residual.v1": {"format", "weights": {name: value}, "training_samples", ...}.
// Parsing is strict: an unknown or missing feature name is an error naming it.
nlohmann::json ResidualToJson(const ResidualModel& r);
StatusOr<ResidualModel> ResidualFromJson(const nlohmann::json& j);

// Identifies the feature vector's layout: "f29-" and 12 hex digits of a SHA-256 over the names in
// order. A stored sample is read back only under the version it was written with, so a change of
// the features is never misread as the old ones.
const std::string& ResidualFeaturesVersion();

// A sample as kept in the tuning database: {"model", "measured_ns", "groups": [[predicted_ns,
// x...], ...]}, the features in ResidualFeatureNames() order. Parsing is strict: a group of the
// wrong length, a non-finite number or a missing field is an error naming it.
nlohmann::json ResidualSampleToJson(const ResidualSample& s);
StatusOr<ResidualSample> ResidualSampleFromJson(const nlohmann::json& j);

// The analytical model with the residual on top: each group's terms are the analytical ones, and
// learned_ns = total * (factor - 1) is added to the total as a term of its own.
class CorrectedCostModel final : public CostModel {
 public:
  CorrectedCostModel(HardwareProfile profile, ResidualModel residual)
      : base_(std::move(profile)), residual_(std::move(residual)) {}
  std::string version() const override { return base_.version(); }
  CostTerms GroupCost(const Graph& g, const FusionGroup& group, const std::vector<TensorId>& inputs,
                      const std::vector<TensorId>& materialized,
                      double leaf_footprint) const override;
  double InPlanNs(const Graph& g, const FusionPlan& plan) const override {
    return base_.InPlanNs(g, plan);
  }
  const AnalyticalCostModel& base() const { return base_; }
  const ResidualModel& residual() const { return residual_; }

 private:
  AnalyticalCostModel base_;
  ResidualModel residual_;
};

}  // namespace fusor
