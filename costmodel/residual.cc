#include "costmodel/residual.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "base/sha256.h"
#include "costmodel/fit.h"
#include "graph/op_registry.h"

namespace fusor {
namespace {

constexpr std::array<const char*, kResidualFeatures> kNames = {"bias",
                                                               "log_predicted_us",
                                                               "share_compute",
                                                               "share_index",
                                                               "share_chains",
                                                               "share_memory",
                                                               "share_handoff",
                                                               "share_tiles",
                                                               "share_overlap",
                                                               "share_spill",
                                                               "share_launch",
                                                               "share_reorder",
                                                               "kind_anchor",
                                                               "kind_reduction",
                                                               "kind_loop",
                                                               "kind_single",
                                                               "kind_opaque",
                                                               "serial",
                                                               "log_nodes",
                                                               "flops_conv",
                                                               "flops_dwconv",
                                                               "flops_matmul",
                                                               "flops_loop",
                                                               "flops_jit",
                                                               "flops_reduction",
                                                               "share_injective",
                                                               "has_primitive_form",
                                                               "log_post_ops",
                                                               "has_handoff"};

// The factor's log is clamped here: [1/3, 3].
constexpr double kMaxLogFactor = 1.0986;

// Share of the group's FLOPs in the given classes.
double FlopsShare(const GroupFeatures& f, std::initializer_list<ComputeClass> classes) {
  double all = 0, some = 0;
  for (double x : f.flops) all += x;
  for (ComputeClass c : classes) some += f.flops[static_cast<size_t>(c)];
  return all > 0 ? some / all : 0;
}

double Dot(const std::vector<double>& w, const ResidualFeatureVector& x) {
  double s = 0;
  for (size_t j = 0; j < x.size(); ++j) s += w[j] * x[j];
  return s;
}

// log(sum_g p_g e^{w.x_g}) - log(measured), and its gradient in w.
double SampleResidual(const ResidualSample& s, const std::vector<double>& w,
                      std::vector<double>* gradient) {
  double sum = 0;
  gradient->assign(w.size(), 0);
  for (size_t g = 0; g < s.x.size(); ++g) {
    double share =
        s.predicted_ns[g] * std::exp(std::clamp(Dot(w, s.x[g]), -kMaxLogFactor, kMaxLogFactor));
    sum += share;
    for (size_t j = 0; j < w.size(); ++j) (*gradient)[j] += share * s.x[g][j];
  }
  for (double& v : *gradient) v /= std::max(sum, 1e-9);
  return std::log(std::max(sum, 1e-9) / s.measured_ns);
}

double RmsLogError(const std::vector<ResidualSample>& samples, const std::vector<double>& w) {
  double sq = 0;
  std::vector<double> unused;
  for (const ResidualSample& s : samples) sq += std::pow(SampleResidual(s, w, &unused), 2);
  return std::sqrt(sq / samples.size());
}

}  // namespace

const std::array<const char*, kResidualFeatures>& ResidualFeatureNames() { return kNames; }

ResidualFeatureVector ResidualFeaturesOf(const Graph& g, const FusionGroup& group,
                                         const GroupFeatures& f, const CostTerms& t) {
  ResidualFeatureVector x{};
  const double total = std::max(t.total_ns, 1.0);
  x[0] = 1;
  x[1] = std::log(total / 1e3);
  const double shares[] = {t.flops_ns, t.index_ns,   t.chain_ns, t.boundary_ns, t.handoff_ns,
                           t.tile_ns,  t.overlap_ns, t.spill_ns, t.launch_ns,   t.reorder_ns};
  for (size_t i = 0; i < std::size(shares); ++i) x[2 + i] = shares[i] / total;
  const GroupKind kinds[] = {GroupKind::kAnchor, GroupKind::kReduction, GroupKind::kLoop,
                             GroupKind::kSingle, GroupKind::kOpaque};
  for (size_t i = 0; i < std::size(kinds); ++i) x[12 + i] = group.kind == kinds[i] ? 1 : 0;
  x[17] = f.threads == 1 ? 1 : 0;
  x[18] = std::log(static_cast<double>(group.nodes.size()));
  x[19] = FlopsShare(f, {ComputeClass::kConv});
  x[20] = FlopsShare(f, {ComputeClass::kDepthwiseConv});
  x[21] = FlopsShare(f, {ComputeClass::kMatMul});
  x[22] = FlopsShare(
      f, {ComputeClass::kElementwise, ComputeClass::kTranscendental, ComputeClass::kErf});
  x[23] = FlopsShare(
      f, {ComputeClass::kJitTranscendental, ComputeClass::kJitSwish, ComputeClass::kJitSigmoid});
  x[24] = FlopsShare(f, {ComputeClass::kReduction});
  int injective = 0;
  for (NodeId id : group.nodes) injective += ClassifyNode(g, g.node(id)) == OpClass::kInjective;
  x[25] = static_cast<double>(injective) / std::max<size_t>(group.nodes.size(), 1);
  x[26] = f.or_else.empty() ? 0 : 1;
  x[27] = std::log1p(f.post_ops);
  x[28] = f.handoffs > 0 ? 1 : 0;
  return x;
}

ResidualSample ResidualSampleOf(const AnalyticalCostModel& base, const Graph& g,
                                const FusionPlan& plan, double measured_ns) {
  ResidualSample s;
  s.measured_ns = measured_ns;
  s.model = g.model_name;
  std::vector<GroupFeatures> features = PlanFeatures(g, plan, base.profile().target);
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    CostTerms t = EvaluateFeatures(features[i], base.profile());
    s.predicted_ns.push_back(t.total_ns);
    s.x.push_back(ResidualFeaturesOf(g, plan.groups[i], features[i], t));
  }
  return s;
}

