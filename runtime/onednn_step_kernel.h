// StepKernel: the GroupKernel every oneDNN kernel is: a list of steps (reorders, the primitive,
// fused loops) over arguments that name a tensor buffer, a slice of the kernel's scratch, or memory
// the kernel owns (weights); and the pieces the kernel builders share to add those steps (sources
// in the layout a primitive wants, post-op operands, the output and its tail loop). Not a public
// header: only the oneDNN kernel files include it (runtime/onednn_*.cc). A StepKernel is owned by
// its executor like any GroupKernel and is not safe to run from two threads at once.
#pragma once

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "graph/graph.h"
#include "lowering/kernel_form.h"
#include "runtime/group_kernel.h"
#include "runtime/onednn_post_ops.h"
#include "runtime/op_params.h"

namespace fusor::onednn {

struct Arg {
  enum Where { kTensor, kScratch, kOwned } where = kTensor;
  TensorId tensor = kNoId;
  int64_t offset = 0;  // kScratch.
  int owned = -1;      // kOwned.
  memory::desc md;
};

struct Step {
  std::optional<dnnl::primitive> prim;
  std::vector<std::pair<int, Arg>> args;
  std::unique_ptr<FusedLoop> loop;
  std::vector<std::pair<TensorId, Arg>> loop_args;  // Loop tensor -> the memory it is bound to.
  std::unordered_map<int, memory> bound;
};

// Memory the kernel owns, filled once at Bind (prepacked weights, biases, folded operands).
struct Owned {
  memory::desc md;
  memory::desc user_md;       // Layout of `values` when they need a reorder into md.
  std::vector<float> values;  // Copied (or reordered) into the memory.
  memory mem;
};

class StepKernel : public GroupKernel {
 public:
  StepKernel(const KernelContext& ctx, std::string label)
      : engine_(*ctx.engine), stream_(*ctx.stream), label_(std::move(label)) {}

  int64_t AddScratch(const memory::desc& md) {
    int64_t at = scratch_;
    scratch_ += (static_cast<int64_t>(md.get_size()) + 63) / 64 * 64;
    return at;
  }
  int AddOwned(memory::desc md, std::vector<float> values, memory::desc user_md = {}) {
    owned_.push_back({md, user_md, std::move(values), {}});
    return static_cast<int>(owned_.size()) - 1;
  }
  std::vector<Step>& steps() { return steps_; }
  void AddNote(const std::string& note) { label_ += note; }
  // Records a reorder of `t` from layout `from` to `to` (a transpose when either is
  // channels-last), and notes it in the label.
  void NoteReorder(TensorId t, ReorderKind kind, const memory::desc& from, const memory::desc& to);
  std::vector<LayoutReorder> Reorders() const override { return reorders_; }
  void SetPostOpNodes(size_t n) { post_op_nodes_ = n; }
  size_t PostOpNodes() const override { return post_op_nodes_; }
  void ClaimNative(TensorId t) {
    if (std::find(native_.begin(), native_.end(), t) == native_.end()) native_.push_back(t);
  }
  std::vector<TensorId> NativeLayouts() const override { return native_; }
  void StoreBlocked(TensorId t, const memory::desc& md) { blocked_out_.push_back({t, md}); }
  std::vector<std::pair<TensorId, memory::desc>> BlockedOutputs() const override {
    return blocked_out_;
  }

  int64_t scratch_bytes() const override { return scratch_; }
  int64_t weight_bytes() const override {
    int64_t total = 0;
    for (const auto& o : owned_) total += static_cast<int64_t>(o.md.get_size());
    return total;
  }

  Status Bind(const TensorBuffer& tensor, void* scratch) override {
    try {
      for (auto& o : owned_) FillOwned(&o);
      for (auto& s : steps_) FUSOR_RETURN_IF_ERROR(BindStep(&s, tensor, scratch));
    } catch (const dnnl::error& e) {
      return Status::Internal("oneDNN: " + std::string(e.what()) + " while binding " + label_);
    }
    return Status::Ok();
  }

  void Run() override {
    for (auto& s : steps_) {
      if (s.loop) {
        s.loop->Run();
      } else {
        s.prim->execute(stream_, s.bound);
      }
    }
    stream_.wait();
  }

  std::string Describe() const override { return label_; }

 private:
  void FillOwned(Owned* o) {
    o->mem = memory(o->md, engine_);
    if (o->user_md.is_zero()) {
      std::memcpy(o->mem.get_data_handle(), o->values.data(), o->values.size() * sizeof(float));
    } else {
      memory user(o->user_md, engine_, o->values.data());
      dnnl::reorder(user, o->mem).execute(stream_, user, o->mem);
      stream_.wait();
    }
    o->values.clear();
    o->values.shrink_to_fit();
  }

