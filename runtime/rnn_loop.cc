#include "runtime/rnn_loop.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/node_attrs.h"
#include "runtime/cache_line_vector.h"
#include "runtime/host_tensor.h"
#include "runtime/loop_simd.h"
#include "runtime/vector_math.h"

namespace fusor {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

// Hidden units per panel block: one AVX-512 vector, two AVX2 ones.
constexpr int64_t kUnitBlock = 16;

// What one step reads and writes: the kernel's weights and scratch. Per direction d and batch
// entry b, a state row starts at (d * batch + b) * padded (hidden rounded up to the block; the
// padding units compute zeros nobody reads).
struct Recurrence {
  RnnCell cell = RnnCell::kLstm;
  int64_t seq = 0, batch = 0, hidden = 0, padded = 0, dirs = 1, gates = 4, blocks = 0;
  bool reverse = false;
  // [dirs][blocks][hidden k][panel gates][kUnitBlock]: R's rows of a block's units, every gate
  // the panel holds side by side per k (LSTM i, o, f, c; GRU z, r (, h under lbr)).
  const float* panels = nullptr;
  // GRU without lbr: [dirs][blocks][hidden k][kUnitBlock], the candidate's R, applied to r * h.
  const float* candidate = nullptr;
  const float* projection = nullptr;  // [seq][batch][dirs][gates][padded]: X W^T + bias.
  const float* rbh = nullptr;         // GRU lbr: [dirs][padded], the candidate's recurrent bias.
  float* h[2] = {nullptr, nullptr};   // h_{t-1}, h_t by step parity: [dirs][batch][padded].
  float* c = nullptr;                 // LSTM: [dirs][batch][padded].
  float* rh = nullptr;                // GRU without lbr: r * h_{t-1}.
  float* z = nullptr;                 // GRU without lbr: the update gate, between the phases.
  float* y = nullptr;                 // ONNX Y [seq][dirs][batch][hidden], or null.

