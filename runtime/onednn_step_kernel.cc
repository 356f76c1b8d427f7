// The step kernel and the pieces the oneDNN kernel builders share (runtime/onednn_step_kernel.h),
// and the layouts and attributes every kernel uses (runtime/group_kernel.h).
#include "runtime/onednn_step_kernel.h"

#include <functional>
#include <numeric>

#include "lowering/layout.h"
#include "runtime/onednn_info.h"

namespace fusor {

dnnl::memory::desc PlainLayout(const Shape& dims) {
  Shape d = dims.empty() ? Shape{1} : dims;
  std::vector<int64_t> strides = RowMajorStrides(d);
  return dnnl::memory::desc(dnnl::memory::dims(d.begin(), d.end()), dnnl::memory::data_type::f32,
                            dnnl::memory::dims(strides.begin(), strides.end()));
}

dnnl::memory::desc ChannelBlocked(const Shape& dims) {
  bool wide = ChannelBlockOf(dims[1], ChannelBlockForIsa(OneDnnIsa())) == 16;
  return dnnl::memory::desc(
      dnnl::memory::dims(dims.begin(), dims.end()), dnnl::memory::data_type::f32,
      wide ? dnnl::memory::format_tag::nChw16c : dnnl::memory::format_tag::nChw8c);
}

dnnl::memory::desc ChannelsLast(const Shape& dims) {
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()),
                            dnnl::memory::data_type::f32, dnnl::memory::format_tag::nhwc);
}

dnnl::memory::desc StoredLayoutOf(const Graph& g, TensorId t, const LayoutTarget& target) {
  const Shape& dims = g.tensor(t).dims;
  return StoredChannelsLast(g, t, target) ? ChannelsLast(dims) : ChannelBlocked(dims);
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

namespace onednn {

void StepKernel::NoteReorder(TensorId t, ReorderKind kind, const memory::desc& from,
                             const memory::desc& to) {
  reorders_.push_back({t, kind, IsChannelsLast(from) || IsChannelsLast(to)});
  AddNote(", reorder " + std::string(ReorderKindName(kind)));
}

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

const memory::desc* NoneStored(TensorId /*t*/) { return nullptr; }

void AddPostOpArgs(StepKernel* k, Step* step, const std::vector<std::vector<PostOp>>& ops,
                   size_t count, const DstView& view, dnnl::engine& engine,
                   const OperandLayout& layout, const StoredLayout& stored) {
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
        } else if (SameBytes(md, from)) {
          step->args.push_back({key, TensorArg(p.operand, md)});
        } else {
          // A per-element operand is read in the primitive's blocked dst layout: reorder it first.
          Arg to = ScratchArg(k->AddScratch(md), md);
          AddReorder(k, TensorArg(p.operand, from), to, engine);
          k->NoteReorder(p.operand, ReorderKind::kOperand, from, md);
          step->args.push_back({key, to});
        }
      }
      ++index;
    }
  }
}

std::string ImplName(const dnnl::primitive_desc_base& pd) { return pd.impl_info_str(); }

bool IsReference(const dnnl::primitive_desc_base& pd) { return ImplName(pd).rfind("ref", 0) == 0; }

int IsaRank(const dnnl::primitive_desc_base& pd) {
  std::string name = ImplName(pd);
  if (name.find("amx") != std::string::npos) return 4;
  if (name.find("avx512") != std::string::npos) return 3;
  if (name.find("avx2") != std::string::npos) return 2;
  if (name.find("sse41") != std::string::npos) return 1;
  return 0;
}

bool SameBytes(const memory::desc& a, const memory::desc& b) {
  if (a == b) return true;
  const auto blocked = memory::format_kind::blocked;
  if (a.get_format_kind() != blocked || b.get_format_kind() != blocked ||
      a.get_dims() != b.get_dims() || a.get_data_type() != b.get_data_type() ||
      a.get_size() != b.get_size()) {
    return false;
  }
  const memory::dims dims = a.get_dims();
  // Dense and unpadded, a tensor with one dim longer than 1 is stored in that dim's order.
  const int64_t elements =
      std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
  const bool dense = static_cast<int64_t>(a.get_size()) ==
                     elements * static_cast<int64_t>(memory::data_type_size(a.get_data_type()));
  if (dense && std::count_if(dims.begin(), dims.end(), [](int64_t d) { return d > 1; }) <= 1) {
    return true;
  }
  if (a.get_inner_nblks() != 0 || b.get_inner_nblks() != 0) return false;
  const memory::dims sa = a.get_strides(), sb = b.get_strides();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] > 1 && sa[i] != sb[i]) return false;
  }
  return true;
}

