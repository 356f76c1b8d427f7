#include "runtime/memory_plan.h"

#include <algorithm>
#include <numeric>

#include "base/host_memory.h"
#include "lowering/concat_in_place.h"

namespace fusor {
namespace {

constexpr int64_t kAlign = 64;

int64_t Aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

bool Overlap(const BufferLifetime& a, const BufferLifetime& b) {
  return a.first <= b.last && b.first <= a.last;
}

}  // namespace

std::string MemoryPlan::ToString() const {
  return "arena " + ByteString(arena_bytes) + " (live peak " + ByteString(peak_live_bytes) +
         ") + weights " + ByteString(weight_bytes) + " = " + ByteString(total_bytes());
}

int64_t StorageBytesPerElement(DType dtype) { return IsFloatingPoint(dtype) ? 4 : 8; }

int64_t StorageBytes(const Tensor& t) { return t.num_elements() * StorageBytesPerElement(t.dtype); }

std::vector<SliceOffset> SliceOffsets(const Graph& g, const FusionPlan& plan) {
  std::vector<SliceOffset> out;
  for (const ConcatSlice& s : InPlaceConcatSlices(g, plan)) {
    out.push_back({s.part, s.whole, s.offset * StorageBytesPerElement(g.tensor(s.whole).dtype)});
  }
  return out;
}

std::vector<BufferLifetime> PlanLifetimes(const Graph& g, const FusionPlan& plan) {
  int last_group = static_cast<int>(plan.groups.size()) - 1;
  std::vector<BufferLifetime> life(g.num_tensors());
  std::vector<bool> used(g.num_tensors(), false);
  for (TensorId t : g.inputs()) {
    life[t] = {t, StorageBytes(g.tensor(t)), 0, 0};
    used[t] = true;
  }
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    int gi = static_cast<int>(i);
    for (TensorId t : MaterializedOutputs(g, plan, i)) {
      life[t] = {t, StorageBytes(g.tensor(t)), gi, gi};
      used[t] = true;
    }
    for (TensorId t : GroupInputs(g, plan, i)) {
      if (used[t]) life[t].last = std::max(life[t].last, gi);
    }
  }
  for (TensorId t = 0; t < static_cast<TensorId>(g.num_tensors()); ++t) {
    // Outputs are read after the run; inputs are set once and read by every later run.
    bool whole_run = g.IsGraphOutput(t) || g.tensor(t).kind == TensorKind::kGraphInput;
    if (used[t] && whole_run) life[t].last = std::max(last_group, 0);
  }
  std::vector<bool> in_slice(g.num_tensors(), false);
  for (const ConcatSlice& s : InPlaceConcatSlices(g, plan)) {
    in_slice[s.part] = true;
    if (!used[s.part] || !used[s.whole]) continue;
    life[s.whole].first = std::min(life[s.whole].first, life[s.part].first);
    life[s.whole].last = std::max(life[s.whole].last, life[s.part].last);
  }
  std::vector<BufferLifetime> out;
  for (TensorId t = 0; t < static_cast<TensorId>(g.num_tensors()); ++t) {
    if (used[t] && !in_slice[t]) out.push_back(life[t]);
  }
  return out;
}

MemoryPlan AssignOffsets(std::vector<BufferLifetime> buffers, int64_t weight_bytes) {
  MemoryPlan m;
  m.weight_bytes = weight_bytes;
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  m.offsets.assign(buffers.size(), 0);
  std::vector<size_t> placed;
  for (size_t i : order) {
    // Lowest offset that clears every placed buffer whose lifetime overlaps this one.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed) {
      if (Overlap(buffers[i], buffers[j]))
        busy.push_back({m.offsets[j], m.offsets[j] + Aligned(buffers[j].bytes)});
    }
    std::sort(busy.begin(), busy.end());
    int64_t at = 0, need = Aligned(buffers[i].bytes);
    for (const auto& [lo, hi] : busy) {
      if (at + need <= lo) break;
      at = std::max(at, hi);
    }
    m.offsets[i] = at;
    m.arena_bytes = std::max(m.arena_bytes, at + need);
    placed.push_back(i);
  }
  int groups = 0;
  for (const auto& b : buffers) groups = std::max(groups, b.last + 1);
  for (int gi = 0; gi < groups; ++gi) {
    int64_t live = 0;
    for (const auto& b : buffers) live += b.first <= gi && gi <= b.last ? Aligned(b.bytes) : 0;
    m.peak_live_bytes = std::max(m.peak_live_bytes, live);
  }
  m.buffers = std::move(buffers);
  return m;
}

MemoryPlan EstimatePlanMemory(const Graph& g, const FusionPlan& plan) {
  int64_t weights = 0;
  for (const Tensor& t : g.tensors()) {
    if (t.kind == TensorKind::kWeight || t.kind == TensorKind::kConstant)
      weights += StorageBytes(t);
  }
  return AssignOffsets(PlanLifetimes(g, plan), weights);
}

Status CheckMemoryBudget(const MemoryPlan& m, int64_t budget_bytes) {
  if (m.total_bytes() <= budget_bytes) return Status::Ok();
  return Status::ResourceExhausted("plan needs " + std::to_string(m.total_bytes()) +
                                   " bytes at peak (" + m.ToString() +
                                   "), over the memory budget of " + std::to_string(budget_bytes) +
                                   " bytes; raise the budget or choose a plan with less fusion "
                                   "recompute");
}

}  // namespace fusor