  // Gate rows a panel holds per k.
  int64_t panel_gates() const { return cell == RnnCell::kGru ? 2 : gates; }
  // The time index direction d processes at step `step`.
  int64_t Time(int64_t d, int64_t step) const {
    const bool backwards = dirs == 2 ? d == 1 : reverse;
    return backwards ? seq - 1 - step : step;
  }
  int64_t Row(int64_t d, int64_t b) const { return (d * batch + b) * padded; }
};

template <typename V>
FUSOR_INLINE V Load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V>
FUSOR_INLINE void Store(float* p, V v) {
  std::memcpy(p, &v, sizeof(V));
}

// acc[r][g * kV + v] = sum_k h[r * ldh + k] * panel[k][g][v * lanes ...]: kRows batch rows of
// the block's kG gate rows. The panel streams once (from L2 at large hidden sizes); h is
// broadcast one value at a time.
template <typename V, int kG, int kRows>
FUSOR_INLINE void Products(const float* panel, const float* h, int64_t ldh, int64_t len,
                           V (&acc)[kRows][kG * (kUnitBlock / vector_math::kLanes<V>)]) {
  constexpr int kL = vector_math::kLanes<V>, kQ = kG * (kUnitBlock / kL);
  _Pragma("GCC unroll 16") for (int r = 0; r < kRows; ++r) {
    _Pragma("GCC unroll 16") for (int q = 0; q < kQ; ++q) acc[r][q] = vector_math::Splat<V>(0.0f);
  }
  int64_t k = 0;
  if constexpr (kRows == 1) {
    // One batch row has a single FMA chain per accumulator: a second set over the odd k keeps
    // twice the loads in flight.
    V odd[kQ];
    _Pragma("GCC unroll 16") for (int q = 0; q < kQ; ++q) odd[q] = vector_math::Splat<V>(0.0f);
    for (; k + 1 < len; k += 2) {
      const float* w = panel + k * kG * kUnitBlock;
      const V h0 = vector_math::Splat<V>(h[k]), h1 = vector_math::Splat<V>(h[k + 1]);
      _Pragma("GCC unroll 16") for (int q = 0; q < kQ; ++q) {
        acc[0][q] += h0 * Load<V>(w + q * kL);
        odd[q] += h1 * Load<V>(w + kG * kUnitBlock + q * kL);
      }
    }
    _Pragma("GCC unroll 16") for (int q = 0; q < kQ; ++q) acc[0][q] += odd[q];
  }
  for (; k < len; ++k) {
    const float* w = panel + k * kG * kUnitBlock;
    V hv[kRows];
    _Pragma("GCC unroll 16") for (int r = 0; r < kRows; ++r) {
      hv[r] = vector_math::Splat<V>(h[r * ldh + k]);
    }
    _Pragma("GCC unroll 16") for (int q = 0; q < kQ; ++q) {
      const V wq = Load<V>(w + q * kL);
      _Pragma("GCC unroll 16") for (int r = 0; r < kRows; ++r) acc[r][q] += hv[r] * wq;
    }
  }
}

// One block of units (offset j0) of direction d at time tt, for batch rows b0 .. b0 + kRows:
// the gate products and the cell's arithmetic. `phase` 1 is the candidate of GRU without lbr.
template <typename V, int kRows>
FUSOR_INLINE void Block(const Recurrence& s, int64_t d, int64_t blk, int64_t tt, int64_t b0,
                        int phase, float* h_next) {
  using vector_math::Sigmoid;
  using vector_math::Tanh;
  constexpr int kL = vector_math::kLanes<V>, kV = kUnitBlock / kL;
  const int64_t j0 = blk * kUnitBlock, pad = s.padded;
  const float* h_prev = s.h[0] == h_next ? s.h[1] : s.h[0];
  const int64_t panel_at = (d * s.blocks + blk) * s.hidden * kUnitBlock;
  auto gx = [&](int64_t b, int64_t g) {
    return s.projection + ((tt * s.batch + b) * s.dirs + d) * s.gates * pad + g * pad + j0;
  };
  const int64_t keep = std::min(kUnitBlock, s.hidden - j0);
  auto store_y = [&](int64_t b) {
    if (s.y != nullptr) {
      std::memcpy(s.y + ((tt * s.dirs + d) * s.batch + b) * s.hidden + j0,
                  h_next + s.Row(d, b) + j0, keep * sizeof(float));
    }
  };
  if (s.cell == RnnCell::kLstm) {
    V acc[kRows][4 * kV];
    Products<V, 4, kRows>(s.panels + panel_at * 4, h_prev + s.Row(d, b0), pad, s.hidden, acc);
    for (int r = 0; r < kRows; ++r) {
      const int64_t b = b0 + r, at = s.Row(d, b) + j0;
      _Pragma("GCC unroll 4") for (int v = 0; v < kV; ++v) {
        const V i = Sigmoid(acc[r][v] + Load<V>(gx(b, 0) + v * kL));
        const V o = Sigmoid(acc[r][kV + v] + Load<V>(gx(b, 1) + v * kL));
        const V f = Sigmoid(acc[r][2 * kV + v] + Load<V>(gx(b, 2) + v * kL));
        const V g = Tanh(acc[r][3 * kV + v] + Load<V>(gx(b, 3) + v * kL));
        const V c = f * Load<V>(s.c + at + v * kL) + i * g;
        Store(s.c + at + v * kL, c);
        Store(h_next + at + v * kL, o * Tanh(c));
      }
      store_y(b);
    }
  } else if (s.cell == RnnCell::kLbrGru) {
    V acc[kRows][3 * kV];
    Products<V, 3, kRows>(s.panels + panel_at * 3, h_prev + s.Row(d, b0), pad, s.hidden, acc);
    for (int r = 0; r < kRows; ++r) {
      const int64_t b = b0 + r, at = s.Row(d, b) + j0;
      _Pragma("GCC unroll 4") for (int v = 0; v < kV; ++v) {
        const V z = Sigmoid(acc[r][v] + Load<V>(gx(b, 0) + v * kL));
        const V rg = Sigmoid(acc[r][kV + v] + Load<V>(gx(b, 1) + v * kL));
        const V rbh = Load<V>(s.rbh + d * pad + j0 + v * kL);
        const V n = Tanh(Load<V>(gx(b, 2) + v * kL) + rg * (acc[r][2 * kV + v] + rbh));
        const V hp = Load<V>(h_prev + at + v * kL);
        Store(h_next + at + v * kL, n + z * (hp - n));
      }
      store_y(b);
    }
  } else if (phase == 0) {  // GRU: the update and reset gates, and r * h_{t-1}.
    V acc[kRows][2 * kV];
    Products<V, 2, kRows>(s.panels + panel_at * 2, h_prev + s.Row(d, b0), pad, s.hidden, acc);
    for (int r = 0; r < kRows; ++r) {
      const int64_t at = s.Row(d, b0 + r) + j0;
      _Pragma("GCC unroll 4") for (int v = 0; v < kV; ++v) {
        Store(s.z + at + v * kL, Sigmoid(acc[r][v] + Load<V>(gx(b0 + r, 0) + v * kL)));
        const V rg = Sigmoid(acc[r][kV + v] + Load<V>(gx(b0 + r, 1) + v * kL));
        Store(s.rh + at + v * kL, rg * Load<V>(h_prev + at + v * kL));
      }
    }
  } else {  // GRU: the candidate over r * h_{t-1}, and h_t.
    V acc[kRows][kV];
    Products<V, 1, kRows>(s.candidate + panel_at, s.rh + s.Row(d, b0), pad, s.hidden, acc);
    for (int r = 0; r < kRows; ++r) {
      const int64_t b = b0 + r, at = s.Row(d, b) + j0;
      _Pragma("GCC unroll 4") for (int v = 0; v < kV; ++v) {
        const V n = Tanh(acc[r][v] + Load<V>(gx(b, 2) + v * kL));
        const V z = Load<V>(s.z + at + v * kL);
        const V hp = Load<V>(h_prev + at + v * kL);
        Store(h_next + at + v * kL, n + z * (hp - n));
      }
      store_y(b);
    }
  }
}

// Items [from, to) (item = direction * blocks + block) of step `step`, batch rows kRows at a time.
template <typename V, int kRows>
FUSOR_INLINE void StepOf(const Recurrence& s, int64_t step, int64_t from, int64_t to, int phase) {
  float* h_next = s.h[(step + 1) % 2];
  for (int64_t item = from; item < to; ++item) {
    const int64_t d = item / s.blocks, blk = item % s.blocks, tt = s.Time(d, step);
    int64_t b = 0;
    for (; b + kRows <= s.batch; b += kRows) Block<V, kRows>(s, d, blk, tt, b, phase, h_next);
    for (; b < s.batch; ++b) Block<V, 1>(s, d, blk, tt, b, phase, h_next);
  }
}

// The step at each ISA level, in its register width. AVX-512 carries 4 batch rows (16 LSTM
// accumulators of its 32 registers); AVX2 and SSE one (8 and 16 of their 16).
[[gnu::target("arch=x86-64-v4")]] void StepAvx512(const Recurrence& s, int64_t step, int64_t from,
                                                  int64_t to, int phase) {
  StepOf<vector_math::F16, 4>(s, step, from, to, phase);
}
[[gnu::target("arch=x86-64-v3")]] void StepAvx2(const Recurrence& s, int64_t step, int64_t from,
                                                int64_t to, int phase) {
  StepOf<vector_math::F8, 1>(s, step, from, to, phase);
}
void StepSse(const Recurrence& s, int64_t step, int64_t from, int64_t to, int phase) {
  StepOf<vector_math::F4, 1>(s, step, from, to, phase);
}

using StepFn = void (*)(const Recurrence&, int64_t, int64_t, int64_t, int);

StepFn StepFor(ChainIsa isa) {
  switch (isa) {
    case ChainIsa::kAvx512:
      return &StepAvx512;
    case ChainIsa::kAvx2:
      return &StepAvx2;
    case ChainIsa::kSse:
      break;
  }
  return &StepSse;
}

const char* IsaName(ChainIsa isa) {
  return isa == ChainIsa::kAvx512 ? "avx512" : isa == ChainIsa::kAvx2 ? "avx2" : "sse";
}

const char* CellName(RnnCell cell) {
  return cell == RnnCell::kLstm ? "LSTM" : cell == RnnCell::kGru ? "GRU" : "GRU (lbr)";
}

int64_t Aligned(int64_t bytes) { return (bytes + 63) / 64 * 64; }

class RnnLoopKernel : public GroupKernel {
 public:
  RnnLoopKernel(const KernelContext& ctx, NodeId id, const RnnPrimitive& p)
      : g_(ctx.g),
        id_(id),
        p_(p),
        engine_(*ctx.engine),
        stream_(*ctx.stream),
        materialized_(ctx.outputs),
        isa_(BestChainIsa()) {
    s_.cell = p.cell;
    s_.seq = p.seq;
    s_.batch = p.batch;
    s_.hidden = p.hidden;
    s_.padded = (p.hidden + kUnitBlock - 1) / kUnitBlock * kUnitBlock;
    s_.dirs = p.directions;
    s_.gates = p.gates();
    s_.blocks = s_.padded / kUnitBlock;
    s_.reverse = p.reverse;
  }

