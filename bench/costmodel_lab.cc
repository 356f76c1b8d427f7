// costmodel_lab: develop the cost model against recorded measurements. Measures the calibration
// suite and the held-out regions of the given models once (oneDNN, this CPU), keeps every
// measurement in a JSON table keyed by graph hash and plan, and on later runs answers from the
// table, so a change to the model's features or fit is re-evaluated in a second, not re-measured.
// Prints each calibration sample's fit and the held-out accuracy (the figures of
// `fusor costmodel validate`, from the command's own workflow, accuracy/validation_run.h), worst
// items first.
//
//   costmodel_lab --table T.json [--remeasure] [--worst N] models/*.onnx
//
// To judge a change of the model alone, hold both the measurements and the calibration fixed:
// --fit-db D fits over the calibration log `fusor calibrate --db D` kept (as the server does,
// --pool served; or all, quickest, latest samples), and --replay R answers with the times a
// `fusor costmodel validate --db D --json` report R measured. The figures then reproduce R's and
// differ only by the model's code.
//
// Leave-models-out (docs/costmodel.md): --whole-plans also times each model's whole plans and
// --record-sampled K each of K folds' sampled benchmarks into the table; --folds K then replays
// the table alone (never measuring, so no quiet host is needed), fitting each fold on the other
// folds' models only, and prints held-out figures per way of fitting, and with --fold-detail per
// model, per group kind and per whole plan.
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <unordered_map>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "accuracy/validation_run.h"
#include "costmodel/calibration.h"
#include "costmodel/leave_models_out.h"
#include "costmodel/sampled_suite.h"
#include "costmodel/validation.h"
#include "db/sqlite_plan_store.h"
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
#include "server/calibration_fit_samples.h"

namespace fusor {
namespace {

// Measurements keyed by RecordedMeasurer::PlanKey, loaded from and saved to a JSON file.
class MeasurementTable {
 public:
  explicit MeasurementTable(std::string path) : path_(std::move(path)) {
    std::ifstream in(path_);
    if (in) table_ = nlohmann::json::parse(in);
  }
  void Save() const {
    if (!replay_only_) std::ofstream(path_) << table_.dump(0);
  }
  // Answers only from the table: what it lacks is unstable (left out), never measured.
  void set_replay_only() { replay_only_ = true; }
  // Replays timings whose spread stayed above the limit as usable (their median is still a
  // measurement): on a loaded host, more regions at the price of more noise, which the even/odd
  // figures show.
  void set_keep_unstable() { keep_unstable_ = true; }

  // Notes on how the table was recorded (host load when each phase began and ended, one entry per
  // run), under "_recording".
  void Note(const std::string& phase) {
    std::ifstream in("/proc/loadavg");
    double load1 = 0, load5 = 0, load15 = 0;
    in >> load1 >> load5 >> load15;
    table_["_recording"][phase].push_back(
        {{"loadavg_1_5_15", {load1, load5, load15}},
         {"unix_time", static_cast<int64_t>(std::time(nullptr))}});
  }

  // The whole plans of a model a table keeps ("none", "rules", "tuned" as the recording's profile
  // scored them): recorded on the first run, read back on later ones, so a replay judges the
  // plans that were measured.
  StatusOr<std::vector<std::pair<std::string, FusionPlan>>> WholePlans(const Graph& g,
                                                                       const CostModel& model) {
    std::string key = "plans|" + g.model_name;
    if (!table_.contains(key) && replay_only_) {
      return Status::NotFound(g.model_name + ": whole plans not recorded");
    }
    if (!table_.contains(key)) {
      FUSOR_ASSIGN_OR_RETURN(SearchResult tuned, SearchPlan(g, model));
      const PlanOrigin origin{CanonicalHash(g), ""};
      table_[key] = {{"none", PlanToJson(UnfusedPlan(g), origin)},
                     {"rules", PlanToJson(RulesPlan(g, SearchOptions{}.max_group_nodes), origin)},
                     {"tuned", PlanToJson(tuned.plan, origin)}};
    }
    std::vector<std::pair<std::string, FusionPlan>> out;
    for (const auto& [name, j] : table_[key].items()) {
      FUSOR_ASSIGN_OR_RETURN(FusionPlan plan, PlanFromJson(g, j));
      out.emplace_back(name, std::move(plan));
    }
    return out;
  }

