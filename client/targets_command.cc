#include "client/targets_command.h"

#include <google/protobuf/util/json_util.h>
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>

#include "accuracy/validation_run.h"
#include "base/input_file.h"
#include "client/calibration_summary.h"
#include "client/connection.h"
#include "client/exit_codes.h"
#include "client/progress_display.h"
#include "client/text_format.h"
#include "costmodel/hardware_profile.h"
#include "costmodel/validation.h"
#include "runtime/measurer.h"
#include "runtime/onednn_info.h"

namespace fusor {
namespace {

void PrintProfile(const HardwareProfile& p) {
  std::cout << WrapText(fmt::format("target {}: {}, {}, {} cores, L1d {}, L2 {}, L3 {}, oneDNN {}",
                                    p.target.Id(), p.target.cpu_model, p.target.isa, p.target.cores,
                                    ByteString(p.target.l1d_bytes), ByteString(p.target.l2_bytes),
                                    ByteString(p.target.l3_bytes), p.target.onednn_version));
  TextTable table({"PARAMETER", "VALUE", "FIT ERROR", "SAMPLES"});
  for (const auto& [name, f] : p.Parameters()) {
    table.Add({name, fmt::format("{:.4g}", f->value), fmt::format("{:.1f}%", 100 * f->rel_error),
               std::to_string(f->samples)});
  }
  table.Print(std::cout);
}

struct CalibrateFlags {
  ConnectionOptions connection;
  double time_limit_s = 0;
  bool json = false;
  bool fresh = false;
  bool list_noisy = false;
  std::string out;
  std::string samples;
};

// How far off the prediction is, either way: |log(predicted / measured)|.
double Miss(const v1::FittedSample& s) {
  if (s.measured_ns() <= 0 || s.predicted_ns() <= 0) return HUGE_VAL;
  return std::abs(std::log(s.predicted_ns() / s.measured_ns()));
}

// The samples file: every sample the fit used, the worst-predicted first.
nlohmann::json SlowRunsJson(const v1::CalibrateResponse& r) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : r.slow_runs())
    out.push_back({{"run_id", s.run_id()}, {"slowdown", s.slowdown()}});
  return out;
}

StatusOr<nlohmann::json> FittedSamplesJson(const v1::CalibrateResponse& r) {
  std::vector<v1::FittedSample> sorted(r.samples().begin(), r.samples().end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return Miss(a) > Miss(b); });
  nlohmann::json samples = nlohmann::json::array();
  for (const v1::FittedSample& s : sorted) {
    nlohmann::json features = nlohmann::json::parse(s.features_json(), nullptr, false);
    if (!features.is_object()) {
      return Status::Internal("the tuner sent features of sample '" + s.benchmark() +
                              "' that are not a JSON object");
    }
    features.erase("benchmark");  // SampleToJson repeats these two; they are fields above.
    features.erase("measured_ns");
    samples.push_back({{"benchmark", s.benchmark()},
                       {"run_id", s.run_id()},
                       {"measured_ns", s.measured_ns()},
                       {"predicted_ns", s.predicted_ns()},
                       {"features", std::move(features)}});
  }
  return nlohmann::json{{"target_id", r.profile().target().id()},
                        {"cost_model_version", r.profile().cost_model_version()},
                        {"runs_used", r.runs_used()},
                        {"slow_runs", SlowRunsJson(r)},
                        {"slow_timings", r.slow_timings()},
                        {"samples_used", r.samples_used()},
                        {"samples", std::move(samples)}};
}

Status WriteFittedSamples(const v1::CalibrateResponse& r, const std::string& path) {
  FUSOR_ASSIGN_OR_RETURN(nlohmann::json samples, FittedSamplesJson(r));
  std::ofstream out(path);
  out << samples.dump(2) << "\n";
  if (!out) return Status::IOError("cannot write the samples to '" + path + "'");
  return Status::Ok();
}