  Status Create(const KernelContext& ctx) {
    const Node& n = g_->node(id_);
    Repack(*ctx.known(n.inputs[1]), *ctx.known(n.inputs[2]),
           n.input(3) == kNoId ? nullptr : ctx.known(n.inputs[3]));
    const int64_t rows = p_.seq * p_.batch, cols = Columns();
    const memory::desc src({rows, p_.input}, memory::data_type::f32, tag::ab);
    const memory::desc weights({p_.input, cols}, memory::data_type::f32, tag::any);
    const memory::desc bias({1, cols}, memory::data_type::f32, tag::ab);
    const memory::desc dst({rows, cols}, memory::data_type::f32, tag::ab);
    const dnnl::primitive_attr attr = UserScratchpadAttr();
    try {
      pd_ = dnnl::matmul::primitive_desc(engine_, src, weights, bias, dst, attr);
    } catch (const dnnl::error& e) {
      return Status::Unimplemented(NodeLabel(n) + ": " + n.op_type +
                                   " input projection that oneDNN's matmul refuses (" + e.what() +
                                   "); it runs through the reference fallback");
    }
    const int64_t state = s_.dirs * s_.batch * s_.padded * 4;
    const bool gru = p_.cell == RnnCell::kGru;
    at_.projection = 0;
    at_.h = Aligned(rows * cols * 4);
    at_.c = at_.h + 2 * Aligned(state);
    at_.rh = at_.c + Aligned(state);
    at_.z = at_.rh + (gru ? Aligned(state) : 0);
    at_.scratchpad = at_.z + (gru ? Aligned(state) : 0);
    scratch_ = at_.scratchpad + Aligned(static_cast<int64_t>(pd_.scratchpad_desc().get_size()));
    return Status::Ok();
  }

