// Kernels built from oneDNN primitives: anchors with post-ops, reductions, and eltwise/binary
// chains. A kernel is a list of steps (reorders, the primitive, fused loops) over arguments that
// name a tensor buffer, a slice of the kernel's scratch, or memory the kernel owns (weights).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "graph/op_registry.h"
#include "graph/plan.h"
#include "lowering/kernel_form.h"
#include "lowering/layout.h"
#include "lowering/plan_legality.h"
#include "runtime/group_kernel.h"
#include "runtime/onednn_info.h"
#include "runtime/op_params.h"

namespace fusor {

dnnl::memory::desc PlainLayout(const Shape& dims) {
  Shape d = dims.empty() ? Shape{1} : dims;
  std::vector<int64_t> strides = RowMajorStrides(d);
  return dnnl::memory::desc(dnnl::memory::dims(d.begin(), d.end()), dnnl::memory::data_type::f32,
                            dnnl::memory::dims(strides.begin(), strides.end()));
}

dnnl::memory::desc ChannelBlocked(const Shape& dims) {
  bool wide = ChannelBlockForIsa(OneDnnIsa()) == 16 && dims[1] % 16 == 0;
  return dnnl::memory::desc(
      dnnl::memory::dims(dims.begin(), dims.end()), dnnl::memory::data_type::f32,
      wide ? dnnl::memory::format_tag::nChw16c : dnnl::memory::format_tag::nChw8c);
}

dnnl::primitive_attr UserScratchpadAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

TensorId MaterializedOutput(const Graph& g, NodeId id, const std::vector<TensorId>& materialized,
                            size_t i) {
  const Node& n = g.node(id);
  if (i >= n.outputs.size()) return kNoId;
  const bool read =
      std::find(materialized.begin(), materialized.end(), n.outputs[i]) != materialized.end();
  return read ? n.outputs[i] : kNoId;
}

Status NoBufferFor(const Graph& g, NodeId id, TensorId t) {
  return Status::Internal(NodeLabel(g.node(id)) + ": no buffer for '" + g.tensor(t).name + "'");
}

namespace {

using dnnl::algorithm;
using dnnl::memory;
using Dt = memory::data_type;

memory::dims Dims(const Shape& s) {
  return s.empty() ? memory::dims{1} : memory::dims(s.begin(), s.end());
}

Shape AlignRank(const Shape& s, size_t rank) {
  Shape out(rank - std::min(rank, s.size()), 1);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Post-ops

struct PostOp {
  bool binary = false;
  bool sum = false;  // A binary_add read as oneDNN's sum: dst (holding the operand) += result.
  algorithm alg = algorithm::eltwise_linear;
  float alpha = 0, beta = 0;
  TensorId operand = kNoId;  // Binary operand read from a tensor buffer...
  std::vector<float> owned;  // ...or values computed here (folded BatchNormalization).
  Shape operand_dims;        // Aligned to the chain value's rank.
};

PostOp Eltwise(algorithm alg, float alpha = 0, float beta = 0) {
  PostOp p;
  p.alg = alg;
  p.alpha = alpha;
  p.beta = beta;
  return p;
}

std::optional<std::vector<PostOp>> UnaryPostOps(const Graph& g, const Node& n,
                                                const FusedLoop::Lookup& known) {
  const std::string& op = n.op_type;
  float alpha = static_cast<float>(FloatAttrOrDefault(n, "alpha"));
  float beta = static_cast<float>(FloatAttrOrDefault(n, "beta"));
  if (op == "Relu") return std::vector<PostOp>{Eltwise(algorithm::eltwise_relu)};
  if (op == "LeakyRelu") return std::vector<PostOp>{Eltwise(algorithm::eltwise_relu, alpha)};
  if (op == "Sigmoid") return std::vector<PostOp>{Eltwise(algorithm::eltwise_logistic)};
  if (op == "Tanh") return std::vector<PostOp>{Eltwise(algorithm::eltwise_tanh)};
  if (op == "Exp") return std::vector<PostOp>{Eltwise(algorithm::eltwise_exp)};
  if (op == "Log") return std::vector<PostOp>{Eltwise(algorithm::eltwise_log)};
  if (op == "Sqrt") return std::vector<PostOp>{Eltwise(algorithm::eltwise_sqrt)};
  // ONNX fixes HardSwish at x * max(0, min(1, x / 6 + 1 / 2)); oneDNN 3 reads both from alpha,
  // beta.
  if (op == "HardSwish") {
    return std::vector<PostOp>{Eltwise(algorithm::eltwise_hardswish, 1.0f / 6, 0.5f)};
  }
  if (op == "HardSigmoid") {
    return std::vector<PostOp>{Eltwise(algorithm::eltwise_linear, alpha, beta),
                               Eltwise(algorithm::eltwise_clip_v2, 0, 1)};
  }
  if (op == "Clip") {
    auto bounds = ClipBounds(g, n, known);
    if (!bounds.ok()) return std::nullopt;
    float big = std::numeric_limits<float>::max();
    return std::vector<PostOp>{Eltwise(algorithm::eltwise_clip_v2, std::max(bounds->first, -big),
                                       std::min(bounds->second, big))};
  }
  if (op == "Cast" && g.tensor(n.outputs[0]).dtype == DType::kFloat32) {
    return std::vector<PostOp>{};
  }
  return std::nullopt;
}

std::optional<std::vector<PostOp>> ScalarPostOps(const std::string& op, float c, bool v_first) {
  using V = std::vector<PostOp>;
  if (op == "Add") return V{Eltwise(algorithm::eltwise_linear, 1, c)};
  if (op == "Mul") return V{Eltwise(algorithm::eltwise_linear, c, 0)};
  if (op == "Sub") return V{Eltwise(algorithm::eltwise_linear, v_first ? 1 : -1, v_first ? -c : c)};
  if (op == "Div" && v_first) return V{Eltwise(algorithm::eltwise_linear, 1 / c, 0)};
  if (op == "Div") return V{Eltwise(algorithm::eltwise_pow, c, -1)};
  if (op == "Pow" && v_first) return V{Eltwise(algorithm::eltwise_pow, 1, c)};
  return std::nullopt;
}

std::optional<std::vector<PostOp>> BinaryPostOps(const Graph& g, const Node& n, TensorId v,
                                                 const FusedLoop::Lookup& known) {
  const std::string& op = n.op_type;
  if (!IsBinaryArithmetic(op)) return std::nullopt;
  bool v_first = n.inputs[0] == v;
  TensorId other = v_first ? n.inputs[1] : n.inputs[0];
  const Tensor& ot = g.tensor(other);
  if (other == v) {
    if (op == "Mul") return std::vector<PostOp>{Eltwise(algorithm::eltwise_square)};
    if (op == "Add") return std::vector<PostOp>{Eltwise(algorithm::eltwise_linear, 2, 0)};
    return std::nullopt;
  }
  const HostTensor* c = ot.kind != TensorKind::kActivation ? known(other) : nullptr;
  if (c != nullptr && c->num_elements() == 1) {
    return ScalarPostOps(op, static_cast<float>(c->at(0)), v_first);
  }
  const Shape& vd = g.tensor(v).dims;
  if (op == "Pow" || (op == "Div" && !v_first) || ot.dims.size() > vd.size() ||
      ot.dtype != DType::kFloat32 || g.tensor(n.outputs[0]).dims != vd) {
    return std::nullopt;
  }
  PostOp p;
  p.binary = true;
  p.alg = op == "Add"   ? algorithm::binary_add
          : op == "Sub" ? algorithm::binary_sub
          : op == "Mul" ? algorithm::binary_mul
                        : algorithm::binary_div;
  p.operand = other;
  p.operand_dims = AlignRank(ot.dims, vd.size());
  std::vector<PostOp> ops{p};
  if (op == "Sub" && !v_first) ops.push_back(Eltwise(algorithm::eltwise_linear, -1, 0));
  return ops;
}

// Per-channel scale and shift of an inference BatchNormalization with known parameters.
bool BatchNormAffine(const Graph& /*g*/, const Node& n, const FusedLoop::Lookup& known,
                     std::vector<float>* scale, std::vector<float>* shift) {
  const HostTensor* p[4];
  for (size_t j = 0; j < 4; ++j) {
    p[j] = n.input(j + 1) == kNoId ? nullptr : known(n.inputs[j + 1]);
    if (p[j] == nullptr || !p[j]->is_float()) return false;
  }
  float eps = static_cast<float>(FloatAttrOrDefault(n, "epsilon"));
  int64_t c = p[0]->num_elements();
  scale->resize(c);
  shift->resize(c);
  for (int64_t i = 0; i < c; ++i) {
    (*scale)[i] = p[0]->f[i] / std::sqrt(p[3]->f[i] + eps);
    (*shift)[i] = p[1]->f[i] - p[2]->f[i] * (*scale)[i];
  }
  return true;
}

// The post-ops of one chain node that reads chain value `v`, or nullopt without a post-op form.
std::optional<std::vector<PostOp>> PostOpsFor(const Graph& g, const Node& n, TensorId v,
                                              const FusedLoop::Lookup& known) {
  if (n.outputs.size() != 1 || g.tensor(n.outputs[0]).dtype != DType::kFloat32) return std::nullopt;
  if (n.op_type == "BatchNormalization") {
    std::vector<float> scale, shift;
    const Shape& vd = g.tensor(v).dims;
    if (n.inputs[0] != v || vd.size() < 2 || !BatchNormAffine(g, n, known, &scale, &shift)) {
      return std::nullopt;
    }
    Shape pd(vd.size(), 1);
    pd[1] = vd[1];
    PostOp mul, add;
    mul.binary = add.binary = true;
    mul.alg = algorithm::binary_mul;
    add.alg = algorithm::binary_add;
    mul.operand_dims = add.operand_dims = pd;
    mul.owned = std::move(scale);
    add.owned = std::move(shift);
    return std::vector<PostOp>{mul, add};
  }
  if (n.inputs.size() == 1 || n.op_type == "Clip") {
    if (n.inputs[0] != v) return std::nullopt;
    return UnaryPostOps(g, n, known);
  }
  if (n.inputs.size() == 2) return BinaryPostOps(g, n, v, known);
  return std::nullopt;
}

// Appends `ops` to the chain's post-ops so far, or returns false when oneDNN 2.6 would get them
// wrong: its JIT eltwise injector keeps one set of constants per algorithm, so a second eltwise
// post-op of the same algorithm with other parameters silently reuses the first one's (seen with
// two eltwise_linear post-ops on jit:uni binary). Adjacent linear maps are merged instead.
bool AppendPostOps(std::vector<std::vector<PostOp>>* chain, std::vector<PostOp> ops) {
  std::vector<const PostOp*> seen;
  for (const auto& node : *chain) {
    for (const PostOp& p : node) seen.push_back(&p);
  }
  std::vector<PostOp> kept;
  kept.reserve(ops.size());  // `seen` points into it.
  PostOp* last = seen.empty() ? nullptr : const_cast<PostOp*>(seen.back());
  for (PostOp& p : ops) {
    if (last && !p.binary && !last->binary && p.alg == algorithm::eltwise_linear &&
        last->alg == algorithm::eltwise_linear) {
      // p(last(x)) = p.alpha * (last.alpha * x + last.beta) + p.beta.
      last->beta = p.alpha * last->beta + p.beta;
      last->alpha *= p.alpha;
      continue;
    }
    for (const PostOp* q : seen) {
      if (!p.binary && !q->binary && q->alg == p.alg &&
          (q->alpha != p.alpha || q->beta != p.beta)) {
        return false;
      }
    }
    kept.push_back(p);
    seen.push_back(&kept.back());
    last = &kept.back();
  }
  chain->push_back(std::move(kept));
  return true;
}

// The one eltwise of a gated pair (lowering/plan_legality.h): x * Sigmoid(x) is eltwise_swish
// (alpha 1), x * HardSigmoid(x) is eltwise_hardswish, x * max(0, min(1, alpha * x + beta)), with
// the HardSigmoid's alpha and beta.
PostOp GatePostOp(const Node& gate, GatedPair pair) {
  if (pair == GatedPair::kSwish) return Eltwise(algorithm::eltwise_swish, 1);
  return Eltwise(algorithm::eltwise_hardswish,
                 static_cast<float>(FloatAttrOrDefault(gate, "alpha")),
                 static_cast<float>(FloatAttrOrDefault(gate, "beta")));
}

// Post-ops for the longest prefix of `chain` (starting from value v) that has a post-op form, one
// entry per node: a gated pair's gate holds its eltwise and its Mul none.
std::vector<std::vector<PostOp>> TranslateChain(const Graph& g, const std::vector<NodeId>& chain,
                                                TensorId v, const FusedLoop::Lookup& known) {
  std::vector<std::vector<PostOp>> out;
  for (size_t i = 0; i < chain.size(); ++i) {
    const Node& n = g.node(chain[i]);
    GatedPair pair =
        i + 1 < chain.size() ? GatedPairOf(g, n, g.node(chain[i + 1])) : GatedPair::kNone;
    std::optional<std::vector<PostOp>> ops;
    if (pair != GatedPair::kNone && n.inputs[0] == v &&
        g.tensor(n.outputs[0]).dtype == DType::kFloat32) {
      ops = std::vector<PostOp>{GatePostOp(n, pair)};
    } else {
      ops = PostOpsFor(g, n, v, known);
      pair = GatedPair::kNone;
    }
    if (!ops) break;
    std::vector<std::vector<PostOp>> trial = out;
    if (!AppendPostOps(&trial, std::move(*ops))) break;
    if (pair != GatedPair::kNone) trial.emplace_back();  // The pair's Mul.
    out = std::move(trial);
    if (pair != GatedPair::kNone) ++i;
    v = g.node(chain[i]).outputs[0];
  }
  return out;
}

// Maps a binary operand's dims (aligned to the chain value) to the primitive's dst dims.
using DstView = std::function<std::optional<memory::dims>(const Shape&)>;

// The memory layout a binary operand with the given (dst-view) dims is read in; plain by default.
using OperandLayout = std::function<memory::desc(const memory::dims&)>;

memory::desc PlainDims(const memory::dims& d) { return PlainLayout(Shape(d.begin(), d.end())); }

DstView IdentityView() {
  return [](const Shape& s) { return std::optional<memory::dims>(Dims(s)); };
}

// ---------------------------------------------------------------------------------------------
// The step kernel

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
  int64_t scratch_ = 0;
};

Arg TensorArg(TensorId t, const memory::desc& md) {
  Arg a;
  a.tensor = t;
  a.md = md;
  return a;
}

Arg ScratchArg(int64_t offset, const memory::desc& md) {
  Arg a;
  a.where = Arg::kScratch;
  a.offset = offset;
  a.md = md;
  return a;
}

Arg OwnedArg(int index, const memory::desc& md) {
  Arg a;
  a.where = Arg::kOwned;
  a.owned = index;
  a.md = md;
  return a;
}

void AddReorder(StepKernel* k, const Arg& from, const Arg& to, dnnl::engine& engine) {
  Step s;
  s.prim = dnnl::reorder(dnnl::reorder::primitive_desc(engine, from.md, engine, to.md));
  s.args = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  k->steps().push_back(std::move(s));
}

// A fused loop over `nodes` running in place on `buffer_tensor`'s memory: `leaf` (the chain value
// the primitive produced) and the loop's output both live there.
Status AddTailLoop(const KernelContext& ctx, StepKernel* k, const std::vector<NodeId>& nodes,
                   TensorId leaf, TensorId out) {
  if (nodes.empty()) return Status::Ok();
  Step s;
  FUSOR_ASSIGN_OR_RETURN(s.loop, FusedLoop::Build(*ctx.g, nodes, {out}, ctx.known));
  for (TensorId t : s.loop->leaves())
    s.loop_args.push_back({t, TensorArg(t == leaf ? out : t, {})});
  s.loop_args.push_back({out, TensorArg(out, {})});
  k->steps().push_back(std::move(s));
  std::string names;
  for (NodeId id : nodes) names += (names.empty() ? "" : ",") + ctx.g->node(id).op_type;
  k->AddNote(", tail loop [" + names + "]");
  return Status::Ok();
}

// Builds a primitive_attr with the post-ops of `ops`, or nullopt when an operand does not map.
std::optional<dnnl::primitive_attr> MakeAttr(const std::vector<std::vector<PostOp>>& ops, size_t k,
                                             const DstView& view,
                                             const OperandLayout& layout = PlainDims) {
  dnnl::post_ops po;
  for (size_t i = 0; i < k; ++i) {
    for (const PostOp& p : ops[i]) {
      if (p.sum) {
        po.append_sum(1.0f);
        continue;
      }
      if (!p.binary) {
        po.append_eltwise(p.alg, p.alpha, p.beta);
        continue;
      }
      auto dims = view(p.operand_dims);
      if (!dims) return std::nullopt;
      po.append_binary(p.alg, layout(*dims));
    }
  }
  dnnl::primitive_attr attr = UserScratchpadAttr();
  attr.set_post_ops(po);
  return attr;
}

// The layout a tensor the kernel reads is stored in (KernelContext::stored), null for plain.
using StoredLayout = std::function<const memory::desc*(TensorId)>;

const memory::desc* NoneStored(TensorId /*t*/) { return nullptr; }

// Binds post-op operands of the first k chain nodes to `step`. An operand stored blocked is read in
// place when that is the layout the primitive wants, and reordered from its stored layout if not.
void AddPostOpArgs(StepKernel* k, Step* step, const std::vector<std::vector<PostOp>>& ops,
                   size_t count, const DstView& view, dnnl::engine& engine,
                   const OperandLayout& layout = PlainDims,
                   const StoredLayout& stored = NoneStored) {
  int index = 0;
  for (size_t i = 0; i < count; ++i) {
    for (const PostOp& p : ops[i]) {
      if (p.binary && !p.sum) {
        auto dims = view(p.operand_dims);
        memory::desc plain = PlainDims(*dims), md = layout(*dims);
        int key = DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1;
        const memory::desc* kept = p.owned.empty() ? stored(p.operand) : nullptr;
        memory::desc from = kept ? *kept : plain;
        if (kept) k->ClaimNative(p.operand);
        if (!p.owned.empty()) {
          step->args.push_back({key, OwnedArg(k->AddOwned(md, p.owned, plain), md)});
        } else if (md == from) {
          step->args.push_back({key, TensorArg(p.operand, md)});
        } else {
          // A per-element operand is read in the primitive's blocked dst layout: reorder it first.
          Arg to = ScratchArg(k->AddScratch(md), md);
          AddReorder(k, TensorArg(p.operand, from), to, engine);
          k->AddNote(", reorder operand");
          step->args.push_back({key, to});
        }
      }
      ++index;
    }
  }
}

std::string ImplName(const dnnl::primitive_desc_base& pd) { return pd.impl_info_str(); }

bool IsReference(const dnnl::primitive_desc_base& pd) { return ImplName(pd).rfind("ref", 0) == 0; }

// The vector width class of an implementation, read from its name ("jit_1x1:avx2" -> 2,
// "brgconv:avx512_core" -> 3): 0 for reference and unnamed ISAs.
int IsaRank(const dnnl::primitive_desc_base& pd) {
  std::string name = ImplName(pd);
  if (name.find("amx") != std::string::npos) return 4;
  if (name.find("avx512") != std::string::npos) return 3;
  if (name.find("avx2") != std::string::npos) return 2;
  if (name.find("sse41") != std::string::npos) return 1;
  return 0;
}

// Dense NHWC (channels stride 1, no blocking) of a 4-D tensor.
bool IsChannelsLast(const memory::desc& md) {
  return md.get_ndims() == 4 && md.get_format_kind() == memory::format_kind::blocked &&
         md.get_inner_nblks() == 0 && md.get_strides()[1] == 1 && md.get_dims()[1] > 1;
}

// Tries post-op prefixes from longest to shortest; `make` returns a primitive descriptor or throws.
template <typename Pd>
StatusOr<std::pair<Pd, size_t>> LongestPrefix(
    const std::vector<std::vector<PostOp>>& ops, const DstView& view,
    const std::function<Pd(const dnnl::primitive_attr&)>& make, const std::string& what,
    const OperandLayout& layout = PlainDims) {
  std::string last_error;
  for (size_t k = ops.size() + 1; k-- > 0;) {
    auto attr = MakeAttr(ops, k, view, layout);
    if (!attr) continue;
    try {
      Pd pd = make(*attr);
      if (k > 0 && IsReference(pd))
        continue;  // A post-op that forces the slow path is not worth it.
      return std::make_pair(pd, k);
    } catch (const dnnl::error& e) {
      last_error = e.what();
    }
  }
  return Status::Unimplemented(what + ": oneDNN has no implementation (" + last_error + ")");
}

// Adds the scratchpad of `pd` as a scratch slice.
void AddScratchpad(StepKernel* k, Step* step, const dnnl::primitive_desc_base& pd) {
  memory::desc sp = pd.scratchpad_desc();
  if (sp.get_size() == 0) return;
  step->args.push_back({DNNL_ARG_SCRATCHPAD, ScratchArg(k->AddScratch(sp), sp)});
}

// Source argument in the layout `want`, reordering from the tensor's buffer (plain, or blocked as
// `stored` says) when they differ.
Arg SourceIn(StepKernel* k, TensorId t, const memory::desc& plain, const memory::desc& want,
             dnnl::engine& engine, const StoredLayout& stored = NoneStored) {
  const memory::desc* kept = stored(t);
  memory::desc from = kept ? *kept : plain;
  if (kept) k->ClaimNative(t);
  if (want == from) return TensorArg(t, from);
  Arg to = ScratchArg(k->AddScratch(want), want);
  AddReorder(k, TensorArg(t, from), to, engine);
  k->AddNote(", reorder in");
  return to;
}

std::vector<NodeId> Tail(const std::vector<NodeId>& chain, size_t k) {
  return std::vector<NodeId>(chain.begin() + static_cast<std::ptrdiff_t>(k), chain.end());
}

TensorId ChainValue(const Graph& g, TensorId start, const std::vector<NodeId>& chain, size_t k) {
  return k == 0 ? start : g.node(chain[k - 1]).outputs[0];
}

// Adds the main primitive step writing `final_out`: in the primitive's own layout when that is
// blocked, the tensor may stay blocked (KernelContext::keeps_blocked) and no tail loop follows;
// else plain, through a reorder when the primitive picked another layout. Then the tail loop for
// chain nodes without a post-op form (on the plain output). With `sum_from`, that tensor is first
// copied into the primitive's dst, which a sum post-op adds to.
Status FinishAnchor(const KernelContext& ctx, StepKernel* k, Step main, const memory::desc& dst_md,
                    const Shape& out_dims, const std::vector<NodeId>& chain, TensorId start,
                    size_t done, const std::optional<Arg>& sum_from = std::nullopt) {
  const Graph& g = *ctx.g;
  TensorId final_out = chain.empty() ? start : g.node(chain.back()).outputs[0];
  memory::desc plain = PlainLayout(out_dims);
  bool stays_blocked = done == chain.size() && dst_md != plain &&
                       dst_md.get_size() == plain.get_size() && ctx.KeepsBlocked(final_out);
  bool reorder_out = !stays_blocked && dst_md != plain;
  Arg dst = reorder_out ? ScratchArg(k->AddScratch(dst_md), dst_md) : TensorArg(final_out, dst_md);
  if (sum_from) {
    AddReorder(k, *sum_from, dst, *ctx.engine);
    k->AddNote(", residual copied to dst for a sum post-op");
  }
  main.args.push_back({DNNL_ARG_DST, dst});
  k->steps().push_back(std::move(main));
  if (stays_blocked) {
    k->StoreBlocked(final_out, dst_md);
    return Status::Ok();
  }
  if (reorder_out) {
    AddReorder(k, dst, TensorArg(final_out, plain), *ctx.engine);
    k->AddNote(", reorder out");
  }
  return AddTailLoop(ctx, k, Tail(chain, done), ChainValue(g, start, chain, done), final_out);
}

// The stored layouts of tensors a kernel reads or writes, except the ones its tail loop (`tail`)
// touches: the loop indexes plain row-major buffers, so those stay plain for the whole kernel.
StoredLayout StoredOutsideTail(const KernelContext& ctx, const std::vector<NodeId>& tail) {
  std::vector<TensorId> loop_tensors;
  for (NodeId id : tail) {
    const Node& n = ctx.g->node(id);
    loop_tensors.insert(loop_tensors.end(), n.inputs.begin(), n.inputs.end());
  }
  return [&ctx, loop_tensors](TensorId t) -> const memory::desc* {
    if (std::find(loop_tensors.begin(), loop_tensors.end(), t) != loop_tensors.end()) {
      return nullptr;
    }
    return ctx.Stored(t);
  };
}

std::string PostOpNote(size_t done, size_t total) {
  if (total == 0) return "";
  return ", " + std::to_string(done) + "/" + std::to_string(total) + " chain nodes as post-ops";
}

// ---------------------------------------------------------------------------------------------
// Anchors

const HostTensor* KnownFloat(const KernelContext& ctx, TensorId t) {
  if (t == kNoId || ctx.g->tensor(t).kind == TensorKind::kActivation) return nullptr;
  const HostTensor* h = ctx.known(t);
  return h && h->is_float() ? h : nullptr;
}

// A sliding window in oneDNN's terms (dilation 0 = dense).
struct DnnlWindow {
  memory::dims strides, dilates, pad_l, pad_r;
};

DnnlWindow ToDnnl(const Window& w) {
  DnnlWindow d{memory::dims(w.strides.begin(), w.strides.end()),
               {},
               memory::dims(w.pad_begin.begin(), w.pad_begin.end()),
               memory::dims(w.pad_end.begin(), w.pad_end.end())};
  for (int64_t v : w.dilations) d.dilates.push_back(v - 1);
  return d;
}

// What differs between the Conv and ConvTranspose lowerings; BatchNormalization folding, layouts,
// post-ops and reorders are shared (BuildConvLike).
struct ConvSpec {
  std::string name;           // "conv" / "deconv", for Describe().
  Shape weight_dims;          // oneDNN's weight dims: [groups,] out channels, in channels, spatial.
  memory::desc user_weights;  // Where the ONNX weight values sit in those dims.
  int64_t out_channels = 0;
  std::function<int64_t(int64_t)> channel_of;  // Output channel of a flat ONNX weight index.
  // The primitive descriptor for src, weights, bias, dst descriptors and attributes; throws.
  using Make = std::function<dnnl::primitive_desc(const memory::desc&, const memory::desc&,
                                                  const memory::desc&, const memory::desc&,
                                                  const dnnl::primitive_attr&)>;
  Make make;
};

// ConvSpec::make for oneDNN's convolution_forward or deconvolution_forward over window `w`.
template <typename Primitive>
ConvSpec::Make WindowedPrimitive(algorithm alg, const Window& w, const dnnl::engine& engine) {
  DnnlWindow dw = ToDnnl(w);
  return [alg, dw, engine](const memory::desc& src, const memory::desc& wei,
                           const memory::desc& bias, const memory::desc& dst,
                           const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    return typename Primitive::primitive_desc(engine, dnnl::prop_kind::forward_inference, alg, src,
                                              wei, bias, dst, dw.strides, dw.dilates, dw.pad_l,
                                              dw.pad_r, attr);
  };
}

// With `residual_as_sum`, a per-element Add right after the (folded) conv runs as oneDNN's sum
// post-op on a copy of the residual in dst (Unimplemented without such an Add): some
// implementations (brgconv on AVX-512) take sum but not a per-element binary post-op.
StatusOr<std::unique_ptr<GroupKernel>> BuildConvLike(const KernelContext& ctx, NodeId id,
                                                     std::vector<NodeId> chain,
                                                     const ConvSpec& spec, bool residual_as_sum) {
  const Graph& g = *ctx.g;
  const Node& n = g.node(id);
  const HostTensor* w = KnownFloat(ctx, n.input(1));
  const HostTensor* b = KnownFloat(ctx, n.input(2));
  if (w == nullptr || (n.input(2) != kNoId && b == nullptr)) {
    return Status::Unimplemented(NodeLabel(n) + ": weights and bias must be weights or constants");
  }
  const Shape& xd = g.tensor(n.inputs[0]).dims;
  const Shape& yd = g.tensor(n.outputs[0]).dims;
  int64_t oc = spec.out_channels;
  std::vector<float> weights = w->f, bias = b ? b->f : std::vector<float>(oc, 0.0f);
  TensorId start = n.outputs[0];
  std::vector<float> scale, shift;
  if (!chain.empty() && g.node(chain[0]).op_type == "BatchNormalization" &&
      g.node(chain[0]).inputs[0] == start &&
      BatchNormAffine(g, g.node(chain[0]), ctx.known, &scale, &shift)) {
    // Inference BatchNormalization right after the anchor is a per-output-channel affine map: fold.
    for (size_t i = 0; i < weights.size(); ++i) weights[i] *= scale[spec.channel_of(i)];
    for (int64_t o = 0; o < oc; ++o) bias[o] = bias[o] * scale[o] + shift[o];
    start = g.node(chain[0]).outputs[0];
    chain.erase(chain.begin());
  }
  memory::desc src_md(Dims(xd), Dt::f32, memory::format_tag::any);
  memory::desc wei_any(Dims(spec.weight_dims), Dt::f32, memory::format_tag::any);
  memory::desc dst_md(Dims(yd), Dt::f32, memory::format_tag::any);
  memory::desc bias_md = PlainLayout({oc});
  auto ops = TranslateChain(g, chain, start, ctx.known);
  TensorId residual = kNoId;
  if (residual_as_sum) {
    if (ops.empty() || ops[0].size() != 1 || !ops[0][0].binary ||
        ops[0][0].alg != algorithm::binary_add || !ops[0][0].owned.empty() ||
        ops[0][0].operand_dims != yd) {
      return Status::Unimplemented(NodeLabel(n) + ": no per-element Add right after it");
    }
    ops[0][0].sum = true;
    residual = ops[0][0].operand;
  }
  using Pd = dnnl::primitive_desc;
  std::function<Pd(const dnnl::primitive_attr&)> make = [&](const dnnl::primitive_attr& attr) {
    return spec.make(src_md, wei_any, bias_md, dst_md, attr);
  };
  // Let oneDNN pick the layouts without post-ops first, then hold them: a plain per-element
  // operand would otherwise pull the convolution onto a slower plain-layout implementation. An
  // input kept blocked is read in its layout when oneDNN has a fast implementation for it.
  dnnl::primitive_attr plain_attr;
  Pd first = make(plain_attr);
  // Takes the layouts `src`, `dst` where oneDNN has a JIT implementation for them.
  auto prefer = [&](const memory::desc& src, const memory::desc& dst) {
    memory::desc any_src = src_md, any_dst = dst_md;
    src_md = src;
    dst_md = dst;
    try {
      Pd chosen = make(plain_attr);
      if (!IsReference(chosen)) first = chosen;
    } catch (const dnnl::error&) {
    }
    src_md = any_src;
    dst_md = any_dst;
  };
  if (StemConvReadsPlain(g, n, ChannelBlockForIsa(OneDnnIsa()))) {
    // A stem conv reads its plain input as it is and writes the blocked layout
    // (lowering/layout.h).
    prefer(PlainLayout(xd), ChannelBlocked(yd));
  } else if (IsChannelsLast(first.src_desc()) || IsChannelsLast(first.dst_desc())) {
    // oneDNN 2.6's brgconv kernels (AVX-512) pick channels-last, whose reorder to or from plain
    // is a transpose: [1,128,27,27] nhwc -> nchw 15.9 us against 5.7 us from nChw16c, while the
    // conv itself runs as fast in the channel-blocked layout (brgconv_1x1 32.9 us, jit_1x1
    // 29.0 us). Take the blocked layout when oneDNN has a JIT implementation for it.
    if (xd.size() == 4 && yd.size() == 4 && xd[1] % 8 == 0 && yd[1] % 8 == 0) {
      prefer(ChannelBlocked(xd), ChannelBlocked(yd));
    }
  }
  if (const memory::desc* kept = ctx.Stored(n.inputs[0]); kept && *kept != first.src_desc()) {
    memory::desc any = src_md;
    src_md = *kept;
    try {
      // The input is read in place only on an implementation as wide as the free choice: on
      // AVX-512, nChw8c (a grouped conv's output with 8 channels a group) is taken only by
      // AVX2 kernels, and each conv reading it in place writes nChw8c again, so every later
      // conv of the net would run at half the vector width for want of one reorder.
      Pd in_place = make(plain_attr);
      if (!IsReference(in_place) && IsaRank(in_place) >= IsaRank(first)) first = in_place;
    } catch (const dnnl::error&) {
    }
    src_md = any;
  }
  src_md = first.src_desc();
  dst_md = first.dst_desc();
  memory::dims out_dims = Dims(yd);
  OperandLayout layout = [&](const memory::dims& d) {
    return d == out_dims ? dst_md : PlainDims(d);
  };
  FUSOR_ASSIGN_OR_RETURN(auto found,
                         LongestPrefix<Pd>(ops, IdentityView(), make, NodeLabel(n), layout));
  auto& [pd, done] = found;
  if (residual != kNoId && done == 0) {
    return Status::Unimplemented(NodeLabel(n) + ": oneDNN takes no sum post-op here");
  }
  auto k = std::make_unique<StepKernel>(
      ctx, spec.name + " (" + ImplName(pd) + ")" + PostOpNote(done, chain.size()));
  StoredLayout stored = StoredOutsideTail(ctx, Tail(chain, done));
  std::optional<Arg> sum_from;
  if (residual != kNoId) {
    const memory::desc* kept = stored(residual);
    sum_from = TensorArg(residual, kept ? *kept : PlainLayout(yd));
    if (kept) k->ClaimNative(residual);
  }
  Step main;
  main.prim = dnnl::primitive(pd);
  main.args.push_back({DNNL_ARG_SRC, SourceIn(k.get(), n.inputs[0], PlainLayout(xd), pd.src_desc(),
                                              *ctx.engine, stored)});
  int wi = k->AddOwned(pd.weights_desc(), std::move(weights), spec.user_weights);
  main.args.push_back({DNNL_ARG_WEIGHTS, OwnedArg(wi, pd.weights_desc())});
  main.args.push_back({DNNL_ARG_BIAS, OwnedArg(k->AddOwned(bias_md, std::move(bias)), bias_md)});
  AddPostOpArgs(k.get(), &main, ops, done, IdentityView(), *ctx.engine, layout, stored);
  AddScratchpad(k.get(), &main, pd);
  FUSOR_RETURN_IF_ERROR(
      FinishAnchor(ctx, k.get(), std::move(main), pd.dst_desc(), yd, chain, start, done, sum_from));
  return std::unique_ptr<GroupKernel>(std::move(k));
}

StatusOr<std::unique_ptr<GroupKernel>> BuildConv(const KernelContext& ctx, NodeId id,
                                                 const std::vector<NodeId>& chain,
                                                 bool residual_as_sum = false) {
  const Node& n = ctx.g->node(id);
  FUSOR_ASSIGN_OR_RETURN(Window win, ConvWindow(*ctx.g, n));
  const Shape& wd = ctx.g->tensor(n.input(1)).dims;  // [OC, IC / groups, spatial...]
  int64_t groups = n.GetInt("group", 1), per_oc = NumElements(wd) / wd[0];
  ConvSpec spec;
  spec.name = "conv";
  spec.weight_dims = wd;
  if (groups > 1) {
    spec.weight_dims.insert(spec.weight_dims.begin(), groups);
    spec.weight_dims[1] /= groups;
  }
  spec.user_weights = PlainLayout(spec.weight_dims);
  spec.out_channels = wd[0];
  spec.channel_of = [per_oc](int64_t i) { return i / per_oc; };
  spec.make =
      WindowedPrimitive<dnnl::convolution_forward>(algorithm::convolution_direct, win, *ctx.engine);
  return BuildConvLike(ctx, id, chain, spec, residual_as_sum);
}

// ConvTranspose as oneDNN's deconvolution. ONNX's weight [IC, OC / groups, spatial...] is read in
// place through strides as oneDNN's [groups,] OC / groups, IC / groups, spatial...; oneDNN's right
// padding (end padding minus output_padding) may be negative, extending the output.
StatusOr<std::unique_ptr<GroupKernel>> BuildConvTranspose(const KernelContext& ctx, NodeId id,
                                                          const std::vector<NodeId>& chain) {
  const Node& n = ctx.g->node(id);
  FUSOR_ASSIGN_OR_RETURN(Window win, ConvTransposeWindow(*ctx.g, n));
  const Shape& wd = ctx.g->tensor(n.input(1)).dims;
  int64_t groups = n.GetInt("group", 1), icg = wd[0] / groups, ocg = wd[1];
  int64_t kernel = NumElements(win.kernel);
  ConvSpec spec;
  spec.name = "deconv";
  spec.weight_dims = {ocg, icg};
  std::vector<int64_t> strides = {kernel, ocg * kernel};
  if (groups > 1) {
    spec.weight_dims.insert(spec.weight_dims.begin(), groups);
    strides.insert(strides.begin(), icg * ocg * kernel);
  }
  std::vector<int64_t> spatial = RowMajorStrides(win.kernel);
  spec.weight_dims.insert(spec.weight_dims.end(), win.kernel.begin(), win.kernel.end());
  strides.insert(strides.end(), spatial.begin(), spatial.end());
  spec.user_weights = memory::desc(Dims(spec.weight_dims), Dt::f32, Dims(strides));
  spec.out_channels = ocg * groups;
  spec.channel_of = [icg, ocg, kernel](int64_t i) {
    return (i / (ocg * kernel)) / icg * ocg + (i / kernel) % ocg;
  };
  spec.make = WindowedPrimitive<dnnl::deconvolution_forward>(algorithm::deconvolution_direct, win,
                                                             *ctx.engine);
  return BuildConvLike(ctx, id, chain, spec, /*residual_as_sum=*/false);
}

// A matrix operand: plain (possibly transposed through strides) or prepacked when known.
struct MatOperand {
  memory::desc user;  // Layout of the tensor buffer / the known values.
  bool known = false;
  std::vector<float> values;
};

memory::desc Transposed2d(int64_t rows, int64_t cols) {
  // Logical [rows, cols] stored as [cols, rows].
  return memory::desc({rows, cols}, Dt::f32, memory::dims{1, rows});
}

// Maps dims aligned to the output of a MatMul with a 1-D operand to the promoted product's dims:
// [..., N] -> [..., 1, N] for a 1-D A, [..., M] -> [..., M, 1] for a 1-D B, [] -> [1, 1] for both.
DstView PromotedMatMulView(bool a_vec, bool b_vec) {
  return [a_vec, b_vec](const Shape& s) -> std::optional<memory::dims> {
    memory::dims d(s.begin(), s.end());
    if (a_vec) d.insert(b_vec || d.empty() ? d.end() : d.end() - 1, 1);
    if (b_vec) d.push_back(1);
    return d;
  };
}

StatusOr<std::unique_ptr<GroupKernel>> BuildMatMulLike(const KernelContext& ctx, NodeId id,
                                                       const std::vector<NodeId>& chain) {
  const Graph& g = *ctx.g;
  const Node& n = g.node(id);
  const Shape& ad = g.tensor(n.inputs[0]).dims;
  const Shape& bd = g.tensor(n.inputs[1]).dims;
  const Shape& yd = g.tensor(n.outputs[0]).dims;
  bool gemm = n.op_type == "Gemm";
  const HostTensor* bk = KnownFloat(ctx, n.inputs[1]);
  memory::desc a_md, b_md, dst_md, bias_md;
  DstView view = IdentityView();
  std::vector<float> b_values, bias_values;
  TensorId bias_tensor = kNoId;
  if (gemm) {
    bool ta = n.GetInt("transA", 0) != 0, tb = n.GetInt("transB", 0) != 0;
    float alpha = static_cast<float>(FloatAttrOrDefault(n, "alpha"));
    float beta = static_cast<float>(FloatAttrOrDefault(n, "beta"));
    int64_t m = yd[0], nn = yd[1], kk = ta ? ad[0] : ad[1];
    a_md = ta ? Transposed2d(m, kk) : PlainLayout({m, kk});
    b_md = tb ? Transposed2d(kk, nn) : PlainLayout({kk, nn});
    dst_md = PlainLayout(yd);
    if (alpha != 1.0f && bk == nullptr) {
      return Status::Unimplemented(NodeLabel(n) + ": alpha != 1 needs a constant B");
    }
    if (bk) {
      b_values = bk->f;
      for (auto& v : b_values) v *= alpha;
    }
    if (n.input(2) != kNoId) {
      const HostTensor* ck = KnownFloat(ctx, n.inputs[2]);
      Shape cd = AlignRank(g.tensor(n.inputs[2]).dims, 2);
      if (ck == nullptr && beta != 1.0f) {
        return Status::Unimplemented(NodeLabel(n) + ": beta != 1 needs a constant C");
      }
      bias_md = PlainLayout(cd);
      if (ck) {
        bias_values = ck->f;
        for (auto& v : bias_values) v *= beta;
      } else {
        bias_tensor = n.inputs[2];
      }
    }
  } else {
    int64_t kk = ad.back();
    bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
    bool collapse = !a_vec && !b_vec && bd.size() == 2 && bk != nullptr;
    if (collapse) {
      int64_t rows = g.tensor(n.inputs[0]).num_elements() / kk, nn = bd[1];
      a_md = PlainLayout({rows, kk});
      b_md = PlainLayout(bd);
      dst_md = PlainLayout({rows, nn});
      // The chain value [..., M, N] is viewed as [rows, N]: an operand's leading dims must be all 1
      // (broadcast) or all equal to the output's.
      view = [yd, rows, nn](const Shape& s) -> std::optional<memory::dims> {
        bool ones = true, same = true;
        for (size_t i = 0; i + 1 < s.size(); ++i) {
          ones = ones && s[i] == 1;
          same = same && s[i] == yd[i];
        }
        if (!ones && !same) return std::nullopt;
        return memory::dims{ones ? 1 : rows, s.back() == 1 ? 1 : nn};
      };
    } else {
      // ONNX promotes a 1-D A to [1, K] and a 1-D B to [K, 1], and drops that 1 from the output:
      // the primitive computes the promoted product, whose dst holds the output's elements in
      // order, and post-op operands get the dropped 1 back.
      if (a_vec || b_vec) view = PromotedMatMulView(a_vec, b_vec);
      memory::dims dst = *view(yd);
      size_t r = dst.size();
      a_md = PlainLayout(AlignRank(a_vec ? Shape{1, kk} : ad, r));
      b_md = PlainLayout(AlignRank(b_vec ? Shape{bd[0], 1} : bd, r));
      dst_md = PlainLayout(Shape(dst.begin(), dst.end()));
    }
    if (bk) b_values = bk->f;
  }
  auto ops = TranslateChain(g, chain, n.outputs[0], ctx.known);
  memory::desc b_any = bk ? memory::desc(b_md.get_dims(), Dt::f32, memory::format_tag::any) : b_md;
  using Pd = dnnl::matmul::primitive_desc;
  std::function<Pd(const dnnl::primitive_attr&)> make = [&](const dnnl::primitive_attr& attr) {
    return bias_md.get_ndims() > 0 && bias_tensor == kNoId
               ? Pd(*ctx.engine, a_md, b_any, bias_md, dst_md, attr)
               : Pd(*ctx.engine, a_md, b_any, dst_md, attr);
  };
  if (bias_tensor != kNoId) {
    // A computed C joins the chain as the first binary add.
    PostOp add;
    add.binary = true;
    add.alg = algorithm::binary_add;
    add.operand = bias_tensor;
    add.operand_dims = AlignRank(g.tensor(bias_tensor).dims, 2);
    ops.insert(ops.begin(), {add});
  }
  FUSOR_ASSIGN_OR_RETURN(auto found, LongestPrefix<Pd>(ops, view, make, NodeLabel(n)));
  auto& [pd, done] = found;
  if (bias_tensor != kNoId && done == 0) {
    return Status::Unimplemented(NodeLabel(n) + ": computed C could not be fused");
  }
  size_t chain_done = bias_tensor != kNoId ? done - 1 : done;
  auto k = std::make_unique<StepKernel>(ctx, std::string(gemm ? "gemm" : "matmul") + " (" +
                                                 ImplName(pd) + ")" +
                                                 PostOpNote(chain_done, chain.size()));
  Step main;
  main.prim = dnnl::matmul(pd);
  main.args.push_back({DNNL_ARG_SRC, TensorArg(n.inputs[0], a_md)});
  if (bk) {
    int wi = k->AddOwned(pd.weights_desc(), std::move(b_values), b_md);
    main.args.push_back({DNNL_ARG_WEIGHTS, OwnedArg(wi, pd.weights_desc())});
  } else {
    main.args.push_back({DNNL_ARG_WEIGHTS, TensorArg(n.inputs[1], b_md)});
  }
  if (bias_md.get_ndims() > 0 && bias_tensor == kNoId) {
    main.args.push_back(
        {DNNL_ARG_BIAS, OwnedArg(k->AddOwned(bias_md, std::move(bias_values)), bias_md)});
  }
  AddPostOpArgs(k.get(), &main, ops, done, view, *ctx.engine);
  AddScratchpad(k.get(), &main, pd);
  // The primitive writes its plain dst straight into the group's output buffer.
  TensorId final_out = chain.empty() ? n.outputs[0] : g.node(chain.back()).outputs[0];
  main.args.push_back({DNNL_ARG_DST, TensorArg(final_out, pd.dst_desc())});
  k->steps().push_back(std::move(main));
  FUSOR_RETURN_IF_ERROR(AddTailLoop(ctx, k.get(), Tail(chain, chain_done),
                                    ChainValue(g, n.outputs[0], chain, chain_done), final_out));
  return std::unique_ptr<GroupKernel>(std::move(k));
}

// ---------------------------------------------------------------------------------------------
// Reductions

struct ReductionDescs {
  std::function<dnnl::primitive_desc(const dnnl::primitive_attr&)> make;
  memory::desc src, dst;
  Shape dst_dims;                               // The primitive's dst dims (keepdims form).
  std::vector<std::pair<int, TensorId>> extra;  // LayerNormalization scale / shift.
  std::vector<memory::desc> extra_md;
};

StatusOr<ReductionDescs> ReductionFor(const KernelContext& ctx, const Node& n) {
  const Graph& g = *ctx.g;
  const Shape& xd = g.tensor(n.inputs[0]).dims;
  ReductionDescs r;
  dnnl::engine eng = *ctx.engine;
  const std::string& op = n.op_type;
  if (op == "MaxPool" || op == "AveragePool") {
    FUSOR_ASSIGN_OR_RETURN(Window w, PoolWindow(g, n));
    if (n.outputs.size() > 1 && n.outputs[1] != kNoId) {
      return Status::Unimplemented(NodeLabel(n) + ": MaxPool indices output is not supported");
    }
    r.dst_dims = g.tensor(n.outputs[0]).dims;
    r.src = PlainLayout(xd);
    r.dst = PlainLayout(r.dst_dims);
    algorithm alg = op == "MaxPool"                    ? algorithm::pooling_max
                    : n.GetInt("count_include_pad", 0) ? algorithm::pooling_avg_include_padding
                                                       : algorithm::pooling_avg_exclude_padding;
    DnnlWindow dw = ToDnnl(w);
    memory::dims ker(w.kernel.begin(), w.kernel.end());
    r.make = [=](const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
      return dnnl::pooling_forward::primitive_desc(eng, dnnl::prop_kind::forward_inference, alg,
                                                   r.src, r.dst, dw.strides, ker, dw.dilates,
                                                   dw.pad_l, dw.pad_r, attr);
    };
    return r;
  }
  if (op == "Softmax") {
    SoftmaxAxis sa = SoftmaxAxisOf(g, n);
    Shape s = xd;
    int axis = static_cast<int>(sa.axis);
    if (sa.coerce_2d) {
      s = {NumElements(Shape(xd.begin(), xd.begin() + sa.axis)),
           NumElements(Shape(xd.begin() + sa.axis, xd.end()))};
      axis = 1;
    }
    r.src = r.dst = PlainLayout(s);
    r.dst_dims = s;
    r.make = [=](const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
      return dnnl::softmax_forward::primitive_desc(eng, dnnl::prop_kind::forward_inference,
                                                   algorithm::softmax_accurate, r.src, r.dst, axis,
                                                   attr);
    };
    return r;
  }
  if (op == "LayerNormalization") {
    if (n.outputs.size() > 1) {
      return Status::Unimplemented(NodeLabel(n) + ": mean / inv-std-dev outputs are not supported");
    }
    int64_t axis = NormalizeAxis(n.GetInt("axis", -1), xd.size());
    int64_t len = NumElements(Shape(xd.begin() + axis, xd.end()));
    Shape s = {g.tensor(n.inputs[0]).num_elements() / len, len};
    r.src = r.dst = PlainLayout(s);
    r.dst_dims = s;
    float eps = static_cast<float>(FloatAttrOrDefault(n, "epsilon"));
    auto flags = dnnl::normalization_flags::use_scale;
    r.extra = {{DNNL_ARG_SCALE, n.inputs[1]}};
    if (n.input(2) != kNoId) {
      flags = flags | dnnl::normalization_flags::use_shift;
      r.extra.push_back({DNNL_ARG_SHIFT, n.inputs[2]});
    }
    r.extra_md.assign(r.extra.size(), PlainLayout({len}));
    r.make = [=](const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
      return dnnl::layer_normalization_forward::primitive_desc(
          eng, dnnl::prop_kind::forward_inference, r.src, r.dst, eps, flags, attr);
    };
    return r;
  }
  std::vector<int64_t> axes;
  algorithm alg = algorithm::reduction_mean;
  if (op == "GlobalAveragePool") {
    for (size_t a = 2; a < xd.size(); ++a) axes.push_back(static_cast<int64_t>(a));
  } else if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax") {
    FUSOR_ASSIGN_OR_RETURN(axes, ReduceAxes(g, n));
    alg = op == "ReduceSum"   ? algorithm::reduction_sum
          : op == "ReduceMax" ? algorithm::reduction_max
                              : algorithm::reduction_mean;
  } else {
    return Status::Unimplemented(NodeLabel(n) + ": reduction op is not supported by the runtime");
  }
  r.dst_dims = xd;
  for (int64_t a : axes) r.dst_dims[a] = 1;
  r.src = PlainLayout(xd);
  r.dst = PlainLayout(r.dst_dims);
  r.make = [=](const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    return dnnl::reduction::primitive_desc(eng, alg, r.src, r.dst, 0.0f, 0.0f, attr);
  };
  return r;
}

// Maps an operand aligned to the reduction's ONNX output to its keepdims dst dims.
DstView ReductionView(const Shape& onnx_out, const Shape& dst_dims) {
  return [onnx_out, dst_dims](const Shape& s) -> std::optional<memory::dims> {
    if (NumElements(onnx_out) != NumElements(dst_dims)) return std::nullopt;
    if (onnx_out.size() == dst_dims.size()) return Dims(s);
    // keepdims=0: only per-tensor operands map without knowing where the axes were.
    if (NumElements(s) == 1) return memory::dims(dst_dims.size(), 1);
    return std::nullopt;
  };
}

dnnl::pooling_forward::primitive_desc BlockedPoolingDesc(const KernelContext& ctx, const Node& n,
                                                         const Window& w, const memory::desc& src,
                                                         const Shape& yd) {
  algorithm alg = n.op_type == "MaxPool"             ? algorithm::pooling_max
                  : n.GetInt("count_include_pad", 0) ? algorithm::pooling_avg_include_padding
                                                     : algorithm::pooling_avg_exclude_padding;
  DnnlWindow dw = ToDnnl(w);
  memory::desc dst(Dims(yd), Dt::f32, memory::format_tag::any);
  return dnnl::pooling_forward::primitive_desc(
      *ctx.engine, dnnl::prop_kind::forward_inference, alg, src, dst, dw.strides,
      memory::dims(w.kernel.begin(), w.kernel.end()), dw.dilates, dw.pad_l, dw.pad_r);
}

StatusOr<std::unique_ptr<GroupKernel>> BuildBlockedPooling(const KernelContext& ctx,
                                                           const std::vector<NodeId>& prologue,
                                                           NodeId id,
                                                           const std::vector<NodeId>& epilogue) {
  const Graph& g = *ctx.g;
  const Node& n = g.node(id);
  FUSOR_ASSIGN_OR_RETURN(Window w, PoolWindow(g, n));
  if (n.outputs.size() > 1 && n.outputs[1] != kNoId) {
    return Status::Unimplemented(NodeLabel(n) + ": MaxPool indices output is not supported");
  }
  const Shape& xd = g.tensor(n.inputs[0]).dims;
  const Shape& yd = g.tensor(n.outputs[0]).dims;
  dnnl::pooling_forward::primitive_desc pd;
  try {
    // The stored layout when oneDNN pools it in JIT code, else the channel-blocked one.
    const memory::desc* kept = prologue.empty() ? ctx.Stored(n.inputs[0]) : nullptr;
    if (kept) {
      try {
        pd = BlockedPoolingDesc(ctx, n, w, *kept, yd);
      } catch (const dnnl::error&) {
      }
    }
    if (!pd || IsReference(pd)) pd = BlockedPoolingDesc(ctx, n, w, ChannelBlocked(xd), yd);
  } catch (const dnnl::error& e) {
    return Status::Unimplemented(NodeLabel(n) + ": blocked pooling: " + e.what());
  }
  auto k = std::make_unique<StepKernel>(ctx, n.op_type + " (" + ImplName(pd) + ")");
  StoredLayout stored = StoredOutsideTail(ctx, epilogue);
  Step main;
  main.prim = dnnl::pooling_forward(pd);
  if (prologue.empty()) {
    main.args.push_back({DNNL_ARG_SRC, SourceIn(k.get(), n.inputs[0], PlainLayout(xd),
                                                pd.src_desc(), *ctx.engine, stored)});
  } else {
    // The prologue loop writes the pooling's input (plain) to scratch, reordered from there.
    Step pro;
    FUSOR_ASSIGN_OR_RETURN(pro.loop, FusedLoop::Build(g, prologue, {n.inputs[0]}, ctx.known));
    Arg plain_src = ScratchArg(k->AddScratch(PlainLayout(xd)), PlainLayout(xd));
    for (TensorId t : pro.loop->leaves()) pro.loop_args.push_back({t, TensorArg(t, {})});
    pro.loop_args.push_back({n.inputs[0], plain_src});
    k->steps().push_back(std::move(pro));
    k->AddNote(", prologue loop into scratch");
    Arg blocked_src = ScratchArg(k->AddScratch(pd.src_desc()), pd.src_desc());
    AddReorder(k.get(), plain_src, blocked_src, *ctx.engine);
    k->AddNote(", reorder in");
    main.args.push_back({DNNL_ARG_SRC, blocked_src});
  }
  AddScratchpad(k.get(), &main, pd);
  FUSOR_RETURN_IF_ERROR(FinishAnchor(ctx, k.get(), std::move(main), pd.dst_desc(), yd, epilogue,
                                     n.outputs[0], /*done=*/0));
  return std::unique_ptr<GroupKernel>(std::move(k));
}

StatusOr<std::unique_ptr<GroupKernel>> BuildDnnlReduction(const KernelContext& ctx,
                                                          const std::vector<NodeId>& prologue,
                                                          NodeId id,
                                                          const std::vector<NodeId>& epilogue) {
  const Graph& g = *ctx.g;
  const Node& n = g.node(id);
  FUSOR_ASSIGN_OR_RETURN(ReductionDescs r, ReductionFor(ctx, n));
  if (PoolingRunsBlocked(g, n, ChannelBlockForIsa(OneDnnIsa()))) {
    auto blocked = BuildBlockedPooling(ctx, prologue, id, epilogue);
    if (blocked.ok()) return blocked;
  }
  auto ops = TranslateChain(g, epilogue, n.outputs[0], ctx.known);
  DstView view = ReductionView(g.tensor(n.outputs[0]).dims, r.dst_dims);
  using Pd = dnnl::primitive_desc;
  FUSOR_ASSIGN_OR_RETURN(auto found, LongestPrefix<Pd>(ops, view, r.make, NodeLabel(n)));
  auto& [pd, done] = found;
  // Plain pooling with only a reference kernel runs blocked after all, where its channels fit
  // nChw8c (PoolingRunsBlocked at block 8).
  if (IsReference(pd) && PoolingRunsBlocked(g, n, /*block=*/8)) {
    auto blocked = BuildBlockedPooling(ctx, prologue, id, epilogue);
    if (blocked.ok()) return blocked;
  }
  auto k = std::make_unique<StepKernel>(
      ctx, n.op_type + " (" + ImplName(pd) + ")" + PostOpNote(done, epilogue.size()));
  Step main;
  main.prim = dnnl::primitive(pd);
  if (prologue.empty()) {
    main.args.push_back({DNNL_ARG_SRC, TensorArg(n.inputs[0], r.src)});
  } else {
    // The prologue loop writes the reduction's input to scratch; the primitive reads it there.
    Step pro;
    FUSOR_ASSIGN_OR_RETURN(pro.loop, FusedLoop::Build(g, prologue, {n.inputs[0]}, ctx.known));
    int64_t at = k->AddScratch(r.src);
    for (TensorId t : pro.loop->leaves()) pro.loop_args.push_back({t, TensorArg(t, {})});
    pro.loop_args.push_back({n.inputs[0], ScratchArg(at, r.src)});
    k->steps().push_back(std::move(pro));
    main.args.push_back({DNNL_ARG_SRC, ScratchArg(at, r.src)});
    k->AddNote(", prologue loop into scratch");
  }
  for (size_t i = 0; i < r.extra.size(); ++i) {
    main.args.push_back({r.extra[i].first, TensorArg(r.extra[i].second, r.extra_md[i])});
  }
  AddPostOpArgs(k.get(), &main, ops, done, view, *ctx.engine);
  AddScratchpad(k.get(), &main, pd);
  TensorId final_out = epilogue.empty() ? n.outputs[0] : g.node(epilogue.back()).outputs[0];
  main.args.push_back({DNNL_ARG_DST, TensorArg(final_out, r.dst)});
  k->steps().push_back(std::move(main));
  FUSOR_RETURN_IF_ERROR(AddTailLoop(ctx, k.get(), Tail(epilogue, done),
                                    ChainValue(g, n.outputs[0], epilogue, done), final_out));
  return std::unique_ptr<GroupKernel>(std::move(k));
}

}  // namespace

