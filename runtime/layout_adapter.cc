#include "runtime/layout_adapter.h"

#include <algorithm>
#include <string>
#include <utility>

namespace fusor {

namespace {

using dnnl::memory;

class LayoutAdapter : public GroupKernel {
 public:
  struct Copy {
    TensorId tensor = kNoId;
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
      c.from = memory(c.stored, engine_, buffer);
      c.to = memory(c.plain, engine_, base + c.offset);
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
    for (Copy& c : copies_) c.reorder.execute(stream_, c.from, c.to);
    stream_.wait();
    inner_->Run();
  }

  std::string Describe() const override {
    return inner_->Describe() + ", " + std::to_string(copies_.size()) +
           " blocked input(s) reordered to plain";
  }

  std::vector<TensorId> NativeLayouts() const override { return inner_->NativeLayouts(); }
  std::vector<std::pair<TensorId, dnnl::memory::desc>> BlockedOutputs() const override {
    return inner_->BlockedOutputs();
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::unique_ptr<GroupKernel> inner_;
  std::vector<Copy> copies_;
  int64_t scratch_ = 0;
};

}  // namespace

std::unique_ptr<GroupKernel> AdaptToStoredLayouts(const KernelContext& ctx,
                                                  std::unique_ptr<GroupKernel> inner,
                                                  const std::vector<TensorId>& reads) {
  std::vector<TensorId> native = inner->NativeLayouts();
  std::vector<LayoutAdapter::Copy> copies;
  for (TensorId t : reads) {
    const memory::desc* stored = ctx.Stored(t);
    if (stored == nullptr || std::find(native.begin(), native.end(), t) != native.end()) continue;
    LayoutAdapter::Copy c;
    c.tensor = t;
    c.stored = *stored;
    c.plain = PlainLayout(ctx.g->tensor(t).dims);
    copies.push_back(std::move(c));
  }
  if (copies.empty()) return inner;
  return std::make_unique<LayoutAdapter>(ctx, std::move(inner), std::move(copies));
}

}  // namespace fusor
