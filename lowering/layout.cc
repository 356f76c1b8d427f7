#include "lowering/layout.h"

#include <algorithm>

#include "graph/op_registry.h"
#include "lowering/concat_in_place.h"

namespace fusor {

namespace {

bool IsConvLike(const Node& n) { return n.op_type == "Conv" || n.op_type == "ConvTranspose"; }

bool IsPooling(const Node& n) { return n.op_type == "MaxPool" || n.op_type == "AveragePool"; }

bool IsGlobalAveragePool(const Graph& g, const Node& n) {
  return n.op_type == "GlobalAveragePool" && n.inputs.size() == 1 &&
         g.tensor(n.inputs[0]).dims.size() == 4;
}

bool MoreThanOnePixel(const Shape& s) { return s.size() == 4 && s[2] * s[3] > 1; }

// Whether channel counts `a` and `b` fit one block of a host of `block`: both multiples of 8, and
// on a 16-wide host both multiples of 16 or neither (the runtime blocks a tensor by 16 where its
// channels allow, and oneDNN has no kernel from nChw8c to nChw16c). A conv between them reads a
// kept input in the form it is stored in (lowering/layout.h).
bool ShareOneBlock(int64_t a, int64_t b, int64_t block) {
  if (a % 8 != 0 || b % 8 != 0) return false;
  return block != 16 || (a % 16 == 0) == (b % 16 == 0);
}

// A conv whose output is a single pixel runs on plain layouts (oneDNN's choice), so it is no
// native reader or writer of blocked tensors.
bool IsBlockedConv(const Graph& g, const Node& n) {
  return IsConvLike(n) && !n.outputs.empty() && MoreThanOnePixel(g.tensor(n.outputs[0]).dims);
}

// A blocked conv that `target` has a kernel on the channel-blocked layout for.
bool JitBlockedConv(const Graph& g, const Node& n, const LayoutTarget& target) {
  return IsBlockedConv(g, n) && !ConvHasNoBlockedKernel(g, n, target);
}

bool BlockedConcat(const Graph& g, const Node& n, const LayoutTarget& target);

bool NativeProducer(const Graph& g, const Node& n, const LayoutTarget& target) {
  if (JitBlockedConv(g, n, target) || IsPooling(n) || IsFlatElementwise(g, n)) return true;
  if (n.op_type == "Concat") return BlockedConcat(g, n, target);
  if (n.op_type == "BatchNormalization" && !n.inputs.empty()) {
    NodeId p = g.tensor(n.inputs[0]).producer;
    return p != kNoId && JitBlockedConv(g, g.node(p), target);
  }
  return false;
}

bool NativeConsumer(const Graph& g, const Node& n, TensorId t, const LayoutTarget& target) {
  if (n.op_type == "Concat") return BlockedConcat(g, n, target);
  if (JitBlockedConv(g, n, target) || IsPooling(n)) {
    // The data input only: a weight or bias in blocked storage would be misread.
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      if (n.inputs[i] == t) return false;
    }
    return n.inputs[0] == t;
  }
  if (IsGlobalAveragePool(g, n)) return n.inputs[0] == t;
  return IsFlatElementwise(g, n) && IsFullOperand(g, n, t);
}

// The conditions on `t` itself: a 4-D float32 activation of more than one pixel that some node
// computes and some node reads, not a graph output.
bool BlockableTensor(const Graph& g, TensorId t, int64_t block) {
  if (block <= 0 || t == kNoId) return false;
  const Tensor& x = g.tensor(t);
  return x.kind == TensorKind::kActivation && x.dtype == DType::kFloat32 && !g.IsGraphOutput(t) &&
         x.producer != kNoId && MoreThanOnePixel(x.dims) && !x.consumers.empty();
}

// Whether `t`'s channels are whole blocks, so that its channel-blocked storage is as large as its
// plain one; any other kept tensor is stored channels-last (layout.h).
bool WholeBlocks(const Graph& g, TensorId t, int64_t block) {
  return g.tensor(t).dims[1] % block == 0;
}

// Blockable, and written blocked by its producer: a flat node writes blocked only when it reads
// blocked, every non-scalar input kept too. A tensor of partial blocks is written channels-last by
// a conv, by a BatchNormalization folded into one, or by a pooling reading such a tensor kept; on
// a target without brgemm convs nothing writes channels-last, so such a tensor stays plain.
bool WrittenBlocked(const Graph& g, TensorId t, const LayoutTarget& target) {
  if (!BlockableTensor(g, t, target.block)) return false;
  const Node& producer = g.node(g.tensor(t).producer);
  if (!NativeProducer(g, producer, target)) return false;
  if (!WholeBlocks(g, t, target.block)) {
    if (!target.brgemm) return false;
    if (IsPooling(producer)) return KeptBlocked(g, producer.inputs[0], target);
    if (producer.op_type == "BatchNormalization") return true;
  }
  if (!IsFlatElementwise(g, producer)) return true;
  // A broadcast operand is never kept (its reader is no native consumer of it): plain, its bytes
  // are the same in the full operands' stored form (IsStorageFreeBroadcast).
  return std::all_of(producer.inputs.begin(), producer.inputs.end(), [&](TensorId in) {
    return !IsFullOperand(g, producer, in) || KeptBlocked(g, in, target);
  });
}

// A Concat over the channels of one image whose parts and output are whole channel blocks, that
// runs in place (lowering/concat_in_place.h) in the channel-blocked layout: its parts are written
// blocked (IsBlockedConcatPart), none read by another Concat, and its output is read by nodes that
// read blocked data, none of them a Concat (nested Concats stay plain). Reads only the parts'
// producers and the output's readers, never a sibling's KeptBlocked, so the rule has no cycle.
bool BlockedConcat(const Graph& g, const Node& n, const LayoutTarget& target) {
  const int64_t block = target.block;
  if (n.outputs.size() != 1 || n.inputs.empty()) return false;
  const TensorId out = n.outputs[0];
  const int64_t axis = n.GetInt("axis", 0);
  if (!BlockableTensor(g, out, block) || !WholeBlocks(g, out, block) || (axis != 1 && axis != -3)) {
    return false;
  }
  const NodeId id = g.tensor(out).producer;
  if (!ConcatFitsInPlace(g, id)) return false;
  for (NodeId c : g.tensor(out).consumers) {
    const Node& reader = g.node(c);
    if (reader.op_type == "Concat" || !NativeConsumer(g, reader, out, target)) return false;
  }
  for (TensorId part : n.inputs) {
    if (!BlockableTensor(g, part, block) || !WholeBlocks(g, part, block)) return false;
    for (NodeId c : g.tensor(part).consumers) {
      if (c == id) continue;
      const Node& reader = g.node(c);
      if (reader.op_type == "Concat" || !NativeConsumer(g, reader, part, target)) return false;
    }
  }
  // A part whose producer runs channels-last is reordered into its blocked slice (a conv's, a
  // pooling's destination; a flat loop's plain copy: RunsFlatOnBlocked).
  return std::all_of(n.inputs.begin(), n.inputs.end(),
                     [&](TensorId part) { return WrittenBlocked(g, part, target); });
}

// Whether `t` is a part of a blocked Concat: stored blocked whatever form its producer runs in.
bool IsBlockedConcatPart(const Graph& g, TensorId t, const LayoutTarget& target) {
  const std::vector<NodeId>& readers = g.tensor(t).consumers;
  return std::any_of(readers.begin(), readers.end(), [&](NodeId c) {
    return g.node(c).op_type == "Concat" && BlockedConcat(g, g.node(c), target);
  });
}

}  // namespace