  // Each whole plan's time in each of `rounds` rounds, measured side by side (recorded as
  // "whole|KEY|round n").
  StatusOr<std::vector<std::vector<MeasuredTime>>> MeasureWhole(
      const Graph& g, const std::vector<std::pair<std::string, FusionPlan>>& plans,
      OneDnnMeasurer* measurer, bool remeasure, int rounds) {
    std::vector<std::vector<MeasuredTime>> out(plans.size());
    for (int round = 0; round < rounds; ++round) {
      std::vector<std::string> keys;
      std::vector<FusionPlan> list;
      bool recorded = !remeasure;
      for (const auto& [name, plan] : plans) {
        keys.push_back("whole|" + RecordedMeasurer::PlanKey(g, plan) + "|round " +
                       std::to_string(round));
        recorded &= table_.contains(keys.back());
        list.push_back(plan);
      }
      if (recorded) {
        for (size_t i = 0; i < keys.size(); ++i) out[i].push_back(Recorded(keys[i]));
        continue;
      }
      if (replay_only_) return Status::NotFound(g.model_name + ": whole plans not recorded");
      FUSOR_ASSIGN_OR_RETURN(std::vector<Measurement> ms, measurer->MeasurePlans(g, list));
      for (size_t i = 0; i < ms.size(); ++i)
        out[i].push_back(Record(keys[i], MeasuredTimeOf(ms[i])));
      Save();
    }
    return out;
  }

  // `prefix` keeps apart the times of one plan measured another way (held to oneDNN).
  MeasureFn Fn(OneDnnMeasurer* measurer, bool remeasure, const std::string& prefix = "") {
    return [this, measurer, remeasure, prefix](const Graph& g,
                                               const FusionPlan& plan) -> StatusOr<MeasuredTime> {
      std::string key = prefix + RecordedMeasurer::PlanKey(g, plan);
      if (!remeasure && table_.contains(key)) return Recorded(key);
      if (replay_only_) return MeasuredTime{1, 0, true, {}, true};
      FUSOR_ASSIGN_OR_RETURN(Measurement m, measurer->MeasurePlan(g, plan));
      return Record(key, MeasuredTimeOf(m));
    };
  }

  // Validation's rounds: the n-th request for one plan (n > 0) is a measurement of its own,
  // "|round n". A region the table lacks is timed by `live`: side by side as `fusor costmodel
  // validate` times (accuracy/validation_run.h), or each alternative alone in turn.
  MeasureAlternativesFn Alternatives(MeasureAlternativesFn live, bool remeasure) {
    auto seen = std::make_shared<std::unordered_map<std::string, int>>();
    return [this, live = std::move(live), remeasure,
            seen](const HeldOutRegion& r) -> StatusOr<std::vector<MeasuredTime>> {
      std::vector<std::string> keys;
      bool recorded = !remeasure;
      for (const auto& [name, plan] : r.alternatives) {
        std::string key = RecordedMeasurer::PlanKey(r.graph, plan);
        if (int round = (*seen)[key]++; round > 0) key += "|round " + std::to_string(round);
        recorded &= table_.contains(key);
        keys.push_back(key);
      }
      std::vector<MeasuredTime> out;
      if (recorded) {
        for (const std::string& key : keys) out.push_back(Recorded(key));
        return out;
      }
      if (replay_only_)
        return std::vector<MeasuredTime>(keys.size(), MeasuredTime{1, 0, true, {}, true});
      FUSOR_ASSIGN_OR_RETURN(std::vector<MeasuredTime> ms, live(r));
      for (size_t i = 0; i < ms.size(); ++i) out.push_back(Record(keys[i], ms[i]));
      return out;
    };
  }

 private:
  MeasuredTime Recorded(const std::string& key) const {
    const auto& j = table_[key];
    std::vector<bool> chain = j.value("primitive_chain", std::vector<bool>{});
    bool unstable = j["unstable"].get<bool>() && !keep_unstable_;
    return MeasuredTime{j["median_ns"], j["cv"], unstable, chain, j.value("disturbed", false)};
  }
  // A runtime measurement's median is whole nanoseconds (MeasuredTimeOf), kept as an integer.
  MeasuredTime Record(const std::string& key, const MeasuredTime& m) {
    table_[key] = {{"median_ns", static_cast<int64_t>(m.median_ns)},
                   {"cv", m.cv},
                   {"unstable", m.unstable},
                   {"primitive_chain", m.primitive_chain},
                   {"disturbed", m.disturbed}};
    return m;
  }

