#include "runtime/rnn_kernel.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "graph/node_attrs.h"
#include "runtime/host_tensor.h"

namespace fusor {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

// oneDNN gate g reads ONNX gate kOnnxGate[g]: oneDNN orders the gates i, f, c, o; ONNX i, o, f, c.
constexpr int kOnnxGate[4] = {0, 2, 3, 1};

struct LstmShape {
  int64_t seq = 0, batch = 0, in = 0, hid = 0, dirs = 1;
  dnnl::rnn_direction direction = dnnl::rnn_direction::unidirectional_left2right;
};

Status Unsupported(const Node& n, const std::string& why) {
  return Status::Unimplemented(NodeLabel(n) + ": LSTM " + why +
                               " has no oneDNN lowering; it runs through the reference fallback");
}

// The node's form (graph/node_attrs.h) and the weights the build converts.
Status CheckLowerable(const KernelContext& ctx, const Node& n) {
  FUSOR_RETURN_IF_ERROR(LstmPrimitiveForm(*ctx.g, n));
  for (size_t i : {1, 2, 3}) {
    if (i == 3 && n.input(3) == kNoId) continue;
    const HostTensor* v = ctx.known ? ctx.known(n.inputs[i]) : nullptr;
    if (v == nullptr || !v->is_float()) {
      return Unsupported(n, "whose weight input " + std::to_string(i) + " is not known at build");
    }
  }
  return Status::Ok();
}

class LstmKernel : public GroupKernel {
 public:
  LstmKernel(const KernelContext& ctx, NodeId id, LstmShape s)
      : g_(ctx.g),
        id_(id),
        s_(s),
        engine_(*ctx.engine),
        stream_(*ctx.stream),
        materialized_(ctx.outputs) {}

  Status Create(const KernelContext& ctx) {
    const Node& n = g_->node(id_);
    ConvertWeights(*ctx.known(n.inputs[1]), *ctx.known(n.inputs[2]),
                   n.input(3) == kNoId ? nullptr : ctx.known(n.inputs[3]));
    // oneDNN takes the hidden and cell states in pairs: with one of initial_h / initial_c the
    // other is zeros of the kernel's own; with one of Y_h / Y_c read the other goes to scratch.
    const memory::desc state({1, s_.dirs, s_.batch, s_.hid}, memory::data_type::f32, tag::ldnc);
    const bool src_state = n.input(5) != kNoId || n.input(6) != kNoId;
    const bool dst_state = Output(1) != kNoId || Output(2) != kNoId;
    if (src_state) zero_state_.assign(s_.dirs * s_.batch * s_.hid, 0.0f);
    auto state_md = [&](size_t, bool is_output) {
      return (is_output ? dst_state : src_state) ? state : memory::desc();
    };
    try {
      lstm_ = dnnl::lstm_forward::primitive_desc(
          dnnl::lstm_forward::desc(
              dnnl::prop_kind::forward_inference, s_.direction,
              memory::desc({s_.seq, s_.batch, s_.in}, memory::data_type::f32, tag::tnc),
              state_md(5, false), state_md(6, false),
              memory::desc({1, s_.dirs, s_.in, 4, s_.hid}, memory::data_type::f32, tag::any),
              memory::desc({1, s_.dirs, s_.hid, 4, s_.hid}, memory::data_type::f32, tag::any),
              memory::desc({1, s_.dirs, 4, s_.hid}, memory::data_type::f32, tag::ldgo),
              memory::desc({s_.seq, s_.batch, s_.dirs * s_.hid}, memory::data_type::f32, tag::tnc),
              state_md(1, true), state_md(2, true)),
          ScratchpadAttr(), engine_);
    } catch (const dnnl::error& e) {
      return Unsupported(n, std::string("that oneDNN refuses (") + e.what() + ")");
    }
    y_in_scratch_ = Output(0) == kNoId || s_.dirs == 2;
    state_at_ = y_in_scratch_ ? Aligned(lstm_.dst_layer_desc().get_size()) : 0;
    scratchpad_at_ = state_at_ + (dst_state ? Aligned(state.get_size()) : 0);
    scratch_ = scratchpad_at_ + Aligned(lstm_.scratchpad_desc().get_size());
    return Status::Ok();
  }

  int64_t scratch_bytes() const override { return scratch_; }
  int64_t weight_bytes() const override {
    return static_cast<int64_t>(lstm_.weights_layer_desc().get_size() +
                                lstm_.weights_iter_desc().get_size() +
                                lstm_.bias_desc().get_size());
  }