int64_t ChannelBlockForIsa(std::string_view isa) {
  if (isa.find("avx512") != std::string_view::npos) return 16;
  if (isa.find("avx") != std::string_view::npos || isa.find("sse41") != std::string_view::npos) {
    return 8;
  }
  return 0;
}

int64_t ChannelBlockOf(int64_t channels, int64_t block) {
  return block == 16 && channels % 16 == 0 ? 16 : 8;
}

bool IsStorageFreeBroadcast(const Shape& operand, const Shape& out) {
  if (out.size() != 4 || operand.size() > 4 || operand == out) return false;
  Shape d(4 - operand.size(), 1);
  d.insert(d.end(), operand.begin(), operand.end());
  for (size_t i = 0; i < 4; ++i) {
    if (d[i] != 1 && d[i] != out[i]) return false;
  }
  return d[1] == 1 || d[2] * d[3] == 1;
}

bool IsFlatElementwise(const Graph& g, const Node& n) {
  const OpClass c = ClassifyNode(g, n);
  if (n.outputs.size() != 1 || (c != OpClass::kElementwise && c != OpClass::kBroadcast)) {
    return false;
  }
  const Tensor& out = g.tensor(n.outputs[0]);
  if (out.dtype != DType::kFloat32) return false;
  for (TensorId t : n.inputs) {
    if (t == kNoId) continue;
    const Tensor& in = g.tensor(t);
    if (NumElements(in.dims) == 1 || in.dims == out.dims) continue;
    if (!IsStorageFreeBroadcast(in.dims, out.dims)) return false;
  }
  return true;
}