  std::string path_;
  bool replay_only_ = false, keep_unstable_ = false;
  nlohmann::json table_ = nlohmann::json::object();
};

// Imported as `fusor tune` and `fusor costmodel validate` import (constant nodes folded), with
// the symbolic dims of the shared models bound as the peer benchmark binds them.
StatusOr<Graph> ImportModel(const std::string& path) {
  ImportOptions options;
  options.dims = {{"batch", 1}, {"seq", 128}};
  return ImportOnnxFileWithDimsItHas(path, WithConstantFolding(options));
}

// Times as the command the lab stands in for does (runtime/timing_policy.h).
OneDnnMeasurer MakeMeasurer(TimingPolicy policy, double min_ms,
                            ChainBackend backend = ChainBackend::kAuto) {
  OneDnnMeasurerOptions mo;
  mo.executor.chain_backend = backend;
  mo.timing = TimingFor(policy, min_ms);
  return OneDnnMeasurer(mo);
}

// The kernels the runtime picks for each benchmark (after timing its chain backends).
void Describe(const std::vector<CalibrationBenchmark>& suite) {
  for (const auto& b : suite) {
    auto leaves = RandomLeafValues(b.graph, 1);
    if (!leaves.ok()) continue;
    auto exec = Executor::Create(b.graph, b.plan, *leaves);
    if (!exec.ok()) continue;
    std::printf("%-36s %s\n", b.name.c_str(), (*exec)->DescribeGroup(0).c_str());
  }
}

void PrintSamples(const CalibrationResult& r) {
  std::printf("%-36s %12s %12s %7s\n", "benchmark", "measured_us", "predicted_us", "ratio");
  for (const auto& s : r.samples) {
    double pred = EvaluateFeatures(s.features, r.profile).total_ns;
    std::printf("%-36s %12.2f %12.2f %7.2f\n", s.benchmark.c_str(), s.measured_ns / 1e3, pred / 1e3,
                pred / s.measured_ns);
  }
  std::printf("fit: rms %.1f%%, mape %.1f%%, %d iterations\n", 100 * r.report.rms_rel_error,
              r.report.mape, r.report.iterations);
  for (const auto& [name, f] : r.profile.Parameters()) {
    std::printf("  %-22s %12.4g  err %6.1f%%  samples %d\n", name.c_str(), f->value,
                100 * f->rel_error, f->samples);
  }
}

// Features and terms of each alternative of the regions whose ops string contains `pattern`.
void Explain(const std::vector<HeldOutRegion>& regions, const HardwareProfile& profile,
             const std::string& pattern, const MeasureFn& measure) {
  for (const HeldOutRegion& r : regions) {
    if (r.ops.find(pattern) == std::string::npos) continue;
    std::printf("== %s %s\n", r.model.c_str(), r.ops.c_str());
    for (const Tensor& t : r.graph.tensors()) {
      std::string dims;
      for (int64_t d : t.dims) dims += std::to_string(d) + "x";
      std::printf("   tensor %-30.30s %s kind %d\n", t.name.c_str(), dims.c_str(),
                  static_cast<int>(t.kind));
    }
    for (const auto& [name, plan] : r.alternatives) {
      auto m = measure(r.graph, plan);
      std::printf(" %s measured %.1f us\n", name.c_str(), m.ok() ? m->median_ns / 1e3 : -1);
      auto leaves = RandomLeafValues(r.graph, 1);
      auto exec = leaves.ok() ? Executor::Create(r.graph, plan, *leaves)
                              : StatusOr<std::unique_ptr<Executor>>(leaves.status());
      for (size_t i = 0; exec.ok() && i < (*exec)->num_groups(); ++i) {
        std::printf("   runs %s\n", (*exec)->DescribeGroup(i).c_str());
      }
      for (const GroupFeatures& f : PlanFeatures(r.graph, plan, profile.target)) {
        CostTerms t = EvaluateFeatures(f, profile);
        std::printf(
            "   total %.1f us: compute %.1f memory %.1f spill %.1f launch %.1f reorder %.1f | "
            "flops",
            t.total_ns / 1e3, t.compute_ns / 1e3, t.memory_ns / 1e3, t.spill_ns / 1e3,
            t.launch_ns / 1e3, t.reorder_ns / 1e3);
        for (double x : f.flops) std::printf(" %.3g", x);
        std::printf(" rd");
        for (double x : f.read_bytes) std::printf(" %.3g", x);
        std::printf(" wr");
        for (double x : f.write_bytes) std::printf(" %.3g", x);
        std::printf(" tile rd %.3g wr %.3g ch %.3g", f.tile_read_bytes, f.tile_write_bytes,
                    f.chain_steps);
        std::printf(
            " k %g lk %g po %g sp %g ro %.3g rt %.3g ix %.3g ga %.3g rm %.3g st %.3g ec %.3g "
            "rc %.3g fk %g th %g ho %g hb %.3g alt %zu\n",
            f.kernels, f.loop_kernels, f.post_ops, f.spilled_value_vectors, f.reorder_bytes,
            f.transposed_bytes, f.indexed_elements, f.gathered_elements, f.remapped_elements,
            f.strided_elements, f.eval_calls, f.run_calls, f.forks, f.threads, f.handoffs,
            f.handoff_bytes, f.or_else.size());
      }
    }
  }
}

void PrintValidation(const ValidationReport& r, int worst) {
  nlohmann::json j = ReportToJson(r);
  std::vector<ValidationItem> items = r.items;
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    return std::fabs(std::log(a.predicted_ns / a.measured_ns)) >
           std::fabs(std::log(b.predicted_ns / b.measured_ns));
  });
  for (int i = 0; i < worst && i < static_cast<int>(items.size()); ++i) {
    const auto& x = items[i];
    std::printf("%-16.16s %-44.44s %-8s %10.1f %10.1f %5.2f\n", x.model.c_str(), x.ops.c_str(),
                x.alternative.c_str(), x.predicted_ns / 1e3, x.measured_ns / 1e3,
                x.predicted_ns / x.measured_ns);
  }
  std::printf(
      "regions %d (skipped %d)  MAPE %.1f%% (median %.1f%%, p90 %.1f%%)  tau %.3f (decisive "
      "%.3f)  agreement %.1f%% (decisive %.1f%% of %d)\n",
      r.regions, r.skipped_unstable, r.mape, j["median_ape_percent"].get<double>(),
      j["p90_ape_percent"].get<double>(), r.kendall_tau, r.decisive_tau, 100 * r.agreement,
      100 * r.decisive_agreement, r.decisive_decisions);
}

