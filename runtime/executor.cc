#include "runtime/executor.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "base/host_memory.h"
#include "graph/op_registry.h"
#include "lowering/layout.h"
#include "lowering/plan_legality.h"
#include "runtime/group_builder.h"
#include "runtime/group_kernel.h"
#include "runtime/layout_adapter.h"
#include "runtime/onednn_info.h"
#include "runtime/op_params.h"
#include "runtime/thread_binding.h"

namespace fusor {

// Materialized tensors stored channel-blocked (lowering/layout.h), with their layout.
using StoredLayouts = std::unordered_map<TensorId, dnnl::memory::desc>;

struct Executor::DnnlState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  StoredLayouts stored;
};

struct Executor::Group {
  FusionGroup group;
  std::string label;
  GroupLowering lowering;  // What the group runs as (lowering/group_lowering.h).
  std::unique_ptr<GroupKernel> kernel;
  // The record's alternative, timed against `kernel` and dropped by ChooseBackends.
  std::unique_ptr<GroupKernel> alternative;
  // The alternative `kernel` runs as, kNone when it runs in the record's form.
  KernelAlternative running = KernelAlternative::kNone;
  // oneDNN's implementation of the anchor primitive, and the ones offered (kernel_choice.h).
  KernelImplementations implementations;
};

void Executor::ArenaFree::operator()(void* p) const { std::free(p); }

namespace {

std::string GroupLabel(const Graph& g, const FusionGroup& group) {
  std::string s = std::string(GroupKindName(group.kind)) + " [";
  for (size_t i = 0; i < group.nodes.size(); ++i) {
    s += (i ? "," : "") + g.node(group.nodes[i]).op_type;
  }
  return s + "]";
}

// Whether `group` is a loop of flat elementwise nodes that runs on its kept inputs as they are
// stored (lowering/layout.h RunsFlatOnBlocked); then `*stored` gets the layout of each output it
// writes kept, as the layout rules store it. The loop reads its kept inputs in the rules' layout
// (the one its program is lowered over), so an input stored otherwise is an error, never a wrong
// result.
StatusOr<bool> RunsOnStoredLayouts(const Graph& g, const FusionGroup& group,
                                   const std::vector<TensorId>& inputs,
                                   const std::vector<TensorId>& outputs, const LayoutTarget& layout,
                                   StoredLayouts* stored) {
  if (!RunsFlatOnBlocked(g, group, inputs, outputs, layout)) return false;
  for (TensorId t : inputs) {
    if (!KeptBlocked(g, t, layout)) continue;
    auto it = stored->find(t);
    if (it == stored->end() || it->second != StoredLayoutOf(g, t, layout)) {
      return Status::Internal("tensor '" + g.tensor(t).name +
                              "' is not stored in the layout the layout rules keep it in, which "
                              "the loop reading it is lowered over");
    }
  }
  for (TensorId t : outputs) {
    if (KeptBlocked(g, t, layout)) (*stored)[t] = StoredLayoutOf(g, t, layout);
  }
  return true;
}

double MedianSeconds(GroupKernel* k, int runs) {
  std::vector<double> t;
  k->Run();
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    k->Run();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(t.begin(), t.begin() + runs / 2, t.end());
  return t[runs / 2];
}

}  // namespace

Executor::~Executor() = default;

StatusOr<std::unique_ptr<Executor>> Executor::Create(const Graph& g, const FusionPlan& plan,
                                                     const TensorValues& leaves,
                                                     const ExecutorOptions& options) {
  ScopedCallerBinding bind;  // Compiling times alternatives (ChooseBackends).
  FUSOR_RETURN_IF_ERROR(CheckPlan(g, plan));
  std::unique_ptr<Executor> e(new Executor());
  e->graph_ = g;
  e->options_ = options;
  if (options.threads > 0) omp_set_num_threads(options.threads);
  e->threads_ = omp_get_max_threads();
  BindOpenMpTeamToCores();
  for (TensorId t = 0; t < static_cast<TensorId>(g.num_tensors()); ++t) {
    if (g.tensor(t).kind == TensorKind::kActivation) continue;
    auto it = leaves.find(t);
    if (it == leaves.end()) {
      return Status::InvalidArgument("no value for " +
                                     std::string(TensorKindName(g.tensor(t).kind)) + " '" +
                                     g.tensor(t).name + "'");
    }
    if (it->second.dims != g.tensor(t).dims) {
      return Status::InvalidArgument("value for '" + g.tensor(t).name + "' has shape " +
                                     ShapeString(it->second.dims) + ", the graph says " +
                                     ShapeString(g.tensor(t).dims));
    }
    e->leaves_[t] = it->second;
  }
  try {
    e->dnnl_ = std::make_unique<DnnlState>();
  } catch (const dnnl::error& err) {
    return Status::Unavailable(std::string("oneDNN CPU engine: ") + err.what());
  }
  FUSOR_RETURN_IF_ERROR(e->Compile(plan));
  FUSOR_RETURN_IF_ERROR(e->Allocate());
  e->ChooseBackends();
  return e;
}

