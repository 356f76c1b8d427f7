#include "runtime/measurer.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <vector>

#include <spdlog/spdlog.h>

#include "graph/canonical.h"
#include "runtime/thread_binding.h"

namespace fusor {
namespace {

const Clock& ClockOf(const TimingOptions& o) {
  return o.clock != nullptr ? *o.clock : Clock::Real();
}

// Writes a buffer larger than the last-level cache so the next run starts cold.
void FlushCache(std::vector<char>* buffer) {
  for (size_t i = 0; i < buffer->size(); i += 64) (*buffer)[i] = static_cast<char>(i);
}

// Waits until the host is quiet or the wait is over; true when it slept (caches may be cold).
HostQuietness& QuietnessOf(const TimingOptions& o) {
  return o.quietness != nullptr ? *o.quietness : HostQuietness::Default();
}

bool WaitForQuietHost(const TimingOptions& o) {
  if (o.quiet_wait_ms <= 0) return false;
  const Clock& clock = ClockOf(o);
  const int64_t deadline = clock.NowNs() + int64_t{o.quiet_wait_ms} * 1'000'000;
  bool slept = false;
  while (!QuietnessOf(o).Quiet(o.quiet_margin) && clock.NowNs() < deadline) {
    clock.SleepFor(std::chrono::milliseconds(20));
    slept = true;
  }
  return slept;
}

Measurement Summarize(std::vector<int64_t> samples) {
  Measurement m;
  m.samples = static_cast<int>(samples.size());
  std::sort(samples.begin(), samples.end());
  size_t n = samples.size();
  m.median_ns = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  m.min_ns = samples.front();
  m.max_ns = samples.back();
  // The spread is the coefficient of variation of the middle 80% of the (sorted) samples: one
  // run descheduled by the OS on a shared machine should not condemn a thousand good ones.
  size_t trim = n >= 10 ? n / 10 : 0;
  auto first = samples.begin() + static_cast<std::ptrdiff_t>(trim);
  auto last = samples.end() - static_cast<std::ptrdiff_t>(trim);
  double kept = static_cast<double>(last - first);
  double mean = std::accumulate(first, last, 0.0) / kept;
  double var = 0;
  for (auto it = first; it != last; ++it) {
    var += (static_cast<double>(*it) - mean) * (static_cast<double>(*it) - mean);
  }
  m.cv = kept > 1 && mean > 0 ? std::sqrt(var / (kept - 1)) / mean : 0.0;
  m.threads = omp_get_max_threads();
  m.samples_ns = std::move(samples);
  return m;
}

Measurement TimeOnce(const std::function<void()>& run, const TimingOptions& o,
                     std::vector<char>* flush) {
  const Clock& clock = ClockOf(o);
  std::vector<int64_t> samples;
  int64_t total = 0;
  while (static_cast<int>(samples.size()) < o.max_repeats &&
         (static_cast<int>(samples.size()) < o.min_repeats || total < o.min_total_ns)) {
    if (o.flush_cache) FlushCache(flush);
    const int64_t start = clock.NowNs();
    run();
    const int64_t ns = clock.NowNs() - start;
    samples.push_back(ns);
    total += ns;
  }
  return Summarize(std::move(samples));
}

std::string GroupString(const FusionGroup& group) {
  std::string s = std::string(GroupKindName(group.kind)) + ":";
  for (NodeId id : group.nodes) s += std::to_string(id) + ",";
  s += "r:";
  for (NodeId id : group.recomputed) s += std::to_string(id) + ",";
  if (!group.kernel.empty()) s += "k:" + group.kernel;
  return s;
}

// One attempt of TimeSideBySide: bursts in turn until every alternative has its runs.
std::vector<Measurement> SideBySideOnce(const std::vector<std::function<void()>>& runs,
                                        const TimingOptions& o, int64_t burst_ns,
                                        std::vector<char>* flush) {
  const Clock& clock = ClockOf(o);
  const size_t n = runs.size();
  std::vector<std::vector<int64_t>> samples(n);
  std::vector<int64_t> total(n, 0);
  auto needs_more = [&](size_t a) {
    int count = static_cast<int>(samples[a].size());
    return count < o.max_repeats && (count < o.min_repeats || total[a] < o.min_total_ns);
  };
  for (bool more = true; more;) {
    more = false;
    for (size_t a = 0; a < n; ++a) {
      if (!needs_more(a)) continue;
      runs[a]();  // Untimed: the previous alternative's data filled the caches.
      int64_t burst = 0;
      while (needs_more(a) && (burst == 0 || burst < burst_ns)) {
        if (o.flush_cache) FlushCache(flush);
        const int64_t start = clock.NowNs();
        runs[a]();
        const int64_t ns = clock.NowNs() - start;
        samples[a].push_back(ns);
        total[a] += ns;
        burst += ns;
      }
      more |= needs_more(a);
    }
  }
  std::vector<Measurement> out;
  for (auto& s : samples) out.push_back(Summarize(std::move(s)));
  return out;
}

double HighestCv(const std::vector<Measurement>& ms) {
  double cv = 0;
  for (const Measurement& m : ms) cv = std::max(cv, m.cv);
  return cv;
}

// Each of two cores rewrites its half of the buffer, then reads the other half (`cross`) or its
// own.
int64_t TwoCoreProbeNs(bool cross) {
  if (omp_get_max_threads() < 2) return 0;
  thread_local std::vector<float> buffer(size_t{1} << 17, 1.0f);
  float* data = buffer.data();
  const size_t half = buffer.size() / 2;
  std::array<int64_t, 5> runs{};
  volatile float sink = 0;
  for (int64_t& ns : runs) {
    const int64_t start = Clock::Real().NowNs();
    float sum = 0;
#pragma omp parallel num_threads(2) reduction(+ : sum)
    {
      const size_t t = static_cast<size_t>(omp_get_thread_num());
      for (size_t i = t * half; i < (t + 1) * half; ++i) data[i] = data[i] * 0.5f + 1.0f;
#pragma omp barrier
      const size_t read = cross ? 1 - t : t;
      for (size_t i = read * half; i < (read + 1) * half; ++i) sum += data[i];
    }
    sink = sum;
    ns = Clock::Real().NowNs() - start;
  }
  (void)sink;
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace

int64_t CrossCoreProbeNs() { return TwoCoreProbeNs(true); }

double CrossCoreRatio() {
  const int64_t same = TwoCoreProbeNs(false);
  return same > 0 ? static_cast<double>(TwoCoreProbeNs(true)) / static_cast<double>(same) : 1.0;
}

HostQuietness::HostQuietness(std::function<int64_t()> probe) : probe_(std::move(probe)) {}

bool HostQuietness::Quiet(double margin) {
  int64_t ns = probe_();
  if (ns <= 0) return true;
  int64_t best = quickest_ns_.load();
  while (ns < best && !quickest_ns_.compare_exchange_weak(best, ns)) {
  }
  return static_cast<double>(ns) <= margin * static_cast<double>(std::min(best, ns));
}

bool SettleHost(int max_ms, const std::string& what, const std::function<double()>& ratio_fn,
                const Clock* clock_or_null) {
  auto measure_ratio = [&] { return ratio_fn ? ratio_fn() : CrossCoreRatio(); };
  const Clock& clock = clock_or_null != nullptr ? *clock_or_null : Clock::Real();
  const int64_t start = clock.NowNs();
  const int64_t deadline = start + int64_t{max_ms} * 1'000'000;
  double ratio = measure_ratio();
  while (ratio > kMaxCrossCoreRatio && clock.NowNs() < deadline) {
    clock.SleepFor(std::chrono::milliseconds(100));
    ratio = measure_ratio();
  }
  if (ratio > kMaxCrossCoreRatio) {
    spdlog::warn(
        "{}: the host stayed in a slow state for {} ms (moving data between its cores costs "
        "{:.1f}x keeping it on one; above {:.1f} plans run up to ~2x slower); timings taken now "
        "are slow",
        what, max_ms, ratio, kMaxCrossCoreRatio);
    return false;
  }
  HostQuietness::Default().Quiet(1.0);  // Its quickest, from a quiet host.
  const int64_t waited_ms = (clock.NowNs() - start) / 1'000'000;
  if (waited_ms >= 100) {
    spdlog::info("{}: the host left a slow state after {} ms", what, waited_ms);
  }
  return true;
}

HostQuietness& HostQuietness::Default() {
  static HostQuietness quietness(CrossCoreProbeNs);
  return quietness;
}

std::string Measurement::ToString() const {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%.3f ms (cv %.1f%%, n=%d, %d threads%s%s)",
                static_cast<double>(median_ns) / 1e6, cv * 100, samples, threads,
                unstable ? ", UNSTABLE" : "", disturbed ? ", host disturbed" : "");
  return buf;
}

// Whether a timing that just ended was taken in one of the host's slow states: slow as the process
// has seen, or (with the default probe) slow outright, since a process can start in a slow state
// and stay in it (CrossCoreRatio). Only when the options wait for a quiet host.
bool TimedInSlowState(const TimingOptions& options) {
  if (options.quiet_wait_ms <= 0) return false;
  if (!QuietnessOf(options).Quiet(options.quiet_margin)) return true;
  return options.quietness == nullptr && CrossCoreRatio() > kMaxCrossCoreRatio;
}

Measurement TimeRepeated(const std::function<void()>& run, const TimingOptions& options) {
  ScopedCallerBinding bind;  // One binding for the whole series, not one per run.
  std::vector<char> flush(options.flush_cache ? static_cast<size_t>(options.flush_bytes) : 0);
  for (int i = 0; i < options.warmup; ++i) run();
  Measurement best;
  for (int attempt = 0; attempt <= options.retries; ++attempt) {
    if (WaitForQuietHost(options)) run();
    Measurement m = TimeOnce(run, options, &flush);
    m.disturbed = TimedInSlowState(options);
    m.attempts = attempt + 1;
    if (attempt == 0 || m.cv < best.cv) best = m;
    if (m.cv <= options.max_cv) return best;
  }
  best.unstable = true;
  best.attempts = options.retries + 1;
  return best;
}

StatusOr<Measurement> OneDnnMeasurer::MeasurePlan(const Graph& g, const FusionPlan& plan) {
  FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, RandomLeafValues(g, options_.seed));
  FUSOR_ASSIGN_OR_RETURN(auto exec, Executor::Create(g, plan, leaves, options_.executor));
  Measurement m = TimeRepeated([&] { exec->Run(); }, options_.timing);
  for (size_t i = 0; i < exec->num_groups(); ++i)
    m.primitive_chain.push_back(exec->RunsPrimitiveChain(i));
  spdlog::debug("measure: model={} groups={} {}", g.model_name, plan.groups.size(), m.ToString());
  return m;
}

StatusOr<std::vector<Measurement>> Measurer::MeasurePlans(const Graph& g,
                                                          const std::vector<FusionPlan>& plans) {
  std::vector<Measurement> out;
  for (const FusionPlan& plan : plans) {
    FUSOR_ASSIGN_OR_RETURN(Measurement m, MeasurePlan(g, plan));
    out.push_back(std::move(m));
  }
  return out;
}

StatusOr<std::vector<Measurement>> OneDnnMeasurer::MeasurePlans(
    const Graph& g, const std::vector<FusionPlan>& plans) {
  FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, RandomLeafValues(g, options_.seed));
  std::vector<std::unique_ptr<Executor>> execs;
  std::vector<std::function<void()>> runs;
  for (const FusionPlan& plan : plans) {
    FUSOR_ASSIGN_OR_RETURN(auto exec, Executor::Create(g, plan, leaves, options_.executor));
    execs.push_back(std::move(exec));
    runs.push_back([e = execs.back().get()] { e->Run(); });
  }
  std::vector<Measurement> out = TimeSideBySide(runs, options_.timing);
  for (size_t p = 0; p < plans.size(); ++p) {
    for (size_t i = 0; i < execs[p]->num_groups(); ++i)
      out[p].primitive_chain.push_back(execs[p]->RunsPrimitiveChain(i));
    spdlog::debug("measure side by side: model={} plan {} of {}: groups={} {}", g.model_name, p + 1,
                  plans.size(), plans[p].groups.size(), out[p].ToString());
  }
  return out;
}

