#include "runtime/rnn_kernel.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "graph/node_attrs.h"
#include "lowering/rnn_form.h"
#include "runtime/host_tensor.h"
#include "runtime/rnn_loop.h"

namespace fusor {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

// oneDNN weight gate g reads ONNX gate OnnxGate(cell, g). LSTM: oneDNN orders the gates i, f, c,
// o; ONNX i, o, f, c. GRU: oneDNN's u, r, o are ONNX's z, r, h, in the same order.
int64_t OnnxGate(RnnCell cell, int64_t g) {
  constexpr int64_t kLstm[4] = {0, 2, 3, 1};
  return cell == RnnCell::kLstm ? kLstm[g] : g;
}

const char* CellName(RnnCell cell) {
  return cell == RnnCell::kLstm ? "LSTM" : cell == RnnCell::kGru ? "GRU" : "GRU (lbr)";
}

Status Unsupported(const Node& n, const std::string& why) {
  return Status::Unimplemented(NodeLabel(n) + ": " + n.op_type + " " + why +
                               " has no recurrent kernel; it runs through the reference fallback");
}

// The weights the build converts must be known when it runs.
Status CheckWeightsKnown(const KernelContext& ctx, const Node& n) {
  for (size_t i : {1, 2, 3}) {
    if (i == 3 && n.input(3) == kNoId) continue;
    const HostTensor* v = ctx.known ? ctx.known(n.inputs[i]) : nullptr;
    if (v == nullptr || !v->is_float()) {
      return Unsupported(n, "whose weight input " + std::to_string(i) + " is not known at build");
    }
  }
  return Status::Ok();
}

dnnl::rnn_direction DirectionOf(const RnnPrimitive& p) {
  if (p.directions == 2) return dnnl::rnn_direction::bidirectional_concat;
  return p.reverse ? dnnl::rnn_direction::unidirectional_right2left
                   : dnnl::rnn_direction::unidirectional_left2right;
}

class RnnKernel : public GroupKernel {
 public:
  RnnKernel(const KernelContext& ctx, NodeId id, RnnPrimitive p)
      : g_(ctx.g),
        id_(id),
        p_(p),
        engine_(*ctx.engine),
        stream_(*ctx.stream),
        materialized_(ctx.outputs) {}

  Status Create(const KernelContext& ctx) {
    const Node& n = g_->node(id_);
    ConvertWeights(*ctx.known(n.inputs[1]), *ctx.known(n.inputs[2]),
                   n.input(3) == kNoId ? nullptr : ctx.known(n.inputs[3]));
    const bool lstm = p_.cell == RnnCell::kLstm;
    // oneDNN takes LSTM's hidden and cell states in pairs: with one of initial_h / initial_c the
    // other is zeros of the kernel's own; with one of Y_h / Y_c read the other goes to scratch.
    const memory::desc state({1, p_.directions, p_.batch, p_.hidden}, memory::data_type::f32,
                             tag::ldnc);
    const bool src_state = n.input(5) != kNoId || (lstm && n.input(6) != kNoId);
    const bool dst_state = Output(1) != kNoId || (lstm && Output(2) != kNoId);
    if (src_state) zero_state_.assign(p_.directions * p_.batch * p_.hidden, 0.0f);
    const memory::desc src_iter = src_state ? state : memory::desc();
    const memory::desc dst_iter = dst_state ? state : memory::desc();
    const memory::desc src_layer({p_.seq, p_.batch, p_.input}, memory::data_type::f32, tag::tnc);
    const memory::desc w_layer({1, p_.directions, p_.input, p_.gates(), p_.hidden},
                               memory::data_type::f32, tag::any);
    const memory::desc w_iter({1, p_.directions, p_.hidden, p_.gates(), p_.hidden},
                              memory::data_type::f32, tag::any);
    const memory::desc bias({1, p_.directions, p_.bias_gates(), p_.hidden}, memory::data_type::f32,
                            tag::ldgo);
    const memory::desc dst_layer({p_.seq, p_.batch, p_.directions * p_.hidden},
                                 memory::data_type::f32, tag::tnc);
    const auto prop = dnnl::prop_kind::forward_inference;
    const dnnl::rnn_direction dir = DirectionOf(p_);
    try {
      switch (p_.cell) {
        case RnnCell::kLstm:
          pd_ = dnnl::lstm_forward::primitive_desc(engine_, prop, dir, src_layer, src_iter,
                                                   src_iter, w_layer, w_iter, bias, dst_layer,
                                                   dst_iter, dst_iter, UserScratchpadAttr());
          break;
        case RnnCell::kGru:
          pd_ = dnnl::gru_forward::primitive_desc(engine_, prop, dir, src_layer, src_iter, w_layer,
                                                  w_iter, bias, dst_layer, dst_iter,
                                                  UserScratchpadAttr());
          break;
        case RnnCell::kLbrGru:
          pd_ = dnnl::lbr_gru_forward::primitive_desc(engine_, prop, dir, src_layer, src_iter,
                                                      w_layer, w_iter, bias, dst_layer, dst_iter,
                                                      UserScratchpadAttr());
          break;
      }
    } catch (const dnnl::error& e) {
      return Unsupported(n, std::string("that oneDNN refuses (") + e.what() + ")");
    }
    y_in_scratch_ = Output(0) == kNoId || p_.directions == 2;
    state_at_ = y_in_scratch_ ? Aligned(pd_.dst_layer_desc().get_size()) : 0;
    scratchpad_at_ = state_at_ + (dst_state ? Aligned(state.get_size()) : 0);
    scratch_ = scratchpad_at_ + Aligned(pd_.scratchpad_desc().get_size());
    return Status::Ok();
  }

