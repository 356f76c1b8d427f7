// The peer bench: Fusor against ONNX Runtime on the same models, weights and inputs.
//
//   peer_bench [--rounds N] [--threads T] MODEL.onnx[=PLAN.json][@dim=V,...]...
//
// Each MODEL carries its weights (tools/fill_weights.py fills stripped ones); PLAN.json is its
// tuned plan (`fusor tune MODEL --save-plan PLAN.json`); without one the greedy plan of the
// default cost model runs and the row says so. A model with symbolic dims runs with the values
// after '@' (bench/peer_model.h). Per model:
//   - parity: the reference interpreter's outputs against Fusor's under the unfused plan and the
//     plan (runtime/host_tensor.h Compare: every element within 1e-4 * max|ref| + 1e-3 * |ref|),
//     and how much the outputs of two inputs differ (RelativeDifference; below
//     kMinInputSensitivity the weights wash the input out and parity sees little of the network);
//   - peer: ONNX Runtime, the version deploy/onnxruntime-version pins (bench/peers/ort_runner.py,
//     in FUSOR_PEER_PYTHON: all graph optimisations, sequential execution) and Fusor's executor
//     under the plan, T threads each (default 2), same seeded inputs; the largest
//     absolute output difference and that difference over the largest |ORT output|, and ORT's
//     parity against the reference (the same Compare: a second float32 runtime's distance, the
//     yardstick when Fusor's parity DIFFERS; LR-ASPP's does under both runtimes); then N rounds
//     (default 10) of a ~150 ms burst each of ORT and of Fusor under the plan, under every op
//     alone (`none`) and under the rules plan (search/plan_search.h RulesPlan), each burst after
//     ~150 ms of untimed runs, the order rotating and reversing each round: median latencies and
//     ORT / Fusor (above 1: Fusor is faster).
// A closing Markdown table has every model's medians and ratios, the geomean of ORT / tuned and
// how many models the tuned plan wins.
// The OpenMP environment is left as the user has it: OMP_WAIT_POLICY=passive makes every Fusor
// plan ~2.4x slower on this machine, so the bench warns when it is set.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "bench/peer_model.h"
#include "graph/tensor_file.h"
#include "lowering/plan_legality.h"
#include "runtime/executor.h"
#include "runtime/measurer.h"
#include "runtime/model_weights.h"
#include "runtime/reference.h"
#include "search/plan_search.h"

