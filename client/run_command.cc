#include "client/run_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "base/input_file.h"
#include "client/exit_codes.h"
#include "client/model_options.h"
#include "client/text_format.h"
#include "db/default_path.h"
#include "engine/plan_source.h"
#include "graph/plan.h"
#include "graph/tensor_file.h"
#include "runtime/executor.h"
#include "runtime/host_tensor.h"
#include "runtime/measurer.h"
#include "runtime/model_weights.h"
#include "runtime/timing_policy.h"

namespace fusor {
namespace {

struct RunOptions {
  ModelOptions model;
  std::string plan_path;
  std::string db_path;  // "" for the default database, when it exists.
  bool unfused = false;
  int threads = 0;
  uint64_t seed = 1;
  int64_t memory_budget = int64_t{16} << 30;
  double min_time_ms = 200;
  double group_min_time_ms = 20;
  bool flush_cache = false;
  bool weights = false;             // The model's own weights instead of seeded ones.
  std::vector<std::string> inputs;  // "NAME=FILE"
  std::string output_dir;
  std::string output_format = "pb";  // pb | npy
  bool timing = true;
};

// The tuning database the stored plan comes from: --db, else the default one when it exists;
// "" with *reason when there is none.
StatusOr<std::string> PlanDatabase(const RunOptions& o, std::string* reason) {
  if (!o.db_path.empty()) return o.db_path;
  FUSOR_ASSIGN_OR_RETURN(std::string path, db::DefaultDatabasePath(false));
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return path;
  *reason = "no tuning database at '" + path + "' (the default; tune the model, or pass --db)";
  return std::string();
}

// The plan to run and where it came from: every op alone (--unfused), the plan JSON (--plan), or
// the plan the tuning database stores for this graph on this CPU's target, else the rules plan.
// The database lookup and the JSON checks are the engine's (engine/plan_source.h).
StatusOr<SourcedPlan> ChoosePlan(const Graph& g, const RunOptions& o) {
  if (o.unfused) return SourcedPlan{UnfusedPlan(g), "every op alone (--unfused)", ""};
  FUSOR_ASSIGN_OR_RETURN(std::string target, PlanTargetId(""));
  if (!o.plan_path.empty()) return PlanFromJsonFile(g, o.plan_path, target);
  std::string reason;
  FUSOR_ASSIGN_OR_RETURN(std::string database, PlanDatabase(o, &reason));
  if (!database.empty()) {
    FUSOR_ASSIGN_OR_RETURN(std::optional<SourcedPlan> stored,
                           PlanFromDatabase(g, database, target, &reason));
    if (stored) return *std::move(stored);
  }
  SourcedPlan rules = RulesPlanBecause(g, reason);
  rules.source = "no stored plan: " + rules.source;
  return rules;
}

TimingOptions Timing(const RunOptions& o, double min_ms) {
  TimingOptions t = TimingFor(TimingPolicy::kRun, min_ms);
  t.flush_cache = o.flush_cache;
  return t;
}

// Each group timed two ways: alone (run again and again, its inputs and weights warm) and inside
// the plan (the median of its share of whole runs, its inputs just written by the group before
// and its weights wherever the other groups left them). The cost model prices groups alone; the
// difference is what the plan adds.
void PrintGroups(Executor& exec, const RunOptions& o) {
  std::vector<Measurement> alone;
  for (size_t i = 0; i < exec.num_groups(); ++i) {
    alone.push_back(TimeRepeated([&] { exec.RunGroup(i); }, Timing(o, o.group_min_time_ms)));
  }
  std::vector<std::vector<double>> in_plan(exec.num_groups());
  std::vector<double> seconds;
  const TimingOptions timing = Timing(o, o.min_time_ms);
  const auto start = std::chrono::steady_clock::now();
  for (int run = 0; run < timing.warmup; ++run) exec.Run();
  for (int run = 0; run < timing.max_repeats; ++run) {
    exec.RunProfiled(&seconds);
    for (size_t i = 0; i < seconds.size(); ++i) in_plan[i].push_back(seconds[i]);
    auto elapsed = std::chrono::steady_clock::now() - start;
    if (run + 1 >= timing.min_repeats && elapsed >= std::chrono::nanoseconds(timing.min_total_ns)) {
      break;
    }
  }
  std::printf("%5s %12s %12s %6s %7s  %s\n", "group", "alone", "in plan", "ratio", "cv",
              "lowering");
  double sum_alone = 0, sum_in_plan = 0;
  for (size_t i = 0; i < exec.num_groups(); ++i) {
    const Measurement& m = alone[i];
    std::vector<double>& v = in_plan[i];
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    const double plan_ms = v[v.size() / 2] * 1e3, alone_ms = static_cast<double>(m.median_ns) / 1e6;
    sum_alone += alone_ms;
    sum_in_plan += plan_ms;
    std::printf("%5zu %9.3f ms %9.3f ms %5.2fx %6.1f%%  %s%s\n", i, alone_ms, plan_ms,
                alone_ms > 0 ? plan_ms / alone_ms : 0.0, m.cv * 100, exec.DescribeGroup(i).c_str(),
                m.unstable ? "  [UNSTABLE]" : "");
  }
  std::printf("sum of group medians: %.3f ms alone, %.3f ms in the plan (%.2fx)\n", sum_alone,
              sum_in_plan, sum_alone > 0 ? sum_in_plan / sum_alone : 0.0);
}

// The graph and its leaf values: the model's weights or seeded ones, then the given inputs.
StatusOr<std::pair<Graph, TensorValues>> LoadModel(const RunOptions& o) {
  Graph g;
  TensorValues leaves;
  if (o.weights) {
    FUSOR_ASSIGN_OR_RETURN(ImportedModel m, o.model.ImportWithWeights());
    g = std::move(m.graph);
    FUSOR_ASSIGN_OR_RETURN(leaves, ModelLeafValues(g, std::move(m.weights), o.seed));
  } else {
    FUSOR_ASSIGN_OR_RETURN(g, o.model.Import());
    FUSOR_ASSIGN_OR_RETURN(leaves, RandomLeafValues(g, o.seed));
  }
  for (const auto& spec : o.inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      return Status::InvalidArgument("--input " + spec + ": expected NAME=FILE (.pb or .npy)");
    }
    FUSOR_ASSIGN_OR_RETURN(TensorData value, ReadTensorFile(spec.substr(eq + 1)));
    Status s = SetInputValue(g, spec.substr(0, eq), std::move(value), &leaves);
    if (!s.ok()) return s.WithContext("--input " + spec);
  }
  return std::make_pair(std::move(g), std::move(leaves));
}

// "output 'logits': float32 1x1000  min -3.1 max 4.2 mean 0.01  [0.12, -0.5, ...]"
void PrintOutput(const std::string& name, const HostTensor& v) {
  double lo = 0, hi = 0, sum = 0;
  int64_t n = v.num_elements();
  for (int64_t e = 0; e < n; ++e) {
    double x = v.at(e);
    lo = e == 0 ? x : std::min(lo, x);
    hi = e == 0 ? x : std::max(hi, x);
    sum += x;
  }
  std::printf("output '%s': %s %s  min %.6g max %.6g mean %.6g  [", name.c_str(),
              std::string(DTypeName(v.dtype)).c_str(), ShapeString(v.dims).c_str(), lo, hi,
              n > 0 ? sum / static_cast<double>(n) : 0.0);
  for (int64_t e = 0; e < std::min<int64_t>(n, 5); ++e) {
    std::printf("%s%.6g", e ? ", " : "", v.at(e));
  }
  std::printf("%s]\n", n > 5 ? ", ..." : "");
}

Status ReportOutputs(const Graph& g, const Executor& exec, const RunOptions& o) {
  if (!o.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
    if (ec) return Status::IOError("cannot create '" + o.output_dir + "': " + ec.message());
  }
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    TensorId t = g.outputs()[k];
    FUSOR_ASSIGN_OR_RETURN(HostTensor value, exec.Read(t));
    PrintOutput(g.tensor(t).name, value);
    if (o.output_dir.empty()) continue;
    std::string path = (std::filesystem::path(o.output_dir) /
                        ("output_" + std::to_string(k) + "." + o.output_format))
                           .string();
    FUSOR_RETURN_IF_ERROR(WriteTensorFile(path, ToTensorData(g.tensor(t).name, value)));
    std::printf("  written to %s\n", path.c_str());
  }
  return Status::Ok();
}

