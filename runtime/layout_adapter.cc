#include "runtime/layout_adapter.h"

#include <algorithm>
#include <string>
#include <utility>

#include "runtime/onednn_step_kernel.h"

namespace fusor {

namespace {

using dnnl::memory;

class LayoutAdapter : public GroupKernel {
 public:
  // One tensor between its stored layout and the plain copy the inner kernel is bound to: an
  // input reordered to plain before the kernel runs, or an output reordered to `stored` after.
  struct Copy {
    TensorId tensor = kNoId;
    bool output = false;
    memory::desc stored, plain;
    int64_t offset = 0;  // Of the plain copy, after the inner kernel's scratch.
    dnnl::reorder reorder;
    memory from, to;
  };

  LayoutAdapter(const KernelContext& ctx, std::unique_ptr<GroupKernel> inner,
                std::vector<Copy> copies)
      : engine_(*ctx.engine), stream_(*ctx.stream), inner_(std::move(inner)) {
    scratch_ = (inner_->scratch_bytes() + 63) / 64 * 64;
    for (Copy& c : copies) {
      c.offset = scratch_;
      scratch_ += (static_cast<int64_t>(c.plain.get_size()) + 63) / 64 * 64;
    }
    copies_ = std::move(copies);
  }

  int64_t scratch_bytes() const override { return scratch_; }
  int64_t weight_bytes() const override { return inner_->weight_bytes(); }

  Status Bind(const TensorBuffer& tensor, void* scratch) override {
    char* base = static_cast<char*>(scratch);
    for (Copy& c : copies_) {
      void* buffer = tensor(c.tensor);
      if (buffer == nullptr) return Status::Internal("layout adapter: tensor has no buffer");
      memory stored(c.stored, engine_, buffer), plain(c.plain, engine_, base + c.offset);
      c.from = c.output ? plain : stored;
      c.to = c.output ? stored : plain;
      c.reorder = dnnl::reorder(c.from, c.to);
    }
    auto mapped = [this, base, &tensor](TensorId t) -> void* {
      for (const Copy& c : copies_) {
        if (c.tensor == t) return base + c.offset;
      }
      return tensor(t);
    };
    return inner_->Bind(mapped, scratch);
  }

  void Run() override {
    RunCopies(/*outputs=*/false);
    inner_->Run();
    RunCopies(/*outputs=*/true);
  }

  std::string Describe() const override {
    const size_t outs = static_cast<size_t>(
        std::count_if(copies_.begin(), copies_.end(), [](const Copy& c) { return c.output; }));
    std::string text = inner_->Describe();
    if (copies_.size() > outs) {
      text += ", " + std::to_string(copies_.size() - outs) + " blocked input(s) reordered to plain";
    }
    if (outs > 0) text += ", " + std::to_string(outs) + " output(s) reordered to blocked";
    return text;
  }

  std::vector<TensorId> NativeLayouts() const override { return inner_->NativeLayouts(); }
  std::vector<std::pair<TensorId, dnnl::memory::desc>> BlockedOutputs() const override {
    auto out = inner_->BlockedOutputs();
    for (const Copy& c : copies_) {
      if (c.output) out.push_back({c.tensor, c.stored});
    }
    return out;
  }
  std::vector<LayoutReorder> Reorders() const override {
    std::vector<LayoutReorder> out;
    for (const Copy& c : copies_) {
      const ReorderKind kind = c.output ? ReorderKind::kBlockedOut : ReorderKind::kPlainCopy;
      out.push_back({c.tensor, kind, onednn::IsChannelsLast(c.stored)});
    }
    for (const LayoutReorder& r : inner_->Reorders()) out.push_back(r);
    return out;
  }
  size_t PostOpNodes() const override { return inner_->PostOpNodes(); }

 private:
  void RunCopies(bool outputs) {
    bool ran = false;
    for (Copy& c : copies_) {
      if (c.output != outputs) continue;
      c.reorder.execute(stream_, c.from, c.to);
      ran = true;
    }
    if (ran) stream_.wait();
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::unique_ptr<GroupKernel> inner_;
  std::vector<Copy> copies_;
  int64_t scratch_ = 0;
};

bool Contains(const std::vector<TensorId>& ts, TensorId t) {
  return std::find(ts.begin(), ts.end(), t) != ts.end();
}

}  // namespace

std::unique_ptr<GroupKernel> AdaptToStoredLayouts(const KernelContext& ctx,
                                                  std::unique_ptr<GroupKernel> inner,
                                                  const GroupLowering& record,
                                                  const std::vector<TensorId>& reads) {
  const std::vector<TensorId> native = inner->NativeLayouts();
  std::vector<TensorId> written;
  for (const auto& [t, md] : inner->BlockedOutputs()) written.push_back(t);
  std::vector<LayoutAdapter::Copy> copies;
  for (TensorId t : reads) {
    const memory::desc* stored = ctx.Stored(t);
    if (stored == nullptr || Contains(native, t)) continue;
    LayoutAdapter::Copy c;
    c.tensor = t;
    c.stored = *stored;
    c.plain = PlainLayout(ctx.g->tensor(t).dims);
    copies.push_back(std::move(c));
  }
  for (const LayoutReorder& r : record.reorders) {
    if (r.kind != ReorderKind::kBlockedOut || Contains(written, r.tensor)) continue;
    LayoutAdapter::Copy c;
    c.tensor = r.tensor;
    c.output = true;
    c.plain = PlainLayout(ctx.g->tensor(r.tensor).dims);
    const Shape& dims = ctx.g->tensor(r.tensor).dims;
    c.stored = r.transposed ? ChannelsLast(dims) : ChannelBlocked(dims);
    copies.push_back(std::move(c));
  }
  if (copies.empty()) return inner;
  return std::make_unique<LayoutAdapter>(ctx, std::move(inner), std::move(copies));
}

}  // namespace fusor