  Status Bind(const TensorBuffer& tensor, void* scratch) override {
    const Node& n = g_->node(id_);
    try {
      Prepack();
      char* base = static_cast<char*>(scratch);
      args_ = {
          {DNNL_ARG_WEIGHTS_LAYER, w_layer_},
          {DNNL_ARG_WEIGHTS_ITER, w_iter_},
          {DNNL_ARG_BIAS, memory(lstm_.bias_desc(), engine_, bias_.data())},
          {DNNL_ARG_SCRATCHPAD, memory(lstm_.scratchpad_desc(), engine_, base + scratchpad_at_)}};
      void* zeros = zero_state_.data();
      void* discard = base + state_at_;
      FUSOR_RETURN_IF_ERROR(
          BindArg(DNNL_ARG_SRC_LAYER, lstm_.src_layer_desc(), tensor, n.input(0), nullptr));
      FUSOR_RETURN_IF_ERROR(
          BindArg(DNNL_ARG_SRC_ITER, lstm_.src_iter_desc(), tensor, n.input(5), zeros));
      FUSOR_RETURN_IF_ERROR(
          BindArg(DNNL_ARG_SRC_ITER_C, lstm_.src_iter_c_desc(), tensor, n.input(6), zeros));
      FUSOR_RETURN_IF_ERROR(
          BindArg(DNNL_ARG_DST_ITER, lstm_.dst_iter_desc(), tensor, Output(1), discard));
      FUSOR_RETURN_IF_ERROR(
          BindArg(DNNL_ARG_DST_ITER_C, lstm_.dst_iter_c_desc(), tensor, Output(2), discard));
      y_ = Output(0) == kNoId ? nullptr : static_cast<float*>(tensor(Output(0)));
      if (Output(0) != kNoId && y_ == nullptr) return Missing(Output(0));
      y_layer_ = y_in_scratch_ ? reinterpret_cast<float*>(base) : y_;
      args_[DNNL_ARG_DST_LAYER] = memory(lstm_.dst_layer_desc(), engine_, y_layer_);
      prim_ = dnnl::lstm_forward(lstm_);
    } catch (const dnnl::error& e) {
      return Status::Internal("oneDNN: " + std::string(e.what()) + " while binding " +
                              NodeLabel(n));
    }
    return Status::Ok();
  }

  void Run() override {
    prim_.execute(stream_, args_);
    stream_.wait();
    if (y_ != nullptr && s_.dirs == 2) SplitDirections();
  }

  std::string Describe() const override {
    return "LSTM oneDNN rnn " + std::string(lstm_.impl_info_str()) + ", not fused";
  }

 private:
  static int64_t Aligned(size_t bytes) { return (static_cast<int64_t>(bytes) + 63) / 64 * 64; }

  static dnnl::primitive_attr ScratchpadAttr() {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return attr;
  }

  // The node's output `i` when the group materializes it (something reads it), else kNoId.
  TensorId Output(size_t i) const {
    const Node& n = g_->node(id_);
    if (i >= n.outputs.size()) return kNoId;
    bool read =
        std::find(materialized_.begin(), materialized_.end(), n.outputs[i]) != materialized_.end();
    return read ? n.outputs[i] : kNoId;
  }

  Status Missing(TensorId t) const {
    return Status::Internal(NodeLabel(g_->node(id_)) + ": no buffer for '" + g_->tensor(t).name +
                            "'");
  }

  // Binds tensor `t` in place; an argument the primitive takes without the tensor (the other of
  // a state pair) binds `instead`; one the primitive does not take binds nothing.
  Status BindArg(int arg, const memory::desc& md, const TensorBuffer& tensor, TensorId t,
                 void* instead) {
    if (md.is_zero()) return Status::Ok();
    if (t == kNoId) {
      if (instead != nullptr) args_[arg] = memory(md, engine_, instead);
      return Status::Ok();
    }
    void* p = tensor(t);
    if (p == nullptr) return Missing(t);
    args_[arg] = memory(md, engine_, p);
    return Status::Ok();
  }

