// inplan_lab: what a plan adds to its groups' times (costmodel/in_plan.h), recorded once and
// fitted leave-models-out on replays.
//
//   inplan_lab --record R.json [--profile P.json] [--rounds N] models/*.onnx
//   inplan_lab --replay R.json [--folds K] [--detail] [--leaves-warm] [--median]
//              [--in-plan-from P.json]
//
// --record: calibrates this CPU (the hand-picked suite, as `fusor calibrate`; or reads a profile
// JSON), then for each model (imported as costmodel_lab imports it) and its plans none, rules and
// the plan the profile tunes, in N rounds (the plans in turn within a round, so a slow stretch of
// the host falls on all of them): each group timed alone (run again and again, Executor::RunGroup)
// and inside the plan (Executor::RunProfiled, median of the profiled runs), and the whole plan
// (Executor::Run). The recording (format "fusor.inplan_record.v1") keeps the profile, each plan,
// per group the prediction, the times of each round, its weight and input bytes, its reads' reuse
// distances and cold bytes, and /proc/loadavg before and after each model.
//
// --replay: reads the recording (each time the quickest of its rounds, --median the median) and,
// with the recorded profile and today's code, predicts each whole plan as the sum of its groups
// (before) and with the in-plan term (after), whose constants each fold fits on the other folds'
// models' groups only (folds by family, costmodel/leave_models_out.h). Prints the constants per
// fold, each plan's error against its measured time (the sum of its groups' in-plan times; a whole
// run's median beside it), and the mean per model and over all; and each plan as the product
// predicts it (CostModel::WholePlan) with the calibrated constants (`fusor calibrate`'s in-plan
// fit, on plans of its own: held out for every model), the recording's profile's or
// --in-plan-from's.
//
// --record calibrates the in-plan constants as `fusor calibrate` does (InPlanSuite) unless
// --profile gives a profile.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "accuracy/measured_time.h"
#include "costmodel/calibration.h"
#include "costmodel/in_plan.h"
#include "costmodel/leave_models_out.h"
#include "graph/canonical.h"
#include "graph/onnx_import.h"
#include "graph/plan_json.h"
#include "lowering/plan_legality.h"
#include "runtime/constant_evaluator.h"
#include "runtime/executor.h"
#include "runtime/host_tensor.h"
#include "runtime/measurer.h"
#include "runtime/onednn_info.h"
#include "runtime/timing_policy.h"
#include "search/plan_search.h"

