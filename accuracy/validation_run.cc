#include "accuracy/validation_run.h"

#include <utility>

#include "runtime/constant_evaluator.h"

namespace fusor {
namespace {

// The quick calibration suite, or `count` of its benchmarks spread evenly over it.
std::vector<CalibrationBenchmark> MachineCheckSuite(const TargetFingerprint& target, int count) {
  std::vector<CalibrationBenchmark> suite = CalibrationSuite(target, /*scale=*/0.5);
  if (count <= 0 || static_cast<size_t>(count) >= suite.size()) return suite;
  std::vector<CalibrationBenchmark> spread;
  for (size_t i = 0; i < static_cast<size_t>(count); ++i) {
    spread.push_back(std::move(suite[i * suite.size() / count]));
  }
  return spread;
}

// The machine-check suite measured again against the profile (costmodel/validation.h).
StatusOr<MachineCheck> TakeMachineCheck(const HardwareProfile& profile, const MeasureFn& measure,
                                        const ValidationRunOptions& options,
                                        const std::string& phase, const PhaseProgressFn& progress) {
  return CheckMachine(MachineCheckSuite(profile.target, options.machine_check_benchmarks), profile,
                      measure, [&](size_t done, size_t total, const std::string& name) {
                        if (progress) progress(phase, done, total, name);
                      });
}

}  // namespace

StatusOr<std::vector<HeldOutRegion>> HeldOutRegionsOfModels(
    const std::vector<std::string>& model_paths, const ValidationRunOptions& options) {
  std::vector<HeldOutRegion> regions;
  for (const std::string& path : model_paths) {
    FUSOR_ASSIGN_OR_RETURN(Graph g, ImportOnnxFile(path, WithConstantFolding(options.import)));
    for (auto& r : HeldOutRegions(g, options.max_ops, options.regions, options.seed))
      regions.push_back(std::move(r));
  }
  return regions;
}

OneDnnMeasurerOptions ValidationMeasurerOptions(const TimingOptions& timing) {
  OneDnnMeasurerOptions mo;
  mo.timing = timing;
  return mo;
}

MeasureAlternativesFn MeasureSideBySide(Measurer* measurer) {
  return [measurer](const HeldOutRegion& r) -> StatusOr<std::vector<MeasuredTime>> {
    std::vector<FusionPlan> plans;
    for (const auto& [name, plan] : r.alternatives) plans.push_back(plan);
    FUSOR_ASSIGN_OR_RETURN(std::vector<Measurement> ms, measurer->MeasurePlans(r.graph, plans));
    std::vector<MeasuredTime> out;
    for (const Measurement& m : ms) out.push_back(MeasuredTimeOf(m));
    return out;
  };
}

StatusOr<ValidationRun> RunValidation(const std::vector<HeldOutRegion>& regions,
                                      const HardwareProfile& profile,
                                      const ValidationRunOptions& options,
                                      const PhaseProgressFn& progress,
                                      const MeasureAlternativesFn& measure) {
  OneDnnMeasurer measurer(ValidationMeasurerOptions(options.timing));
  const MeasureFn measure_plan = MeasurePlanWith(&measurer);
  ValidationRun run;
  if (options.settle_host_ms > 0) SettleHost(options.settle_host_ms, "costmodel validate");
  if (options.machine_check) {
    FUSOR_ASSIGN_OR_RETURN(run.before, TakeMachineCheck(profile, measure_plan, options,
                                                        "machine check (before)", progress));
  }
  AnalyticalCostModel model(profile);
  FUSOR_ASSIGN_OR_RETURN(run.report,
                         ValidateCostModel(
                             regions, model, measure ? measure : MeasureSideBySide(&measurer),
                             [&](size_t done, size_t total, const std::string& ops) {
                               if (progress) progress("measure", done, total, ops);
                             },
                             options.rounds));
  if (options.machine_check) {
    FUSOR_ASSIGN_OR_RETURN(run.after, TakeMachineCheck(profile, measure_plan, options,
                                                       "machine check (after)", progress));
  }
  return run;
}

StatusOr<ValidationRun> RunValidation(const std::vector<std::string>& model_paths,
                                      const HardwareProfile& profile,
                                      const ValidationRunOptions& options,
                                      const PhaseProgressFn& progress) {
  FUSOR_ASSIGN_OR_RETURN(std::vector<HeldOutRegion> regions,
                         HeldOutRegionsOfModels(model_paths, options));
  return RunValidation(regions, profile, options, progress);
}

nlohmann::json MachineCheckToJson(const MachineCheck& c) {
  return {{"benchmarks", c.benchmarks},
          {"median_measured_over_predicted", c.median_ratio},
          {"p10", c.p10_ratio},
          {"p90", c.p90_ratio},
          {"drifted", MachineDrifted(c)}};
}

nlohmann::json ValidationRunToJson(const ValidationRun& run) {
  nlohmann::json j = ReportToJson(run.report);
  if (run.before && run.after) {
    j["machine_check"] = {{"before", MachineCheckToJson(*run.before)},
                          {"after", MachineCheckToJson(*run.after)}};
  }
  return j;
}

}  // namespace fusor