Status Executor::Compile(const FusionPlan& plan) {
  const Graph& g = graph_;
  auto all_inputs = AllGroupInputs(g, plan);
  auto all_outputs = AllMaterializedOutputs(g, plan);
  LayoutTarget layout = LayoutTargetForIsa(OneDnnIsa());
  if (!options_.keep_blocked) layout.block = 0;
  KernelContext ctx;
  ctx.g = &graph_;
  ctx.engine = &dnnl_->engine;
  ctx.stream = &dnnl_->stream;
  ctx.stored = [this](TensorId t) -> const dnnl::memory::desc* {
    auto it = dnnl_->stored.find(t);
    return it == dnnl_->stored.end() ? nullptr : &it->second;
  };
  ctx.layout = layout;
  ctx.known = [this](TensorId t) -> const HostTensor* {
    auto it = leaves_.find(t);
    bool constant = it != leaves_.end() && graph_.tensor(t).kind != TensorKind::kGraphInput;
    return constant ? &it->second : nullptr;
  };
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const FusionGroup& fg = plan.groups[i];
    ctx.outputs = all_outputs[i];
    ctx.kernel = fg.kernel;
    Group group;
    group.group = fg;
    group.label = GroupLabel(g, fg);
    group.lowering =
        LowerGroup(g, fg, all_inputs[i], all_outputs[i], layout, options_.rnn_implementation);
    // Kernels are built with the thread count they will run with: some oneDNN primitives fix
    // their work split when created.
    UseThreads(group);
    auto built = BuildGroupKernels(ctx, group.lowering, options_.build_choices());
    if (!built.ok()) {
      omp_set_num_threads(threads_);
      return built.status().WithContext("group " + std::to_string(i) + " " + group.label);
    }
    group.alternative = std::move(built->alternative);
    if (built->alternative_is_kernel) group.running = built->built_alternative;
    group.kernel = std::move(built->kernel);
    group.implementations = group.kernel->implementations();
    if (!fg.kernel.empty() && group.implementations.built.empty()) {
      omp_set_num_threads(threads_);
      return Status::InvalidArgument(
          "group " + std::to_string(i) + " " + group.label + " names kernel '" + fg.kernel +
          "', but runs no oneDNN primitive to choose one for (only an "
          "anchor primitive, a Conv, ConvTranspose, MatMul or Gemm, has one)");
    }
    // A loop of flat elementwise nodes over tensors in one blocked layout runs on them as stored
    // and writes that layout; other kernels get plain copies of blocked inputs they cannot read.
    StatusOr<bool> as_stored =
        RunsOnStoredLayouts(g, fg, all_inputs[i], all_outputs[i], layout, &dnnl_->stored);
    if (!as_stored.ok()) {
      omp_set_num_threads(threads_);
      return as_stored.status().WithContext("group " + std::to_string(i) + " " + group.label);
    }
    if (!*as_stored) {
      group.kernel =
          AdaptToStoredLayouts(ctx, std::move(group.kernel), group.lowering, all_inputs[i]);
      if (group.alternative) {
        group.alternative =
            AdaptToStoredLayouts(ctx, std::move(group.alternative), group.lowering, all_inputs[i]);
      }
      for (const auto& [t, md] : group.kernel->BlockedOutputs()) dnnl_->stored[t] = md;
    }
    groups_.push_back(std::move(group));
  }
  omp_set_num_threads(threads_);
  return Status::Ok();
}