  int64_t scratch_bytes() const override { return scratch_; }
  int64_t weight_bytes() const override {
    return static_cast<int64_t>(pd_.weights_layer_desc().get_size() +
                                pd_.weights_iter_desc().get_size() + pd_.bias_desc().get_size());
  }

  Status Bind(const TensorBuffer& tensor, void* scratch) override {
    const Node& n = g_->node(id_);
    const bool lstm = p_.cell == RnnCell::kLstm;
    try {
      Prepack();
      char* base = static_cast<char*>(scratch);
      args_ = {
          {DNNL_ARG_WEIGHTS_LAYER, w_layer_},
          {DNNL_ARG_WEIGHTS_ITER, w_iter_},
          {DNNL_ARG_BIAS, memory(pd_.bias_desc(), engine_, bias_.data())},
          {DNNL_ARG_SCRATCHPAD, memory(pd_.scratchpad_desc(), engine_, base + scratchpad_at_)}};
      void* zeros = zero_state_.data();
      void* discard = base + state_at_;
      FUSOR_RETURN_IF_ERROR(
          BindArg(DNNL_ARG_SRC_LAYER, pd_.src_layer_desc(), tensor, n.input(0), nullptr));
      FUSOR_RETURN_IF_ERROR(
          BindArg(DNNL_ARG_SRC_ITER, pd_.src_iter_desc(), tensor, n.input(5), zeros));
      FUSOR_RETURN_IF_ERROR(
          BindArg(DNNL_ARG_DST_ITER, pd_.dst_iter_desc(), tensor, Output(1), discard));
      if (lstm) {
        FUSOR_RETURN_IF_ERROR(
            BindArg(DNNL_ARG_SRC_ITER_C, pd_.src_iter_c_desc(), tensor, n.input(6), zeros));
        FUSOR_RETURN_IF_ERROR(
            BindArg(DNNL_ARG_DST_ITER_C, pd_.dst_iter_c_desc(), tensor, Output(2), discard));
      }
      y_ = Output(0) == kNoId ? nullptr : static_cast<float*>(tensor(Output(0)));
      if (Output(0) != kNoId && y_ == nullptr) return Missing(Output(0));
      y_layer_ = y_in_scratch_ ? reinterpret_cast<float*>(base) : y_;
      args_[DNNL_ARG_DST_LAYER] = memory(pd_.dst_layer_desc(), engine_, y_layer_);
      prim_ = dnnl::primitive(pd_);
    } catch (const dnnl::error& e) {
      return Status::Internal("oneDNN: " + std::string(e.what()) + " while binding " +
                              NodeLabel(n));
    }
    return Status::Ok();
  }

  void Run() override {
    prim_.execute(stream_, args_);
    stream_.wait();
    if (y_ != nullptr && p_.directions == 2) SplitDirections();
  }

  std::string Describe() const override {
    return std::string(CellName(p_.cell)) + " oneDNN rnn " + pd_.impl_info_str() + ", not fused";
  }

 private:
  static int64_t Aligned(size_t bytes) { return (static_cast<int64_t>(bytes) + 63) / 64 * 64; }

  TensorId Output(size_t i) const { return MaterializedOutput(*g_, id_, materialized_, i); }
  Status Missing(TensorId t) const { return NoBufferFor(*g_, id_, t); }

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