void PrintTimes(Executor& exec, const RunOptions& o) {
  // A process can start in one of the host's slow states (runtime/measurer.h, CrossCoreRatio),
  // where every plan runs up to ~2x slower: give it a few seconds to end before timing, and say
  // so when it is there after the timing.
  SettleHost(kSettleHostMaxMs, "run");
  PrintGroups(exec, o);
  Measurement total = TimeRepeated([&] { exec.Run(); }, Timing(o, o.min_time_ms));
  std::printf("total: %s\n", total.ToString().c_str());
  if (double ratio = CrossCoreRatio(); ratio > kMaxCrossCoreRatio) {
    std::printf(
        "note: the host was in a slow state when timing ended (moving data between cores cost "
        "%.1fx keeping it on one); these times may be up to ~2x the quiet host's\n",
        ratio);
  }
}

Status RunModel(const RunOptions& o) {
  FUSOR_ASSIGN_OR_RETURN(auto loaded, LoadModel(o));
  auto& [g, leaves] = loaded;
  FUSOR_ASSIGN_OR_RETURN(SourcedPlan plan, ChoosePlan(g, o));
  if (!plan.warning.empty()) std::fprintf(stderr, "warning: %s\n", plan.warning.c_str());
  ExecutorOptions eo;
  eo.threads = o.threads;
  eo.memory_budget_bytes = o.memory_budget;
  FUSOR_ASSIGN_OR_RETURN(auto exec, Executor::Create(g, plan.plan, leaves, eo));
  std::printf("model %s: %zu nodes, %zu groups, memory %s, %s weights\nplan: %s\n",
              g.model_name.c_str(), g.num_nodes(), plan.plan.groups.size(),
              exec->memory().ToString().c_str(), o.weights ? "the model's" : "seeded random",
              plan.source.c_str());
  exec->Run();
  FUSOR_RETURN_IF_ERROR(ReportOutputs(g, *exec, o));
  if (o.timing) PrintTimes(*exec, o);
  return Status::Ok();
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand(
      "run",
      "Run a model with oneDNN under a fusion plan: a summary of each output, then per-group "
      "and total times");
  auto o = std::make_shared<RunOptions>();
  o->model.AddTo(cmd);
  auto* plan = cmd->add_option("--plan", o->plan_path,
                               "Plan JSON (graph/plan_json.h) instead of the stored tuned plan");
  auto* db = cmd->add_option("--db", o->db_path,
                             "Tuning database whose plan for this model on this CPU runs: a "
                             "SQLite file or postgresql://... (default: "
                             "$XDG_DATA_HOME/fusor/tuning.db, when it exists)");
  cmd->add_flag("--unfused", o->unfused, "Run every op alone")->excludes(plan)->excludes(db);
  plan->excludes(db);
  cmd->add_option("--threads", o->threads, "OpenMP threads (0: all cores)")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random inputs and weights")
      ->capture_default_str();
  cmd->add_option("--memory-budget", o->memory_budget, "Refuse plans needing more bytes")
      ->default_str(std::to_string(o->memory_budget) + " (" + ByteString(o->memory_budget) + ")");
  cmd->add_option("--min-time-ms", o->min_time_ms, "Minimum timed total for the whole plan")
      ->capture_default_str();
  cmd->add_option("--group-min-time-ms", o->group_min_time_ms, "Minimum timed total per group")
      ->capture_default_str();
  cmd->add_flag("--flush-cache", o->flush_cache, "Flush the caches between timed runs");
  cmd->add_flag("--weights", o->weights,
                "Run with the model's own weights (initializer data, external data files next "
                "to the model) instead of seeded random ones");
  cmd->add_option("--input", o->inputs,
                  "A graph input's value: NAME=FILE, an ONNX TensorProto .pb or NumPy .npy "
                  "(repeatable; inputs not given get seeded random values)");
  cmd->add_option("--output-dir", o->output_dir,
                  "Write each output as DIR/output_K.pb (ONNX test-data layout) or .npy");
  cmd->add_option("--output-format", o->output_format, "pb or npy")
      ->check(CLI::IsMember({"pb", "npy"}))
      ->capture_default_str();
  cmd->add_flag("--no-timing{false}", o->timing, "Print the outputs only, no timing");
  cmd->callback([o, exit_code] {
    Status s = RunModel(*o);
    *exit_code = s.ok() ? kExitOk : ReportError("run", s);
  });
}

}  // namespace fusor
