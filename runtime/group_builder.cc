#include "runtime/group_builder.h"

#include <spdlog/spdlog.h>

#include "runtime/reference_kernel.h"
#include "runtime/rnn_kernel.h"

namespace fusor {
namespace {

StatusOr<std::unique_ptr<GroupKernel>> BuildForm(const KernelContext& ctx, const GroupLowering& r,
                                                 const BuildChoices& choices) {
  switch (r.form) {
    case KernelForm::kRnnPrimitive:
      if (choices.lower_rnn) return BuildRnnKernel(ctx, r.center, r.rnn);
      return BuildReferenceKernel(ctx, r.center);
    case KernelForm::kReference:
      return BuildReferenceKernel(ctx, r.center);
    case KernelForm::kAnchorPrimitive:
      return BuildAnchorKernel(ctx, r.center, r.after);
    case KernelForm::kRowReduction:
      return BuildRowReductionKernel(ctx, r);
    case KernelForm::kReductionPrimitive:
      return BuildReductionPrimitiveKernel(ctx, r);
    case KernelForm::kFusedLoop: {
      // A loop over kept tensors' stored form is built from that view of the graph.
      KernelContext over = ctx;
      if (r.storage_view) over.g = r.storage_view.get();
      return BuildLoopKernel(over, r.loop);
    }
    case KernelForm::kResampling:
      return BuildResamplingKernel(ctx, r.center);
    case KernelForm::kInstanceNorm:
      return BuildInstanceNormKernel(ctx, r.center);
    case KernelForm::kInPlaceConcat:
      return BuildInPlaceConcatKernel(ctx, r.center);
  }
  return Status::Internal("unknown kernel form");
}

StatusOr<std::unique_ptr<GroupKernel>> BuildAlternative(const KernelContext& ctx,
                                                        const GroupLowering& r) {
  switch (r.alternative) {
    case KernelAlternative::kPrimitiveChain:
      return BuildChainPrimitiveKernel(ctx, r.after);
    case KernelAlternative::kResidualSum:
      return BuildResidualSumKernel(ctx, r.center, r.after);
    case KernelAlternative::kNone:
      break;
  }
  return Status::Internal("no alternative");
}

// Whether the choices leave the record's alternative out, time it, or take it outright.
enum class Use { kNever, kTimed, kAlways };
Use UseOf(KernelAlternative alternative, const BuildChoices& choices) {
  switch (alternative) {
    case KernelAlternative::kPrimitiveChain:
      return choices.chain_backend == ChainBackend::kFusedLoop ? Use::kNever
             : choices.chain_backend == ChainBackend::kOneDnn  ? Use::kAlways
                                                               : Use::kTimed;
    case KernelAlternative::kResidualSum:
      return choices.residual_add == ResidualAdd::kBinary ? Use::kNever
             : choices.residual_add == ResidualAdd::kSum  ? Use::kAlways
                                                          : Use::kTimed;
    case KernelAlternative::kNone:
      break;
  }
  return Use::kNever;
}

}  // namespace

StatusOr<GroupKernels> BuildGroupKernels(const KernelContext& ctx, const GroupLowering& record,
                                         const BuildChoices& choices) {
  GroupKernels out;
  out.form = record.form;
  auto kernel = BuildForm(ctx, record, choices);
  if (record.form == KernelForm::kRnnPrimitive && !choices.lower_rnn) {
    out.form = KernelForm::kReference;
  }
  // A single node whose lowering is refused runs through the reference fallback instead, when the
  // interpreter runs it; otherwise the lowering's error stands.
  const bool alone = record.before.size() + record.after.size() + (record.center != kNoId) == 1;
  if (!kernel.ok() && alone && kernel.status().code() == Status::Code::kUnimplemented &&
      out.form != KernelForm::kReference) {
    const NodeId node = record.center != kNoId ? record.center : record.after[0];
    auto fallback = BuildReferenceKernel(ctx, node);
    if (fallback.ok()) {
      spdlog::info("executor: node '{}' ({}) runs through the reference fallback: {}",
                   ctx.g->node(node).name, ctx.g->node(node).op_type, kernel.status().message());
      kernel = std::move(fallback);
      out.form = KernelForm::kReference;
    }
  }
  if (!kernel.ok()) return kernel.status();
  out.kernel = std::move(kernel).value();
  const Use use = out.form == record.form ? UseOf(record.alternative, choices) : Use::kNever;
  if (use == Use::kNever) return out;
  // oneDNN may still refuse the alternative on this CPU (a reference implementation only, or no
  // sum post-op for this convolution): the record's form runs alone then.
  auto alternative = BuildAlternative(ctx, record);
  if (!alternative.ok()) {
    spdlog::debug("executor: no {} for node '{}': {}", KernelAlternativeName(record.alternative),
                  ctx.g->node(record.center != kNoId ? record.center : record.after[0]).name,
                  alternative.status().message());
    return out;
  }
  out.built_alternative = record.alternative;
  if (use == Use::kAlways) {
    out.kernel = std::move(alternative).value();
    out.alternative_is_kernel = true;
  } else {
    out.alternative = std::move(alternative).value();
  }
  return out;
}

}  // namespace fusor