StatusOr<std::vector<KernelImplementations>> Measurer::Implementations(const Graph&,
                                                                       const FusionPlan& plan) {
  return std::vector<KernelImplementations>(plan.groups.size());
}

StatusOr<std::vector<KernelImplementations>> OneDnnMeasurer::Implementations(
    const Graph& g, const FusionPlan& plan) {
  FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, RandomLeafValues(g, options_.seed));
  FUSOR_ASSIGN_OR_RETURN(auto exec, Executor::Create(g, plan, leaves, options_.executor));
  std::vector<KernelImplementations> out;
  for (size_t i = 0; i < exec->num_groups(); ++i) out.push_back(exec->Implementations(i));
  return out;
}

namespace {

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

GroupTimesInPlan TimeGroupsInPlan(Executor& exec, double group_min_ms, double plan_min_ms) {
  const size_t n = exec.num_groups();
  GroupTimesInPlan out;
  TimingOptions group_timing;
  group_timing.min_total_ns = static_cast<int64_t>(group_min_ms * 1e6);
  group_timing.retries = 0;
  for (size_t i = 0; i < n; ++i) {
    Measurement m = TimeRepeated([&] { exec.RunGroup(i); }, group_timing);
    out.alone_ns.push_back(static_cast<double>(m.median_ns));
  }
  using Clock = std::chrono::steady_clock;
  std::vector<std::vector<double>> runs(n);
  std::vector<double> seconds;
  ScopedCallerBinding bind;
  exec.Run();
  const auto start = Clock::now();
  const auto least = std::chrono::duration<double, std::milli>(plan_min_ms);
  for (int r = 0; r < kInPlanProfiledRuns || Clock::now() - start < least; ++r) {
    exec.RunProfiled(&seconds);
    for (size_t i = 0; i < n; ++i) runs[i].push_back(seconds[i] * 1e9);
  }
  for (size_t i = 0; i < n; ++i) out.in_plan_ns.push_back(MedianOf(runs[i]));
  return out;
}

StatusOr<GroupTimesInPlan> Measurer::MeasureGroupsInPlan(const Graph& g, const FusionPlan&, int) {
  return Status::Unimplemented("this measurer cannot time the groups of a plan of '" +
                               g.model_name + "' one by one");
}

StatusOr<GroupTimesInPlan> OneDnnMeasurer::MeasureGroupsInPlan(const Graph& g,
                                                               const FusionPlan& plan, int rounds) {
  FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, RandomLeafValues(g, options_.seed));
  FUSOR_ASSIGN_OR_RETURN(auto exec, Executor::Create(g, plan, leaves, options_.executor));
  GroupTimesInPlan best;
  for (int r = 0; r < std::max(rounds, 1); ++r) {
    GroupTimesInPlan t = TimeGroupsInPlan(*exec, 3, 100);
    if (best.alone_ns.empty()) {
      best = std::move(t);
      continue;
    }
    for (size_t i = 0; i < t.alone_ns.size(); ++i) {
      best.alone_ns[i] = std::min(best.alone_ns[i], t.alone_ns[i]);
      best.in_plan_ns[i] = std::min(best.in_plan_ns[i], t.in_plan_ns[i]);
    }
  }
  return best;
}