  int64_t scratch_bytes() const override { return scratch_; }
  int64_t weight_bytes() const override {
    return static_cast<int64_t>(pd_.weights_desc().get_size() +
                                (panels_.size() + candidate_.size() + bias_.size() + rbh_.size()) *
                                    sizeof(float));
  }

  Status Bind(const TensorBuffer& tensor, void* scratch) override {
    const Node& n = g_->node(id_);
    char* base = static_cast<char*>(scratch);
    try {
      memory user(memory::desc({p_.input, Columns()}, memory::data_type::f32, tag::ba), engine_,
                  w_user_.data());
      weights_ = memory(pd_.weights_desc(), engine_);
      dnnl::reorder(user, weights_).execute(stream_, user, weights_);
      stream_.wait();
      w_user_ = {};
      void* x = tensor(n.inputs[0]);
      if (x == nullptr) return Missing(n.inputs[0]);
      args_ = {
          {DNNL_ARG_SRC, memory(pd_.src_desc(), engine_, x)},
          {DNNL_ARG_WEIGHTS, weights_},
          {DNNL_ARG_BIAS, memory(pd_.bias_desc(), engine_, bias_.data())},
          {DNNL_ARG_DST, memory(pd_.dst_desc(), engine_, base + at_.projection)},
          {DNNL_ARG_SCRATCHPAD, memory(pd_.scratchpad_desc(), engine_, base + at_.scratchpad)}};
      projection_ = dnnl::matmul(pd_);
    } catch (const dnnl::error& e) {
      return Status::Internal("oneDNN: " + std::string(e.what()) + " while binding " +
                              NodeLabel(n));
    }
    auto floats = [&](int64_t at) { return reinterpret_cast<float*>(base + at); };
    s_.projection = floats(at_.projection);
    s_.h[0] = floats(at_.h);
    s_.h[1] = floats(at_.h + (at_.c - at_.h) / 2);
    s_.c = floats(at_.c);
    s_.rh = floats(at_.rh);
    s_.z = floats(at_.z);
    s_.panels = panels_.data();
    s_.candidate = candidate_.data();
    s_.rbh = rbh_.data();
    for (size_t i : {size_t{5}, size_t{6}}) {
      initial_[i - 5] = n.input(i) == kNoId ? nullptr : static_cast<float*>(tensor(n.inputs[i]));
      if (n.input(i) != kNoId && initial_[i - 5] == nullptr) return Missing(n.inputs[i]);
    }
    for (size_t i = 0; i < 3; ++i) {
      out_[i] = Output(i) == kNoId ? nullptr : static_cast<float*>(tensor(Output(i)));
      if (Output(i) != kNoId && out_[i] == nullptr) return Missing(Output(i));
    }
    s_.y = out_[0];
    return Status::Ok();
  }