// Answers a region's alternatives with the times a validation report measured for them (matched
// by model, place, ops and alternative, in order: two regions can start at one node); a region the
// report lacks is unstable, so left out. Regions are asked for in the report's order.
StatusOr<MeasureAlternativesFn> ReplayReport(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read " + path);
  nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
  if (report.is_discarded() || !report.contains("items")) {
    return Status::InvalidArgument(path + ": not a `fusor costmodel validate --json` report");
  }
  using Times = std::map<std::string, std::vector<double>>;  // Per alternative, region by region.
  auto regions = std::make_shared<std::map<std::string, std::vector<Times>>>();
  int last_region = -1;
  for (const auto& item : report["items"]) {
    std::string key = item["model"].get<std::string>() + "|" + item["where"].get<std::string>() +
                      "|" + item["ops"].get<std::string>();
    auto& list = (*regions)[key];
    if (item["region"].get<int>() != last_region) list.emplace_back();
    last_region = item["region"].get<int>();
    list.back()[item["alternative"].get<std::string>()].push_back(item["measured_ns"]);
  }
  auto next = std::make_shared<std::map<std::string, size_t>>();
  return MeasureAlternativesFn(
      [regions, next](const HeldOutRegion& r) -> StatusOr<std::vector<MeasuredTime>> {
        std::string key = r.model + "|" + r.where + "|" + r.ops;
        const Times* times = nullptr;
        if (auto it = regions->find(key); it != regions->end() && (*next)[key] < it->second.size())
          times = &it->second[(*next)[key]++];
        std::vector<MeasuredTime> out;
        for (const auto& [name, plan] : r.alternatives) {
          MeasuredTime m;
          auto t = times ? times->find(name) : Times::const_iterator();
          m.unstable = !times || t == times->end();
          m.median_ns = m.unstable ? 1 : t->second.front();
          out.push_back(m);
        }
        return out;
      });
}

// The profile fitted over the calibration log of `db_path` (this target, this cost model), the
// samples chosen as `pool` says: "all" of them, "served" as `fusor calibrate` chooses (slow runs,
// then slow timings left out), "quickest" (each benchmark's quickest timing alone), "latest" (the
// newest run alone). Lets one held-out table judge fits over several calibration runs.
StatusOr<HardwareProfile> FitFromLog(const std::string& db_path, const std::string& pool,
                                     const TargetFingerprint& target, int max_runs,
                                     bool print_profile) {
  FUSOR_ASSIGN_OR_RETURN(auto store, db::SqlitePlanStore::Open(db_path, {.read_only = true}));
  FUSOR_ASSIGN_OR_RETURN(LoggedSamples logged,
                         LoadCalibrationLog(*store, {target.Id(), kCostModelVersion, max_runs}));
  if (logged.samples.empty()) return Status::NotFound("no calibration samples in " + db_path);
  LoggedSamples used = logged;
  const int64_t newest = logged.run_ids.front();
  if (pool == "served") {
    FitSamples chosen = ChooseFitSamples(logged, newest);
    for (const RunSlowdown& r : chosen.compared)
      std::printf("run %lld %.3fx\n", static_cast<long long>(r.run_id), r.slowdown);
    used = std::move(chosen.used);
  } else if (pool == "quickest") {
    std::map<std::string, size_t> quickest;
    for (size_t i = 0; i < logged.samples.size(); ++i) {
      auto [it, inserted] = quickest.emplace(logged.samples[i].benchmark, i);
      if (!inserted && logged.samples[i].measured_ns < logged.samples[it->second].measured_ns)
        it->second = i;
    }
    used = {};
    for (const auto& [name, i] : quickest) used.samples.push_back(logged.samples[i]);
  } else if (pool == "latest") {
    std::vector<int64_t> older;
    for (int64_t id : logged.run_ids) {
      if (id != newest && (older.empty() || older.back() != id)) older.push_back(id);
    }
    used = WithoutRuns(logged, older);
  } else if (pool != "all") {
    return Status::InvalidArgument("--pool: one of all, served, quickest, latest; got " + pool);
  }
  HardwareProfile profile;
  profile.target = target;
  FUSOR_ASSIGN_OR_RETURN(FitReport report, FitProfile(used.samples, &profile));
  if (print_profile) std::cout << ProfileToJson(profile).dump(1) << "\n";
  std::printf("fit over %zu of %zu samples (%d runs, pool %s): rms %.3f, conv %.1f GFLOP/s\n",
              used.samples.size(), logged.samples.size(), logged.runs, pool.c_str(),
              report.rms_rel_error, profile.conv_gflops.value);
  return profile;
}