  // ONNX W [dirs, 4 hid, in], R [dirs, 4 hid, hid], B [dirs, 8 hid] (Wb then Rb) to oneDNN's
  // ldigo weights and ldgo bias, gates reordered.
  void ConvertWeights(const HostTensor& w, const HostTensor& r, const HostTensor* b) {
    const int64_t hid = s_.hid, in = s_.in;
    w_user_.assign(s_.dirs * in * 4 * hid, 0.0f);
    r_user_.assign(s_.dirs * hid * 4 * hid, 0.0f);
    bias_.assign(s_.dirs * 4 * hid, 0.0f);
    for (int64_t d = 0; d < s_.dirs; ++d) {
      for (int64_t gate = 0; gate < 4; ++gate) {
        const int64_t src_gate = kOnnxGate[gate];
        for (int64_t o = 0; o < hid; ++o) {
          const int64_t row = d * 4 * hid + src_gate * hid + o;
          for (int64_t i = 0; i < in; ++i)
            w_user_[((d * in + i) * 4 + gate) * hid + o] = w.f[row * in + i];
          for (int64_t i = 0; i < hid; ++i)
            r_user_[((d * hid + i) * 4 + gate) * hid + o] = r.f[row * hid + i];
          if (b != nullptr) {
            bias_[(d * 4 + gate) * hid + o] = b->f[d * 8 * hid + src_gate * hid + o] +
                                              b->f[d * 8 * hid + 4 * hid + src_gate * hid + o];
          }
        }
      }
    }
  }

  // Reorders the converted weights into the primitive's layout, once.
  void Prepack() {
    auto pack = [&](std::vector<float>& user, const memory::dims& dims, const memory::desc& want) {
      memory src(memory::desc(dims, memory::data_type::f32, tag::ldigo), engine_, user.data());
      memory dst(want, engine_);
      dnnl::reorder(src, dst).execute(stream_, src, dst);
      return dst;
    };
    w_layer_ = pack(w_user_, {1, s_.dirs, s_.in, 4, s_.hid}, lstm_.weights_layer_desc());
    w_iter_ = pack(r_user_, {1, s_.dirs, s_.hid, 4, s_.hid}, lstm_.weights_iter_desc());
    stream_.wait();
  }

  // oneDNN's bidirectional dst_layer is [seq, batch, dirs, hid]; ONNX's Y is [seq, dirs, batch,
  // hid].
  void SplitDirections() {
    const int64_t hid = s_.hid;
    for (int64_t t = 0; t < s_.seq; ++t) {
      for (int64_t b = 0; b < s_.batch; ++b) {
        for (int64_t d = 0; d < 2; ++d) {
          const float* src = y_layer_ + ((t * s_.batch + b) * 2 + d) * hid;
          std::memcpy(y_ + ((t * 2 + d) * s_.batch + b) * hid, src, hid * sizeof(float));
        }
      }
    }
  }

  const Graph* g_;
  NodeId id_;
  LstmShape s_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::lstm_forward::primitive_desc lstm_;
  dnnl::lstm_forward prim_;
  std::vector<float> w_user_, r_user_, bias_;
  memory w_layer_, w_iter_;
  std::vector<TensorId> materialized_;
  std::unordered_map<int, memory> args_;
  bool y_in_scratch_ = false;
  std::vector<float> zero_state_;  // initial_h or initial_c when the node has only the other.
  int64_t state_at_ = 0, scratchpad_at_ = 0, scratch_ = 0;
  float* y_ = nullptr;
  float* y_layer_ = nullptr;
};

}  // namespace

StatusOr<std::unique_ptr<GroupKernel>> BuildLstmKernel(const KernelContext& ctx, NodeId id) {
  const Graph& g = *ctx.g;
  const Node& n = g.node(id);
  FUSOR_RETURN_IF_ERROR(CheckLowerable(ctx, n));
  const Shape& x = g.tensor(n.inputs[0]).dims;
  LstmShape s{x[0], x[1], x[2], n.GetInt("hidden_size", g.tensor(n.inputs[2]).dims.back()), 1};
  const std::string direction = n.GetString("direction", "forward");
  if (direction == "bidirectional") {
    s.dirs = 2;
    s.direction = dnnl::rnn_direction::bidirectional_concat;
  } else if (direction == "reverse") {
    s.direction = dnnl::rnn_direction::unidirectional_right2left;
  }
  auto kernel = std::make_unique<LstmKernel>(ctx, id, s);
  FUSOR_RETURN_IF_ERROR(kernel->Create(ctx));
  return std::unique_ptr<GroupKernel>(std::move(kernel));
}

}  // namespace fusor
