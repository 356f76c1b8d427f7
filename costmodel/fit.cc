#include "costmodel/fit.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace fusor {
namespace {

// Unconstrained coordinates: log for positive constants, logit for the overlap factor.
struct Coordinates {
  static double ToU(const std::string& name, double v) {
    if (name == "overlap_alpha") {
      v = std::clamp(v, 1e-4, 1 - 1e-4);
      return std::log(v / (1 - v));
    }
    return std::log(std::max(v, 1e-12));
  }
  static double FromU(const std::string& name, double u) {
    if (name == "overlap_alpha") return 1 / (1 + std::exp(-u));
    return std::exp(u);
  }
};

// Log-ratio error at which the Cauchy loss starts to discount a sample (~30%).
constexpr double kCauchyScale = 0.3;

// The memory hierarchy's order: a level nearer the core is at least as fast as the one behind
// it, for reads and for writes. Samples alone do not pin it (most groups read and write at once,
// so a fit can trade a read rate against a write rate of another level); without it the fit has
// put L2 writes at 1 TB/s and L3 reads above L2 reads, which prices a pass over an L2-resident
// tensor at half of what it costs.
constexpr std::pair<const char*, const char*> kOrdered[] = {
    {"l1_read_gbps", "l2_read_gbps"},   {"l2_read_gbps", "l3_read_gbps"},
    {"l3_read_gbps", "dram_read_gbps"}, {"l1_write_gbps", "l2_write_gbps"},
    {"l2_write_gbps", "l3_write_gbps"}, {"l3_write_gbps", "dram_write_gbps"},
};

class Problem {
 public:
  Problem(const std::vector<CalibrationSample>& samples, const HardwareProfile& start,
          const FitOptions& options)
      : samples_(samples),
        profile_(start),
        prior_sqrt_(std::sqrt(options.prior_weight)),
        order_sqrt_(std::sqrt(options.order_weight)) {
    for (const auto& [name, f] : profile_.Parameters()) {
      names_.push_back(name);
      u0_.push_back(Coordinates::ToU(name, f->value));
    }
    auto index = [this](const char* name) {
      return static_cast<size_t>(std::find(names_.begin(), names_.end(), name) - names_.begin());
    };
    for (auto [faster, slower] : kOrdered) ordered_.emplace_back(index(faster), index(slower));
  }

  size_t num_params() const { return names_.size(); }
  void set_robust(bool robust) { robust_ = robust; }

  // Keeps a step inside each parameter's plausible range (slightly inside, so the result passes
  // CheckPlausible): a constant few samples pin must not run off to an absurd value.
  void Clamp(std::vector<double>* u) const {
    for (size_t j = 0; j < u->size(); ++j) {
      auto [lo, hi] = PlausibleRange(names_[j]);
      double a = Coordinates::ToU(names_[j], std::max(lo * 1.01, lo + 1e-6));
      double b = Coordinates::ToU(names_[j], hi * 0.99);
      (*u)[j] = std::clamp((*u)[j], a, b);
    }
  }
  size_t num_residuals() const { return samples_.size() + names_.size() + ordered_.size(); }
  const std::vector<double>& start() const { return u0_; }

  void Apply(const std::vector<double>& u, HardwareProfile* p) const {
    auto params = p->Parameters();
    for (size_t j = 0; j < u.size(); ++j)
      params[j].second->value = Coordinates::FromU(names_[j], u[j]);
  }

  std::vector<double> Predictions(const std::vector<double>& u) const {
    HardwareProfile p = profile_;
    Apply(u, &p);
    std::vector<double> out;
    for (const auto& s : samples_) out.push_back(EvaluateFeatures(s.features, p).total_ns);
    return out;
  }

  // Per sample, the log of predicted over measured time (a factor of 2 too slow weighs the same as
  // a factor of 2 too fast) through a Cauchy loss: a sample disturbed by another process on the
  // machine pulls the fit far less than a square would let it.
  std::vector<double> Residuals(const std::vector<double>& u) const {
    std::vector<double> pred = Predictions(u);
    std::vector<double> r;
    for (size_t i = 0; i < samples_.size(); ++i) {
      double e = std::log(std::max(pred[i], 1e-9) / samples_[i].measured_ns);
      double c = kCauchyScale;
      r.push_back(robust_ ? std::copysign(c * std::sqrt(std::log1p(e * e / (c * c))), e) : e);
    }
    for (size_t j = 0; j < u.size(); ++j) r.push_back(prior_sqrt_ * (u[j] - u0_[j]));
    // Zero while the order holds; grows with the log of the inversion when it does not.
    for (auto [faster, slower] : ordered_) {
      r.push_back(order_sqrt_ * std::max(0.0, u[slower] - u[faster]));
    }
    return r;
  }

  const std::vector<CalibrationSample>& samples() const { return samples_; }
  const std::vector<std::string>& names() const { return names_; }

