// Plan quality, measured: for each bundled model, end-to-end latency under the plans of
//   none (every op alone), rules (TVM-style), greedy (cost model), tuned (default search + measured
//   refinement), all built once and then timed side by side (TimeSideBySide) in rounds in one
//   process,
// reported as medians and as ratios to `none` (> 1 is faster). The cost model is calibrated on
// this machine first (or read from --profile). Prints a Markdown table for docs/benchmarks.md.
//   build/bench/plan_quality [--rounds N] [--profile PROFILE.json] [--threads N] [models...]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "accuracy/measured_time.h"
#include "costmodel/calibration.h"
#include "graph/onnx_import.h"
#include "runtime/executor.h"
#include "runtime/measurer.h"
#include "runtime/onednn_info.h"
#include "runtime/timing_policy.h"
#include "search/autotune.h"
#include "search/plan_search.h"

namespace fusor {
namespace {

struct Args {
  int rounds = 5;
  int threads = 0;
  std::string profile;
  std::vector<std::string> models;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--rounds" && i + 1 < argc)
      a.rounds = std::atoi(argv[++i]);
    else if (s == "--threads" && i + 1 < argc)
      a.threads = std::atoi(argv[++i]);
    else if (s == "--profile" && i + 1 < argc)
      a.profile = argv[++i];
    else if (s.rfind("-", 0) == 0) {
      const bool help = s == "--help" || s == "-h";
      std::fprintf(help ? stdout : stderr,
                   "usage: %s [--rounds N] [--profile PROFILE.json] [--threads N] [models...]\n",
                   argv[0]);
      if (!help) std::fprintf(stderr, "unknown or incomplete option '%s'\n", s.c_str());
      std::exit(help ? 0 : 2);
    } else {
      a.models.push_back(s);
    }
  }
  if (a.models.empty()) {
    a.models = {"resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0",
                "bert_base_encoder"};
  }
  return a;
}

OneDnnMeasurerOptions MeasureOptions(int threads, double min_ms) {
  OneDnnMeasurerOptions o;
  o.executor.threads = threads;
  o.timing = TimingFor(TimingPolicy::kBench, min_ms);
  return o;
}

StatusOr<HardwareProfile> Profile(const Args& a) {
  if (!a.profile.empty()) {
    std::ifstream in(a.profile);
    std::stringstream text;
    text << in.rdbuf();
    return ProfileFromJsonText(text.str());
  }
  FUSOR_ASSIGN_OR_RETURN(TargetFingerprint t, DetectTarget(OneDnnIsa(), OneDnnVersion()));
  HardwareProfile start;
  start.target = t;
  OneDnnMeasurerOptions held = MeasureOptions(a.threads, 100);
  held.executor.chain_backend = ChainBackend::kOneDnn;
  OneDnnMeasurer m(MeasureOptions(a.threads, 100)), onednn(held);
  SettleHost(kSettleHostMaxMs, "plan_quality calibration");
  FUSOR_ASSIGN_OR_RETURN(
      CalibrationResult r,
      Calibrate(CalibrationSuite(t), start, MeasurePlanWith(&m), {}, {}, MeasurePlanWith(&onednn)));
  std::fprintf(stderr, "calibrated: fit MAPE %.1f%%, %d unstable benchmarks skipped\n",
               r.report.mape, r.skipped_unstable);
  return r.profile;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Status RunModel(const std::string& name, const HardwareProfile& profile, const Args& a) {
  FUSOR_ASSIGN_OR_RETURN(Graph g,
                         ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + name + ".onnx"));
  AnalyticalCostModel model(profile);
  std::vector<std::pair<std::string, FusionPlan>> plans;
  plans.emplace_back("none", UnfusedPlan(g));
  plans.emplace_back("rules", RulesPlan(g, 64));
  SearchOptions greedy;
  greedy.algorithm = SearchAlgorithm::kGreedy;
  FUSOR_ASSIGN_OR_RETURN(SearchResult gr, SearchPlan(g, model, greedy));
  plans.emplace_back("greedy", gr.plan);
  FUSOR_ASSIGN_OR_RETURN(SearchResult def, SearchPlan(g, model));
  OneDnnMeasurer measurer(MeasureOptions(a.threads, 50));
  AutotuneOptions tune;
  tune.measure_budget = 10;
  FUSOR_ASSIGN_OR_RETURN(AutotuneResult tuned,
                         Autotune(g, model, profile.target, def.plan, &measurer, tune));
  plans.emplace_back("tuned", tuned.plan);

  FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, RandomLeafValues(g, 1));
  std::vector<std::unique_ptr<Executor>> execs;
  ExecutorOptions eo;
  eo.threads = a.threads;
  for (auto& [label, plan] : plans) {
    FUSOR_ASSIGN_OR_RETURN(auto e, Executor::Create(g, plan, leaves, eo));
    execs.push_back(std::move(e));
  }
  SettleHost(kSettleHostMaxMs, "plan_quality " + name);
  TimingOptions timing = MeasureOptions(a.threads, 150).timing;
  timing.quiet_wait_ms = 250;  // Each timing starts with the host in its quiet state (measurer.h).
  std::vector<std::vector<double>> times(plans.size());
  std::vector<std::function<void()>> runs;
  for (auto& e : execs) runs.push_back([e = e.get()] { e->Run(); });
  int unstable = 0;
  for (int round = 0; round < a.rounds; ++round) {
    // Side by side (runtime/measurer.h): a slow stretch of the host falls on every plan alike.
    std::vector<Measurement> ms = TimeSideBySide(runs, timing);
    for (size_t i = 0; i < plans.size(); ++i) {
      unstable += ms[i].unstable;
      times[i].push_back(static_cast<double>(ms[i].median_ns));
    }
  }
  double none = Median(times[0]);
  std::printf("| %s | %zu |", name.c_str(), g.num_nodes());
  for (size_t i = 0; i < plans.size(); ++i) {
    std::printf(" %.2f ms (%zu groups) %.2fx |", Median(times[i]) / 1e6,
                plans[i].second.groups.size(), none / Median(times[i]));
  }
  std::printf(" %d |\n", unstable);
  std::fflush(stdout);
  return Status::Ok();
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) {
  fusor::Args a = fusor::Parse(argc, argv);
  auto profile = fusor::Profile(a);
  if (!profile.ok()) {
    std::fprintf(stderr, "%s\n", profile.status().ToString().c_str());
    return 1;
  }
  std::printf("| model | nodes | none | rules | greedy | tuned | unstable timings |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const auto& m : a.models) {
    fusor::Status s = fusor::RunModel(m, *profile, a);
    if (!s.ok()) std::printf("| %s | error: %s |\n", m.c_str(), s.ToString().c_str());
  }
  return 0;
}
