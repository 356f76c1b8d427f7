// Anchor kernels (runtime/group_kernel.h BuildAnchorKernel): a Conv, ConvTranspose, MatMul or
// Gemm primitive with the elementwise chain after it as post-ops, BatchNormalization folded into
// a (de)convolution's weights, and the rest of the chain as a tail loop.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "graph/op_registry.h"
#include "graph/plan.h"
#include "lowering/kernel_form.h"
#include "lowering/layout.h"
#include "runtime/group_kernel.h"
#include "runtime/onednn_info.h"
#include "runtime/onednn_step_kernel.h"
#include "runtime/op_params.h"

namespace fusor {
namespace onednn {
namespace {

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
  size_t folded = 0;
  if (!chain.empty() && g.node(chain[0]).op_type == "BatchNormalization" &&
      g.node(chain[0]).inputs[0] == start &&
      BatchNormAffine(g, g.node(chain[0]), ctx.known, &scale, &shift)) {
    // Inference BatchNormalization right after the anchor is a per-output-channel affine map: fold.
    for (size_t i = 0; i < weights.size(); ++i) weights[i] *= scale[spec.channel_of(i)];
    for (int64_t o = 0; o < oc; ++o) bias[o] = bias[o] * scale[o] + shift[o];
    start = g.node(chain[0]).outputs[0];
    chain.erase(chain.begin());
    folded = 1;
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
  const bool channels_last = ConvRunsChannelsLast(g, n, ctx.layout);
  if (StemConvReadsPlain(g, n, LayoutTargetForIsa(OneDnnIsa()))) {
    // A stem conv reads its plain input as it is and writes the blocked layout
    // (lowering/layout.h).
    prefer(PlainLayout(xd), ChannelBlocked(yd));
  } else if (channels_last) {
    // The layout rules keep its output channels-last (lowering/layout.h).
    prefer(ChannelsLast(xd), ChannelsLast(yd));
  } else if (IsChannelsLast(first.src_desc()) || IsChannelsLast(first.dst_desc())) {
    // oneDNN's brgconv kernels (AVX2, AVX-512) pick channels-last, whose reorder to or from plain
    // is a transpose: [1,128,27,27] nhwc -> nchw 15.9 us against 5.7 us from nChw16c, while the
    // conv itself runs as fast in the channel-blocked layout (brgconv_1x1 32.9 us, jit_1x1
    // 29.0 us). Take the blocked layout when oneDNN has a JIT implementation for it.
    if (xd.size() == 4 && yd.size() == 4 && xd[1] % 8 == 0 && yd[1] % 8 == 0) {
      prefer(ChannelBlocked(xd), ChannelBlocked(yd));
    }
  }
  if (const memory::desc* kept = ctx.Stored(n.inputs[0]);
      kept && *kept != first.src_desc() && (!channels_last || IsChannelsLast(*kept))) {
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
  KernelImplementations implementations;
  FUSOR_ASSIGN_OR_RETURN(auto found, LongestPrefix<Pd>(ops, IdentityView(), make, NodeLabel(n),
                                                       layout, ctx.kernel, &implementations));
  auto& [pd, done] = found;
  if (residual != kNoId && done == 0) {
    return Status::Unimplemented(NodeLabel(n) + ": oneDNN takes no sum post-op here");
  }
  auto k = std::make_unique<StepKernel>(
      ctx, spec.name + " (" + ImplName(pd) + ")" + PostOpNote(done, chain.size()));
  k->SetPostOpNodes(folded + done);
  k->set_implementations(std::move(implementations));
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
  KernelImplementations implementations;
  FUSOR_ASSIGN_OR_RETURN(auto found, LongestPrefix<Pd>(ops, view, make, NodeLabel(n), PlainDims,
                                                       ctx.kernel, &implementations));
  auto& [pd, done] = found;
  if (bias_tensor != kNoId && done == 0) {
    return Status::Unimplemented(NodeLabel(n) + ": computed C could not be fused");
  }
  size_t chain_done = bias_tensor != kNoId ? done - 1 : done;
  auto k = std::make_unique<StepKernel>(ctx, std::string(gemm ? "gemm" : "matmul") + " (" +
                                                 ImplName(pd) + ")" +
                                                 PostOpNote(chain_done, chain.size()));
  k->SetPostOpNodes(chain_done);
  k->set_implementations(std::move(implementations));
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

}  // namespace
}  // namespace onednn

using onednn::BuildConv;
using onednn::BuildConvTranspose;
using onednn::BuildMatMulLike;

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

}  // namespace fusor