bool IsFullOperand(const Graph& g, const Node& n, TensorId t) {
  return t != kNoId && !n.outputs.empty() && g.tensor(t).dims == g.tensor(n.outputs[0]).dims &&
         NumElements(g.tensor(t).dims) > 1;
}

bool KeptBlocked(const Graph& g, TensorId t, const LayoutTarget& target) {
  if (!WrittenBlocked(g, t, target)) return false;
  const Tensor& x = g.tensor(t);
  return std::all_of(x.consumers.begin(), x.consumers.end(),
                     [&](NodeId c) { return NativeConsumer(g, g.node(c), t, target); });
}

bool ConvHasNoBlockedKernel(const Graph& g, const Node& n, const LayoutTarget& target) {
  const int64_t groups = n.GetInt("group", 1);
  if (target.brgemm || groups == 1 || !IsConvLike(n) || n.outputs.empty()) return false;
  const int64_t in = g.tensor(n.inputs[0]).dims[1], out = g.tensor(n.outputs[0]).dims[1];
  if (groups == in && out == in) return false;  // Depthwise: jit_uni_dw.
  return (in / groups) % 8 != 0 || (out / groups) % 8 != 0;
}

bool BrgemmConvsForIsa(std::string_view isa) {
  return isa.find("avx2") != std::string_view::npos || isa.find("avx512") != std::string_view::npos;
}

LayoutTarget LayoutTargetForIsa(std::string_view isa) {
  return LayoutTarget{ChannelBlockForIsa(isa), BrgemmConvsForIsa(isa)};
}

// Whether the chain of tensors `start` begins (followed through the nodes that keep a tensor's
// form: convs reading it in place, poolings, BatchNormalizations, flat elementwise nodes) reaches
// a Concat. Structural only (channel counts, op types), so that it never asks KeptBlocked, whose
// Concat rule asks this one back.
bool ChainReachesConcat(const Graph& g, TensorId start, int64_t block) {
  std::vector<TensorId> work = {start};
  std::vector<bool> seen(g.num_tensors(), false);
  seen[start] = true;
  while (!work.empty()) {
    const TensorId t = work.back();
    work.pop_back();
    const int64_t c = g.tensor(t).dims[1];
    for (NodeId id : g.tensor(t).consumers) {
      const Node& reader = g.node(id);
      if (reader.op_type == "Concat") return true;
      bool keeps_form = IsPooling(reader) || reader.op_type == "BatchNormalization" ||
                        IsFlatElementwise(g, reader);
      if (IsBlockedConv(g, reader) && reader.inputs[0] == t) {
        const int64_t out = g.tensor(reader.outputs[0]).dims[1];
        keeps_form = ShareOneBlock(c, out, block);
      }
      if (!keeps_form) continue;
      for (TensorId next : reader.outputs) {
        if (!seen[next] && BlockableTensor(g, next, block) && WholeBlocks(g, next, block)) {
          seen[next] = true;
          work.push_back(next);
        }
      }
    }
  }
  return false;
}