StatusOr<std::unique_ptr<GroupKernel>> BuildAnchorKernel(const KernelContext& ctx, NodeId anchor,
                                                         const std::vector<NodeId>& chain) {
  const Node& n = ctx.g->node(anchor);
  try {
    if (n.op_type == "Conv") return BuildConv(ctx, anchor, chain);
    if (n.op_type == "ConvTranspose") return BuildConvTranspose(ctx, anchor, chain);
    if (n.op_type == "MatMul" || n.op_type == "Gemm") return BuildMatMulLike(ctx, anchor, chain);
  } catch (const dnnl::error& e) {
    return Status::Internal(NodeLabel(n) + ": oneDNN: " + e.what());
  }
  return Status::Unimplemented(NodeLabel(n) + ": op is not supported by the runtime");
}

StatusOr<std::unique_ptr<GroupKernel>> BuildResidualSumKernel(const KernelContext& ctx,
                                                              NodeId anchor,
                                                              const std::vector<NodeId>& chain) {
  const Node& n = ctx.g->node(anchor);
  if (n.op_type != "Conv") return Status::Unimplemented(NodeLabel(n) + ": not a Conv");
  try {
    return BuildConv(ctx, anchor, chain, /*residual_as_sum=*/true);
  } catch (const dnnl::error& e) {
    return Status::Internal(NodeLabel(n) + ": oneDNN: " + e.what());
  }
}

