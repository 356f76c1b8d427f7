// Recurrent groups, lowered against the fallback: for a model with LSTM or GRU nodes (default
// models/lstm_tagger.onnx; models/gru_tagger.onnx), the rules plan built twice, once with those
// nodes on oneDNN's RNN primitive (runtime/rnn_kernel.h) and once through the reference fallback,
// then each recurrent group and the whole plan timed side by side (TimeSideBySide) in one process.
// Prints the medians, their ratio, and the cost model's prediction of each group (default profile,
// or --profile P.json).
//
//   ./build/bench/rnn_bench [--profile P.json] [model.onnx]
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "costmodel/cost_model.h"
#include "graph/onnx_import.h"
#include "runtime/constant_evaluator.h"
#include "runtime/executor.h"
#include "runtime/measurer.h"
#include "search/plan_search.h"

namespace fusor {
namespace {

struct Args {
  std::string model = std::string(FUSOR_MODELS_DIR) + "/lstm_tagger.onnx";
  std::string profile;
};

StatusOr<HardwareProfile> LoadProfile(const std::string& path) {
  if (path.empty()) return HardwareProfile{};
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read profile '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return ProfileFromJsonText(text.str());
}

TimingOptions Timing() {
  TimingOptions o;
  o.min_repeats = 15;
  o.min_total_ns = 300'000'000;
  o.quiet_wait_ms = 250;
  return o;
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

Status Run(const Args& a) {
  FUSOR_ASSIGN_OR_RETURN(Graph g, ImportOnnxFile(a.model, WithConstantFolding({})));
  FUSOR_ASSIGN_OR_RETURN(HardwareProfile profile, LoadProfile(a.profile));
  AnalyticalCostModel model(profile);
  SearchOptions so;
  so.algorithm = SearchAlgorithm::kRules;
  FUSOR_ASSIGN_OR_RETURN(SearchResult searched, SearchPlan(g, model, so));
  const FusionPlan& plan = searched.plan;
  PlanCost predicted = model.Cost(g, plan);
  FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, RandomLeafValues(g, 1));
  ExecutorOptions lowered, fallback;
  fallback.lower_rnn = false;
  FUSOR_ASSIGN_OR_RETURN(auto on, Executor::Create(g, plan, leaves, lowered));
  FUSOR_ASSIGN_OR_RETURN(auto off, Executor::Create(g, plan, leaves, fallback));
  SettleHost(kSettleHostMaxMs, "rnn_bench");
  std::printf("%-34s %12s %12s %12s %9s\n", "group", "predicted", "oneDNN", "fallback", "speed-up");
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const std::string& op = g.node(plan.groups[i].nodes[0]).op_type;
    if (op != "LSTM" && op != "GRU") continue;
    on->Run();
    off->Run();
    auto t = TimeSideBySide({[&, i] { on->RunGroup(i); }, [&, i] { off->RunGroup(i); }}, Timing());
    std::printf("%-34s %9.3f ms %9.3f ms %9.3f ms %8.1fx\n",
                ("group " + std::to_string(i) + " " + g.node(plan.groups[i].nodes[0]).name).c_str(),
                predicted.groups[i].total_ns / 1e6, Ms(t[0].median_ns), Ms(t[1].median_ns),
                static_cast<double>(t[1].median_ns) / static_cast<double>(t[0].median_ns));
    std::printf("  oneDNN: %s\n  fallback: %s\n", on->DescribeGroup(i).c_str(),
                off->DescribeGroup(i).c_str());
  }
  auto whole = TimeSideBySide({[&] { on->Run(); }, [&] { off->Run(); }}, Timing());
  std::printf("%-34s %9.3f ms %9.3f ms %9.3f ms %8.1fx\n", "whole plan",
              predicted.total.total_ns / 1e6, Ms(whole[0].median_ns), Ms(whole[1].median_ns),
              static_cast<double>(whole[1].median_ns) / static_cast<double>(whole[0].median_ns));
  std::printf("timings: oneDNN %s; fallback %s\n", whole[0].ToString().c_str(),
              whole[1].ToString().c_str());
  return Status::Ok();
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) {
  fusor::Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--profile" && i + 1 < argc) {
      a.profile = argv[++i];
    } else if (s.rfind("-", 0) == 0) {
      std::fprintf(stderr, "usage: %s [--profile P.json] [model.onnx]\n", argv[0]);
      return 2;
    } else {
      a.model = s;
    }
  }
  fusor::Status s = fusor::Run(a);
  if (!s.ok()) {
    std::fprintf(stderr, "rnn_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
