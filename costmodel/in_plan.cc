#include "costmodel/in_plan.h"

#include <algorithm>
#include <cmath>

namespace fusor {
namespace {

double Bytes(const Graph& g, TensorId t) { return static_cast<double>(g.tensor(t).bytes()); }

// What each group of a plan reads (immediates aside) and what it touches (that and its writes).
struct Accesses {
  std::vector<std::vector<TensorId>> reads, touched;
};

Accesses AccessesOf(const Graph& g, const FusionPlan& plan) {
  auto inputs = AllGroupInputs(g, plan);
  auto outputs = AllMaterializedOutputs(g, plan);
  Accesses a;
  a.reads.resize(plan.groups.size());
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    for (TensorId t : inputs[i])
      if (g.tensor(t).kind != TensorKind::kConstant) a.reads[i].push_back(t);
  }
  a.touched = a.reads;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    a.touched[i].insert(a.touched[i].end(), outputs[i].begin(), outputs[i].end());
  }
  return a;
}

// Distinct bytes the groups before `reader` touch back to the previous one that touches `t`,
// the plan taken as a cycle; every other group's when `reader` alone touches `t`.
double ReuseBytes(const Graph& g, const std::vector<std::vector<TensorId>>& touched, size_t reader,
                  TensorId t, std::vector<char>* seen) {
  const size_t n = touched.size();
  std::vector<TensorId> marked;
  double bytes = 0;
  for (size_t step = 1; step < n; ++step) {
    const std::vector<TensorId>& group = touched[(reader + n - step) % n];
    if (std::find(group.begin(), group.end(), t) != group.end()) break;
    for (TensorId u : group) {
      if ((*seen)[u]) continue;
      (*seen)[u] = 1;
      marked.push_back(u);
      bytes += Bytes(g, u);
    }
  }
  for (TensorId u : marked) (*seen)[u] = 0;
  return bytes;
}

// The smallest level that holds `bytes`, with L1 and L2 per core times cores (as the group cost's
// residency counts them).
MemoryLevel LevelHolding(double bytes, const TargetFingerprint& target) {
  const double capacity[] = {static_cast<double>(target.l1d_bytes) * target.cores,
                             static_cast<double>(target.l2_bytes) * target.cores,
                             static_cast<double>(target.l3_bytes)};
  for (int l = 0; l < 3; ++l) {
    if (bytes <= capacity[l]) return static_cast<MemoryLevel>(l);
  }
  return MemoryLevel::kDram;
}

InPlanGroupReads GroupReads(const Graph& g, const Accesses& a, size_t i,
                            const TargetFingerprint& target, std::vector<char>* seen) {
  InPlanGroupReads out;
  double working_set = 0;
  for (TensorId t : a.touched[i]) working_set += Bytes(g, t);
  const MemoryLevel alone = LevelHolding(working_set, target);
  for (TensorId t : a.reads[i]) {
    InPlanRead r;
    r.tensor = t;
    r.leaf = g.tensor(t).kind != TensorKind::kActivation;
    r.bytes = Bytes(g, t);
    r.reuse_bytes = ReuseBytes(g, a.touched, i, t, seen);
    r.in_plan = LevelHolding(r.reuse_bytes + r.bytes, target);
    r.alone = alone;
    (r.leaf ? out.weight_bytes : out.input_bytes) += r.bytes;
    for (int s = static_cast<int>(r.alone); s < static_cast<int>(r.in_plan); ++s) {
      out.cold_bytes[s] += r.bytes;
    }
    out.reads.push_back(r);
  }
  return out;
}

}  // namespace

std::vector<InPlanGroupReads> InPlanReadsOf(const Graph& g, const FusionPlan& plan,
                                            const TargetFingerprint& target) {
  const Accesses a = AccessesOf(g, plan);
  std::vector<char> seen(g.tensors().size(), 0);
  std::vector<InPlanGroupReads> out;
  for (size_t i = 0; i < plan.groups.size(); ++i) out.push_back(GroupReads(g, a, i, target, &seen));
  return out;
}

