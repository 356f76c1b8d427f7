// Kernels made of our own loops: a fused loop group, and fused row reductions whose elementwise
// prologue is evaluated inside the reduction (the prologue's values never reach memory).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include <omp.h>

#include "graph/op_registry.h"
#include "lowering/threading.h"
#include "runtime/group_kernel.h"
#include "runtime/op_params.h"
#include "runtime/vector_math.h"

namespace fusor {
namespace {

std::string NodeList(const Graph& g, const std::vector<NodeId>& nodes) {
  std::string s;
  for (NodeId id : nodes) s += (s.empty() ? "" : ",") + g.node(id).op_type;
  return s;
}

Status BindLoop(FusedLoop* loop, const GroupKernel::TensorBuffer& tensor) {
  for (TensorId t : loop->leaves()) loop->Bind(t, tensor(t));
  for (TensorId t : loop->outputs()) loop->Bind(t, tensor(t));
  if (!loop->IsBound()) return Status::Internal("fused loop has unbound tensors");
  return Status::Ok();
}

class LoopKernel : public GroupKernel {
 public:
  LoopKernel(std::unique_ptr<FusedLoop> loop, std::string label)
      : loop_(std::move(loop)), label_(std::move(label)) {}
  Status Bind(const TensorBuffer& tensor, void*) override { return BindLoop(loop_.get(), tensor); }
  void Run() override { loop_->Run(); }
  std::string Describe() const override {
    const int chained = loop_->chained_values();
    return "fused loop [" + label_ + "]" +
           (chained > 0
                ? ", " + std::to_string(chained) + " values only in registers (single-pass chains)"
                : "") +
           (loop_->streams() ? ", streams (no tile buffers, longer tiles)" : "");
  }