bool StemConvReadsPlain(const Graph& g, const Node& n, const LayoutTarget& target) {
  const int64_t block = target.block;
  if (block <= 0 || n.op_type != "Conv" || n.inputs.empty() || n.outputs.empty()) return false;
  const Shape& x = g.tensor(n.inputs[0]).dims;
  const Shape& y = g.tensor(n.outputs[0]).dims;
  if (x.size() != 4 || y.size() != 4 || !MoreThanOnePixel(y)) return false;
  if (g.tensor(n.inputs[0]).dtype != DType::kFloat32 || n.GetInt("group", 1) != 1) return false;
  // Fewer channels than a block: the input is stored plain whoever wrote it. Without brgemm convs
  // nothing runs channels-last, so every stem conv reads plain.
  if (x[1] >= block || y[1] % block != 0) return false;
  return !target.brgemm || ChainReachesConcat(g, n.outputs[0], block);
}

namespace {

// Whether conv `n` writes a kept tensor of partial blocks: its output, or the output of the
// BatchNormalization folded into it.
bool WritesPartialBlocksKept(const Graph& g, const Node& n, const LayoutTarget& target) {
  TensorId out = n.outputs[0];
  if (WholeBlocks(g, out, target.block)) return false;
  const std::vector<NodeId>& readers = g.tensor(out).consumers;
  if (readers.size() == 1 && g.node(readers[0]).op_type == "BatchNormalization" &&
      g.node(readers[0]).inputs[0] == out && !g.IsGraphOutput(out)) {
    out = g.node(readers[0]).outputs[0];
  }
  return KeptBlocked(g, out, target);
}

}  // namespace

bool ConvRunsChannelsLast(const Graph& g, const Node& n, const LayoutTarget& target) {
  const int64_t block = target.block;
  if (!target.brgemm || block <= 0 || (n.op_type != "Conv" && n.op_type != "ConvTranspose")) {
    return false;
  }
  if (StemConvReadsPlain(g, n, target)) return false;
  const Shape& x = g.tensor(n.inputs[0]).dims;
  const Shape& y = g.tensor(n.outputs[0]).dims;
  if (x.size() != 4 || y.size() != 4 || !MoreThanOnePixel(y)) return false;
  // An output of partial blocks is kept only channels-last, which the conv writes as it is.
  if (WritesPartialBlocksKept(g, n, target)) return true;
  // A kept input is read in the form it is stored in; a plain one in the conv's own choice.
  if (ShareOneBlock(x[1], y[1], block)) return StoredChannelsLast(g, n.inputs[0], target);
  return !KeptBlocked(g, n.inputs[0], target) || StoredChannelsLast(g, n.inputs[0], target);
}

bool StoredChannelsLast(const Graph& g, TensorId t, const LayoutTarget& target) {
  if (!target.brgemm || t == kNoId || g.tensor(t).producer == kNoId) return false;
  // Partial blocks are kept in no other form; a blocked Concat's parts in no other than blocked.
  if (target.block > 0 && !WholeBlocks(g, t, target.block)) return KeptBlocked(g, t, target);
  if (IsBlockedConcatPart(g, t, target)) return false;
  // The producer's form first: a Concat writes the channel-blocked layout, which settles it
  // without walking the graph for KeptBlocked.
  const Node& p = g.node(g.tensor(t).producer);
  bool channels_last = false;
  if (p.op_type == "Conv" || p.op_type == "ConvTranspose") {
    channels_last = ConvRunsChannelsLast(g, p, target);
  } else if (p.op_type == "BatchNormalization" || IsPooling(p)) {
    // oneDNN pools a kept input in the layout it is stored in and writes that layout.
    channels_last = StoredChannelsLast(g, p.inputs[0], target);
  } else if (IsFlatElementwise(g, p)) {
    for (TensorId in : p.inputs) {
      if (IsFullOperand(g, p, in)) {
        channels_last = StoredChannelsLast(g, in, target);
        break;
      }
    }
  }
  return channels_last && KeptBlocked(g, t, target);
}