// Relative difference of the median of a plan's even rounds from that of its odd rounds (in
// percent, against the smaller): the measurement's own error; 0 with one round.
double EvenOddError(const std::vector<double>& rounds_ns) {
  std::vector<double> half[2];
  for (size_t k = 0; k < rounds_ns.size(); ++k) half[k % 2].push_back(rounds_ns[k]);
  if (half[1].empty()) return 0;
  for (auto& h : half) std::sort(h.begin(), h.end());
  double a = half[0][half[0].size() / 2], b = half[1][half[1].size() / 2];
  return 100 * std::fabs(a - b) / std::min(a, b);
}

void PrintSummaryRow(const std::string& label, const ValidationReport& r) {
  nlohmann::json j = ReportToJson(r);
  std::printf("%-22.22s %4d %6.1f %6.1f %6.1f %6.3f %6.3f %6.1f %6.1f | %6.3f %6.1f %6.1f\n",
              label.c_str(), r.regions, r.mape, j["median_ape_percent"].get<double>(),
              j["p90_ape_percent"].get<double>(), r.kendall_tau, r.decisive_tau, 100 * r.agreement,
              100 * r.decisive_agreement, r.repeat_tau, 100 * r.repeat_agreement, r.repeat_mape);
}

void PrintSummaryHeader(const std::string& what) {
  std::printf("%-22s %4s %6s %6s %6s %6s %6s %6s %6s | %6s %6s %6s\n", what.c_str(), "reg", "MAPE",
              "med", "p90", "tau", "tau5%", "agr%", "agr5%", "r.tau", "r.agr", "r.ape");
}

struct WholePlanError {
  double mape = 0, repeat_mape = 0, tuned_mape = 0;
  int plans = 0;
};

// Whole plans: predicted against the median of the measured rounds, and even rounds against odd.
WholePlanError WholePlanErrors(const std::vector<MeasuredWholePlan>& plans, const CostModel& model,
                               bool print) {
  WholePlanError e;
  int tuned = 0;
  for (const MeasuredWholePlan& p : plans) {
    std::vector<double> v = p.rounds_ns;
    std::sort(v.begin(), v.end());
    double measured = v[v.size() / 2];
    double predicted = model.WholePlan(*p.graph, p.plan).total_ns;
    double err = 100 * std::fabs(predicted - measured) / measured;
    double repeat = EvenOddError(p.rounds_ns);
    e.mape += err;
    e.repeat_mape += repeat;
    ++e.plans;
    if (p.name == "tuned") e.tuned_mape += err, ++tuned;
    if (print) {
      std::printf(
          "  %-24.24s %-6s predicted %10.1f us measured %10.1f us  error %+6.1f%%  "
          "even/odd %4.1f%%\n",
          p.graph->model_name.c_str(), p.name.c_str(), predicted / 1e3, measured / 1e3,
          100 * (predicted - measured) / measured, repeat);
    }
  }
  if (e.plans) e.mape /= e.plans, e.repeat_mape /= e.plans;
  if (tuned) e.tuned_mape /= tuned;
  return e;
}

FoldFitOptions Way(bool refit_profile, bool residual, double ridge, int sampled = 0) {
  FoldFitOptions o;
  o.sampled_benchmarks = sampled;
  o.refit_profile = refit_profile;
  o.residual = residual;
  o.residual_options.ridge = ridge;
  return o;
}

