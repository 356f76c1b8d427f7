// The validation workflow of `fusor costmodel validate`, as a library function the CLI prints and
// bench/costmodel_lab calls where it stands in for the command: the held-out regions of the given
// models (costmodel/validation.h), each region's alternatives timed side by side with runtime/'s
// OneDnnMeasurer under the validate timing policy (runtime/timing_policy.h) on a settled host, the
// cost model's predictions scored against them, and the quick calibration suite measured before
// and after against the profile (MachineCheck), so that drift of the machine shows apart from the
// model's error.
//
// It lives in accuracy/, above both costmodel/ (which prices plans and never runs them) and
// runtime/ (which runs plans and knows no cost model). Functions are stateless; RunValidation
// times on the calling thread and is not to be run twice at once on one host (the timings would
// disturb each other).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "accuracy/measured_time.h"
#include "base/status.h"
#include "costmodel/calibration.h"
#include "costmodel/hardware_profile.h"
#include "costmodel/validation.h"
#include "graph/onnx_import.h"
#include "runtime/measurer.h"
#include "runtime/timing_policy.h"

namespace fusor {

struct ValidationRunOptions {
  int max_ops = 6;    // Ops per held-out region, at most.
  int regions = 40;   // Regions per model, at most.
  uint64_t seed = 1;  // Chooses the regions.
  int rounds = 4;     // Interleaved measurements of each alternative (the median counts).
  // How each alternative (and each machine-check benchmark) is timed: the validate policy. Tests
  // that check the workflow's structure, not its figures, accept any spread here.
  TimingOptions timing = TimingFor(TimingPolicy::kValidate, kValidateMinMs);
  // Measure the quick calibration suite before and after the regions. A caller answering from
  // recorded times (bench/costmodel_lab) turns it off: the check only means something live.
  bool machine_check = true;
  // At most this many of the quick suite's benchmarks in each machine check, spread evenly over
  // it (its families follow one another); 0 takes them all. Tests of the workflow take a few.
  int machine_check_benchmarks = 0;
  // How long to wait, at most, for a quiet host before the first timing (SettleHost).
  int settle_host_ms = kSettleHostMaxMs;
  ImportOptions import;  // How the models are imported; constant nodes are always folded.
};

// What a validation measured: the report, and the machine checks when they were taken.
struct ValidationRun {
  ValidationReport report;
  std::optional<MachineCheck> before, after;
};

// Progress within a phase of RunValidation: "machine check (before)", "measure",
// "machine check (after)".
using PhaseProgressFn = std::function<void(const std::string& phase, size_t done, size_t total,
                                           const std::string& name)>;

// The held-out regions of each model, imported with `options.import` and constant nodes folded.
// A model that does not import is an error naming its path.
StatusOr<std::vector<HeldOutRegion>> HeldOutRegionsOfModels(
    const std::vector<std::string>& model_paths, const ValidationRunOptions& options);

// How validation times: a OneDnnMeasurer with `timing` (by default the validate policy).
OneDnnMeasurerOptions ValidationMeasurerOptions(
    const TimingOptions& timing = ValidationRunOptions{}.timing);

// A region's alternatives timed side by side by `measurer` (Measurer::MeasurePlans), so that a
// change of the host's speed falls on all of them alike.
MeasureAlternativesFn MeasureSideBySide(Measurer* measurer);

// Settles the host, takes the machine check before (options.machine_check), scores `profile`'s
// analytical cost model on `regions` over options.rounds rounds, and takes the machine check
// after. `measure` times the regions' alternatives; empty, they are timed side by side with a
// OneDnnMeasurer under ValidationMeasurerOptions(options.timing), which also times the checks.
StatusOr<ValidationRun> RunValidation(const std::vector<HeldOutRegion>& regions,
                                      const HardwareProfile& profile,
                                      const ValidationRunOptions& options,
                                      const PhaseProgressFn& progress = {},
                                      const MeasureAlternativesFn& measure = {});

// RunValidation over the held-out regions of the models at `model_paths`.
StatusOr<ValidationRun> RunValidation(const std::vector<std::string>& model_paths,
                                      const HardwareProfile& profile,
                                      const ValidationRunOptions& options,
                                      const PhaseProgressFn& progress = {});

// The report as ReportToJson writes it, with "machine_check": {"before", "after"} when taken.
nlohmann::json ValidationRunToJson(const ValidationRun& run);
nlohmann::json MachineCheckToJson(const MachineCheck& c);

}  // namespace fusor