namespace {

// The dims of the group's largest output: the shape its kept operands have.
const Shape& FullDimsOf(const Graph& g, const FusionGroup& group) {
  const Shape* full = &g.tensor(g.node(group.nodes.back()).outputs[0]).dims;
  for (NodeId id : group.nodes) {
    const Shape& d = g.tensor(g.node(id).outputs[0]).dims;
    if (NumElements(d) > NumElements(*full)) full = &d;
  }
  return *full;
}

bool IsFullGroupTensor(const Graph& g, const FusionGroup& group, TensorId t) {
  return NumElements(g.tensor(t).dims) > 1 && g.tensor(t).dims == FullDimsOf(g, group);
}

}  // namespace

bool RunsFlatOnBlocked(const Graph& g, const FusionGroup& group,
                       const std::vector<TensorId>& inputs,
                       const std::vector<TensorId>& materialized, const LayoutTarget& target) {
  if (group.kind != GroupKind::kLoop && group.kind != GroupKind::kSingle) return false;
  for (NodeId id : group.nodes) {
    if (!IsFlatElementwise(g, g.node(id))) return false;
  }
  int channels_last = -1;  // The form of the tensors so far; -1 before the first.
  auto same_form = [&](TensorId t) {
    const int form = StoredChannelsLast(g, t, target) ? 1 : 0;
    if (channels_last >= 0 && form != channels_last) return false;
    channels_last = form;
    return true;
  };
  for (TensorId t : inputs) {
    if (!IsFullGroupTensor(g, group, t)) continue;  // A scalar or broadcast operand, plain.
    if (!KeptBlocked(g, t, target) || !same_form(t)) return false;
  }
  // Outputs in the inputs' form (a blocked Concat's part is blocked after a channels-last input).
  return std::all_of(materialized.begin(), materialized.end(), [&](TensorId t) {
    return !IsFullGroupTensor(g, group, t) || (KeptBlocked(g, t, target) && same_form(t));
  });
}

bool HasBroadcastOperand(const Graph& g, const FusionGroup& group) {
  for (NodeId id : group.nodes) {
    const Node& n = g.node(id);
    for (TensorId t : n.inputs) {
      if (t != kNoId && NumElements(g.tensor(t).dims) > 1 && !IsFullOperand(g, n, t)) return true;
    }
  }
  return false;
}

Shape StoredFormDims(const Shape& dims, bool channels_last, int64_t block) {
  if (dims.size() > 4 || NumElements(dims) <= 1) return dims;
  Shape d(4 - dims.size(), 1);
  d.insert(d.end(), dims.begin(), dims.end());
  if (channels_last) return {d[0], d[2], d[3], d[1]};
  const int64_t b = d[1] == 1 ? 1 : block;
  return {d[0], d[1] / b, d[2], d[3], b};
}

Graph StoredFormView(const Graph& g, const FusionGroup& group, bool channels_last, int64_t block) {
  Graph view = g;
  std::vector<bool> done(g.num_tensors(), false);
  for (NodeId id : group.nodes) {
    const Node& n = g.node(id);
    for (const std::vector<TensorId>* list : {&n.inputs, &n.outputs}) {
      for (TensorId t : *list) {
        if (t == kNoId || done[t]) continue;
        done[t] = true;
        view.mutable_tensor(t).dims = StoredFormDims(g.tensor(t).dims, channels_last, block);
      }
    }
  }
  return view;
}

}  // namespace fusor