// The leave-models-out protocol over the table: for each way a fold may fit (the calibration suite
// alone; the profile refitted with the training models' regions; the residual on top of either),
// K folds by model family, each fold's models predicted by the model fitted without them. Prints
// the pooled figures of each way, and for `detail` the figures per model, per group kind and per
// whole plan.
int LeaveModelsOut(int folds, const std::string& detail, const CalibrationResult& cal,
                   FoldData data, const std::function<MeasureAlternativesFn()>& replay,
                   double ridge, int sampled) {
  const std::vector<HeldOutRegion>& held_out = *data.regions;
  const std::vector<MeasuredWholePlan>& plans = data.plans;
  const int rounds = data.rounds;
  std::vector<std::string> models;
  for (const Graph* g : data.models) models.push_back(g->model_name);
  std::map<std::string, int> fold_of = AssignFolds(models, folds);
  std::printf("leave-models-out: %zu models, %d folds by family\n", models.size(), folds);
  for (int f = 0; f < folds; ++f) {
    std::printf("  fold %d:", f);
    for (const auto& [m, k] : fold_of)
      if (k == f) std::printf(" %s", m.c_str());
    std::printf("\n");
  }
  const std::pair<const char*, FoldFitOptions> ways[] = {
      {"calibration", Way(false, false, ridge)},
      {"refit", Way(true, false, ridge)},
      {"residual", Way(false, true, ridge)},
      {"refit+residual", Way(true, true, ridge)},
      {"sampled", Way(false, false, ridge, sampled)},
      {"sampled+residual", Way(false, true, ridge, sampled)},
  };
  PrintSummaryHeader("held-out, fitted by");
  std::printf("%-22s whole-plan error: all plans / tuned plans / even-vs-odd\n", "");
  for (const auto& [name, options] : ways) {
    std::vector<std::unique_ptr<CostModel>> fold_models;
    int train_regions = 0, train_sampled = 0;
    for (int f = 0; f < folds; ++f) {
      auto m = FitFold(f, fold_of, cal.profile, (data.measure = replay(), data), options);
      if (!m.ok()) return std::cerr << name << ": " << m.status().ToString() << "\n", 1;
      train_regions += m->training_regions;
      train_sampled += m->sampled_benchmarks;
      fold_models.push_back(FoldCostModel(*m));
    }
    FoldedCostModel model(fold_of, std::move(fold_models));
    auto report = ValidateCostModel(held_out, model, replay(), {}, rounds);
    if (!report.ok()) return std::cerr << report.status().ToString() << "\n", 1;
    PrintSummaryRow(name, *report);
    WholePlanError w = WholePlanErrors(plans, model, false);
    std::printf(
        "%-22s whole-plan %.1f%% / %.1f%% / %.1f%% over %d plans (per fold: %d training "
        "regions, %d sampled benchmarks)\n",
        "", w.mape, w.tuned_mape, w.repeat_mape, w.plans, train_regions / folds,
        train_sampled / folds);
    if (detail != name) continue;
    std::printf("\nper model (%s)\n", name);
    PrintSummaryHeader("model");
    for (const std::string& m : models) {
      std::vector<HeldOutRegion> subset;
      for (const HeldOutRegion& r : held_out)
        if (r.model == m) subset.push_back(r);
      auto sub = ValidateCostModel(subset, model, replay(), {}, rounds);
      if (sub.ok()) PrintSummaryRow(m, *sub);
    }
    std::printf("\nper group kind (%s)\n", name);
    PrintSummaryHeader("kind");
    std::map<std::string, std::vector<HeldOutRegion>> by_kind;
    for (const HeldOutRegion& r : held_out) by_kind[RegionKind(r)].push_back(r);
    for (const auto& [kind, subset] : by_kind) {
      auto sub = ValidateCostModel(subset, model, replay(), {}, rounds);
      if (sub.ok()) PrintSummaryRow(kind, *sub);
    }
    std::printf("\nwhole plans (%s)\n", name);
    WholePlanErrors(plans, model, true);
    std::printf("\nwrong fuse-or-not calls (%s), decisive first:\n", name);
    std::vector<WrongFuseCall> wrong = WrongFuseCalls(*report);
    for (size_t i = 0; i < std::min<size_t>(wrong.size(), 15); ++i) {
      const WrongFuseCall& w = wrong[i];
      std::printf("  %-9s %.3f vs %.3f  %s %s  at %s\n", w.decisive ? "decisive" : "close",
                  w.measured_ratio, w.predicted_ratio, w.model.c_str(), w.ops.c_str(),
                  w.where.c_str());
    }
    std::printf("\n");
  }
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"Develop the cost model against recorded measurements"};
  std::string table_path = "costmodel_lab.json";
  std::vector<std::string> models;
  bool remeasure = false, quiet_samples = false, describe = false, one_after_another = false;
  std::string explain, dump, fit_db, pool = "served", replay;
  int fit_runs = 8;
  bool print_profile = false, whole_plans = false;
  bool keep_unstable = false;
  int folds = 0, whole_rounds = 2, sampled = 32, record_sampled = 0;
  double ridge = ResidualFitOptions{}.ridge;
  std::string fold_detail = "calibration";
  int worst = 30, max_ops = 6, regions = 40, rounds = 1;
  uint64_t seed = 1;
  app.add_option("--table", table_path, "Recorded measurements (JSON)");
  app.add_flag("--remeasure", remeasure, "Measure again even what the table has");
  app.add_flag("--quiet-samples", quiet_samples, "Do not print the calibration samples");
  app.add_option("--worst", worst, "Held-out items to print, worst first");
  app.add_option("--max-ops", max_ops, "Ops per held-out group, at most");
  app.add_option("--regions", regions, "Groups per model, at most");
  app.add_option("--seed", seed, "Seed for choosing groups");
  app.add_flag("--describe", describe, "Print the kernels each calibration benchmark runs");
  app.add_option("--dump", dump, "Write the validation report (JSON) here");
  app.add_option("--rounds", rounds,
                 "Interleaved measurement rounds per held-out region (as `fusor costmodel "
                 "validate --rounds`; each round recorded apart)");
  app.add_flag("--one-after-another", one_after_another,
               "Measure a region's alternatives each alone in turn, not side by side");
  app.add_option("--explain", explain, "Print features of regions whose ops contain this");
  app.add_option("--fit-db", fit_db,
                 "Judge the profile fitted over this database's calibration log, not the table's");
  app.add_option("--pool", pool, "With --fit-db: all, served, quickest or latest samples");
  app.add_option("--fit-runs", fit_runs, "With --fit-db: newest runs loaded");
  app.add_flag("--print-profile", print_profile, "With --fit-db: print the fitted profile (JSON)");
  app.add_option("--replay", replay,
                 "Judge against the measured times of a `fusor costmodel validate --json` report "
                 "(one round each; regions it lacks count as unstable), not the table's");
  app.add_flag("--whole-plans", whole_plans,
               "Also measure each model's whole plans (none, rules, tuned) side by side, --rounds "
               "times, and print their predicted and measured times");
  app.add_option("--whole-rounds", whole_rounds, "Rounds of each model's whole plans");
  app.add_option("--folds", folds,
                 "Leave-models-out replay of the table (never measures): K folds by model family");
  app.add_option("--fold-detail", fold_detail,
                 "With --folds: per model / kind / plan figures of calibration, refit, residual or "
                 "refit+residual");
  app.add_option(
      "--sampled", sampled,
      "Benchmarks sampled from the training models per fold (costmodel/sampled_suite.h)");
  app.add_option("--record-sampled", record_sampled,
                 "Measure the sampled benchmarks of each of this many folds into the table");
  app.add_flag("--keep-unstable", keep_unstable,
               "With --folds: replay timings whose spread stayed high as usable");
  app.add_option("--ridge", ridge, "With --folds: the residual's ridge weight");
  app.add_option("models", models, "ONNX models to draw held-out groups from");
  CLI11_PARSE(app, argc, argv);

  auto target = DetectTarget(OneDnnIsa(), OneDnnVersion());
  if (!target.ok()) return std::cerr << target.status().ToString() << "\n", 1;
  MeasurementTable table(table_path);
  if (folds > 0) {
    table.set_replay_only();
    if (keep_unstable) table.set_keep_unstable();
  } else {
    SettleHost(kSettleHostMaxMs, "costmodel_lab");
  }
  OneDnnMeasurer calibration_measurer = MakeMeasurer(TimingPolicy::kCalibrate, 100);
  OneDnnMeasurer onednn_measurer =
      MakeMeasurer(TimingPolicy::kCalibrate, 100, ChainBackend::kOneDnn);
  HardwareProfile start;
  start.target = *target;
  auto cal = Calibrate(CalibrationSuite(*target), start, table.Fn(&calibration_measurer, remeasure),
                       {}, {}, table.Fn(&onednn_measurer, remeasure, "onednn|"));
  table.Save();
  if (!cal.ok()) return std::cerr << cal.status().ToString() << "\n", 1;
  if (!quiet_samples) PrintSamples(*cal);
  if (describe) Describe(CalibrationSuite(*target));

  std::vector<HeldOutRegion> held_out;
  std::vector<Graph> graphs;
  for (const auto& path : models) {
    auto g = ImportModel(path);
    if (!g.ok()) return std::cerr << g.status().ToString() << "\n", 1;
    for (auto& r : HeldOutRegions(*g, max_ops, regions, seed)) held_out.push_back(std::move(r));
    graphs.push_back(std::move(*g));
  }
  if (held_out.empty()) return 0;
  // Times as `fusor costmodel validate` does.
  OneDnnMeasurer validation_measurer(ValidationMeasurerOptions());
  if (record_sampled > 0) {
    table.Note("sampled_start");
    std::vector<std::string> names;
    for (const Graph& g : graphs) names.push_back(g.model_name);
    std::map<std::string, int> fold_of = AssignFolds(names, record_sampled);
    MeasureFn measure = table.Fn(&calibration_measurer, remeasure);
    for (int f = 0; f < record_sampled; ++f) {
      std::vector<const Graph*> training;
      for (const Graph& g : graphs)
        if (fold_of[g.model_name] != f) training.push_back(&g);
      for (const CalibrationBenchmark& b : SampledCalibrationSuite(training, {.count = sampled})) {
        auto m = measure(b.graph, b.plan);
        if (!m.ok()) return std::cerr << b.name << ": " << m.status().ToString() << "\n", 1;
      }
      table.Save();
    }
    table.Note("sampled_end");
    table.Save();
  }
  if (folds > 0) {
    std::vector<MeasuredWholePlan> plans;
    AnalyticalCostModel unused(cal->profile);
    for (const Graph& g : graphs) {
      auto listed = table.WholePlans(g, unused);
      if (!listed.ok()) continue;
      auto times = table.MeasureWhole(g, *listed, &validation_measurer, false, whole_rounds);
      if (!times.ok()) continue;
      for (size_t i = 0; i < listed->size(); ++i) {
        MeasuredWholePlan p{&g, (*listed)[i].first, (*listed)[i].second, {}};
        // Rounds timed in one of the host's slow states are left out while another round was not.
        // A whole plan's timing is kept when its spread stayed high: it is one median of many
        // kernels, and the even/odd error shows how far two of them part.
        for (bool keep_disturbed : {false, true}) {
          for (const MeasuredTime& m : (*times)[i]) {
            if (keep_disturbed || !m.disturbed) p.rounds_ns.push_back(m.median_ns);
          }
          if (!p.rounds_ns.empty()) break;
        }
        if (!p.rounds_ns.empty()) plans.push_back(std::move(p));
      }
    }
    auto replay = [&] {
      return table.Alternatives(MeasureSideBySide(&validation_measurer), false);
    };
    FoldData data;
    data.calibration = cal->samples;
    data.regions = &held_out;
    data.rounds = rounds;
    data.plans = std::move(plans);
    for (const Graph& g : graphs) data.models.push_back(&g);
    data.measure_benchmark = table.Fn(&calibration_measurer, false);
    return LeaveModelsOut(folds, fold_detail, *cal, std::move(data), replay, ridge, sampled);
  }
  HardwareProfile profile = cal->profile;
  if (!fit_db.empty()) {
    auto fitted = FitFromLog(fit_db, pool, *target, fit_runs, print_profile);
    if (!fitted.ok()) return std::cerr << fitted.status().ToString() << "\n", 1;
    profile = *fitted;
  }
  AnalyticalCostModel model(profile);
  MeasureAlternativesFn measure =
      table.Alternatives(one_after_another ? OneAfterAnother(MeasurePlanWith(&validation_measurer))
                                           : MeasureSideBySide(&validation_measurer),
                         remeasure);
  if (!replay.empty()) {
    auto replayed = ReplayReport(replay);
    if (!replayed.ok()) return std::cerr << replayed.status().ToString() << "\n", 1;
    measure = *replayed;
    rounds = 1;
  }
  table.Note("regions_start");
  // The command's workflow, answered from the table where it can (so without the machine checks,
  // which only mean something live); saved as it goes: a recording of all shared models takes a
  // while and keeps what it measured.
  ValidationRunOptions validation;
  validation.rounds = rounds;
  validation.machine_check = false;
  auto run = RunValidation(
      held_out, profile, validation,
      [&](const std::string&, size_t done, size_t total, const std::string&) {
        if (done % 8 == 0 || done == total) table.Save();
      },
      measure);
  table.Note("regions_end");
  table.Save();
  if (!run.ok()) return std::cerr << run.status().ToString() << "\n", 1;
  const ValidationReport& report = run->report;
  if (whole_plans) {
    table.Note("whole_plans_start");
    for (const Graph& g : graphs) {
      auto plans = table.WholePlans(g, model);
      if (!plans.ok())
        return std::cerr << g.model_name << ": " << plans.status().ToString() << "\n", 1;
      auto times = table.MeasureWhole(g, *plans, &validation_measurer, remeasure, whole_rounds);
      if (!times.ok())
        return std::cerr << g.model_name << ": " << times.status().ToString() << "\n", 1;
      for (size_t i = 0; i < plans->size(); ++i) {
        std::printf("whole %-24s %-6s predicted %10.1f us measured", g.model_name.c_str(),
                    (*plans)[i].first.c_str(),
                    model.WholePlan(g, (*plans)[i].second).total_ns / 1e3);
        for (const MeasuredTime& m : (*times)[i]) std::printf(" %.1f", m.median_ns / 1e3);
        std::printf("\n");
      }
    }
    table.Note("whole_plans_end");
    table.Save();
  }
  if (!explain.empty()) {
    Explain(held_out, profile, explain, table.Fn(&validation_measurer, false));
  }
  if (!dump.empty()) std::ofstream(dump) << ReportToJson(report).dump(1);
  PrintValidation(report, worst);
  return 0;
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) { return fusor::Main(argc, argv); }