bool IsChannelsLast(const memory::desc& md) {
  return md.get_ndims() == 4 && md.get_format_kind() == memory::format_kind::blocked &&
         md.get_inner_nblks() == 0 && md.get_strides()[1] == 1 && md.get_dims()[1] > 1;
}

void AddScratchpad(StepKernel* k, Step* step, const dnnl::primitive_desc_base& pd) {
  memory::desc sp = pd.scratchpad_desc();
  if (sp.get_size() == 0) return;
  step->args.push_back({DNNL_ARG_SCRATCHPAD, ScratchArg(k->AddScratch(sp), sp)});
}

Arg SourceIn(StepKernel* k, TensorId t, const memory::desc& plain, const memory::desc& want,
             dnnl::engine& engine, const StoredLayout& stored) {
  const memory::desc* kept = stored(t);
  memory::desc from = kept ? *kept : plain;
  if (kept) k->ClaimNative(t);
  if (SameBytes(want, from)) return TensorArg(t, want);
  Arg to = ScratchArg(k->AddScratch(want), want);
  AddReorder(k, TensorArg(t, from), to, engine);
  k->NoteReorder(t, ReorderKind::kIn, from, want);
  return to;
}

std::vector<NodeId> Tail(const std::vector<NodeId>& chain, size_t k) {
  return std::vector<NodeId>(chain.begin() + static_cast<std::ptrdiff_t>(k), chain.end());
}

TensorId ChainValue(const Graph& g, TensorId start, const std::vector<NodeId>& chain, size_t k) {
  return k == 0 ? start : g.node(chain[k - 1]).outputs[0];
}

Status FinishAnchor(const KernelContext& ctx, StepKernel* k, Step main, const memory::desc& dst_md,
                    const Shape& out_dims, const std::vector<NodeId>& chain, TensorId start,
                    size_t done, const std::optional<Arg>& sum_from) {
  const Graph& g = *ctx.g;
  TensorId final_out = chain.empty() ? start : g.node(chain.back()).outputs[0];
  memory::desc plain = PlainLayout(out_dims);
  bool stays_blocked = done == chain.size() && dst_md != plain &&
                       dst_md.get_size() == plain.get_size() && ctx.KeepsBlocked(final_out);
  // Kept in the other form than the primitive writes (a channels-last conv writing a part of a
  // channel-blocked Concat, lowering/layout.h): reordered into it.
  const memory::desc kept =
      stays_blocked ? StoredLayoutOf(g, final_out, ctx.layout) : memory::desc();
  const bool into_kept = stays_blocked && IsChannelsLast(kept) != IsChannelsLast(dst_md);
  bool reorder_out = (!stays_blocked && !SameBytes(dst_md, plain)) || into_kept;
  Arg dst = reorder_out ? ScratchArg(k->AddScratch(dst_md), dst_md) : TensorArg(final_out, dst_md);
  if (sum_from) {
    AddReorder(k, *sum_from, dst, *ctx.engine);
    k->AddNote(", residual copied to dst for a sum post-op");
  }
  main.args.push_back({DNNL_ARG_DST, dst});
  k->steps().push_back(std::move(main));
  if (into_kept) {
    AddReorder(k, dst, TensorArg(final_out, kept), *ctx.engine);
    k->NoteReorder(final_out, ReorderKind::kOut, dst_md, kept);
    k->StoreBlocked(final_out, kept);
    return Status::Ok();
  }
  if (stays_blocked) {
    k->StoreBlocked(final_out, dst_md);
    return Status::Ok();
  }
  if (reorder_out) {
    AddReorder(k, dst, TensorArg(final_out, plain), *ctx.engine);
    k->NoteReorder(final_out, ReorderKind::kOut, dst_md, plain);
  }
  return AddTailLoop(ctx, k, Tail(chain, done), ChainValue(g, start, chain, done), final_out);
}

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

const HostTensor* KnownFloat(const KernelContext& ctx, TensorId t) {
  if (t == kNoId || ctx.g->tensor(t).kind == TensorKind::kActivation) return nullptr;
  const HostTensor* h = ctx.known(t);
  return h && h->is_float() ? h : nullptr;
}

DnnlWindow ToDnnl(const Window& w) {
  DnnlWindow d{memory::dims(w.strides.begin(), w.strides.end()),
               {},
               memory::dims(w.pad_begin.begin(), w.pad_begin.end()),
               memory::dims(w.pad_end.begin(), w.pad_end.end())};
  for (int64_t v : w.dilations) d.dilates.push_back(v - 1);
  return d;
}

}  // namespace onednn
}  // namespace fusor
