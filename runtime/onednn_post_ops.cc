// Post-op translation (runtime/onednn_post_ops.h).
#include "runtime/onednn_post_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/op_registry.h"
#include "lowering/kernel_form.h"
#include "lowering/plan_legality.h"
#include "runtime/group_kernel.h"
#include "runtime/op_params.h"

namespace fusor::onednn {

memory::dims Dims(const Shape& s) {
  return s.empty() ? memory::dims{1} : memory::dims(s.begin(), s.end());
}

Shape AlignRank(const Shape& s, size_t rank) {
  Shape out(rank - std::min(rank, s.size()), 1);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

PostOp Eltwise(algorithm alg, float alpha, float beta) {
  PostOp p;
  p.alg = alg;
  p.alpha = alpha;
  p.beta = beta;
  return p;
}

namespace {

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

}  // namespace

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

PostOp GatePostOp(const Node& gate, GatedPair pair) {
  if (pair == GatedPair::kSwish) return Eltwise(algorithm::eltwise_swish, 1);
  return Eltwise(algorithm::eltwise_hardswish,
                 static_cast<float>(FloatAttrOrDefault(gate, "alpha")),
                 static_cast<float>(FloatAttrOrDefault(gate, "beta")));
}

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

memory::desc PlainDims(const memory::dims& d) { return PlainLayout(Shape(d.begin(), d.end())); }

DstView IdentityView() {
  return [](const Shape& s) { return std::optional<memory::dims>(Dims(s)); };
}

std::optional<dnnl::primitive_attr> MakeAttr(const std::vector<std::vector<PostOp>>& ops, size_t k,
                                             const DstView& view, const OperandLayout& layout) {
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

}  // namespace fusor::onednn
