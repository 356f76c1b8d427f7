// Which tensors stay in oneDNN's channel-blocked layout (nChw8c on AVX2, nChw16c on AVX-512)
// between fusion groups. Convolutions and pooling run on that layout; a plain NCHW tensor between
// two of them costs a reorder out of the first and one into the second, each a pass over the
// tensor. So a tensor is kept blocked when every node that writes or reads it can do so natively:
//
//   producer   Conv / ConvTranspose, 4-D MaxPool / AveragePool, a BatchNormalization of a Conv's
//              output (folded into the conv's weights), a flat elementwise node whose full
//              operands are all kept blocked (so that it reads and writes one layout), or a
//              blocked Concat (below);
//   consumers  Conv / ConvTranspose reading it as their data input, 4-D pooling, a 4-D
//              GlobalAveragePool (oneDNN's pooling reads the stored form), flat elementwise nodes
//              reading it as a full operand (the residual Add of a ResNet block, the Relu after
//              it, the per-channel Mul of a squeeze-and-excite block), a blocked Concat;
//
// A blocked Concat joins whole channel blocks of one image in place (lowering/concat_in_place.h:
// a slice of channels [c0, c0 + k) of an nChw16c image, c0 and k multiples of 16, is an nChw16c
// image of k channels where the plain slice is), so its producers write their slices blocked and
// its readers read the whole blocked: Inception and Fire modules, DenseNet blocks. It needs every
// part written blocked by its producer and read by no other Concat, and an output read by blocked
// readers other than a Concat. A part is stored blocked even where its producer runs channels-last
// (a conv after a channels-last input: GoogLeNet's 3x3 convs after its 24-channel reduce convs):
// the conv's or pooling's destination is reordered into its slice (a transpose, as it was out to
// a plain Concat before), and a flat loop reading channels-last writes it through a plain copy
// (RunsFlatOnBlocked). Where
// the plan does not run it in place (fused with other nodes), the group pays the reorders of any
// kernel that cannot read blocked data.
//
// where "flat" means every input is a single element, has the output's shape (a full operand),
// or is a plain broadcast whose bytes are the same in every stored form (one value per channel or
// per pixel: IsStorageFreeBroadcast). Such a node runs as a loop over the stored form's dims
// (StoredFormView: [N,H,W,C] or [N,C/16,H,W,16]), each operand read where it is stored; a graph
// input, weight or constant full operand is plain, so a flat node reading one writes plain. This
// keeps a squeeze-and-excite block's tensors in the conv's layout: the depthwise conv's output is
// read by the GlobalAveragePool and the per-channel Mul in its stored form, and the Mul writes the
// projection conv's input in it, where they were transposed out to plain and back in before. The
// tensor must be 4-D float32, not a graph input or output, with more than one pixel (oneDNN keeps
// 1x1 images plain).
//
// A tensor whose channels are not whole blocks (24, 40, 72, 88, 120, 144 channels of the mobile
// nets on a 16-wide host) has no channel-blocked form as large as its plain one; it is kept
// channels-last (NHWC, the plain size for any channel count) where a conv writes it (or a
// BatchNormalization folded into one, or a pooling or flat elementwise node reading such tensors
// kept) and no Concat reads it. The conv writing it runs channels-last (ConvRunsChannelsLast), as
// oneDNN's brgemm convs do, on a target that has them (BrgemmConvsForIsa: AVX2 and later). Stored
// plain instead, each such tensor cost a reorder out of its conv and one into each reader, and the
// 8-channel blocked form between those reorders ran AVX2 kernels on AVX-512 hosts (MobileNetV3-
// Small's 16 -> 72 1x1 conv at 56x56: 0.098 ms against ONNX Runtime's 0.035 ms, whose NCHWc
// layout pads channels to the block). On a target without brgemm convs (AVX, SSE4.1) no conv runs
// channels-last, so no tensor is kept so: one of partial blocks stays plain.
//
// The rule is a property of the graph and the target (LayoutTarget), not of the plan, so a group's
// layouts (and the reorders it pays) follow from the group alone: the runtime stores tensors this
// way under every plan and the cost model charges a group for each kept-blocked tensor it cannot
// read or write natively. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "graph/plan.h"