int RunCalibrate(const CalibrateFlags& f) {
  auto api = Connect(f.connection);
  if (!api.ok()) return ReportError("calibrate", api.status());
  std::cerr << "calibrating (oneDNN micro-benchmarks on the tuner's CPU)...\n";
  v1::CalibrateRequest request;
  request.set_time_limit_s(f.time_limit_s);
  request.set_fresh(f.fresh);
  request.set_include_samples(!f.samples.empty());
  auto response = (*api)->Calibrate(request);
  if (!response.ok()) return ReportError("calibrate", response.status());
  auto profile = ProfileFromProto(response->profile());
  if (!profile.ok()) return ReportError("calibrate", profile.status());
  std::cerr << CalibrationSummary(*response, f.list_noisy);
  if (!f.out.empty()) {
    std::ofstream(f.out) << ProfileToJson(*profile).dump(2) << "\n";
    std::cerr << "wrote " << f.out << "\n";
  }
  if (!f.samples.empty()) {
    Status s = WriteFittedSamples(*response, f.samples);
    if (!s.ok()) return ReportError("calibrate", s);
    std::cerr << "wrote " << f.samples << "\n";
  }
  if (f.json) {
    std::cout << ProfileToJson(*profile).dump(2) << "\n";
  } else {
    PrintProfile(*profile);
  }
  return kExitOk;
}

struct TargetsFlags {
  ConnectionOptions connection;
  bool json = false;
  std::string profile_path;
};

int RunList(const TargetsFlags& f) {
  auto api = Connect(f.connection);
  if (!api.ok()) return ReportError("targets list", api.status());
  auto response = (*api)->ListTargets({});
  if (!response.ok()) return ReportError("targets list", response.status());
  nlohmann::json all = nlohmann::json::array();
  TextTable table({"TARGET", "ISA", "CORES", "CALIBRATED", "CPU"});
  for (const auto& p : response->profiles()) {
    auto profile = ProfileFromProto(p);
    if (!profile.ok()) return ReportError("targets list", profile.status());
    if (f.json) {
      all.push_back(ProfileToJson(*profile));
      continue;
    }
    std::string when = profile->calibrated_unix_ms ? LocalIsoTime(profile->calibrated_unix_ms)
                                                   : "never (defaults)";
    table.Add({profile->target.Id(), profile->target.isa, std::to_string(profile->target.cores),
               when, profile->target.cpu_model});
  }
  if (f.json) {
    std::cout << all.dump(2) << "\n";
  } else {
    table.Print(std::cout);
  }
  return kExitOk;
}

int RunRegister(const TargetsFlags& f) {
  auto text = ReadInputFile(f.profile_path, "profile file", kMaxProfileFileBytes);
  if (!text.ok()) return ReportError("targets register", text.status());
  auto profile = ProfileFromJsonText(*text);
  if (!profile.ok())
    return ReportError("targets register", profile.status().WithContext(f.profile_path));
  auto api = Connect(f.connection);
  if (!api.ok()) return ReportError("targets register", api.status());
  v1::RegisterTargetRequest request;
  ProfileToProto(*profile, request.mutable_profile());
  auto response = (*api)->RegisterTarget(request);
  if (!response.ok()) return ReportError("targets register", response.status());
  std::printf("registered target %s\n", response->target_id().c_str());
  return kExitOk;
}

struct ValidateFlags {
  std::vector<std::string> models;
  ConnectionOptions connection;
  int max_ops = 6;
  int regions = 40;
  uint64_t seed = 1;
  int rounds = 4;
  bool json = false;
  std::string plot;
};

// The profile of this machine, as the local tuning database holds it.
StatusOr<HardwareProfile> LocalProfile(const ConnectionOptions& c) {
  FUSOR_ASSIGN_OR_RETURN(auto api, Connect(c));
  FUSOR_ASSIGN_OR_RETURN(TargetFingerprint local, DetectTarget(OneDnnIsa(), OneDnnVersion()));
  FUSOR_ASSIGN_OR_RETURN(v1::ListTargetsResponse targets, api->ListTargets({}));
  for (const auto& p : targets.profiles()) {
    if (p.target().id() == local.Id()) return ProfileFromProto(p);
  }
  return Status::NotFound("this machine (target " + local.Id() +
                          ") has no profile in the database; run `fusor calibrate` first");
}