namespace fusor {
namespace {

namespace fs = std::filesystem;

struct Options {
  int rounds = 10;
  int threads = 2;
  std::vector<std::string> models;
};

// The process's CPU set as it started, before the runtime bound this thread to one core
// (runtime/thread_binding.h). Taken in main.
cpu_set_t g_process_cpus;

// A Python child running ort_runner.py, spoken to over its stdin and stdout. The child gets the
// process's whole CPU set back: forked from a thread the runtime bound to one core, it would
// inherit that one core, and ONNX Runtime's two threads would share it (3.5x slower than alone).
class OrtRunner {
 public:
  static StatusOr<std::unique_ptr<OrtRunner>> Start(const std::string& model, const fs::path& in,
                                                    const fs::path& out, int threads) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return Status::IOError("pipe failed");
    pid_t pid = fork();
    if (pid == 0) {
      sched_setaffinity(0, sizeof(g_process_cpus), &g_process_cpus);
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      close(to_child[1]);
      close(from_child[0]);
      std::string script = std::string(FUSOR_SOURCE_DIR) + "/bench/peers/ort_runner.py";
      std::string t = std::to_string(threads);
      execl(FUSOR_PEER_PYTHON, FUSOR_PEER_PYTHON, script.c_str(), model.c_str(), in.c_str(),
            out.c_str(), t.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    auto r = std::unique_ptr<OrtRunner>(new OrtRunner);
    r->pid_ = pid;
    r->in_ = fdopen(to_child[1], "w");
    r->out_ = fdopen(from_child[0], "r");
    std::string ready = r->ReadLine();  // "ready VERSION"
    if (ready.rfind("ready ", 0) != 0) {
      return Status::Unavailable("ONNX Runtime did not load the model (its error is above)");
    }
    r->version_ = ready.substr(6);
    return r;
  }
  ~OrtRunner() {
    std::fputs("quit\n", in_);
    std::fclose(in_);
    std::fclose(out_);
    waitpid(pid_, nullptr, 0);
  }
  const std::string& version() const { return version_; }
  std::vector<double> Run(int count) {
    std::fprintf(in_, "run %d\n", count);
    std::fflush(in_);
    std::stringstream line(ReadLine());
    std::vector<double> ms;
    for (double t; line >> t;) ms.push_back(t);
    return ms;
  }

 private:
  OrtRunner() = default;
  std::string ReadLine() {
    std::string s;
    for (int c; (c = std::fgetc(out_)) != EOF && c != '\n';) s += static_cast<char>(c);
    return s;
  }
  pid_t pid_ = -1;
  std::string version_;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The worst Compare ratio of `plan`'s outputs against the reference's (<= 1: within tolerance).
StatusOr<double> ParityRatio(const Graph& g, const TensorValues& leaves, const TensorValues& want,
                             const FusionPlan& plan, int threads) {
  ExecutorOptions eo;
  eo.threads = threads;
  FUSOR_ASSIGN_OR_RETURN(auto exec, Executor::Create(g, plan, leaves, eo));
  exec->Run();
  double worst = 0;
  for (const auto& [t, value] : want) {
    FUSOR_ASSIGN_OR_RETURN(HostTensor got, exec->Read(t));
    FUSOR_ASSIGN_OR_RETURN(Closeness c, Compare(value, got));
    worst = std::max(worst, c.worst_ratio);
  }
  return worst;
}

// How much the outputs depend on the input (host_tensor.h RelativeDifference): `exec`'s outputs
// for other seeded inputs against the reference's for `leaves`. `exec` is left with `leaves`'
// inputs, run once.
StatusOr<double> InputSensitivity(const Graph& g, Executor& exec, const TensorValues& leaves,
                                  const TensorValues& want) {
  FUSOR_ASSIGN_OR_RETURN(TensorValues other, RandomLeafValues(g, 2, /*weights=*/false));
  for (TensorId t : g.inputs()) FUSOR_RETURN_IF_ERROR(exec.SetInput(t, other.at(t)));
  exec.Run();
  FUSOR_ASSIGN_OR_RETURN(TensorValues got, exec.ReadOutputs());
  for (TensorId t : g.inputs()) FUSOR_RETURN_IF_ERROR(exec.SetInput(t, leaves.at(t)));
  exec.Run();
  return RelativeDifference(want, got);
}

// Fusor against ORT, and ORT against the reference: the worst Compare ratio of a second float32
// runtime is the yardstick for Fusor's. The reference sums in double, so where a model amplifies
// float32 rounding (LR-ASPP: a Sigmoid gate whose pre-activation cancels to ~1 from terms of ~1e3
// scales a ~4e3 branch) any float32 runtime can land near or past the tolerance, ORT as well as
// Fusor; docs/benchmarks.md, "Parity and float32", has the float64 evaluation that shows it.
struct PeerDiff {
  double max_abs = 0, max_rel = 0;
  double ort_ratio = 0;  // ORT's worst Compare ratio against the reference.
};

StatusOr<PeerDiff> DiffWithOrt(const Graph& g, const Executor& exec, const TensorValues& want,
                               const fs::path& ort_dir) {
  PeerDiff d;
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    FUSOR_ASSIGN_OR_RETURN(HostTensor ours, exec.Read(g.outputs()[k]));
    FUSOR_ASSIGN_OR_RETURN(TensorData theirs,
                           ReadTensorFile((ort_dir / ("output_" + std::to_string(k) + ".npy"))));
    if (auto reference = want.find(g.outputs()[k]); reference != want.end()) {
      FUSOR_ASSIGN_OR_RETURN(HostTensor ort_value, ToHostTensor(theirs));
      FUSOR_ASSIGN_OR_RETURN(Closeness c, Compare(reference->second, ort_value));
      d.ort_ratio = std::max(d.ort_ratio, c.worst_ratio);
    }
    if (theirs.dims != ours.dims) {
      return Status::Internal("output " + std::to_string(k) + ": ORT gives " +
                              ShapeString(theirs.dims) + ", Fusor " + ShapeString(ours.dims));
    }
    double scale = 0, diff = 0;
    for (int64_t e = 0; e < ours.num_elements(); ++e) {
      double t = theirs.is_float() ? theirs.f[e] : static_cast<double>(theirs.i[e]);
      scale = std::max(scale, std::abs(t));
      diff = std::max(diff, std::abs(t - ours.at(e)));
    }
    d.max_abs = std::max(d.max_abs, diff);
    d.max_rel = std::max(d.max_rel, scale > 0 ? diff / scale : diff);
  }
  return d;
}

// Rounds of a burst of ~150 ms each of ONNX Runtime and of every executor, the order rotating
// from round to round so that drift in the host's load hits all alike; the medians in ms, ORT's
// first.
std::vector<double> TimeAlternating(OrtRunner& ort, const std::vector<Executor*>& execs,
                                    int rounds) {
  auto once = [](Executor& e) {
    auto t0 = std::chrono::steady_clock::now();
    e.Run();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  // Each burst starts with ~kWarmMs of untimed runs. The contender before it leaves the caches
  // cold, this one's idle threads asleep and, when it is ONNX Runtime, its pool's threads still
  // spinning for a while: with one untimed run, two executors of one plan timed 3-30% apart, the
  // one after ORT slower; with 150 ms, within the noise (0.96x, 1.03x).
  constexpr double kBurstMs = 150, kWarmMs = 150;
  const size_t n = execs.size() + 1;  // ORT is entry 0.
  std::vector<int> burst(n), warm(n);
  auto counts = [&](size_t i, double one_ms) {
    burst[i] = std::clamp(static_cast<int>(kBurstMs / one_ms), 2, 200);
    warm[i] = std::clamp(static_cast<int>(kWarmMs / one_ms), 1, 200);
  };
  counts(0, Median(ort.Run(3)));
  for (size_t i = 1; i < n; ++i) counts(i, std::min(once(*execs[i - 1]), once(*execs[i - 1])));
  std::vector<std::vector<double>> ms(n);
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < n; ++k) {
      // Rotated each round and reversed every other one, so that each contender follows each
      // other about equally often.
      const size_t at = r % 2 == 0 ? k : n - 1 - k;
      const size_t i = (at + static_cast<size_t>(r / 2)) % n;
      if (i == 0) {
        auto t = ort.Run(warm[0] + burst[0]);
        ms[0].insert(ms[0].end(), t.begin() + std::min<size_t>(warm[0], t.size()), t.end());
      } else {
        for (int j = 0; j < warm[i]; ++j) once(*execs[i - 1]);
        for (int j = 0; j < burst[i]; ++j) ms[i].push_back(once(*execs[i - 1]));
      }
    }
  }
  std::vector<double> medians;
  for (auto& v : ms) medians.push_back(Median(v));
  return medians;
}

// One model's row of the closing table.
struct Row {
  std::string model;
  std::string ort_version;
  size_t groups = 0;
  double ort = 0, none = 0, rules = 0, tuned = 0;
};

// "MODEL.onnx[=PLAN.json][@name=V,name=V]": the model, its plan, and its symbolic dims' values
// (bench/peer_model.h).
Status BenchModel(const std::string& spec, const Options& o, std::vector<Row>* rows) {
  FUSOR_ASSIGN_OR_RETURN(PeerModel m, LoadPeerModel(spec));
  const Graph& g = m.graph;
  const TensorValues& leaves = m.leaves;
  const FusionPlan& plan = m.plan;
  const std::string& plan_name = m.plan_name;
  FUSOR_ASSIGN_OR_RETURN(TensorValues want, RunReference(g, leaves));
  FUSOR_ASSIGN_OR_RETURN(double unfused_ratio,
                         ParityRatio(g, leaves, want, UnfusedPlan(g), o.threads));
  FUSOR_ASSIGN_OR_RETURN(double plan_ratio, ParityRatio(g, leaves, want, plan, o.threads));
  std::printf("%-28s parity vs reference: unfused %.3g %s, %s (%zu groups) %.3g %s\n",
              g.model_name.c_str(), unfused_ratio, unfused_ratio <= 1 ? "ok" : "DIFFERS",
              plan_name.c_str(), plan.groups.size(), plan_ratio,
              plan_ratio <= 1 ? "ok" : "DIFFERS");
  std::fflush(stdout);

  fs::path dir = fs::temp_directory_path() / ("fusor-peer-" + std::to_string(getpid()));
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  FUSOR_RETURN_IF_ERROR(WriteInputs(m, dir / "in"));
  ExecutorOptions eo;
  eo.threads = o.threads;
  FUSOR_ASSIGN_OR_RETURN(auto exec, Executor::Create(g, plan, leaves, eo));
  exec->Run();
  FUSOR_ASSIGN_OR_RETURN(double sensitivity, InputSensitivity(g, *exec, leaves, want));
  std::printf("%-28s outputs of two inputs differ by %.3g relative%s\n", g.model_name.c_str(),
              sensitivity,
              sensitivity > kMinInputSensitivity ? "" : ": WASHED OUT, parity sees little");
  std::fflush(stdout);
  // Fusor's own baselines, timed in the same rounds: every op alone, and the rules plan.
  const SearchOptions defaults;
  FUSOR_ASSIGN_OR_RETURN(auto none, Executor::Create(g, UnfusedPlan(g), leaves, eo));
  FUSOR_ASSIGN_OR_RETURN(auto rules,
                         Executor::Create(g, RulesPlan(g, defaults.max_group_nodes), leaves, eo));
  auto ort = OrtRunner::Start(m.path, dir / "in", dir / "out", o.threads);
  if (!ort.ok()) {
    fs::remove_all(dir);
    return ort.status();
  }
  auto diff = DiffWithOrt(g, *exec, want, dir / "out");
  fs::remove_all(dir);
  if (!diff.ok()) return diff.status();
  std::vector<double> ms = TimeAlternating(**ort, {exec.get(), none.get(), rules.get()}, o.rounds);
  const double ort_ms = ms[0], fusor_ms = ms[1];
  std::printf(
      "%-28s vs ORT %s: max abs diff %.3g, max rel %.3g, ORT's parity vs reference %.3g %s | "
      "ORT %.3f ms, Fusor %.3f ms, ORT/Fusor %.2fx\n",
      g.model_name.c_str(), (*ort)->version().c_str(), diff->max_abs, diff->max_rel,
      diff->ort_ratio, diff->ort_ratio <= 1 ? "ok" : "DIFFERS", ort_ms, fusor_ms,
      ort_ms / fusor_ms);
  std::printf("%-28s Fusor none %.3f ms, rules %.3f ms, tuned %.3f ms: rules / tuned %.2fx\n",
              g.model_name.c_str(), ms[2], ms[3], fusor_ms, ms[3] / fusor_ms);
  rows->push_back(
      {g.model_name, (*ort)->version(), plan.groups.size(), ort_ms, ms[2], ms[3], fusor_ms});
  std::fflush(stdout);
  return Status::Ok();
}

// The Markdown table of every model measured (medians in ms; ratios above 1: the second is
// faster), with the geomean of ORT / tuned and how many models Fusor's tuned plan wins.
void PrintTable(const std::vector<Row>& rows, int threads, int rounds) {
  if (rows.empty()) return;
  std::printf(
      "\n| model | tuned groups | ORT (ms) | Fusor none (ms) | rules (ms) | tuned (ms) | ORT / "
      "tuned | rules / tuned | none / tuned |\n|---|---|---|---|---|---|---|---|---|\n");
  double log_sum = 0;
  int wins = 0;
  for (const Row& r : rows) {
    std::printf("| %s | %zu | %.2f | %.2f | %.2f | %.2f | %.2fx | %.2fx | %.2fx |\n",
                r.model.c_str(), r.groups, r.ort, r.none, r.rules, r.tuned, r.ort / r.tuned,
                r.rules / r.tuned, r.none / r.tuned);
    log_sum += std::log(r.ort / r.tuned);
    wins += r.tuned < r.ort;
  }
  std::printf(
      "\nONNX Runtime %s, %d threads, %d rounds; geomean ORT / tuned %.2fx; tuned faster on %d of "
      "%zu\n",
      rows.front().ort_version.c_str(), threads, rounds,
      std::exp(log_sum / static_cast<double>(rows.size())), wins, rows.size());
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) {
  // A runner that dies (a model ONNX Runtime refuses) closes its pipe: writing "quit" to it must
  // fail the write, not end the bench.
  signal(SIGPIPE, SIG_IGN);
  CPU_ZERO(&fusor::g_process_cpus);
  sched_getaffinity(0, sizeof(fusor::g_process_cpus), &fusor::g_process_cpus);
  fusor::Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      o.rounds = std::atoi(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      o.threads = std::atoi(argv[++i]);
    } else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr,
                   "usage: peer_bench [--rounds N] [--threads T] "
                   "MODEL.onnx[=PLAN.json][@dim=V,...]...\n");
      return 2;
    } else {
      o.models.push_back(a);
    }
  }
  if (o.models.empty() || o.rounds < 1 || o.threads < 1) {
    std::fprintf(stderr,
                 "usage: peer_bench [--rounds N] [--threads T] "
                 "MODEL.onnx[=PLAN.json][@dim=V,...]...\n");
    return 2;
  }
  if (const char* w = std::getenv("OMP_WAIT_POLICY")) {
    std::printf(
        "warning: OMP_WAIT_POLICY=%s is set; users do not set it, and it changes Fusor's "
        "times (passive: ~2.4x slower)\n",
        w);
  }
  fusor::SettleHost(fusor::kSettleHostMaxMs, "peer bench");
  int failed = 0;
  std::vector<fusor::Row> rows;
  for (const auto& spec : o.models) {
    fusor::Status s = fusor::BenchModel(spec, o, &rows);
    if (!s.ok()) {
      std::printf("%-28s FAILED: %s\n", spec.c_str(), s.message().c_str());
      ++failed;
    }
  }
  fusor::PrintTable(rows, o.threads, o.rounds);
  return failed > 0 ? 1 : 0;
}
