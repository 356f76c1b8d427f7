// Reduction kernels (runtime/group_kernel.h): oneDNN's pooling, reduction, softmax and layer
// normalization primitives with a prologue loop into scratch and the epilogue as post-ops;
// pooling in a channel-blocked layout; the resampling and instance-normalization primitives.
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

struct ReductionDescs {
  std::function<dnnl::primitive_desc(const dnnl::primitive_attr&)> make;
  memory::desc src, dst;
  Shape dst_dims;                               // The primitive's dst dims (keepdims form).
  std::vector<std::pair<int, TensorId>> extra;  // LayerNormalization scale / shift.
  std::vector<memory::desc> extra_md;
};

// `reads_stored`: the primitive reads `n`'s input where it is stored (no prologue writes it).
StatusOr<ReductionDescs> ReductionFor(const KernelContext& ctx, const Node& n, bool reads_stored) {
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
  const memory::desc* kept = reads_stored ? ctx.Stored(n.inputs[0]) : nullptr;
  if (kept && op == "GlobalAveragePool") {
    // Over a kept input (lowering/kernel_form.h GlobalPoolReadsKept): average pooling over the
    // whole image reads the stored form; its one-pixel output has the plain bytes in it.
    r.dst_dims = {xd[0], xd[1], 1, 1};
    r.src = *kept;
    r.dst = memory::desc(Dims(r.dst_dims), Dt::f32, memory::format_tag::any);
    memory::dims ker = {xd[2], xd[3]}, ones = {1, 1}, zeros = {0, 0};
    const memory::desc src = r.src, dst = r.dst;
    r.make = [=](const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
      return dnnl::pooling_forward::primitive_desc(eng, dnnl::prop_kind::forward_inference,
                                                   algorithm::pooling_avg_exclude_padding, src, dst,
                                                   ones, ker, zeros, zeros, zeros, attr);
    };
    return r;
  }
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

// The record's prologue loop (GroupLowering::prologue) writing the primitive's input, plain, to
// `into` in scratch.
Status AddPrologueLoop(const KernelContext& ctx, StepKernel* k, const GroupLowering& record,
                       const Arg& into) {
  Step pro;
  FUSOR_ASSIGN_OR_RETURN(pro.loop, FusedLoop::Build(*ctx.g, record.prologue, ctx.known));
  for (TensorId t : pro.loop->leaves()) pro.loop_args.push_back({t, TensorArg(t, {})});
  pro.loop_args.push_back({ctx.g->node(record.center).inputs[0], into});
  k->steps().push_back(std::move(pro));
  k->AddNote(", prologue loop into scratch");
  return Status::Ok();
}

// The layout the record reorders a prologue's output into for the pooling (lowering/reorders.h):
// channels-last where the tensor is stored so, else channel-blocked.
memory::desc PrologueOutputLayout(const GroupLowering& record, TensorId t, const Shape& dims) {
  for (const LayoutReorder& r : record.reorders) {
    if (r.tensor == t && r.kind == ReorderKind::kIn && r.transposed) return ChannelsLast(dims);
  }
  return ChannelBlocked(dims);
}

StatusOr<std::unique_ptr<GroupKernel>> BuildBlockedPooling(const KernelContext& ctx,
                                                           const GroupLowering& record) {
  const Graph& g = *ctx.g;
  const Node& n = g.node(record.center);
  const std::vector<NodeId>& epilogue = record.after;
  const bool prologue = !record.before.empty();
  FUSOR_ASSIGN_OR_RETURN(Window w, PoolWindow(g, n));
  if (n.outputs.size() > 1 && n.outputs[1] != kNoId) {
    return Status::Unimplemented(NodeLabel(n) + ": MaxPool indices output is not supported");
  }
  const Shape& xd = g.tensor(n.inputs[0]).dims;
  const Shape& yd = g.tensor(n.outputs[0]).dims;
  dnnl::pooling_forward::primitive_desc pd;
  try {
    // The stored layout (or the one the record reorders the prologue's output into) when oneDNN
    // pools it in JIT code, else the channel-blocked one.
    const memory::desc* kept = prologue ? nullptr : ctx.Stored(n.inputs[0]);
    const memory::desc want = kept ? *kept : PrologueOutputLayout(record, n.inputs[0], xd);
    try {
      pd = BlockedPoolingDesc(ctx, n, w, want, yd);
    } catch (const dnnl::error&) {
    }
    if (!pd || IsReference(pd)) pd = BlockedPoolingDesc(ctx, n, w, ChannelBlocked(xd), yd);
  } catch (const dnnl::error& e) {
    return Status::Unimplemented(NodeLabel(n) + ": blocked pooling: " + e.what());
  }
  auto k = std::make_unique<StepKernel>(ctx, n.op_type + " (" + ImplName(pd) + ")");
  StoredLayout stored = StoredOutsideTail(ctx, epilogue);
  Step main;
  main.prim = dnnl::pooling_forward(pd);
  if (!prologue) {
    main.args.push_back({DNNL_ARG_SRC, SourceIn(k.get(), n.inputs[0], PlainLayout(xd),
                                                pd.src_desc(), *ctx.engine, stored)});
  } else {
    // The prologue loop writes the pooling's input (plain) to scratch, reordered from there.
    Arg plain_src = ScratchArg(k->AddScratch(PlainLayout(xd)), PlainLayout(xd));
    FUSOR_RETURN_IF_ERROR(AddPrologueLoop(ctx, k.get(), record, plain_src));
    Arg blocked_src = ScratchArg(k->AddScratch(pd.src_desc()), pd.src_desc());
    AddReorder(k.get(), plain_src, blocked_src, *ctx.engine);
    k->NoteReorder(n.inputs[0], ReorderKind::kIn, plain_src.md, blocked_src.md);
    main.args.push_back({DNNL_ARG_SRC, blocked_src});
  }
  AddScratchpad(k.get(), &main, pd);
  FUSOR_RETURN_IF_ERROR(FinishAnchor(ctx, k.get(), std::move(main), pd.dst_desc(), yd, epilogue,
                                     n.outputs[0], /*done=*/0));
  return std::unique_ptr<GroupKernel>(std::move(k));
}

StatusOr<std::unique_ptr<GroupKernel>> BuildDnnlReduction(const KernelContext& ctx,
                                                          const GroupLowering& record) {
  const Graph& g = *ctx.g;
  const Node& n = g.node(record.center);
  const std::vector<NodeId>& epilogue = record.after;
  FUSOR_ASSIGN_OR_RETURN(ReductionDescs r, ReductionFor(ctx, n, record.before.empty()));
  if (PoolingRunsBlocked(g, n, LayoutTargetForIsa(OneDnnIsa()))) {
    auto blocked = BuildBlockedPooling(ctx, record);
    if (blocked.ok()) return blocked;
  }
  auto ops = TranslateChain(g, epilogue, n.outputs[0], ctx.known);
  DstView view = ReductionView(g.tensor(n.outputs[0]).dims, r.dst_dims);
  using Pd = dnnl::primitive_desc;
  FUSOR_ASSIGN_OR_RETURN(auto found, LongestPrefix<Pd>(ops, view, r.make, NodeLabel(n)));
  auto& [pd, done] = found;
  // Plain pooling with only a reference kernel runs blocked after all, where its channels fit
  // nChw8c (PoolingRunsBlocked at block 8).
  if (IsReference(pd) &&
      PoolingRunsBlocked(g, n, LayoutTarget{8, BrgemmConvsForIsa(OneDnnIsa())})) {
    auto blocked = BuildBlockedPooling(ctx, record);
    if (blocked.ok()) return blocked;
  }
  auto k = std::make_unique<StepKernel>(
      ctx, n.op_type + " (" + ImplName(pd) + ")" + PostOpNote(done, epilogue.size()));
  k->SetPostOpNodes(done);
  Step main;
  main.prim = dnnl::primitive(pd);
  // A pooling over the whole image writes its one-pixel output in the layout it picks, the plain
  // bytes (SameBytes); the tail loop and readers take them as plain.
  r.dst = PlainLayout(r.dst_dims);
  if (!SameBytes(pd.dst_desc(), r.dst)) {
    return Status::Internal(NodeLabel(n) + ": oneDNN writes its output in a layout (" +
                            ImplName(pd) + ") whose bytes are not the plain ones");
  }
  if (record.before.empty()) {
    if (ctx.Stored(n.inputs[0]) && *ctx.Stored(n.inputs[0]) == r.src) k->ClaimNative(n.inputs[0]);
    main.args.push_back({DNNL_ARG_SRC, TensorArg(n.inputs[0], r.src)});
  } else {
    // The prologue loop writes the reduction's input to scratch; the primitive reads it there.
    Arg src = ScratchArg(k->AddScratch(r.src), r.src);
    FUSOR_RETURN_IF_ERROR(AddPrologueLoop(ctx, k.get(), record, src));
    main.args.push_back({DNNL_ARG_SRC, src});
  }
  for (size_t i = 0; i < r.extra.size(); ++i) {
    main.args.push_back({r.extra[i].first, TensorArg(r.extra[i].second, r.extra_md[i])});
  }
  AddPostOpArgs(k.get(), &main, ops, done, view, *ctx.engine);
  AddScratchpad(k.get(), &main, pd);
  TensorId final_out = epilogue.empty() ? n.outputs[0] : g.node(epilogue.back()).outputs[0];
  main.args.push_back({DNNL_ARG_DST, TensorArg(final_out, pd.dst_desc())});
  k->steps().push_back(std::move(main));
  FUSOR_RETURN_IF_ERROR(AddTailLoop(ctx, k.get(), Tail(epilogue, done),
                                    ChainValue(g, n.outputs[0], epilogue, done), final_out));
  return std::unique_ptr<GroupKernel>(std::move(k));
}

}  // namespace
}  // namespace onednn

using onednn::AddScratchpad;
using onednn::algorithm;
using onednn::BuildDnnlReduction;
using onednn::ImplName;
using onednn::memory;
using onednn::Step;
using onednn::StepKernel;
using onednn::TensorArg;

StatusOr<std::unique_ptr<GroupKernel>> BuildReductionPrimitiveKernel(const KernelContext& ctx,
                                                                     const GroupLowering& record) {
  try {
    return BuildDnnlReduction(ctx, record);
  } catch (const dnnl::error& e) {
    return Status::Internal(NodeLabel(ctx.g->node(record.center)) + ": oneDNN: " + e.what());
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

}  // namespace fusor
