// Fitting the hardware profile to measurements. Calibration produces samples (a group's features
// and its measured median time); FitProfile adjusts every constant of the profile at once by
// Levenberg-Marquardt on log(predicted / measured) under a Cauchy loss (so a few samples disturbed
// by other processes do not drag the fit), with constants in log space (logit for the overlap
// factor, which lives in [0, 1]) and a weak pull toward the starting values so a constant no
// sample exercises stays where it was instead of drifting. Each constant's fit record says how many
// samples it mattered to (a 5% share of their prediction or more) and the RMS relative error over
// those. Bandwidths keep the memory hierarchy's order: L1 at least as fast as L2, L2 as L3, L3 as
// DRAM, for reads and for writes apart. The fit is a pure function of its inputs: rerun it over all
// samples so far to refit.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "costmodel/cost_model.h"
#include "costmodel/hardware_profile.h"

namespace fusor {

struct CalibrationSample {
  std::string benchmark;  // What was measured, for reports ("stream_l2_read_256KiB", ...).
  GroupFeatures features;
  double measured_ns = 0;
};

struct FitOptions {
  int max_iterations = 200;
  double prior_weight = 1e-3;  // Weight of the pull toward the starting values (per parameter).
  // Weight of the memory hierarchy's order (each level at least as fast as the one behind it),
  // per inverted pair: high, so the order holds to within a few percent.
  double order_weight = 100;
};

struct FitReport {
  double rms_rel_error = 0;  // Over all samples, after the fit.
  double mape = 0;           // Mean absolute percentage error, in percent.
  int iterations = 0;
  bool converged = false;
};

// `profile` holds the starting values on entry and the fitted values (with fit records) on return.
StatusOr<FitReport> FitProfile(const std::vector<CalibrationSample>& samples,
                               HardwareProfile* profile, const FitOptions& options = {});

// Solves A x = b by Gaussian elimination with partial pivoting; false if A is singular.
bool SolveLinearSystem(std::vector<std::vector<double>> A, std::vector<double> b,
                       std::vector<double>* x);

}  // namespace fusor