Status WritePlot(const ValidationReport& r, const std::string& png) {
  std::string data = png + ".dat";
  {
    std::ofstream out(data);
    for (const auto& i : r.items) out << i.measured_ns / 1e3 << " " << i.predicted_ns / 1e3 << "\n";
  }
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return Status::FailedPrecondition(
        "--plot needs gnuplot (apt-get install gnuplot-nox); the data "
        "is in " +
        data);
  }
  std::string script =
      "set terminal pngcairo size 800,700; set output '" + png +
      "'; set logscale xy; set xlabel 'measured (us)'; set ylabel 'predicted (us)'; "
      "set key top left; set grid; f(x)=x; plot '" +
      data +
      "' using 1:2 with points pt 7 ps 0.6 title 'held-out groups', f(x) title "
      "'predicted = measured', 1.2*x dt 2 lc rgb 'gray' title '+/-20%', 0.8*x dt 2 "
      "lc rgb 'gray' notitle";
  std::string cmd = "gnuplot -e \"" + script + "\"";
  if (std::system(cmd.c_str()) != 0) return Status::IOError("gnuplot failed to write " + png);
  return Status::Ok();
}

void PrintMachineCheck(const MachineCheck& before, const MachineCheck& after) {
  std::printf(
      "machine check    calibration benchmarks run at %.2fx the profile's prediction before, "
      "%.2fx after (median of %d)   1.00 = as calibrated\n",
      before.median_ratio, after.median_ratio, after.benchmarks);
  for (const MachineCheck* c : {&before, &after}) {
    if (!MachineDrifted(*c)) continue;
    std::printf(
        "warning: this CPU ran %.0f%% %s than when it was calibrated (a shared host, frequency); "
        "the figures above mix that drift with the model's error: run `fusor calibrate` and "
        "validate again\n",
        100 * std::fabs(c->median_ratio - 1), c->median_ratio > 1 ? "slower" : "faster");
    break;
  }
}

constexpr size_t kWrongCallsShown = 8;

int RunValidate(const ValidateFlags& f) {
  auto profile = LocalProfile(f.connection);
  if (!profile.ok()) return ReportError("costmodel validate", profile.status());
  ValidationRunOptions options;
  options.max_ops = f.max_ops;
  options.regions = f.regions;
  options.seed = f.seed;
  options.rounds = f.rounds;
  ProgressDisplay progress;
  std::string phase;
  auto run = RunValidation(
      f.models, *profile, options,
      [&](const std::string& now, size_t done, size_t total, const std::string& name) {
        if (now != phase) progress.Finish(), phase = now;
        progress.Update(now, static_cast<double>(done) / std::max<size_t>(total, 1), name);
      });
  progress.Finish();
  if (!run.ok()) return ReportError("costmodel validate", run.status());
  const ValidationReport& report = run->report;
  nlohmann::json j = ValidationRunToJson(*run);
  if (f.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("held-out regions %d (%zu alternatives measured, %d skipped as unstable)\n",
                report.regions, report.items.size(), report.skipped_unstable);
    if (report.disturbed_rounds > 0) {
      std::printf(
          "slow host        %d of %d rounds were measured in one of the host's slow states and "
          "left "
          "out (data between cores %.1fx+ dearer than kept on one)\n",
          report.disturbed_rounds, report.rounds, kMaxCrossCoreRatio);
    }
    std::printf("MAPE             %.1f%% (median %.1f%%, p90 %.1f%%)   goal <= 20%%\n", report.mape,
                j["median_ape_percent"].get<double>(), j["p90_ape_percent"].get<double>());
    std::printf("Kendall tau      %.3f (%.3f over pairs measured >= 5%% apart)   goal >= 0.8\n",
                report.kendall_tau, report.decisive_tau);
    std::printf(
        "fuse-or-not      %.1f%% of %d decisions agree with measurement (%.1f%% of %d "
        "decisive ones, gap >= 5%%)   goal >= 90%%\n",
        100 * report.agreement, report.decisions, 100 * report.decisive_agreement,
        report.decisive_decisions);
    if (f.rounds >= 2) {
      std::printf(
          "repeatability    tau %.3f, fuse-or-not %.1f%%: even rounds against odd ones, how far "
          "any model could agree with these measurements\n",
          report.repeat_tau, 100 * report.repeat_agreement);
    }
    std::printf("tau by measured gap (model / even-vs-odd rounds, pairs):");
    for (const GapBucket& b : report.by_gap) {
      if (std::isinf(b.max_gap)) {
        std::printf("  >=%g%%", 100 * b.min_gap);
      } else {
        std::printf("  %g-%g%%", 100 * b.min_gap, 100 * b.max_gap);
      }
      std::printf(" %.2f / %.2f (%d)", b.tau, b.repeat_tau, b.pairs);
    }
    std::printf("\n");
    PrintMachineCheck(*run->before, *run->after);
    std::vector<WrongFuseCall> wrong = WrongFuseCalls(report);
    if (!wrong.empty()) {
      std::printf("wrong fuse-or-not calls (fused / unfused time, measured vs predicted%s):\n",
                  wrong.size() > kWrongCallsShown ? "; all of them with --json" : "");
    }
    for (size_t i = 0; i < std::min(wrong.size(), kWrongCallsShown); ++i) {
      const WrongFuseCall& w = wrong[i];
      std::printf("  %-9s %.3f vs %.3f  %s %s  at %s\n", w.decisive ? "decisive" : "close",
                  w.measured_ratio, w.predicted_ratio, w.model.c_str(), w.ops.c_str(),
                  w.where.c_str());
    }
  }
  if (!f.plot.empty()) {
    Status s = WritePlot(report, f.plot);
    if (!s.ok()) return ReportError("costmodel validate", s);
    std::cerr << "wrote " << f.plot << "\n";
  }
  return kExitOk;
}

}  // namespace