StatusOr<std::unique_ptr<GroupKernel>> BuildReductionPrimitiveKernel(
    const KernelContext& ctx, const std::vector<NodeId>& prologue, NodeId reduction,
    const std::vector<NodeId>& epilogue) {
  try {
    return BuildDnnlReduction(ctx, prologue, reduction, epilogue);
  } catch (const dnnl::error& e) {
    return Status::Internal(NodeLabel(ctx.g->node(reduction)) + ": oneDNN: " + e.what());
  }
}

StatusOr<std::unique_ptr<GroupKernel>> BuildResamplingKernel(const KernelContext& ctx, NodeId id) {
  const Graph& g = *ctx.g;
  const Node& n = g.node(id);
  if (!RunsAsResampling(g, n)) {
    return Status::Unimplemented(NodeLabel(n) +
                                 ": not a linear half-pixel Resize of the spatial dims");
  }
  try {
    memory::desc src = PlainLayout(g.tensor(n.inputs[0]).dims);
    memory::desc dst = PlainLayout(g.tensor(n.outputs[0]).dims);
    dnnl::resampling_forward::primitive_desc pd(*ctx.engine, dnnl::prop_kind::forward_inference,
                                                algorithm::resampling_linear, src, dst,
                                                UserScratchpadAttr());
    auto k = std::make_unique<StepKernel>(ctx, "resampling (" + ImplName(pd) + ")");
    Step main;
    main.prim = dnnl::primitive(pd);
    main.args.push_back({DNNL_ARG_SRC, TensorArg(n.inputs[0], src)});
    AddScratchpad(k.get(), &main, pd);
    main.args.push_back({DNNL_ARG_DST, TensorArg(n.outputs[0], dst)});
    k->steps().push_back(std::move(main));
    return std::unique_ptr<GroupKernel>(std::move(k));
  } catch (const dnnl::error& e) {
    return Status::Internal(NodeLabel(n) + ": oneDNN: " + e.what());
  }
}