StatusOr<Measurement> OneDnnMeasurer::MeasureGroup(const Graph& g, const FusionGroup& group) {
  // The group alone: its nodes as a graph whose inputs are the group's inputs.
  Graph region = g.ExtractRegion(group.nodes);
  FusionGroup local;
  local.kind = group.kind;
  local.kernel = group.kernel;
  for (size_t i = 0; i < group.nodes.size(); ++i) {
    local.nodes.push_back(static_cast<NodeId>(i));
    if (std::count(group.recomputed.begin(), group.recomputed.end(), group.nodes[i])) {
      local.recomputed.push_back(static_cast<NodeId>(i));
    }
  }
  return MeasurePlan(region, FusionPlan{{local}});
}

std::string RecordedMeasurer::PlanKey(const Graph& g, const FusionPlan& plan) {
  std::string key = CanonicalHash(g) + "|";
  for (const FusionGroup& group : plan.groups) key += GroupString(group) + ";";
  return key;
}

std::string RecordedMeasurer::GroupKey(const Graph& g, const FusionGroup& group) {
  return CanonicalHash(g) + "|" + GroupString(group);
}

void RecordedMeasurer::Record(const std::string& key, const Measurement& m) {
  RecordSequence(key, {m});
}

void RecordedMeasurer::RecordSequence(const std::string& key, std::vector<Measurement> answers) {
  std::lock_guard<std::mutex> lock(mu_);
  table_[key] = Answers{std::move(answers), 0};
}