Status Executor::Allocate() {
  FusionPlan plan;
  for (const auto& gr : groups_) plan.groups.push_back(gr.group);
  std::vector<BufferLifetime> buffers = PlanLifetimes(graph_, plan);
  size_t tensor_buffers = buffers.size();
  int64_t weights = 0;
  for (const auto& [t, v] : leaves_) {
    if (graph_.tensor(t).kind != TensorKind::kGraphInput) weights += StorageBytes(graph_.tensor(t));
  }
  for (size_t i = 0; i < groups_.size(); ++i) {
    int64_t scratch = groups_[i].kernel->scratch_bytes();
    weights += groups_[i].kernel->weight_bytes();
    if (groups_[i].alternative) {
      scratch = std::max(scratch, groups_[i].alternative->scratch_bytes());
      weights += groups_[i].alternative->weight_bytes();
    }
    int gi = static_cast<int>(i);
    buffers.push_back({kNoId, scratch, gi, gi});
  }
  memory_ = AssignOffsets(std::move(buffers), weights);
  FUSOR_RETURN_IF_ERROR(CheckMemoryBudget(memory_, options_.memory_budget_bytes));
  tensor_offset_.assign(graph_.num_tensors(), -1);
  scratch_offset_.assign(groups_.size(), 0);
  for (size_t b = 0; b < memory_.buffers.size(); ++b) {
    if (b < tensor_buffers) {
      tensor_offset_[memory_.buffers[b].tensor] = memory_.offsets[b];
    } else {
      scratch_offset_[b - tensor_buffers] = memory_.offsets[b];
    }
  }
  const std::vector<SliceOffset> slices = SliceOffsets(graph_, plan);
  for (const SliceOffset& s : slices) {
    if (tensor_offset_[s.whole] >= 0)
      tensor_offset_[s.part] = tensor_offset_[s.whole] + s.byte_offset;
  }
  KeepCallerBuffers(slices);
  // Weights and their packed copies are allocated by now; the arena is what remains to take.
  FUSOR_RETURN_IF_ERROR(CheckHostMemory(
      memory_.arena_bytes, "the plan's activations and scratch (" + memory_.ToString() + ")"));
  size_t bytes = static_cast<size_t>(std::max<int64_t>(memory_.arena_bytes, 64));
  arena_.reset(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  if (!arena_)
    return Status::ResourceExhausted("cannot allocate " + std::to_string(bytes) + " bytes");
  std::memset(arena_.get(), 0, bytes);
  for (TensorId t : graph_.inputs()) {
    if (!caller_buffer_[t]) FUSOR_RETURN_IF_ERROR(SetInput(t, leaves_.at(t)));
  }
  for (size_t i = 0; i < groups_.size(); ++i) {
    void* scratch = static_cast<char*>(arena_.get()) + scratch_offset_[i];
    auto buffer = [this](TensorId t) { return Buffer(t); };
    FUSOR_RETURN_IF_ERROR(groups_[i].kernel->Bind(buffer, scratch).WithContext(groups_[i].label));
    if (groups_[i].alternative) {
      FUSOR_RETURN_IF_ERROR(groups_[i].alternative->Bind(buffer, scratch));
    }
  }
  spdlog::debug("executor: model={} groups={} memory: {}", graph_.model_name, groups_.size(),
                memory_.ToString());
  return Status::Ok();
}

void Executor::KeepCallerBuffers(const std::vector<SliceOffset>& slices) {
  caller_buffer_.assign(graph_.num_tensors(), nullptr);
  // Kernels find an in-place Concat's parts at fixed offsets of its whole, and write a blocked
  // tensor in a layout the caller does not read: those stay in the arena.
  std::unordered_set<TensorId> sliced;
  for (const SliceOffset& s : slices) sliced.insert({s.part, s.whole});
  const auto& outputs = graph_.outputs();
  for (const auto& [t, memory] : options_.caller_buffers) {
    if (t < 0 || t >= static_cast<TensorId>(graph_.num_tensors()) || tensor_offset_[t] < 0 ||
        sliced.count(t) || dnnl_->stored.count(t) || !memory) {
      continue;
    }
    bool io = graph_.tensor(t).kind == TensorKind::kGraphInput ||
              std::find(outputs.begin(), outputs.end(), t) != outputs.end();
    if (io) caller_buffer_[t] = memory;
  }
}

bool Executor::InCallerMemory(TensorId t) const {
  return t >= 0 && t < static_cast<TensorId>(caller_buffer_.size()) && caller_buffer_[t];
}

void* Executor::InputBuffer(TensorId t) {
  if (t < 0 || t >= static_cast<TensorId>(graph_.num_tensors()) ||
      graph_.tensor(t).kind != TensorKind::kGraphInput || tensor_offset_[t] < 0 ||
      caller_buffer_[t]) {
    return nullptr;
  }
  return Buffer(t);
}

std::vector<KernelAlternative> Executor::alternatives() const {
  std::vector<KernelAlternative> out;
  for (const Group& g : groups_) out.push_back(g.running);
  return out;
}

void* Executor::Buffer(TensorId t) {
  if (t < 0 || t >= static_cast<TensorId>(graph_.num_tensors())) return nullptr;
  if (caller_buffer_[t]) return caller_buffer_[t];
  if (tensor_offset_[t] >= 0) return static_cast<char*>(arena_.get()) + tensor_offset_[t];
  auto it = leaves_.find(t);
  if (it == leaves_.end() || graph_.tensor(t).kind == TensorKind::kGraphInput) return nullptr;
  HostTensor& h = it->second;
  return h.is_float() ? static_cast<void*>(h.f.data()) : static_cast<void*>(h.i.data());
}

void Executor::ChooseBackends() {
  const std::vector<KernelAlternative>& pinned = options_.pinned_alternatives;
  for (size_t i = 0; i < groups_.size(); ++i) {
    Group& gr = groups_[i];
    if (!gr.alternative) continue;
    if (pinned.size() == groups_.size()) {
      if (pinned[i] != gr.running) {
        std::swap(gr.kernel, gr.alternative);
        gr.running = gr.lowering.alternative;
      }
      gr.alternative.reset();
      continue;
    }
    // Both kernels compute the same values into the same buffers; run each a few times.
    UseThreads(gr);
    double form = MedianSeconds(gr.kernel.get(), 5);
    double alternative = MedianSeconds(gr.alternative.get(), 5);
    spdlog::debug("executor: group {} {}: {:.1f} us ({}), {:.1f} us ({})", i, gr.label, form * 1e6,
                  gr.kernel->Describe(), alternative * 1e6, gr.alternative->Describe());
    if (alternative < form) {
      std::swap(gr.kernel, gr.alternative);
      gr.running = gr.lowering.alternative;
    }
    gr.alternative.reset();
  }
  omp_set_num_threads(threads_);
}

void Executor::UseThreads(const Group& group) const {
  omp_set_num_threads(group.lowering.serial ? 1 : threads_);
}

Status Executor::SetInput(TensorId t, const HostTensor& value) {
  if (t < 0 || t >= static_cast<TensorId>(graph_.num_tensors()) ||
      graph_.tensor(t).kind != TensorKind::kGraphInput || tensor_offset_[t] < 0) {
    return Status::InvalidArgument("tensor " + std::to_string(t) + " is not a graph input");
  }
  const Tensor& info = graph_.tensor(t);
  if (value.dims != info.dims || value.is_float() != IsFloatingPoint(info.dtype)) {
    return Status::InvalidArgument("input '" + info.name + "' needs " +
                                   std::string(DTypeName(info.dtype)) + "[" +
                                   ShapeString(info.dims) + "], got " + ShapeString(value.dims));
  }
  void* dst = Buffer(t);
  size_t n = static_cast<size_t>(value.num_elements());
  if (value.is_float()) {
    std::memcpy(dst, value.f.data(), n * sizeof(float));
  } else {
    std::memcpy(dst, value.i.data(), n * sizeof(int64_t));
  }
  return Status::Ok();
}

void Executor::Run() { Run(RunControl{}); }

bool Executor::Run(const RunControl& control) {
  std::optional<ScopedCallerBinding> bind;
  if (control.bind_caller) bind.emplace();
  const int team = control.threads > 0 ? std::min(control.threads, threads_) : threads_;
  bool finished = true;
  for (auto& g : groups_) {
    if (control.cancel && control.cancel->load(std::memory_order_relaxed)) {
      finished = false;
      break;
    }
    omp_set_num_threads(g.lowering.serial ? 1 : team);
    g.kernel->Run();
  }
  omp_set_num_threads(threads_);
  return finished;
}

void Executor::RunProfiled(std::vector<double>* seconds) {
  ScopedCallerBinding bind;
  seconds->assign(groups_.size(), 0.0);
  auto last = std::chrono::steady_clock::now();
  for (size_t i = 0; i < groups_.size(); ++i) {
    UseThreads(groups_[i]);
    groups_[i].kernel->Run();
    auto now = std::chrono::steady_clock::now();
    (*seconds)[i] = std::chrono::duration<double>(now - last).count();
    last = now;
  }
  omp_set_num_threads(threads_);
}

void Executor::RunGroup(size_t index) {
  ScopedCallerBinding bind;
  UseThreads(groups_[index]);
  groups_[index].kernel->Run();
  omp_set_num_threads(threads_);
}

size_t Executor::num_groups() const { return groups_.size(); }

const KernelImplementations& Executor::Implementations(size_t index) const {
  return groups_[index].implementations;
}

bool Executor::RunsPrimitiveChain(size_t index) const {
  return groups_[index].running == KernelAlternative::kPrimitiveChain;
}

const GroupLowering& Executor::GroupRecord(size_t index) const { return groups_[index].lowering; }

const GroupKernel& Executor::RunningKernel(size_t index) const { return *groups_[index].kernel; }

std::string Executor::DescribeGroup(size_t index) const {
  return groups_[index].label + ": " + groups_[index].kernel->Describe();
}

StatusOr<HostTensor> Executor::Read(TensorId t) const {
  if (t < 0 || t >= static_cast<TensorId>(graph_.num_tensors())) {
    return Status::NotFound("tensor " + std::to_string(t) + " is not in the graph");
  }
  const Tensor& info = graph_.tensor(t);
  HostTensor h = HostTensor::Zeros(info.dtype, info.dims);
  FUSOR_RETURN_IF_ERROR(ReadInto(t, h.is_float() ? static_cast<void*>(h.f.data()) : h.i.data()));
  return h;
}

Status Executor::ReadInto(TensorId t, void* dst) const {
  if (t < 0 || t >= static_cast<TensorId>(graph_.num_tensors())) {
    return Status::NotFound("tensor " + std::to_string(t) + " is not in the graph");
  }
  const Tensor& info = graph_.tensor(t);
  const bool is_float = IsFloatingPoint(info.dtype);
  const size_t bytes =
      static_cast<size_t>(NumElements(info.dims)) * (is_float ? sizeof(float) : sizeof(int64_t));
  // An output that folding left a constant (or a weight) is its leaf value; no kernel writes it.
  if (tensor_offset_[t] < 0 && info.kind != TensorKind::kGraphInput && leaves_.count(t)) {
    const HostTensor& leaf = leaves_.at(t);
    std::memcpy(dst, is_float ? static_cast<const void*>(leaf.f.data()) : leaf.i.data(), bytes);
    return Status::Ok();
  }
  if (tensor_offset_[t] < 0) {
    return Status::NotFound("tensor '" + info.name + "' is not materialized by the plan");
  }
  const char* src = caller_buffer_[t] ? static_cast<const char*>(caller_buffer_[t])
                                      : static_cast<const char*>(arena_.get()) + tensor_offset_[t];
  auto blocked = dnnl_->stored.find(t);
  if (blocked != dnnl_->stored.end()) {
    // Kept channel-blocked between groups: reorder to the plain row-major value.
    dnnl::memory from(blocked->second, dnnl_->engine, const_cast<char*>(src));
    dnnl::memory to(PlainLayout(info.dims), dnnl_->engine, dst);
    dnnl::reorder(from, to).execute(dnnl_->stream, from, to);
    dnnl_->stream.wait();
    return Status::Ok();
  }
  if (dst != src) std::memcpy(dst, src, bytes);
  return Status::Ok();
}

StatusOr<TensorValues> Executor::ReadOutputs() const {
  TensorValues out;
  for (TensorId t : graph_.outputs()) {
    FUSOR_ASSIGN_OR_RETURN(out[t], Read(t));
  }
  return out;
}

}  // namespace fusor