const std::string& ResidualFeaturesVersion() {
  static const std::string version = [] {
    Sha256 h;
    for (const char* name : kNames) h.UpdateString(name);
    return "f" + std::to_string(kResidualFeatures) + "-" + h.FinishHex().substr(0, 12);
  }();
  return version;
}

nlohmann::json ResidualSampleToJson(const ResidualSample& s) {
  nlohmann::json groups = nlohmann::json::array();
  for (size_t g = 0; g < s.x.size(); ++g) {
    nlohmann::json row = nlohmann::json::array({s.predicted_ns[g]});
    for (double v : s.x[g]) row.push_back(v);
    groups.push_back(std::move(row));
  }
  return {{"model", s.model}, {"measured_ns", s.measured_ns}, {"groups", std::move(groups)}};
}

StatusOr<ResidualSample> ResidualSampleFromJson(const nlohmann::json& j) {
  auto finite = [](const nlohmann::json& v) {
    return v.is_number() && std::isfinite(v.get<double>());
  };
  if (!j.is_object() || !j.contains("measured_ns") || !finite(j["measured_ns"]) ||
      !j.contains("groups") || !j["groups"].is_array()) {
    return Status::InvalidArgument(
        "residual sample: expected an object with a finite 'measured_ns' and a 'groups' array");
  }
  ResidualSample s;
  s.measured_ns = j["measured_ns"].get<double>();
  if (j.contains("model") && j["model"].is_string()) s.model = j["model"].get<std::string>();
  for (size_t g = 0; g < j["groups"].size(); ++g) {
    const nlohmann::json& row = j["groups"][g];
    if (!row.is_array() || row.size() != kResidualFeatures + 1) {
      return Status::InvalidArgument("residual sample: group " + std::to_string(g) + " has not " +
                                     std::to_string(kResidualFeatures + 1) +
                                     " numbers (the predicted time, then the features)");
    }
    for (const nlohmann::json& v : row) {
      if (!finite(v)) {
        return Status::InvalidArgument("residual sample: group " + std::to_string(g) +
                                       " has a value that is not a finite number");
      }
    }
    s.predicted_ns.push_back(row[0].get<double>());
    ResidualFeatureVector x{};
    for (size_t k = 0; k < x.size(); ++k) x[k] = row[k + 1].get<double>();
    s.x.push_back(x);
  }
  return s;
}

double ResidualModel::Factor(const ResidualFeatureVector& x) const {
  if (weights.empty()) return 1;
  return std::exp(std::clamp(Dot(weights, x), -kMaxLogFactor, kMaxLogFactor));
}