StatusOr<std::unique_ptr<GroupKernel>> BuildInstanceNormKernel(const KernelContext& ctx,
                                                               NodeId id) {
  const Graph& g = *ctx.g;
  const Node& n = g.node(id);
  if (!RunsAsInstanceNormPrimitive(g, n)) {
    return Status::Unimplemented(NodeLabel(n) + ": not a float32 InstanceNormalization");
  }
  try {
    const Shape& xd = g.tensor(n.inputs[0]).dims;
    const int64_t planes = xd[0] * xd[1];
    const int64_t len = planes == 0 ? 0 : NumElements(xd) / planes;
    // Each (image, channel) plane is a row of a [planes, len] matrix: layer normalization over
    // the rows computes the instance statistics. oneDNN 2.6's batch normalization would do it per
    // channel for one image, but on a plain layout it runs a C++ kernel 30x slower.
    memory::desc rows = PlainLayout({planes, len});
    const float eps = static_cast<float>(FloatAttrOrDefault(n, "epsilon"));
    dnnl::layer_normalization_forward::primitive_desc npd(
        *ctx.engine, dnnl::prop_kind::forward_inference, rows, rows, eps,
        dnnl::normalization_flags::none, UserScratchpadAttr());
    // Then the per-channel scale and shift in place: a binary multiply broadcasting the scale
    // over [image, channel, plane], with the shift as a binary add post-op.
    memory::desc planes_md = PlainLayout({xd[0], xd[1], len});
    memory::desc per_channel = PlainLayout({1, xd[1], 1});
    dnnl::post_ops shift;
    shift.append_binary(algorithm::binary_add, per_channel);
    dnnl::primitive_attr affine_attr = UserScratchpadAttr();
    affine_attr.set_post_ops(shift);
    dnnl::binary::primitive_desc apd(*ctx.engine, algorithm::binary_mul, planes_md, per_channel,
                                     planes_md, affine_attr);
    auto k = std::make_unique<StepKernel>(
        ctx, "instance norm (" + ImplName(npd) + " + " + ImplName(apd) + ")");
    Step norm;
    norm.prim = dnnl::primitive(npd);
    norm.args.push_back({DNNL_ARG_SRC, TensorArg(n.inputs[0], rows)});
    AddScratchpad(k.get(), &norm, npd);
    norm.args.push_back({DNNL_ARG_DST, TensorArg(n.outputs[0], rows)});
    k->steps().push_back(std::move(norm));
    Step affine;
    affine.prim = dnnl::primitive(apd);
    affine.args.push_back({DNNL_ARG_SRC_0, TensorArg(n.outputs[0], planes_md)});
    affine.args.push_back({DNNL_ARG_SRC_1, TensorArg(n.inputs[1], per_channel)});
    affine.args.push_back(
        {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, TensorArg(n.inputs[2], per_channel)});
    AddScratchpad(k.get(), &affine, apd);
    affine.args.push_back({DNNL_ARG_DST, TensorArg(n.outputs[0], planes_md)});
    k->steps().push_back(std::move(affine));
    return std::unique_ptr<GroupKernel>(std::move(k));
  } catch (const dnnl::error& e) {
    return Status::Internal(NodeLabel(n) + ": oneDNN: " + e.what());
  }
}