  void Run() override {
    projection_.execute(stream_, args_);
    stream_.wait();
    LoadStates();
    const int64_t items = s_.dirs * s_.blocks;
    const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), items));
    const StepFn step = StepFor(isa_);
    if (threads <= 1) {
      RunSteps(step, 0, items);
    } else {
#pragma omp parallel num_threads(threads)
      {
        const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
        RunSteps(step, items * t / team, items * (t + 1) / team);
      }
    }
    StoreStates();
  }

  std::string Describe() const override {
    return std::string(CellName(p_.cell)) + " recurrence loop (" + IsaName(isa_) +
           ", projection matmul " + pd_.impl_info_str() + "), not fused";
  }

 private:
  // Columns of the projection: every direction's gates, each padded to whole blocks.
  int64_t Columns() const { return s_.dirs * s_.gates * s_.padded; }

  // The steps of the items [from, to) on this thread. The barrier publishes h_t (and GRU's
  // r * h_{t-1}) to the team; outside a parallel region it returns at once.
  void RunSteps(StepFn step, int64_t from, int64_t to) const {
    const bool two_phases = s_.cell == RnnCell::kGru;
    for (int64_t t = 0; t < s_.seq; ++t) {
      step(s_, t, from, to, 0);
      if (two_phases) {
#pragma omp barrier
        step(s_, t, from, to, 1);
      }
#pragma omp barrier
    }
  }

  // h_0 (and LSTM's c_0) from initial_h / initial_c, or zeros; padding units zero.
  void LoadStates() {
    const int64_t state = s_.dirs * s_.batch * s_.padded;
    std::fill(s_.h[0], s_.h[0] + state, 0.0f);
    std::fill(s_.h[1], s_.h[1] + state, 0.0f);
    if (p_.cell == RnnCell::kLstm) std::fill(s_.c, s_.c + state, 0.0f);
    for (int k = 0; k < 2; ++k) {
      float* to = k == 0 ? s_.h[0] : s_.c;
      if (initial_[k] == nullptr || (k == 1 && p_.cell != RnnCell::kLstm)) continue;
      for (int64_t row = 0; row < s_.dirs * s_.batch; ++row) {
        std::memcpy(to + row * s_.padded, initial_[k] + row * s_.hidden, s_.hidden * sizeof(float));
      }
    }
  }

  // Y_h (and LSTM's Y_c) from the state after the last step.
  void StoreStates() const {
    const float* from[2] = {s_.h[s_.seq % 2], s_.c};
    for (int k = 0; k < 2; ++k) {
      float* to = out_[k + 1];
      if (to == nullptr) continue;
      for (int64_t row = 0; row < s_.dirs * s_.batch; ++row) {
        std::memcpy(to + row * s_.hidden, from[k] + row * s_.padded, s_.hidden * sizeof(float));
      }
    }
  }

  TensorId Output(size_t i) const { return MaterializedOutput(*g_, id_, materialized_, i); }
  Status Missing(TensorId t) const { return NoBufferFor(*g_, id_, t); }

  // W [dirs, G hid, in] to the projection's [in, cols] (stored transposed, as ONNX's rows), B's
  // Wb + Rb (GRU lbr: the candidate's Rb apart) to its bias, R [dirs, G hid, hid] to the panels.
  void Repack(const HostTensor& w, const HostTensor& r, const HostTensor* b) {
    const int64_t hid = p_.hidden, in = p_.input, gates = s_.gates, pad = s_.padded;
    const int64_t cols = Columns();
    w_user_.assign(cols * in, 0.0f);
    bias_.assign(cols, 0.0f);
    const bool lbr = p_.cell == RnnCell::kLbrGru, gru = p_.cell == RnnCell::kGru;
    if (lbr) rbh_.assign(s_.dirs * pad, 0.0f);
    const int64_t panel_gates = s_.panel_gates();
    panels_.assign(s_.dirs * pad * hid * panel_gates, 0.0f);
    if (gru) candidate_.assign(s_.dirs * pad * hid, 0.0f);
    for (int64_t d = 0; d < s_.dirs; ++d) {
      for (int64_t g = 0; g < gates; ++g) {
        for (int64_t j = 0; j < hid; ++j) {
          const int64_t row = (d * gates + g) * hid + j, col = (d * gates + g) * pad + j;
          std::memcpy(&w_user_[col * in], &w.f[row * in], in * sizeof(float));
          if (b != nullptr) {
            const float wb = b->f[(d * 2 * gates + g) * hid + j];
            const float rb = b->f[(d * 2 * gates + gates + g) * hid + j];
            const bool apart = lbr && g == 2;
            bias_[col] = apart ? wb : wb + rb;
            if (apart) rbh_[d * pad + j] = rb;
          }
          const int64_t blk = j / kUnitBlock, u = j % kUnitBlock;
          const bool cand = gru && g == 2;
          const int64_t kg = cand ? 1 : panel_gates, gi = cand ? 0 : g;
          float* panel = (cand ? candidate_.data() : panels_.data()) +
                         (d * s_.blocks + blk) * hid * kUnitBlock * kg;
          for (int64_t k = 0; k < hid; ++k) {
            panel[(k * kg + gi) * kUnitBlock + u] = r.f[row * hid + k];
          }
        }
      }
    }
  }

  struct Offsets {
    int64_t projection = 0, h = 0, c = 0, rh = 0, z = 0, scratchpad = 0;
  };

  const Graph* g_;
  NodeId id_;
  RnnPrimitive p_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<TensorId> materialized_;
  ChainIsa isa_;
  Recurrence s_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::primitive projection_;
  memory weights_;
  std::unordered_map<int, memory> args_;
  std::vector<float> w_user_;  // Handed to oneDNN's reorder at Bind, then freed.
  // Read every step with vector loads: on whole cache lines.
  CacheLineVector<float> bias_, rbh_, panels_, candidate_;
  Offsets at_;
  int64_t scratch_ = 0;
  const float* initial_[2] = {nullptr, nullptr};  // initial_h, initial_c.
  float* out_[3] = {nullptr, nullptr, nullptr};   // Y, Y_h, Y_c (those something reads).
};

}  // namespace

StatusOr<std::unique_ptr<GroupKernel>> BuildRnnLoopKernel(const KernelContext& ctx, NodeId id,
                                                          const RnnPrimitive& form) {
  auto kernel = std::make_unique<RnnLoopKernel>(ctx, id, form);
  FUSOR_RETURN_IF_ERROR(kernel->Create(ctx));
  return std::unique_ptr<GroupKernel>(std::move(kernel));
}

}  // namespace fusor