// Gauss-Newton on the mean squared log error plus ridge * |w without the bias|^2, from w = 0.
StatusOr<ResidualModel> FitResidual(const std::vector<ResidualSample>& samples,
                                    const ResidualFitOptions& options) {
  if (samples.empty()) return Status::InvalidArgument("residual fit: no measured samples");
  for (const ResidualSample& s : samples) {
    if (!(s.measured_ns > 0) || s.x.empty() || s.x.size() != s.predicted_ns.size()) {
      return Status::InvalidArgument("residual fit: a sample of model '" + s.model +
                                     "' has no groups or no positive measured time");
    }
  }
  const size_t n = kResidualFeatures;
  const double count = static_cast<double>(samples.size());
  std::vector<double> w(n, 0);
  ResidualModel out;
  out.training_samples = static_cast<int>(samples.size());
  out.train_rms_log_error_before = RmsLogError(samples, w);
  for (int it = 0; it < options.iterations; ++it) {
    std::vector<std::vector<double>> A(n, std::vector<double>(n, 0));
    std::vector<double> b(n, 0), grad;
    for (const ResidualSample& s : samples) {
      double r = SampleResidual(s, w, &grad);
      for (size_t a = 0; a < n; ++a) {
        b[a] -= grad[a] * r / count;
        for (size_t c = 0; c < n; ++c) A[a][c] += grad[a] * grad[c] / count;
      }
    }
    for (size_t a = 1; a < n; ++a) {
      A[a][a] += options.ridge;
      b[a] -= options.ridge * w[a];
    }
    A[0][0] += 1e-9;
    std::vector<double> delta;
    if (!SolveLinearSystem(A, b, &delta)) break;
    double step = 0;
    for (size_t a = 0; a < n; ++a) {
      w[a] += delta[a];
      step = std::max(step, std::fabs(delta[a]));
    }
    if (step < 1e-6) break;
  }
  out.weights = w;
  out.train_rms_log_error_after = RmsLogError(samples, w);
  return out;
}

nlohmann::json ResidualToJson(const ResidualModel& r) {
  nlohmann::json weights = nlohmann::json::object();
  for (size_t j = 0; j < r.weights.size(); ++j) weights[kNames[j]] = r.weights[j];
  return {{"format", "fusor.residual.v1"},
          {"weights", weights},
          {"training_samples", r.training_samples},
          {"train_rms_log_error_before", r.train_rms_log_error_before},
          {"train_rms_log_error_after", r.train_rms_log_error_after}};
}

StatusOr<ResidualModel> ResidualFromJson(const nlohmann::json& j) {
  if (!j.is_object() || j.value("format", "") != "fusor.residual.v1") {
    return Status::InvalidArgument("residual: expected an object with format 'fusor.residual.v1'");
  }
  ResidualModel r;
  const auto& weights = j.contains("weights") ? j["weights"] : nlohmann::json();
  if (!weights.is_object()) return Status::InvalidArgument("residual: 'weights' is not an object");
  std::set<std::string> known(kNames.begin(), kNames.end());
  for (const auto& [name, value] : weights.items()) {
    if (!known.count(name))
      return Status::InvalidArgument("residual: unknown feature '" + name + "'");
    if (!value.is_number()) {
      return Status::InvalidArgument("residual: weight of '" + name + "' is not a number");
    }
  }
  for (const char* name : kNames) {
    if (!weights.contains(name)) {
      return Status::InvalidArgument(std::string("residual: missing weight of '") + name + "'");
    }
    r.weights.push_back(weights[name].get<double>());
  }
  if (!j.contains("training_samples") || !j["training_samples"].is_number_integer()) {
    return Status::InvalidArgument("residual: 'training_samples' is missing or not an integer");
  }
  r.training_samples = j["training_samples"].get<int>();
  r.train_rms_log_error_before = j.value("train_rms_log_error_before", 0.0);
  r.train_rms_log_error_after = j.value("train_rms_log_error_after", 0.0);
  return r;
}

CostTerms CorrectedCostModel::GroupCost(const Graph& g, const FusionGroup& group,
                                        const std::vector<TensorId>& inputs,
                                        const std::vector<TensorId>& materialized,
                                        double leaf_footprint) const {
  GroupFeatures f =
      GroupFeaturesOf(g, group, inputs, materialized, base_.profile().target, leaf_footprint);
  CostTerms t = EvaluateFeatures(f, base_.profile());
  t.learned_ns = t.total_ns * (residual_.Factor(ResidualFeaturesOf(g, group, f, t)) - 1);
  t.total_ns += t.learned_ns;
  return t;
}

}  // namespace fusor