namespace fusor {
namespace {

inline constexpr const char* kFormat = "fusor.inplan_record.v1";

StatusOr<Graph> ImportModel(const std::string& path) {
  ImportOptions options;
  options.dims = {{"batch", 1}, {"seq", 128}};
  return ImportOnnxFileWithDimsItHas(path, WithConstantFolding(options));
}

nlohmann::json LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  in >> a >> b >> c;
  return {{"loadavg_1_5_15", {a, b, c}}, {"unix_time", static_cast<int64_t>(std::time(nullptr))}};
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// How a replay reads a time measured in several rounds: the quickest (a host's slow states only
// add time, so the quickest round is the machine's) or the median.
bool replay_median = false;
double AcrossRounds(const std::vector<double>& v) {
  if (replay_median) return Median(v);
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

StatusOr<HardwareProfile> CalibrateHere(const TargetFingerprint& target) {
  auto measurer_for = [](ChainBackend backend) {
    OneDnnMeasurerOptions mo;
    mo.executor.chain_backend = backend;
    mo.timing = TimingFor(TimingPolicy::kCalibrate, 100);
    return std::make_shared<OneDnnMeasurer>(mo);
  };
  auto as_fn = [](std::shared_ptr<OneDnnMeasurer> m) -> MeasureFn {
    return [m](const Graph& g, const FusionPlan& plan) -> StatusOr<MeasuredTime> {
      FUSOR_ASSIGN_OR_RETURN(Measurement x, m->MeasurePlan(g, plan));
      return MeasuredTimeOf(x);
    };
  };
  HardwareProfile start;
  start.target = target;
  FUSOR_ASSIGN_OR_RETURN(
      CalibrationResult r,
      Calibrate(CalibrationSuite(target), start, as_fn(measurer_for(ChainBackend::kAuto)), {}, {},
                as_fn(measurer_for(ChainBackend::kOneDnn))));
  // What a plan adds, fitted as `fusor calibrate` fits it (TuningService's FitInPlan).
  std::shared_ptr<OneDnnMeasurer> in_plan = measurer_for(ChainBackend::kAuto);
  FUSOR_ASSIGN_OR_RETURN(
      r.profile.in_plan,
      CalibrateInPlan(InPlanSuite(target), target, MeasureGroupsInPlanWith(in_plan.get(), 3)));
  return r.profile;
}

// One plan's executor and what a round measured of it.
struct PlanUnderTest {
  std::string name;
  FusionPlan plan;
  std::unique_ptr<Executor> exec;
  std::vector<std::vector<double>> alone_ns, in_plan_ns;  // Per group, per round.
  std::vector<double> whole_ns;                           // Per round.
};

// One round of a plan: every group alone, then profiled runs of the whole plan, then whole runs.
void MeasureRound(PlanUnderTest* p, double group_min_ms, double plan_min_ms) {
  Executor& exec = *p->exec;
  const size_t n = exec.num_groups();
  p->alone_ns.resize(n);
  p->in_plan_ns.resize(n);
  const GroupTimesInPlan t = TimeGroupsInPlan(exec, group_min_ms, plan_min_ms);
  for (size_t i = 0; i < n; ++i) {
    p->alone_ns[i].push_back(t.alone_ns[i]);
    p->in_plan_ns[i].push_back(t.in_plan_ns[i]);
  }
  TimingOptions whole_timing = TimingFor(TimingPolicy::kBench, plan_min_ms);
  whole_timing.retries = 0;
  p->whole_ns.push_back(
      static_cast<double>(TimeRepeated([&] { exec.Run(); }, whole_timing).median_ns));
}

nlohmann::json PlanRecord(const Graph& g, const PlanUnderTest& p, const HardwareProfile& profile) {
  AnalyticalCostModel model(profile);
  PlanCost cost = model.Cost(g, p.plan);
  std::vector<InPlanGroupReads> reads = InPlanReadsOf(g, p.plan, profile.target);
  nlohmann::json groups = nlohmann::json::array();
  for (size_t i = 0; i < p.plan.groups.size(); ++i) {
    nlohmann::json reuse = nlohmann::json::array();
    for (const InPlanRead& r : reads[i].reads) {
      reuse.push_back({{"tensor", g.tensor(r.tensor).name},
                       {"leaf", r.leaf},
                       {"bytes", r.bytes},
                       {"reuse_bytes", r.reuse_bytes},
                       {"in_plan_level", MemoryLevelName(r.in_plan)},
                       {"alone_level", MemoryLevelName(r.alone)}});
    }
    groups.push_back({{"lowering", p.exec->DescribeGroup(i)},
                      {"predicted_ns", cost.groups[i].total_ns},
                      {"alone_ns", p.alone_ns[i]},
                      {"in_plan_ns", p.in_plan_ns[i]},
                      {"weight_bytes", reads[i].weight_bytes},
                      {"input_bytes", reads[i].input_bytes},
                      {"cold_bytes", reads[i].cold_bytes},
                      {"reads", reuse}});
  }
  return {{"name", p.name},
          {"plan", PlanToJson(p.plan, {CanonicalHash(g), ""})},
          {"predicted_ns", cost.total.total_ns},
          {"whole_ns", p.whole_ns},
          {"groups", groups}};
}

StatusOr<nlohmann::json> RecordModel(const std::string& path, const HardwareProfile& profile,
                                     int rounds) {
  FUSOR_ASSIGN_OR_RETURN(Graph g, ImportModel(path));
  FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, RandomLeafValues(g, 1));
  AnalyticalCostModel model(profile);
  FUSOR_ASSIGN_OR_RETURN(SearchResult tuned, SearchPlan(g, model));
  std::vector<PlanUnderTest> plans;
  plans.push_back({"none", UnfusedPlan(g), nullptr, {}, {}, {}});
  plans.push_back({"rules", RulesPlan(g, SearchOptions{}.max_group_nodes), nullptr, {}, {}, {}});
  plans.push_back({"tuned", tuned.plan, nullptr, {}, {}, {}});
  ExecutorOptions eo;
  eo.threads = profile.target.cores;
  for (PlanUnderTest& p : plans) {
    FUSOR_ASSIGN_OR_RETURN(p.exec, Executor::Create(g, p.plan, leaves, eo));
  }
  nlohmann::json out = {{"model", g.model_name}, {"path", path}, {"load_before", LoadAverage()}};
  for (int round = 0; round < rounds; ++round) {
    for (size_t k = 0; k < plans.size(); ++k) {
      MeasureRound(&plans[(k + static_cast<size_t>(round)) % plans.size()], 3, 100);
    }
  }
  out["load_after"] = LoadAverage();
  for (const PlanUnderTest& p : plans) out["plans"].push_back(PlanRecord(g, p, profile));
  return out;
}

int Record(const std::string& out_path, const std::string& profile_path, int rounds,
           const std::vector<std::string>& models) {
  auto target = DetectTarget(OneDnnIsa(), OneDnnVersion());
  if (!target.ok()) return std::cerr << target.status().ToString() << "\n", 1;
  SettleHost(kSettleHostMaxMs, "inplan_lab");
  nlohmann::json rec = {{"format", kFormat},
                        {"cost_model_version", kCostModelVersion},
                        {"rounds", rounds},
                        {"load_before_calibration", LoadAverage()}};
  StatusOr<HardwareProfile> profile = Status::NotFound("no profile");
  if (profile_path.empty()) {
    profile = CalibrateHere(*target);
  } else {
    // A profile JSON, or an earlier recording's profile.
    std::ifstream in(profile_path);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    profile = ProfileFromJson(j.contains("profile") ? j["profile"] : j);
  }
  if (!profile.ok()) return std::cerr << profile.status().ToString() << "\n", 1;
  rec["profile"] = ProfileToJson(*profile);
  for (const std::string& path : models) {
    auto m = RecordModel(path, *profile, rounds);
    if (!m.ok()) {
      std::fprintf(stderr, "%s: left out: %s\n", path.c_str(), m.status().ToString().c_str());
      continue;
    }
    std::printf("%s recorded, load %s -> %s\n", path.c_str(),
                (*m)["load_before"]["loadavg_1_5_15"].dump().c_str(),
                (*m)["load_after"]["loadavg_1_5_15"].dump().c_str());
    std::fflush(stdout);
    rec["models"].push_back(std::move(*m));
    std::ofstream(out_path) << rec.dump() << "\n";
  }
  return 0;
}

// A recorded plan replayed with today's code.
struct ReplayedPlan {
  std::string model, name;
  // The whole plan: the sum of its groups' in-plan times (RunProfiled's shares add up to a run;
  // each a median, so a preemption of one run moves it little), and a whole run's median.
  double measured_ns = 0;
  double whole_run_ns = 0;
  double predicted_ns = 0;  // Sum of the groups' predictions.
  // The whole plan as the product predicts it (CostModel::WholePlan) with the profile's in-plan
  // constants, fitted by calibration on its own plans, never on a model's.
  double whole_plan_ns = 0;
  double alone_ns = 0;    // Sum of the groups' times alone (quickest round's).
  double in_plan_ns = 0;  // Sum of the groups' times inside the plan (quickest round's).
  std::vector<InPlanGroupReads> reads;
  std::vector<InPlanSample> samples;
};

// The plan's groups priced with every weight and graph input at the level that holds the group's
// working set, as a group timed alone finds them (a leaf footprint of 0), not at the level that
// holds the model's footprint: the in-plan term then says what the plan adds.
bool replay_leaves_warm = false;
double WarmLeavesCost(const Graph& g, const FusionPlan& plan, const CostModel& model) {
  auto inputs = AllGroupInputs(g, plan);
  auto materialized = AllMaterializedOutputs(g, plan);
  double ns = 0;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    ns += model.GroupCost(g, plan.groups[i], inputs[i], materialized[i], 0).total_ns;
  }
  return ns;
}

StatusOr<std::vector<ReplayedPlan>> ReplayModel(const nlohmann::json& m,
                                                const HardwareProfile& profile) {
  FUSOR_ASSIGN_OR_RETURN(Graph g, ImportModel(m["path"].get<std::string>()));
  AnalyticalCostModel model(profile);
  std::vector<ReplayedPlan> out;
  for (const nlohmann::json& p : m["plans"]) {
    FUSOR_ASSIGN_OR_RETURN(FusionPlan plan, PlanFromJson(g, p["plan"]));
    ReplayedPlan r;
    r.model = g.model_name;
    r.name = p["name"];
    r.whole_run_ns = AcrossRounds(p["whole_ns"].get<std::vector<double>>());
    r.predicted_ns =
        replay_leaves_warm ? WarmLeavesCost(g, plan, model) : model.Cost(g, plan).total.total_ns;
    r.whole_plan_ns = r.predicted_ns + model.InPlanNs(g, plan);
    r.reads = InPlanReadsOf(g, plan, profile.target);
    for (size_t i = 0; i < plan.groups.size(); ++i) {
      const nlohmann::json& gj = p["groups"][i];
      InPlanSample s{r.reads[i].cold_bytes,
                     AcrossRounds(gj["in_plan_ns"].get<std::vector<double>>()),
                     AcrossRounds(gj["alone_ns"].get<std::vector<double>>())};
      r.alone_ns += s.alone_ns;
      r.in_plan_ns += s.in_plan_ns;
      r.samples.push_back(s);
    }
    r.measured_ns = r.in_plan_ns;
    out.push_back(std::move(r));
  }
  return out;
}

// Mean absolute errors of whole plans: the model's prediction before and after the in-plan term,
// and the groups' measured times alone summed, before and after it (what a perfect group model
// would reach).
struct Errors {
  double before = 0, after = 0, alone = 0, alone_after = 0, calibrated = 0;
  int plans = 0;
  void Add(double b, double a, double al, double ala, double cal) {
    before += std::fabs(b), after += std::fabs(a), ++plans;
    alone += std::fabs(al), alone_after += std::fabs(ala), calibrated += std::fabs(cal);
  }
};

// The in-plan constants of a profile JSON (or of a recording's profile).
StatusOr<InPlanConstants> InPlanConstantsOf(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return Status::InvalidArgument(path + " is not JSON");
  FUSOR_ASSIGN_OR_RETURN(HardwareProfile p,
                         ProfileFromJson(j.contains("profile") ? j["profile"] : j));
  return p.in_plan;
}

int Replay(const std::string& path, int folds, bool detail, const std::string& constants_from) {
  std::ifstream in(path);
  if (!in) return std::cerr << "cannot read " << path << "\n", 1;
  nlohmann::json rec = nlohmann::json::parse(in);
  if (rec.value("format", "") != kFormat) {
    return std::cerr << path << ": not an inplan_lab recording (format " << kFormat << ")\n", 1;
  }
  auto profile = ProfileFromJson(rec["profile"]);
  if (!profile.ok()) return std::cerr << profile.status().ToString() << "\n", 1;
  if (!constants_from.empty()) {
    auto c = InPlanConstantsOf(constants_from);
    if (!c.ok()) return std::cerr << c.status().ToString() << "\n", 1;
    profile->in_plan = *c;
  }
  const InPlanConstants& calibrated = profile->in_plan;
  std::printf(
      "calibrated constants (ns per KiB): L1->L2 %.3f  L2->L3 %.3f  L3->DRAM %.3f  (%d groups)\n",
      calibrated.ns_per_byte[0] * 1024, calibrated.ns_per_byte[1] * 1024,
      calibrated.ns_per_byte[2] * 1024, calibrated.samples);
  std::vector<ReplayedPlan> plans;
  std::vector<std::string> models;
  for (const nlohmann::json& m : rec["models"]) {
    auto r = ReplayModel(m, *profile);
    if (!r.ok()) return std::cerr << m["path"] << ": " << r.status().ToString() << "\n", 1;
    models.push_back(m["model"]);
    for (auto& p : *r) plans.push_back(std::move(p));
  }
  std::map<std::string, int> fold_of = AssignFolds(models, folds);
  std::vector<InPlanConstants> constants(folds);
  for (int f = 0; f < folds; ++f) {
    std::vector<InPlanSample> training;
    for (const ReplayedPlan& p : plans) {
      if (fold_of[p.model] == f) continue;
      training.insert(training.end(), p.samples.begin(), p.samples.end());
    }
    auto c = FitInPlanConstants(training);
    if (!c.ok()) return std::cerr << "fold " << f << ": " << c.status().ToString() << "\n", 1;
    constants[f] = *c;
    std::printf(
        "fold %d constants (ns per KiB): L1->L2 %.3f  L2->L3 %.3f  L3->DRAM %.3f  (%d "
        "groups)\n",
        f, c->ns_per_byte[0] * 1024, c->ns_per_byte[1] * 1024, c->ns_per_byte[2] * 1024,
        c->samples);
  }
  std::printf("%-24s %-6s %9s %9s %9s %9s %9s %8s %8s %8s %8s %8s\n", "model", "plan", "in-plan",
              "whole run", "alone", "predicted", "+in-plan", "before", "after", "alone", "al+in",
              "calib.");
  std::map<std::string, Errors> per_model;
  Errors all, tuned;
  for (const ReplayedPlan& p : plans) {
    const InPlanConstants& c = constants[fold_of[p.model]];
    const double extra = InPlanExtraNs(p.reads, c);
    // The groups alone read at their alone levels: everything colder than that is the plan's.
    double alone_extra = 0;
    for (const InPlanGroupReads& r : p.reads)
      for (int s = 0; s < kColdSteps; ++s) alone_extra += r.cold_bytes[s] * c.ns_per_byte[s];
    auto error = [&](double predicted) {
      return 100 * (predicted - p.measured_ns) / p.measured_ns;
    };
    const double eb = error(p.predicted_ns), ea = error(p.predicted_ns + extra);
    const double el = error(p.alone_ns), ela = error(p.alone_ns + alone_extra);
    const double ec = error(p.whole_plan_ns);
    per_model[p.model].Add(eb, ea, el, ela, ec);
    all.Add(eb, ea, el, ela, ec);
    if (p.name == "tuned") tuned.Add(eb, ea, el, ela, ec);
    if (detail) {
      std::printf(
          "%-24.24s %-6s %9.1f %9.1f %9.1f %9.1f %9.1f %+7.1f%% %+7.1f%% %+7.1f%% %+7.1f%% "
          "%+7.1f%%\n",
          p.model.c_str(), p.name.c_str(), p.measured_ns / 1e3, p.whole_run_ns / 1e3,
          p.alone_ns / 1e3, p.predicted_ns / 1e3, (p.predicted_ns + extra) / 1e3, eb, ea, el, ela,
          ec);
    }
  }
  auto print = [](const std::string& what, const Errors& e) {
    std::printf(
        "  %-24s %6.1f%% -> %6.1f%%   groups alone summed %6.1f%% -> %6.1f%%   calibrated "
        "%6.1f%%\n",
        what.c_str(), e.before / e.plans, e.after / e.plans, e.alone / e.plans,
        e.alone_after / e.plans, e.calibrated / e.plans);
  };
  std::printf(
      "\nmean |error| of whole plans, predicted before -> after the in-plan term (each fold's "
      "constants); calibrated: with the calibrated constants (CostModel::WholePlan)\n");
  for (const auto& [m, e] : per_model) print(m + " (" + std::to_string(fold_of[m]) + ")", e);
  print("all " + std::to_string(all.plans) + " plans", all);
  print("tuned plans", tuned);
  return 0;
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) {
  CLI::App app{"Record and replay what plans add to their groups' times"};
  std::string record, replay, profile, constants_from;
  int rounds = 3, folds = 5;
  bool detail = false;
  std::vector<std::string> models;
  app.add_option("--record", record, "Measure the models and write the recording here");
  app.add_option(
      "--profile", profile,
      "With --record: a profile JSON (or an earlier recording's) instead of calibrating");
  app.add_option("--rounds", rounds, "With --record: rounds of each model's plans");
  app.add_option("--replay", replay, "Replay a recording leave-models-out");
  app.add_option("--folds", folds, "With --replay: folds by model family");
  app.add_flag("--detail", detail, "With --replay: print every plan");
  app.add_flag("--leaves-warm", fusor::replay_leaves_warm,
               "With --replay: price each group's weights where its own working set fits (as "
               "alone), not where the model's footprint does");
  app.add_option("--in-plan-from", constants_from,
                 "With --replay: the calibrated in-plan constants of this profile JSON (or "
                 "recording), not the recording's profile's");
  app.add_flag("--median", fusor::replay_median,
               "With --replay: each time the median of its rounds, not the quickest");
  app.add_option("models", models, "ONNX models (with --record)");
  CLI11_PARSE(app, argc, argv);
  if (!record.empty()) return fusor::Record(record, profile, rounds, models);
  if (!replay.empty()) return fusor::Replay(replay, folds, detail, constants_from);
  std::cerr << app.help();
  return 2;
}