  // ONNX W [dirs, G hid, in], R [dirs, G hid, hid], B [dirs, 2 G hid] (Wb then Rb) to oneDNN's
  // ldigo weights and ldgo bias, gates reordered. The bias of a gate is Wb + Rb, except that
  // lbr_gru_forward keeps the candidate's Rb apart, as its fourth bias gate (it multiplies
  // R h + Rb by the reset gate).
  void ConvertWeights(const HostTensor& w, const HostTensor& r, const HostTensor* b) {
    const int64_t hid = p_.hidden, in = p_.input, gates = p_.gates(), dirs = p_.directions;
    w_user_.assign(dirs * in * gates * hid, 0.0f);
    r_user_.assign(dirs * hid * gates * hid, 0.0f);
    bias_.assign(dirs * p_.bias_gates() * hid, 0.0f);
    const bool lbr = p_.cell == RnnCell::kLbrGru;
    for (int64_t d = 0; d < dirs; ++d) {
      for (int64_t gate = 0; gate < gates; ++gate) {
        const int64_t src_gate = OnnxGate(p_.cell, gate);
        for (int64_t o = 0; o < hid; ++o) {
          const int64_t row = (d * gates + src_gate) * hid + o;
          for (int64_t i = 0; i < in; ++i)
            w_user_[((d * in + i) * gates + gate) * hid + o] = w.f[row * in + i];
          for (int64_t i = 0; i < hid; ++i)
            r_user_[((d * hid + i) * gates + gate) * hid + o] = r.f[row * hid + i];
          if (b == nullptr) continue;
          const float wb = b->f[(d * 2 * gates + src_gate) * hid + o];
          const float rb = b->f[(d * 2 * gates + gates + src_gate) * hid + o];
          const bool apart = lbr && gate == 2;
          bias_[(d * p_.bias_gates() + gate) * hid + o] = apart ? wb : wb + rb;
          if (apart) bias_[(d * p_.bias_gates() + 3) * hid + o] = rb;
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
    w_layer_ = pack(w_user_, {1, p_.directions, p_.input, p_.gates(), p_.hidden},
                    pd_.weights_layer_desc());
    w_iter_ = pack(r_user_, {1, p_.directions, p_.hidden, p_.gates(), p_.hidden},
                   pd_.weights_iter_desc());
    stream_.wait();
  }

  // oneDNN's bidirectional dst_layer is [seq, batch, dirs, hid]; ONNX's Y is [seq, dirs, batch,
  // hid].
  void SplitDirections() {
    const int64_t hid = p_.hidden;
    for (int64_t t = 0; t < p_.seq; ++t) {
      for (int64_t b = 0; b < p_.batch; ++b) {
        for (int64_t d = 0; d < 2; ++d) {
          const float* src = y_layer_ + ((t * p_.batch + b) * 2 + d) * hid;
          std::memcpy(y_ + ((t * 2 + d) * p_.batch + b) * hid, src, hid * sizeof(float));
        }
      }
    }
  }

  const Graph* g_;
  NodeId id_;
  RnnPrimitive p_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::rnn_primitive_desc_base pd_;
  dnnl::primitive prim_;
  std::vector<float> w_user_, r_user_, bias_;
  memory w_layer_, w_iter_;
  std::vector<TensorId> materialized_;
  std::unordered_map<int, memory> args_;
  bool y_in_scratch_ = false;
  std::vector<float> zero_state_;  // initial_h (or LSTM's initial_c) when the node lacks it.
  int64_t state_at_ = 0, scratchpad_at_ = 0, scratch_ = 0;
  float* y_ = nullptr;
  float* y_layer_ = nullptr;
};

}  // namespace

StatusOr<std::unique_ptr<GroupKernel>> BuildRnnKernel(const KernelContext& ctx, NodeId id,
                                                      std::optional<RnnImplementation> forced) {
  const Node& n = ctx.g->node(id);
  FUSOR_ASSIGN_OR_RETURN(RnnPrimitive p, RnnPrimitiveForm(*ctx.g, n));
  FUSOR_RETURN_IF_ERROR(CheckWeightsKnown(ctx, n));
  if (forced) p.implementation = *forced;
  if (p.implementation == RnnImplementation::kLoop) return BuildRnnLoopKernel(ctx, id, p);
  auto kernel = std::make_unique<RnnKernel>(ctx, id, p);
  FUSOR_RETURN_IF_ERROR(kernel->Create(ctx));
  return std::unique_ptr<GroupKernel>(std::move(kernel));
}

}  // namespace fusor