namespace {

double AtConstants(const std::array<double, kColdSteps>& bytes, const InPlanConstants& c) {
  double ns = 0;
  for (int s = 0; s < kColdSteps; ++s) ns += bytes[s] * c.ns_per_byte[s];
  return ns;
}

}  // namespace

double InPlanExtraNs(const InPlanGroupReads& r, const InPlanConstants& c) {
  return AtConstants(r.cold_bytes, c);
}

double InPlanExtraNs(const std::vector<InPlanGroupReads>& groups, const InPlanConstants& c) {
  double ns = 0;
  for (const InPlanGroupReads& r : groups) ns += InPlanExtraNs(r, c);
  return ns;
}

namespace {

// Least squares over the steps in `use` alone (the others held at 0): solves the normal equations
// by Gaussian elimination; false when they are singular.
bool SolveSubset(const std::vector<InPlanSample>& samples, const std::vector<int>& use,
                 std::array<double, kColdSteps>* x) {
  const size_t k = use.size();
  std::vector<std::vector<double>> m(k, std::vector<double>(k + 1, 0));
  for (const InPlanSample& s : samples) {
    const double y = s.in_plan_ns - s.alone_ns;
    for (size_t r = 0; r < k; ++r) {
      for (size_t c = 0; c < k; ++c) m[r][c] += s.cold_bytes[use[r]] * s.cold_bytes[use[c]];
      m[r][k] += s.cold_bytes[use[r]] * y;
    }
  }
  for (size_t c = 0; c < k; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < k; ++r)
      if (std::fabs(m[r][c]) > std::fabs(m[pivot][c])) pivot = r;
    if (std::fabs(m[pivot][c]) < 1e-30) return false;
    std::swap(m[c], m[pivot]);
    for (size_t r = 0; r < k; ++r) {
      if (r == c) continue;
      const double f = m[r][c] / m[c][c];
      for (size_t j = c; j <= k; ++j) m[r][j] -= f * m[c][j];
    }
  }
  x->fill(0);
  for (size_t r = 0; r < k; ++r) (*x)[use[r]] = m[r][k] / m[r][r];
  return true;
}

double SquaredError(const std::vector<InPlanSample>& samples, const InPlanConstants& c) {
  double e = 0;
  for (const InPlanSample& s : samples) {
    const double d = s.in_plan_ns - s.alone_ns - AtConstants(s.cold_bytes, c);
    e += d * d;
  }
  return e;
}

}  // namespace

// With three constants, non-negative least squares is the best of the unconstrained fits over
// every subset of the steps whose solution has no negative constant.
StatusOr<InPlanConstants> FitInPlanConstants(const std::vector<InPlanSample>& samples) {
  InPlanConstants best;
  best.samples = static_cast<int>(samples.size());
  double best_error = SquaredError(samples, best);
  bool any_cold = false;
  for (const InPlanSample& s : samples)
    for (double b : s.cold_bytes) any_cold |= b > 0;
  if (!any_cold) {
    return Status::InvalidArgument("in-plan fit: none of the " + std::to_string(samples.size()) +
                                   " groups reads a byte from below its alone level");
  }
  for (int mask = 1; mask < (1 << kColdSteps); ++mask) {
    std::vector<int> use;
    for (int s = 0; s < kColdSteps; ++s)
      if (mask & (1 << s)) use.push_back(s);
    InPlanConstants c;
    c.samples = best.samples;
    if (!SolveSubset(samples, use, &c.ns_per_byte)) continue;
    if (std::any_of(c.ns_per_byte.begin(), c.ns_per_byte.end(), [](double v) { return v < 0; }))
      continue;
    if (double e = SquaredError(samples, c); e < best_error) best = c, best_error = e;
  }
  return best;
}

}  // namespace fusor