StatusOr<std::unique_ptr<GroupKernel>> BuildChainPrimitiveKernel(const KernelContext& ctx,
                                                                 const std::vector<NodeId>& nodes) {
  const Graph& g = *ctx.g;
  const Node& first = g.node(nodes[0]);
  TensorId final_out = g.node(nodes.back()).outputs[0];
  auto no_form = Status::Unimplemented("chain has no oneDNN eltwise/binary form");
  if (ctx.outputs != std::vector<TensorId>{final_out}) return no_form;
  for (size_t i = 1; i < nodes.size(); ++i) {
    if (g.node(nodes[i]).outputs.size() != 1) return no_form;
  }
  const Shape& yd = g.tensor(final_out).dims;
  // A leading gated pair is one eltwise; the chain then continues after its Mul.
  GatedPair pair = nodes.size() > 1 ? GatedPairOf(g, first, g.node(nodes[1])) : GatedPair::kNone;
  const bool gated = pair != GatedPair::kNone;
  std::vector<NodeId> rest(nodes.begin() + (gated ? 2 : 1), nodes.end());
  TensorId head_out = g.node(nodes[gated ? 1 : 0]).outputs[0];
  try {
    Step main;
    std::function<dnnl::primitive_desc(const dnnl::primitive_attr&)> make;
    std::vector<std::vector<PostOp>> ops;
    std::string what;
    auto first_ops =
        gated ? std::optional<std::vector<PostOp>>(std::vector<PostOp>{GatePostOp(first, pair)})
              : PostOpsFor(g, first, first.inputs[0], ctx.known);
    bool binary_first = first_ops && !first_ops->empty() && (*first_ops)[0].binary;
    if (first_ops && !first_ops->empty() && !binary_first && g.tensor(first.inputs[0]).dims == yd &&
        g.tensor(first.inputs[0]).dtype == DType::kFloat32) {
      // Eltwise primitive for the first post-op of the first node, post-ops for the rest.
      // The head op is checked and merged with the post-ops like one of them (same JIT injector).
      std::vector<std::vector<PostOp>> all = {{(*first_ops)[0]}};
      if (!AppendPostOps(&all, std::vector<PostOp>(first_ops->begin() + 1, first_ops->end()))) {
        return no_form;
      }
      auto more = TranslateChain(g, rest, head_out, ctx.known);
      if (more.size() != rest.size()) return no_form;
      for (auto& node_ops : more) {
        if (!AppendPostOps(&all, std::move(node_ops))) return no_form;
      }
      PostOp head = all[0][0];
      ops.assign(all.begin() + 1, all.end());
      memory::desc md = PlainLayout(yd);
      dnnl::engine eng = *ctx.engine;
      make = [=](const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
        return dnnl::eltwise_forward::primitive_desc(eng, dnnl::prop_kind::forward_inference,
                                                     head.alg, md, md, head.alpha, head.beta, attr);
      };
      main.args.push_back({DNNL_ARG_SRC, TensorArg(first.inputs[0], md)});
      what = "eltwise";
    } else if (binary_first && first_ops->size() == 1 && first.inputs[0] != first.inputs[1] &&
               g.tensor(first.inputs[0]).dims == yd) {
      const PostOp& head = (*first_ops)[0];
      auto more = TranslateChain(g, rest, first.outputs[0], ctx.known);
      if (more.size() != rest.size()) return no_form;
      ops = more;
      memory::desc s0 = PlainLayout(yd), s1 = PlainLayout(head.operand_dims), dst = PlainLayout(yd);
      dnnl::engine eng = *ctx.engine;
      algorithm alg = head.alg;
      make = [=](const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
        return dnnl::binary::primitive_desc(eng, alg, s0, s1, dst, attr);
      };
      main.args.push_back({DNNL_ARG_SRC_0, TensorArg(first.inputs[0], s0)});
      main.args.push_back({DNNL_ARG_SRC_1, TensorArg(head.operand, s1)});
      what = "binary";
    } else {
      return no_form;
    }
    dnnl::primitive_desc pd = make(*MakeAttr(ops, ops.size(), IdentityView()));
    if (IsReference(pd)) return no_form;
    auto k = std::make_unique<StepKernel>(ctx, what + " (" + ImplName(pd) + ") + " +
                                                   std::to_string(nodes.size() - 1) +
                                                   " chain nodes as post-ops");
    main.prim = dnnl::primitive(pd);
    AddPostOpArgs(k.get(), &main, ops, ops.size(), IdentityView(), *ctx.engine);
    AddScratchpad(k.get(), &main, pd);
    main.args.push_back({DNNL_ARG_DST, TensorArg(final_out, PlainLayout(yd))});
    k->steps().push_back(std::move(main));
    return std::unique_ptr<GroupKernel>(std::move(k));
  } catch (const dnnl::error&) {
    return no_form;
  }
}

}  // namespace fusor