 private:
  std::unique_ptr<FusedLoop> loop_;
  std::string label_;
};

// Sum and max of n floats in two independent 8-float vectors, so the adds do not wait on each
// other and the horizontal step is a short tree. GCC vector types, not a 16-float lane array
// left to the vectoriser, whose scalar 16-step horizontal sum cost a row of 49 (GlobalAveragePool
// over 7x7) 6.2 ns and a row of 768 42 ns; these take 4.1 and 32 ns (AVX2 clone, -O3, measured
// on an AVX-512 EPYC). Rows shorter than one vector take the scalar loop alone.
using Floats8 = float __attribute__((vector_size(32)));

// Unaligned load; by out-parameter, as returning a 32-byte vector from a function compiled
// without AVX would change its ABI (-Wpsabi).
__attribute__((always_inline)) inline void Load8(const float* p, Floats8* v) {
  std::memcpy(v, p, sizeof *v);
}

FUSOR_VECTOR_CLONES float SumOf(const float* p, int64_t n) {
  if (n < 8) return std::accumulate(p, p + n, 0.0f);
  Floats8 a = {}, b = {};
  int64_t i = 0;
  Floats8 x, y;
  for (; i + 16 <= n; i += 16) {
    Load8(p + i, &x);
    Load8(p + i + 8, &y);
    a += x;
    b += y;
  }
  if (i + 8 <= n) {
    Load8(p + i, &x);
    a += x;
    i += 8;
  }
  a += b;
  float sum = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
  for (; i < n; ++i) sum += p[i];
  return sum;
}

FUSOR_VECTOR_CLONES float MaxOf(const float* p, int64_t n) {
  constexpr float kLow = -std::numeric_limits<float>::infinity();
  if (n < 8)
    return std::accumulate(p, p + n, kLow, [](float m, float v) { return std::max(m, v); });
  Floats8 a = {kLow, kLow, kLow, kLow, kLow, kLow, kLow, kLow}, b = a;
  int64_t i = 0;
  Floats8 x, y;
  for (; i + 16 <= n; i += 16) {
    Load8(p + i, &x);
    Load8(p + i + 8, &y);
    a = a > x ? a : x;
    b = b > y ? b : y;
  }
  if (i + 8 <= n) {
    Load8(p + i, &x);
    a = a > x ? a : x;
    i += 8;
  }
  a = a > b ? a : b;
  float m = kLow;
  for (int j = 0; j < 8; ++j) m = std::max(m, a[j]);
  for (; i < n; ++i) m = std::max(m, p[i]);
  return m;
}

// Softmax of the row x (n values) into dst, through `row` (which may be x): dst may alias the
// reduction's input, so x is read whole before dst is written. Vector clones (vector_math.h): the
// Exp loop is most of a softmax's time.
FUSOR_VECTOR_CLONES void SoftmaxRow(const float* x, float* row, float* dst, int64_t n) {
  float mx = MaxOf(x, n);
  for (int64_t i = 0; i < n; ++i) row[i] = vector_math::Exp(x[i] - mx);
  float inv = 1.0f / SumOf(row, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = row[i] * inv;
}

// A reduction over the trailing `len` elements of each row of its input, which is read as it is
// stored or computed by a fused prologue loop; an epilogue (if any) then runs in place on the
// output.
class RowReductionKernel : public GroupKernel {
 public:
  RowReductionKernel(std::unique_ptr<FusedLoop> prologue, std::unique_ptr<FusedLoop> epilogue,
                     TensorId input, TensorId output, TensorId final_output, RowOp op, int64_t rows,
                     int64_t len, int64_t rows_per_pull, std::string label)
      : prologue_(std::move(prologue)),
        epilogue_(std::move(epilogue)),
        input_(input),
        output_(output),
        final_(final_output),
        op_(op),
        rows_(rows),
        len_(len),
        rows_per_pull_(rows_per_pull),
        label_(std::move(label)) {}

  Status Bind(const TensorBuffer& tensor, void*) override {
    if (prologue_) {
      for (TensorId t : prologue_->leaves()) prologue_->Bind(t, tensor(t));
    } else {
      in_ = static_cast<const float*>(tensor(input_));
    }
    out_ = static_cast<float*>(tensor(final_));
    if (epilogue_ == nullptr) return Status::Ok();
    // In place: the reduction writes the group's output buffer and the epilogue rewrites it.
    for (TensorId t : epilogue_->leaves()) epilogue_->Bind(t, t == output_ ? out_ : tensor(t));
    epilogue_->Bind(final_, out_);
    return Status::Ok();
  }

  void Run() override {
    // Small reductions run on the calling thread: waking the team costs more than they do. They
    // enter no parallel region at all: even one that does not fork costs ~2.5 us in libgomp. Nor
    // does a group the executor runs serially (one OpenMP thread; lowering/threading.h).
    if (RowReductionForks(rows_, len_) && omp_get_max_threads() > 1) {
#pragma omp parallel
      RunBlocks();
    } else {
      RunBlocks();
    }
    if (epilogue_) epilogue_->Run();
  }

  std::string Describe() const override {
    return "fused row reduction [" + label_ + "]" + (epilogue_ ? " + in-place epilogue loop" : "");
  }

 private:
  // Pulls through the prologue: a block of short rows, or a chunk of a long one (the record's
  // prologue_pulls).
  int64_t RowsPerBlock() const { return rows_per_pull_; }

  // This thread's share of the row blocks, with its own scratch (and row buffer for softmax).
  // Called inside a parallel region, the blocks are split across the team; outside one, the
  // orphaned `omp for` runs them all on the calling thread (no team is set up).
  void RunBlocks() const {
    auto scratch = prologue_ ? prologue_->NewScratch() : NoScratch();
    std::vector<float> row(op_ == RowOp::kSoftmax ? len_ : 0);
    const int64_t blocks = (rows_ + RowsPerBlock() - 1) / RowsPerBlock();
#pragma omp for schedule(static) nowait
    for (int64_t b = 0; b < blocks; ++b) RunBlock(b, row.data(), scratch.get());
  }

  void RunBlock(int64_t b, float* row, LoopScratch* s) const {
    const int64_t per = RowsPerBlock(), r0 = b * per, n = std::min(per, rows_ - r0);
    if (per == 1) return RunLongRow(r0, row, s);
    const float* p = Pull(r0 * len_, n * len_, s);
    for (int64_t j = 0; j < n; ++j) {
      const float* x = p + j * len_;
      if (op_ == RowOp::kSoftmax) {
        Softmax(x, row, out_ + (r0 + j) * len_);
      } else {
        out_[r0 + j] = Finish(op_ == RowOp::kMax ? MaxOf(x, len_) : SumOf(x, len_));
      }
    }
  }

  static std::unique_ptr<LoopScratch, void (*)(LoopScratch*)> NoScratch() {
    return {nullptr, [](LoopScratch*) {}};
  }

  // Input elements [offset, offset + n): computed by the prologue, or where they are stored.
  const float* Pull(int64_t offset, int64_t n, LoopScratch* s) const {
    return prologue_ ? prologue_->EvalRange(input_, offset, n, s) : in_ + offset;
  }

  float Finish(double acc) const {
    return static_cast<float>(op_ == RowOp::kMean ? acc / static_cast<double>(len_) : acc);
  }

  void RunLongRow(int64_t r, float* row, LoopScratch* s) const {
    if (op_ == RowOp::kSoftmax) {
      for (int64_t c = 0; c < len_; c += kRowReductionPullElements) {
        int64_t n = std::min(kRowReductionPullElements, len_ - c);
        const float* p = Pull(r * len_ + c, n, s);
        std::copy(p, p + n, row + c);
      }
      Softmax(row, row, out_ + r * len_);
      return;
    }
    double acc = op_ == RowOp::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t c = 0; c < len_; c += kRowReductionPullElements) {
      int64_t n = std::min(kRowReductionPullElements, len_ - c);
      const float* p = Pull(r * len_ + c, n, s);
      if (op_ == RowOp::kMax) {
        acc = std::max(acc, static_cast<double>(MaxOf(p, n)));
      } else {
        acc += SumOf(p, n);
      }
    }
    out_[r] = Finish(acc);
  }

  void Softmax(const float* x, float* row, float* dst) const { SoftmaxRow(x, row, dst, len_); }

  std::unique_ptr<FusedLoop> prologue_, epilogue_;
  TensorId input_, output_, final_;
  RowOp op_;
  int64_t rows_, len_, rows_per_pull_;
  std::string label_;
  const float* in_ = nullptr;
  float* out_ = nullptr;
};

// Rows per pull of a row reduction over `rows` rows of `len` making the record's `pulls`: whole
// rows spread over the pulls, or one row (pulled chunk by chunk) per block when there are as many
// pulls as rows or more. More rows than one pull holds would overrun the prologue's tile.
StatusOr<int64_t> RowsPerPull(const Node& n, int64_t pulls, int64_t rows, int64_t len) {
  const int64_t per = pulls >= rows ? 1 : (rows + std::max<int64_t>(pulls, 1) - 1) / pulls;
  if (pulls <= 0 || (per > 1 && per * len > kRowReductionPullElements)) {
    return Status::Internal(NodeLabel(n) + ": the record's " + std::to_string(pulls) +
                            " prologue pulls do not fit " + std::to_string(rows) + " rows of " +
                            std::to_string(len) + " in pulls of at most " +
                            std::to_string(kRowReductionPullElements) + " elements");
  }
  return per;
}

}  // namespace

StatusOr<std::unique_ptr<GroupKernel>> BuildLoopKernel(const KernelContext& ctx,
                                                       const LoopProgram& program) {
  FUSOR_ASSIGN_OR_RETURN(auto loop, FusedLoop::Build(*ctx.g, program, ctx.known,
                                                     FusedLoop::Tiles::kLongerWhenStreaming));
  std::vector<NodeId> nodes;
  for (const LoopStep& step : program.steps) {
    if (nodes.empty() || nodes.back() != step.node) nodes.push_back(step.node);
  }
  return std::unique_ptr<GroupKernel>(new LoopKernel(std::move(loop), NodeList(*ctx.g, nodes)));
}

StatusOr<std::unique_ptr<GroupKernel>> BuildRowReductionKernel(const KernelContext& ctx,
                                                               const GroupLowering& record) {
  const Graph& g = *ctx.g;
  const std::vector<NodeId>& prologue = record.before;
  const std::vector<NodeId>& epilogue = record.after;
  const Node& r = g.node(record.center);
  RowReduction form = RowReductionOf(g, r);
  if (form.len == 0) return Status::Unimplemented(NodeLabel(r) + ": no fused row form");
  const int64_t len = form.len;
  TensorId input = r.inputs[0], output = r.outputs[0];
  TensorId final_output = epilogue.empty() ? output : g.node(epilogue.back()).outputs[0];
  std::unique_ptr<FusedLoop> pro;
  if (!prologue.empty()) {
    FUSOR_ASSIGN_OR_RETURN(pro, FusedLoop::Build(g, record.prologue, ctx.known));
  }
  std::unique_ptr<FusedLoop> epi;
  if (!epilogue.empty()) {
    FUSOR_ASSIGN_OR_RETURN(epi, FusedLoop::Build(g, record.loop, ctx.known));
  }
  int64_t rows = g.tensor(input).num_elements() / len;
  FUSOR_ASSIGN_OR_RETURN(int64_t rows_per_pull, RowsPerPull(r, record.prologue_pulls, rows, len));
  std::vector<NodeId> all = prologue;
  all.push_back(record.center);
  all.insert(all.end(), epilogue.begin(), epilogue.end());
  return std::unique_ptr<GroupKernel>(new RowReductionKernel(std::move(pro), std::move(epi), input,
                                                             output, final_output, form.op, rows,
                                                             len, rows_per_pull, NodeList(g, all)));
}

}  // namespace fusor
