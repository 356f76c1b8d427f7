// The chain primitive kernel (runtime/group_kernel.h BuildChainPrimitiveKernel): an eltwise or
// binary primitive for the head of an elementwise chain, the rest of the chain as its post-ops.
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
#include "runtime/onednn_step_kernel.h"
#include "runtime/op_params.h"

namespace fusor {

using onednn::AddPostOpArgs;
using onednn::AddScratchpad;
using onednn::algorithm;
using onednn::AppendPostOps;
using onednn::GatePostOp;
using onednn::IdentityView;
using onednn::ImplName;
using onednn::IsReference;
using onednn::MakeAttr;
using onednn::memory;
using onednn::PostOp;
using onednn::PostOpsFor;
using onednn::Step;
using onednn::StepKernel;
using onednn::TensorArg;
using onednn::TranslateChain;

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