  Status BindStep(Step* s, const TensorBuffer& tensor, void* scratch) {
    auto pointer = [&](const Arg& a) -> void* {
      if (a.where == Arg::kTensor) return tensor(a.tensor);
      if (a.where == Arg::kScratch) return static_cast<char*>(scratch) + a.offset;
      return owned_[a.owned].mem.get_data_handle();
    };
    for (const auto& [key, a] : s->args) {
      if (pointer(a) == nullptr) return Status::Internal(label_ + ": argument has no buffer");
    }
    if (s->loop) {
      for (const auto& [t, a] : s->loop_args) s->loop->Bind(t, pointer(a));
      if (!s->loop->IsBound()) return Status::Internal(label_ + ": loop step has unbound tensors");
      return Status::Ok();
    }
    for (const auto& [key, a] : s->args) s->bound[key] = memory(a.md, engine_, pointer(a));
    return Status::Ok();
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::string label_;
  std::vector<Step> steps_;
  std::vector<Owned> owned_;
  std::vector<TensorId> native_;
  std::vector<std::pair<TensorId, memory::desc>> blocked_out_;
  std::vector<LayoutReorder> reorders_;
  size_t post_op_nodes_ = 0;
  int64_t scratch_ = 0;
};

Arg TensorArg(TensorId t, const memory::desc& md);
Arg ScratchArg(int64_t offset, const memory::desc& md);
Arg OwnedArg(int index, const memory::desc& md);

void AddReorder(StepKernel* k, const Arg& from, const Arg& to, dnnl::engine& engine);

// A fused loop over `nodes` running in place on `buffer_tensor`'s memory: `leaf` (the chain value
// the primitive produced) and the loop's output both live there.
Status AddTailLoop(const KernelContext& ctx, StepKernel* k, const std::vector<NodeId>& nodes,
                   TensorId leaf, TensorId out);

// The layout a tensor the kernel reads is stored in (KernelContext::stored), null for plain.
using StoredLayout = std::function<const memory::desc*(TensorId)>;

const memory::desc* NoneStored(TensorId t);

// Binds post-op operands of the first k chain nodes to `step`. An operand stored blocked is read in
// place when that is the layout the primitive wants, and reordered from its stored layout if not.
void AddPostOpArgs(StepKernel* k, Step* step, const std::vector<std::vector<PostOp>>& ops,
                   size_t count, const DstView& view, dnnl::engine& engine,
                   const OperandLayout& layout = PlainDims,
                   const StoredLayout& stored = NoneStored);

std::string ImplName(const dnnl::primitive_desc_base& pd);

bool IsReference(const dnnl::primitive_desc_base& pd);

// The vector width class of an implementation, read from its name ("jit_1x1:avx2" -> 2,
// "brgconv:avx512_core" -> 3): 0 for reference and unnamed ISAs.
int IsaRank(const dnnl::primitive_desc_base& pd);

// Whether `a` and `b` put every element at the same byte, so a buffer in one is read as the other
// without a reorder: equal; dense and unpadded over one dim longer than 1 (NCHW, NHWC and nChw16c
// of a one-pixel image); or both unblocked with the same strides over every dim longer than 1.
bool SameBytes(const memory::desc& a, const memory::desc& b);

// Dense NHWC (channels stride 1, no blocking) of a 4-D tensor.
bool IsChannelsLast(const memory::desc& md);

// Tries post-op prefixes from longest to shortest; `make` returns a primitive descriptor or throws.
// With `implementations`, the descriptor of the prefix taken is stepped to the implementation
// named `kernel` (runtime/kernel_choice.h), and `*implementations` says which were offered.
template <typename Pd>
StatusOr<std::pair<Pd, size_t>> LongestPrefix(
    const std::vector<std::vector<PostOp>>& ops, const DstView& view,
    const std::function<Pd(const dnnl::primitive_attr&)>& make, const std::string& what,
    const OperandLayout& layout = PlainDims, const std::string& kernel = "",
    KernelImplementations* implementations = nullptr) {
  std::string last_error;
  for (size_t k = ops.size() + 1; k-- > 0;) {
    auto attr = MakeAttr(ops, k, view, layout);
    if (!attr) continue;
    try {
      Pd pd = make(*attr);
      if (k > 0 && IsReference(pd))
        continue;  // A post-op that forces the slow path is not worth it.
      if (implementations != nullptr) {
        std::function<Pd()> again = [&] { return make(*attr); };
        FUSOR_ASSIGN_OR_RETURN(pd, ChooseImplementation(again, kernel, what, implementations));
      }
      return std::make_pair(pd, k);
    } catch (const dnnl::error& e) {
      last_error = e.what();
    }
  }
  return Status::Unimplemented(what + ": oneDNN has no implementation (" + last_error + ")");
}

// Adds the scratchpad of `pd` as a scratch slice.
void AddScratchpad(StepKernel* k, Step* step, const dnnl::primitive_desc_base& pd);

// Source argument in the layout `want`, reordering from the tensor's buffer (plain, or blocked as
// `stored` says) when they differ.
Arg SourceIn(StepKernel* k, TensorId t, const memory::desc& plain, const memory::desc& want,
             dnnl::engine& engine, const StoredLayout& stored = NoneStored);

std::vector<NodeId> Tail(const std::vector<NodeId>& chain, size_t k);

TensorId ChainValue(const Graph& g, TensorId start, const std::vector<NodeId>& chain, size_t k);

// Adds the main primitive step writing `final_out`: in the primitive's own layout when that is
// blocked, the tensor may stay blocked (KernelContext::KeepsBlocked) and no tail loop follows;
// else plain, through a reorder when the primitive picked another layout. Then the tail loop for
// chain nodes without a post-op form (on the plain output). With `sum_from`, that tensor is first
// copied into the primitive's dst, which a sum post-op adds to.
Status FinishAnchor(const KernelContext& ctx, StepKernel* k, Step main, const memory::desc& dst_md,
                    const Shape& out_dims, const std::vector<NodeId>& chain, TensorId start,
                    size_t done, const std::optional<Arg>& sum_from = std::nullopt);

// The stored layouts of tensors a kernel reads or writes, except the ones its tail loop (`tail`)
// touches: the loop indexes plain row-major buffers, so those stay plain for the whole kernel.
StoredLayout StoredOutsideTail(const KernelContext& ctx, const std::vector<NodeId>& tail);

std::string PostOpNote(size_t done, size_t total);

const HostTensor* KnownFloat(const KernelContext& ctx, TensorId t);

// A sliding window in oneDNN's terms (dilation 0 = dense).
struct DnnlWindow {
  memory::dims strides, dilates, pad_l, pad_r;
};

DnnlWindow ToDnnl(const Window& w);

}  // namespace fusor::onednn