void AddTargetCommands(CLI::App& app, int* exit_code) {
  auto cal = std::make_shared<CalibrateFlags>();
  auto* cal_cmd = app.add_subcommand("calibrate", "Fit the cost model to the tuner's CPU");
  AddConnectionOptions(cal_cmd, &cal->connection);
  cal_cmd->add_option("--time-limit", cal->time_limit_s, "Seconds (0: the tuner's default, 60)");
  cal_cmd->add_flag("--json", cal->json, "Print the profile as JSON");
  cal_cmd->add_flag("--list-noisy", cal->list_noisy,
                    "Name every benchmark too noisy to fit, not only their count per family");
  cal_cmd->add_option("--out", cal->out, "Also write the profile JSON to this file");
  cal_cmd->add_flag("--fresh", cal->fresh,
                    "Fit over this run's samples only; earlier runs stay in the calibration log");
  cal_cmd->add_option("--samples", cal->samples,
                      "Write every sample the fit used (benchmark, measured and predicted ns, "
                      "features) to this JSON file, the worst-predicted first");
  cal_cmd->callback([cal, exit_code] { *exit_code = RunCalibrate(*cal); });

  auto* targets = app.add_subcommand("targets", "List or register tuning targets");
  targets->require_subcommand(1);
  auto list = std::make_shared<TargetsFlags>();
  auto* list_cmd = targets->add_subcommand("list", "Known targets and their calibration");
  AddConnectionOptions(list_cmd, &list->connection);
  list_cmd->add_flag("--json", list->json, "Print the profiles as JSON");
  list_cmd->callback([list, exit_code] { *exit_code = RunList(*list); });
  auto reg = std::make_shared<TargetsFlags>();
  auto* reg_cmd = targets->add_subcommand("register", "Upload a calibrated profile (JSON)");
  AddConnectionOptions(reg_cmd, &reg->connection);
  reg_cmd->add_option("profile", reg->profile_path, "Profile JSON from `fusor calibrate --out`")
      ->required();
  reg_cmd->callback([reg, exit_code] { *exit_code = RunRegister(*reg); });

  auto* costmodel = app.add_subcommand("costmodel", "The cost model's accuracy");
  costmodel->require_subcommand(1);
  auto val = std::make_shared<ValidateFlags>();
  auto* val_cmd = costmodel->add_subcommand(
      "validate", "Measure held-out groups of models and compare with predictions");
  val_cmd->add_option("models", val->models, "ONNX models to draw groups from")->required();
  AddConnectionOptions(val_cmd, &val->connection);
  val_cmd->add_option("--max-ops", val->max_ops, "Ops per held-out group, at most")
      ->capture_default_str();
  val_cmd->add_option("--regions", val->regions, "Groups per model, at most")
      ->capture_default_str();
  val_cmd->add_option("--seed", val->seed, "Seed for choosing groups")->capture_default_str();
  val_cmd
      ->add_option("--rounds", val->rounds,
                   "Interleaved measurements of each alternative (the median counts)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  val_cmd->add_flag("--json", val->json, "Print the report and every item as JSON");
  val_cmd->add_option("--plot", val->plot, "Write a predicted-vs-measured scatter plot (PNG)");
  val_cmd->callback([val, exit_code] { *exit_code = RunValidate(*val); });
}

}  // namespace fusor
