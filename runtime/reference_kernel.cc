#include "runtime/reference_kernel.h"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "graph/node_attrs.h"
#include "runtime/host_tensor.h"
#include "runtime/reference.h"

namespace fusor {
namespace {

class ReferenceKernel : public GroupKernel {
 public:
  ReferenceKernel(const Graph* g, NodeId id) : g_(g), id_(id) {}

  Status Bind(const TensorBuffer& tensor, void* /*scratch*/) override {
    const Node& n = g_->node(id_);
    for (TensorId t : n.inputs) {
      if (t == kNoId) continue;
      void* p = tensor(t);
      // An empty tensor (Resize's unused roi) has no storage.
      if (p == nullptr && g_->tensor(t).num_elements() > 0) return Missing(t);
      inputs_.push_back({t, p});
    }
    // An output nothing reads (an LSTM's final state) has no buffer: computed, then dropped.
    for (TensorId t : n.outputs) {
      if (void* p = tensor(t)) outputs_.push_back({t, p});
    }
    return Status::Ok();
  }

  void Run() override {
    TensorValues values;
    for (const auto& [t, p] : inputs_) values[t] = Load(t, p);
    Status s = RunReferenceNode(*g_, id_, &values);
    if (!s.ok()) {
      if (!reported_) spdlog::error("reference fallback: {}", s.message());
      reported_ = true;
    }
    for (const auto& [t, p] : outputs_) {
      auto it = values.find(t);
      Store(t, s.ok() && it != values.end() ? &it->second : nullptr, p);
    }
  }

  std::string Describe() const override {
    return "reference fallback (" + g_->node(id_).op_type + ", not fused)";
  }

 private:
  Status Missing(TensorId t) const {
    return Status::Internal(NodeLabel(g_->node(id_)) + ": no buffer for '" + g_->tensor(t).name +
                            "'");
  }

  // Tensors are stored plain row-major: float32, or int64 for integers and bools.
  HostTensor Load(TensorId t, const void* p) const {
    const Tensor& info = g_->tensor(t);
    HostTensor h = HostTensor::Zeros(info.dtype, info.dims);
    size_t n = static_cast<size_t>(h.num_elements());
    if (n == 0) return h;
    if (h.is_float()) {
      std::memcpy(h.f.data(), p, n * sizeof(float));
    } else {
      std::memcpy(h.i.data(), p, n * sizeof(int64_t));
    }
    return h;
  }

  // Writes `value` to the buffer, or NaN (zero for integers) when the run failed.
  void Store(TensorId t, const HostTensor* value, void* p) const {
    const Tensor& info = g_->tensor(t);
    size_t n = static_cast<size_t>(info.num_elements());
    if (IsFloatingPoint(info.dtype)) {
      float* dst = static_cast<float*>(p);
      if (value) {
        std::memcpy(dst, value->f.data(), n * sizeof(float));
      } else {
        std::fill(dst, dst + n, std::numeric_limits<float>::quiet_NaN());
      }
    } else {
      int64_t* dst = static_cast<int64_t*>(p);
      if (value) {
        std::memcpy(dst, value->i.data(), n * sizeof(int64_t));
      } else {
        std::fill(dst, dst + n, int64_t{0});
      }
    }
  }

  const Graph* g_;
  NodeId id_;
  std::vector<std::pair<TensorId, void*>> inputs_, outputs_;
  bool reported_ = false;
};

// Runs the node once on its constants and zero activations, so that an attribute or parameter
// the interpreter does not support (a cubic Resize, a batch-first LSTM) fails the build, naming
// the node, instead of every run.
Status TryOnce(const KernelContext& ctx, NodeId id) {
  const Graph& g = *ctx.g;
  TensorValues values;
  for (TensorId t : g.node(id).inputs) {
    if (t == kNoId) continue;
    const HostTensor* known = ctx.known ? ctx.known(t) : nullptr;
    values[t] = known ? *known : HostTensor::Zeros(g.tensor(t).dtype, g.tensor(t).dims);
  }
  return RunReferenceNode(g, id, &values);
}

}  // namespace

StatusOr<std::unique_ptr<GroupKernel>> BuildReferenceKernel(const KernelContext& ctx, NodeId id) {
  FUSOR_RETURN_IF_ERROR(CheckReferenceKernel(*ctx.g, id));
  FUSOR_RETURN_IF_ERROR(TryOnce(ctx, id));
  return std::unique_ptr<GroupKernel>(new ReferenceKernel(ctx.g, id));
}

}  // namespace fusor