StatusOr<Measurement> RecordedMeasurer::Find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = table_.find(key);
  if (it == table_.end() || it->second.in_order.empty()) {
    return Status::NotFound("no recorded measurement for '" + key + "'");
  }
  Answers& a = it->second;
  const Measurement& m = a.in_order[std::min(a.next, a.in_order.size() - 1)];
  ++a.next;
  return m;
}

StatusOr<Measurement> RecordedMeasurer::MeasurePlan(const Graph& g, const FusionPlan& plan) {
  return Find(PlanKey(g, plan));
}

StatusOr<Measurement> RecordedMeasurer::MeasureGroup(const Graph& g, const FusionGroup& group) {
  return Find(GroupKey(g, group));
}

std::vector<Measurement> TimeSideBySide(const std::vector<std::function<void()>>& runs,
                                        const TimingOptions& options, int64_t burst_ns) {
  ScopedCallerBinding bind;  // One binding for the whole series, not one per run.
  if (runs.empty()) return {};
  std::vector<char> flush(options.flush_cache ? static_cast<size_t>(options.flush_bytes) : 0);
  for (int i = 0; i < options.warmup; ++i) {
    for (const auto& run : runs) run();
  }
  std::vector<Measurement> best;
  for (int attempt = 0; attempt <= options.retries; ++attempt) {
    WaitForQuietHost(options);  // Each burst opens with an untimed run anyway.
    std::vector<Measurement> ms = SideBySideOnce(runs, options, burst_ns, &flush);
    const bool disturbed = TimedInSlowState(options);
    for (Measurement& m : ms) {
      m.disturbed = disturbed;
      m.attempts = attempt + 1;
    }
    if (attempt == 0 || HighestCv(ms) < HighestCv(best)) best = std::move(ms);
    if (HighestCv(best) <= options.max_cv) return best;
  }
  for (Measurement& m : best) {
    m.unstable = m.cv > options.max_cv;
    m.attempts = options.retries + 1;
  }
  return best;
}

}  // namespace fusor
