// What choosing each anchor group's kernel by measurement (search/kernel_choice.h) gains: for
// each model, the searched plan (the default search, as `fusor tune` starts from) with oneDNN's
// first choice everywhere against the same plan with its kernels chosen by ChooseKernels (the
// tuner's step, timed on each group's region), so only the kernels differ; both built
// once and timed side by side (TimeSideBySide) in alternating rounds in one process; medians of
// the rounds and their ratio (> 1: the choice is faster), the ISA oneDNN runs at and the time the
// choice took. Run it natively and under DNNL_MAX_CPU_ISA=AVX2 for the two CPU classes.
//   build/bench/kernel_choice_bench [--rounds N] [--threads N] [models...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "graph/onnx_import.h"
#include "runtime/executor.h"
#include "runtime/measurer.h"
#include "runtime/onednn_info.h"
#include "runtime/timing_policy.h"
#include "search/kernel_choice.h"
#include "search/plan_search.h"

namespace fusor {
namespace {

struct Args {
  int rounds = 7;
  int threads = 0;
  std::vector<std::string> models;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--rounds" && i + 1 < argc) {
      a.rounds = std::atoi(argv[++i]);
    } else if (s == "--threads" && i + 1 < argc) {
      a.threads = std::atoi(argv[++i]);
    } else if (s.rfind("-", 0) == 0) {
      std::fprintf(stderr, "usage: %s [--rounds N] [--threads N] [models...]\n", argv[0]);
      std::exit(2);
    } else {
      a.models.push_back(s);
    }
  }
  if (a.models.empty()) a.models = {"bert_base_encoder", "gpt_decoder_4l", "vit_b_32"};
  return a;
}

// The uncalibrated profile of this CPU: it orders the regions timed; the choice is measured.
StatusOr<HardwareProfile> Profile() {
  FUSOR_ASSIGN_OR_RETURN(TargetFingerprint t, DetectTarget(OneDnnIsa(), OneDnnVersion()));
  HardwareProfile p;
  p.target = t;
  return p;
}

OneDnnMeasurerOptions MeasureOptions(int threads, double min_ms) {
  OneDnnMeasurerOptions o;
  o.executor.threads = threads;
  o.timing = TimingFor(TimingPolicy::kBench, min_ms);
  return o;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// "brg_matmul:avx2 x6, gemm:jit:f32 x2": the kernels a plan names, with how many groups each.
std::string KernelCounts(const FusionPlan& plan) {
  std::map<std::string, int> counts;
  for (const FusionGroup& group : plan.groups) {
    if (!group.kernel.empty()) ++counts[group.kernel];
  }
  std::string s;
  for (const auto& [name, n] : counts)
    s += (s.empty() ? "" : ", ") + name + " x" + std::to_string(n);
  return s.empty() ? "-" : s;
}

Status RunModel(const std::string& name, const HardwareProfile& profile, const Args& a) {
  FUSOR_ASSIGN_OR_RETURN(Graph g,
                         ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + name + ".onnx"));
  AnalyticalCostModel model(profile);
  FUSOR_ASSIGN_OR_RETURN(SearchResult searched, SearchPlan(g, model));
  OneDnnMeasurer measurer(MeasureOptions(a.threads, 50));
  KernelChoiceOptions kernels;
  auto start = std::chrono::steady_clock::now();
  FUSOR_ASSIGN_OR_RETURN(KernelChoice chosen, ChooseKernels(g, {searched.plan}, model, &measurer,
                                                            kernels, [](int) { return true; }));
  double choice_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, RandomLeafValues(g, 1));
  ExecutorOptions eo;
  eo.threads = a.threads;
  FUSOR_ASSIGN_OR_RETURN(auto first, Executor::Create(g, searched.plan, leaves, eo));
  FUSOR_ASSIGN_OR_RETURN(auto timed, Executor::Create(g, chosen.plans[0], leaves, eo));
  std::vector<std::function<void()>> runs = {[&] { first->Run(); }, [&] { timed->Run(); }};
  SettleHost(kSettleHostMaxMs, "kernel_choice_bench " + name);
  TimingOptions timing = MeasureOptions(a.threads, 150).timing;
  std::vector<std::vector<double>> times(2);
  int unstable = 0;
  for (int round = 0; round < a.rounds; ++round) {
    // Side by side in each round, the order alternating between rounds.
    bool swap = round % 2 == 1;
    std::vector<std::function<void()>> order = swap ? std::vector{runs[1], runs[0]} : runs;
    std::vector<Measurement> ms = TimeSideBySide(order, timing);
    for (size_t i = 0; i < 2; ++i) {
      unstable += ms[i].unstable;
      times[swap ? 1 - i : i].push_back(static_cast<double>(ms[i].median_ns));
    }
  }
  const double base = Median(times[0]), with = Median(times[1]);
  std::printf("| %s | %s | %.2f | %.2f | %.3fx | %d regions, %.1f s | %s | %d |\n", name.c_str(),
              OneDnnIsa().c_str(), base / 1e6, with / 1e6, base / with, chosen.regions_timed,
              choice_s, KernelCounts(chosen.plans[0]).c_str(), unstable);
  std::fflush(stdout);
  return Status::Ok();
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) {
  fusor::Args a = fusor::Parse(argc, argv);
  auto profile = fusor::Profile();
  if (!profile.ok()) {
    std::fprintf(stderr, "%s\n", profile.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "| model | ISA | first choice (ms) | chosen (ms) | ratio | choice | kernels chosen | "
      "unstable |\n|---|---|---|---|---|---|---|---|\n");
  for (const auto& m : a.models) {
    fusor::Status s = fusor::RunModel(m, *profile, a);
    if (!s.ok()) std::printf("| %s | error: %s |\n", m.c_str(), s.ToString().c_str());
  }
  return 0;
}