namespace fusor {

// What the layout rules depend on in a target: oneDNN's channel block (0 keeps every tensor
// plain) and whether its convs are brgemm ones that pick channels-last (BrgemmConvsForIsa).
struct LayoutTarget {
  int64_t block = 0;
  bool brgemm = false;
};
// The layout target of an ISA name as oneDNN reports it ("avx2", "avx512_core_bf16", ...).
LayoutTarget LayoutTargetForIsa(std::string_view isa);

// Channel block of oneDNN's blocked layout for an ISA name ("avx2" -> 8, "avx512_core" -> 16).
int64_t ChannelBlockForIsa(std::string_view isa);

// out[i] = f(in[i]...) over the stored form of its operands: elementwise, float32 output, every
// input a scalar, of the output's shape (a full operand, read in the form it is stored in), or a
// storage-free broadcast of it (one value per channel, or per pixel): in a loop over the stored
// form's dims (StoredFormView) every operand is read where it is.
bool IsFlatElementwise(const Graph& g, const Node& n);

// Whether a plain `operand` broadcast over a 4-D `out` has the same bytes in every stored form of
// `out`'s dims (StoredFormDims): its dims, aligned to `out`'s, are each 1 or `out`'s, and it spans
// the channels or the pixels but not both ([1,C,1,1], [C,1,1], [1,1,H,W], [N,1,1,1]).
bool IsStorageFreeBroadcast(const Shape& operand, const Shape& out);

// Whether `t` is an operand of `n` of `n`'s output shape, more than one element.
bool IsFullOperand(const Graph& g, const Node& n, TensorId t);

// Whether a node of `group` reads an operand neither a scalar nor of its output's shape.
bool HasBroadcastOperand(const Graph& g, const FusionGroup& group);

// The dims of a tensor of (up to) 4-D `dims` as stored: channels-last [N,H,W,C], or channel-
// blocked [N,C/block,H,W,block] (a dim of 1 channel stays 1 in both). A scalar keeps its dims.
Shape StoredFormDims(const Shape& dims, bool channels_last, int64_t block);

// `g` with the dims of every tensor `group` reads or writes as stored (StoredFormDims): a loop of
// flat elementwise nodes over it, bound to the kept buffers, computes the group, its broadcast
// operands (plain) read in place (RunsFlatOnBlocked).
Graph StoredFormView(const Graph& g, const FusionGroup& group, bool channels_last, int64_t block);

// The channel block of the channel-blocked form of a tensor of `channels` on a host of `block`:
// the host's block where the channels are whole blocks of it, else 8 (nChw8c, on a 16-wide host
// only a conv's own layout between its reorders: no kept tensor is stored so).
int64_t ChannelBlockOf(int64_t channels, int64_t block);

// Whether `t` is stored channel-blocked (or channels-last) between groups on `target` (see above).
// A target of block 0 keeps all plain.
bool KeptBlocked(const Graph& g, TensorId t, const LayoutTarget& target);

// Whether Conv / ConvTranspose `n` has no kernel on the channel-blocked layout on `target`, so that
// oneDNN runs it as gemm on plain layouts: without brgemm convs, a grouped conv whose groups'
// channels are no whole blocks of 8 and that is not depthwise (oneDNN's jit_avx2 and jit_sse41
// convs take whole blocks a group, jit_uni_dw depthwise ones; ResNeXt-50's 32 groups of 4
// channels). Such a conv reads and writes no kept tensor. Brgemm convs run every grouped conv.
bool ConvHasNoBlockedKernel(const Graph& g, const Node& n, const LayoutTarget& target);

// Where oneDNN has brgemm convolutions (3.7: f32 brg_conv_fwd / brgconv_1x1 on avx2 and every
// avx512 ISA, not on avx or sse41) it picks channels-last (NHWC) for a conv. The runtime asks for
// the channel-blocked layout instead when both channel counts fit one block (on a 16-wide host
// both multiples of 16, or both of 8 and not 16; on an 8-wide one both multiples of 8); a conv
// whose input is kept reads it in the form it is stored in. So a conv on a plain input whose
// channel counts share no block (3 against 64 channels; 24 against 144 on AVX-512) runs
// channels-last, and so does every conv after it that reads such a tensor: the form is decided
// where a chain of kept tensors starts; a conv writing a kept tensor of partial blocks runs so too
// (above), reading a channel-blocked input through a reorder. A stem conv whose chain reaches a
// Concat (StemConvReadsPlain) is the exception: it writes the blocked layout. A reorder between
// channels-last and plain is a transpose, several times slower than one from nChw16c. Without
// brgemm convs (LayoutTarget::brgemm false) no conv runs channels-last.
bool BrgemmConvsForIsa(std::string_view isa);
// Whether Conv / ConvTranspose `n` runs channels-last (see above), which a stem conv never does:
bool ConvRunsChannelsLast(const Graph& g, const Node& n, const LayoutTarget& target);
// Whether Conv `n` is a stem conv that writes the channel-blocked layout: fewer input channels
// than one block (an RGB or grayscale image, so stored plain), ungrouped, whole blocks of output
// channels, and the chain of tensors it starts reaches a Concat. oneDNN's first-layer JIT kernel
// reads such an input as plain NCHW and writes the blocked layout, so the chain runs blocked and
// the Concat can stay blocked too; a channels-last chain would leave the Concat plain, its parts
// transposed out of NHWC and its readers reordering in (SqueezeNet's first Fire module, GoogLeNet's
// first Inception module). A chain that reaches no Concat stays channels-last: oneDNN's brgconv
// 3x3 kernels on NHWC are up to 1.3x faster than the jit ones on nChw16c (ResNet-18's 3x3 128->128
// at 28x28, 3x3/2 64->128: 1.32x, 1.20x; 1x1 convs are 0.7-1.1x, 2 threads). The stem itself, one
// thread, [1,3,224,224]: ResNet's 7x7/2 1.46 ms blocked against 2.18 ms for brgconv with the
// input transposed to NHWC first, MobileNetV2's 3x3/2 0.18 against 0.31 ms, SqueezeNet's 0.28
// against 0.35 ms. On a target without brgemm convs the chain condition falls away: oneDNN's own
// choice for every such stem conv is that first-layer kernel, and no chain runs channels-last.
bool StemConvReadsPlain(const Graph& g, const Node& n, const LayoutTarget& target);
// Whether kept tensor `t` is stored channels-last: written by a conv that runs so, or by a
// BatchNormalization folded into one, or by a pooling or flat elementwise node reading such
// tensors (oneDNN pools in the layout its input is stored in). Never without brgemm convs.
bool StoredChannelsLast(const Graph& g, TensorId t, const LayoutTarget& target);

// A loop group that runs on blocked buffers as they are stored: flat elementwise nodes only, every
// tensor of the group's full shape it reads from outside and every one it writes kept blocked, the
// ones it reads all stored in one form (all channels-last, or none: StoredChannelsLast); scalars
// and broadcast operands are plain. Without a broadcast operand the loop runs unchanged (every
// operand in one element order); with one, it runs over the group's StoredFormView.
bool RunsFlatOnBlocked(const Graph& g, const FusionGroup& group,
                       const std::vector<TensorId>& inputs,
                       const std::vector<TensorId>& materialized, const LayoutTarget& target);

}  // namespace fusor
