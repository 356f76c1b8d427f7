#include "client/run_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "client/exit_codes.h"
#include "client/model_options.h"
#include "graph/plan.h"
#include "graph/plan_json.h"
#include "runtime/executor.h"
#include "runtime/host_tensor.h"
#include "runtime/measurer.h"

namespace fusor {
namespace {

struct RunOptions {
  ModelOptions model;
  std::string plan_path;
  bool unfused = false;
  int threads = 0;
  uint64_t seed = 1;
  int64_t memory_budget = int64_t{16} << 30;
  double min_time_ms = 200;
  double group_min_time_ms = 20;
  bool flush_cache = false;
};

StatusOr<FusionPlan> ChoosePlan(const Graph& g, const RunOptions& o) {
  if (o.unfused) return UnfusedPlan(g);
  if (o.plan_path.empty()) return MaxFusionPlan(g);
  std::ifstream in(o.plan_path);
  if (!in) return Status::IOError("cannot read plan file '" + o.plan_path + "'");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("'" + o.plan_path + "' is not valid JSON");
  auto parsed = PlanFromJson(g, j);
  if (!parsed.ok()) return parsed.status().WithContext(o.plan_path);
  return parsed;
}

TimingOptions Timing(const RunOptions& o, double min_ms) {
  TimingOptions t;
  t.min_total_ns = static_cast<int64_t>(min_ms * 1e6);
  t.flush_cache = o.flush_cache;
  return t;
}

void PrintGroups(Executor& exec, const RunOptions& o) {
  std::printf("%5s %12s %7s  %s\n", "group", "median", "cv", "lowering");
  int64_t sum = 0;
  for (size_t i = 0; i < exec.num_groups(); ++i) {
    Measurement m = TimeRepeated([&] { exec.RunGroup(i); }, Timing(o, o.group_min_time_ms));
    sum += m.median_ns;
    std::printf("%5zu %9.3f ms %6.1f%%  %s%s\n", i, static_cast<double>(m.median_ns) / 1e6,
                m.cv * 100, exec.DescribeGroup(i).c_str(), m.unstable ? "  [UNSTABLE]" : "");
  }
  std::printf("sum of group medians: %.3f ms\n", static_cast<double>(sum) / 1e6);
}

Status RunModel(const RunOptions& o) {
  FUSOR_ASSIGN_OR_RETURN(Graph g, o.model.Import());
  FUSOR_ASSIGN_OR_RETURN(FusionPlan plan, ChoosePlan(g, o));
  FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, RandomLeafValues(g, o.seed));
  ExecutorOptions eo;
  eo.threads = o.threads;
  eo.memory_budget_bytes = o.memory_budget;
  FUSOR_ASSIGN_OR_RETURN(auto exec, Executor::Create(g, plan, leaves, eo));
  std::printf("model %s: %zu nodes, %zu groups (%s), memory %s\n", g.model_name.c_str(),
              g.num_nodes(), plan.groups.size(),
              o.unfused             ? "unfused"
              : o.plan_path.empty() ? "max fusion"
                                    : o.plan_path.c_str(),
              exec->memory().ToString().c_str());
  exec->Run();
  // A process can start in one of the host's slow states (runtime/measurer.h, CrossCoreRatio),
  // where every plan runs up to ~2x slower: give it a few seconds to end before timing, and say
  // so when it is there after the timing.
  SettleHost(3000, "run");
  PrintGroups(*exec, o);
  Measurement total = TimeRepeated([&] { exec->Run(); }, Timing(o, o.min_time_ms));
  std::printf("total: %s\n", total.ToString().c_str());
  if (double ratio = CrossCoreRatio(); ratio > kMaxCrossCoreRatio) {
    std::printf(
        "note: the host was in a slow state when timing ended (moving data between cores cost "
        "%.1fx keeping it on one); these times may be up to ~2x the quiet host's\n",
        ratio);
  }
  return Status::Ok();
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand(
      "run", "Run a model with oneDNN under a fusion plan and print per-group and total times");
  auto o = std::make_shared<RunOptions>();
  o->model.AddTo(cmd);
  auto* plan = cmd->add_option("--plan", o->plan_path, "Plan JSON (graph/plan_json.h)");
  cmd->add_flag("--unfused", o->unfused, "Run every op alone")->excludes(plan);
  cmd->add_option("--threads", o->threads, "OpenMP threads (0: all cores)")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random inputs and weights")
      ->capture_default_str();
  cmd->add_option("--memory-budget", o->memory_budget, "Refuse plans needing more bytes")
      ->capture_default_str();
  cmd->add_option("--min-time-ms", o->min_time_ms, "Minimum timed total for the whole plan")
      ->capture_default_str();
  cmd->add_option("--group-min-time-ms", o->group_min_time_ms, "Minimum timed total per group")
      ->capture_default_str();
  cmd->add_flag("--flush-cache", o->flush_cache, "Flush the caches between timed runs");
  cmd->callback([o, exit_code] {
    Status s = RunModel(*o);
    if (!s.ok()) std::cerr << "fusor run: " << s.message() << "\n";
    *exit_code = ExitCodeFor(s);
  });
}

}  // namespace fusor