 private:
  const std::vector<CalibrationSample>& samples_;
  HardwareProfile profile_;
  double prior_sqrt_;
  double order_sqrt_;
  bool robust_ = false;
  std::vector<std::pair<size_t, size_t>> ordered_;  // (faster, slower) parameter indices.
  std::vector<std::string> names_;
  std::vector<double> u0_;
};

double SumSquares(const std::vector<double>& r) {
  double s = 0;
  for (double x : r) s += x * x;
  return s;
}

// Forward-difference Jacobian, row-major [residual][parameter].
std::vector<std::vector<double>> Jacobian(const Problem& p, const std::vector<double>& u,
                                          const std::vector<double>& r0) {
  const double h = 1e-5;
  std::vector<std::vector<double>> J(r0.size(), std::vector<double>(u.size()));
  for (size_t j = 0; j < u.size(); ++j) {
    std::vector<double> v = u;
    v[j] += h;
    std::vector<double> r = p.Residuals(v);
    for (size_t i = 0; i < r.size(); ++i) J[i][j] = (r[i] - r0[i]) / h;
  }
  return J;
}

// One damped Gauss-Newton step: (J^T J + lambda diag(J^T J)) delta = -J^T r.
bool Step(const std::vector<std::vector<double>>& J, const std::vector<double>& r, double lambda,
          std::vector<double>* delta) {
  const size_t n = J[0].size();
  std::vector<std::vector<double>> A(n, std::vector<double>(n, 0));
  std::vector<double> g(n, 0);
  for (size_t i = 0; i < J.size(); ++i) {
    for (size_t a = 0; a < n; ++a) {
      g[a] -= J[i][a] * r[i];
      for (size_t b = 0; b < n; ++b) A[a][b] += J[i][a] * J[i][b];
    }
  }
  for (size_t a = 0; a < n; ++a) A[a][a] += lambda * std::max(A[a][a], 1e-12);
  return SolveLinearSystem(std::move(A), std::move(g), delta);
}

// Levenberg-Marquardt to convergence; returns the iterations used.
int Minimise(const Problem& p, const FitOptions& options, std::vector<double>* u, bool* converged) {
  std::vector<double> r = p.Residuals(*u);
  double cost = SumSquares(r), lambda = 1e-3;
  *converged = false;
  int it = 0;
  for (; it < options.max_iterations; ++it) {
    auto J = Jacobian(p, *u, r);
    std::vector<double> delta;
    if (!Step(J, r, lambda, &delta)) break;
    std::vector<double> v = *u;
    for (size_t j = 0; j < v.size(); ++j) v[j] += delta[j];
    p.Clamp(&v);
    std::vector<double> rv = p.Residuals(v);
    double cv = SumSquares(rv);
    if (cv < cost) {
      bool small = cost - cv < 1e-12 * std::max(1.0, cost);
      *u = std::move(v);
      r = std::move(rv);
      cost = cv;
      lambda = std::max(lambda / 3, 1e-12);
      if (small) {
        *converged = true;
        break;
      }
    } else {
      lambda *= 4;
      if (lambda > 1e12) {
        *converged = true;  // No descent direction left: at a minimum.
        break;
      }
    }
  }
  return it;
}

// Fit record per parameter: the samples whose prediction it moves by 5% or more.
void RecordFit(const Problem& p, const std::vector<double>& u, HardwareProfile* profile) {
  std::vector<double> pred = p.Predictions(u);
  auto params = profile->Parameters();
  for (size_t j = 0; j < u.size(); ++j) {
    std::vector<double> v = u;
    v[j] += 0.1;  // ~10% change of the constant.
    std::vector<double> moved = p.Predictions(v);
    double sq = 0;
    int n = 0;
    for (size_t i = 0; i < pred.size(); ++i) {
      if (std::fabs(moved[i] - pred[i]) < 0.005 * pred[i]) continue;  // 5% share: 0.5% per 10%.
      double rel = (pred[i] - p.samples()[i].measured_ns) / p.samples()[i].measured_ns;
      sq += rel * rel;
      ++n;
    }
    params[j].second->samples = n;
    params[j].second->rel_error = n ? std::sqrt(sq / n) : 0;
  }
}

}  // namespace

bool SolveLinearSystem(std::vector<std::vector<double>> A, std::vector<double> b,
                       std::vector<double>* x) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::fabs(A[r][c]) > std::fabs(A[pivot][c])) pivot = r;
    }
    if (std::fabs(A[pivot][c]) < 1e-300) return false;
    std::swap(A[c], A[pivot]);
    std::swap(b[c], b[pivot]);
    for (size_t r = c + 1; r < n; ++r) {
      double k = A[r][c] / A[c][c];
      for (size_t k2 = c; k2 < n; ++k2) A[r][k2] -= k * A[c][k2];
      b[r] -= k * b[c];
    }
  }
  x->assign(n, 0);
  for (size_t c = n; c-- > 0;) {
    double s = b[c];
    for (size_t k = c + 1; k < n; ++k) s -= A[c][k] * (*x)[k];
    (*x)[c] = s / A[c][c];
  }
  return true;
}

StatusOr<FitReport> FitProfile(const std::vector<CalibrationSample>& samples,
                               HardwareProfile* profile, const FitOptions& options) {
  if (samples.empty()) return Status::InvalidArgument("calibration has no samples to fit");
  for (const auto& s : samples) {
    if (!(s.measured_ns > 0) || !std::isfinite(s.measured_ns)) {
      return Status::InvalidArgument("sample '" + s.benchmark + "' has measured time " +
                                     std::to_string(s.measured_ns) + " ns; it must be positive");
    }
  }
  Problem problem(samples, *profile, options);
  std::vector<double> u = problem.start();
  problem.Clamp(&u);
  FitReport report;
  // Squared log errors first (one basin, so the fit finds the right region from the defaults),
  // then the Cauchy loss from there (far from the minimum its gradient vanishes, so it only
  // refines).
  report.iterations = Minimise(problem, options, &u, &report.converged);
  problem.set_robust(true);
  report.iterations += Minimise(problem, options, &u, &report.converged);
  problem.Apply(u, profile);
  RecordFit(problem, u, profile);
  std::vector<double> pred = problem.Predictions(u);
  double sq = 0, abs = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    double rel = (pred[i] - samples[i].measured_ns) / samples[i].measured_ns;
    sq += rel * rel;
    abs += std::fabs(rel);
  }
  report.rms_rel_error = std::sqrt(sq / samples.size());
  report.mape = 100 * abs / samples.size();
  return report;
}

}  // namespace fusor
