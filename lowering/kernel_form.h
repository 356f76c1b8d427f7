// Which kernel form a fusion group takes on the oneDNN backend, where the plan's group kind leaves
// a choice: a reduction group as our row-reduction loop or as a oneDNN primitive, an elementwise
// loop group also as one oneDNN eltwise / binary primitive with post-ops (timed against our fused
// loop). Decided here from the graph, read by the runtime (which builds that form) and by the cost
// model (which prices it). Pure functions; thread-safe.
#pragma once

#include <vector>

#include "graph/graph.h"
#include "graph/plan.h"
#include "lowering/layout.h"

namespace fusor {

// Whether elementwise `nodes` (ascending) writing `materialized` also have the form of one oneDNN
// eltwise or binary primitive with post-ops, which the runtime times against our fused loop and
// keeps when faster: one output, the last node's; a head node (an eltwise op, x * Sigmoid(x), or a
// binary op whose first operand has the output's shape) and then a post-op chain as anchors take.
bool HasPrimitiveChainForm(const Graph& g, const std::vector<NodeId>& nodes,
                           const std::vector<TensorId>& materialized);

// Whether a kReduction group (or a single reduction node) runs as our row-reduction loop, which
// evaluates any prologue inside it, rather than as a oneDNN reduction / softmax primitive: when
// its reduction reduces rows (graph/node_attrs.h) and it has a prologue or is not a Softmax.
// oneDNN 2.6 runs a plain-layout reduction with a reference kernel on AVX2 (GlobalAveragePool
// 1280x7x7: 150 us, against 10 us for our loop with a Relu prologue over 1024x7x7). A
// GlobalAveragePool with no prologue over a tensor kept blocked on `target`
// (GlobalPoolReadsKept) runs as oneDNN's pooling on the stored form instead.
bool RunsAsRowReduction(const Graph& g, const FusionGroup& group, const LayoutTarget& target = {});

// Whether `group` starts with a GlobalAveragePool over a tensor kept blocked or channels-last on
// `target` (lowering/layout.h): oneDNN's average pooling over the whole image reads it in place
// (JIT kernels on nChw16c and NHWC: [1,672,14,14] 2.6-2.9 us, 2 threads, Zen 5), where our row
// reduction would read a plain copy (a reorder, ~2x the pooling's own time).
bool GlobalPoolReadsKept(const Graph& g, const FusionGroup& group, const LayoutTarget& target);

// Whether Resize node `n` runs as oneDNN's resampling primitive (resampling_linear) rather than
// in our fused loop: linear over the spatial dims only (batch and channels kept), half_pixel
// coordinates (or pytorch_half_pixel with every resized output dim over 1), float32, and each
// scale equal to output / input (oneDNN derives its coordinates from the dims). oneDNN's linear
// resampling is ONNX's half_pixel blend with edge clamping, vectorised over the channels; our loop
// gathers the four corners of each output element one index at a time.
bool RunsAsResampling(const Graph& g, const Node& n);

// Whether InstanceNormalization node `n` runs on oneDNN rather than through the reference
// fallback: float32, at least 3-D and not empty, scale and bias of one value per channel. Each
// (image, channel) plane is a row that oneDNN's layer normalization normalises by its own mean
// and variance, then one binary primitive applies the per-channel scale and shift (two
// launches). A GroupNorm exports as Reshape -> InstanceNormalization -> Reshape -> Mul -> Add, so
// this is how a 1-D conv audio encoder's normalisations run.
bool RunsAsInstanceNormPrimitive(const Graph& g, const Node& n);

// Whether 4-D MaxPool / AveragePool `n` runs on oneDNN's channel-blocked layout on `target`
// (lowering/layout.h), reordering a plain input in and a plain output out,
// rather than on plain NCHW. oneDNN 2.6 pools plain NCHW with its `simple_nchw` reference kernel
// on AVX2, ~100x slower than the jit kernel on nChw8c, so channels that are a multiple of 8 run
// blocked. On AVX-512 (block 16) channels that are no whole 16-channel block are the exception:
// nChw8c runs the AVX2 kernel and padding to nChw16c takes oneDNN's generic reorder, while plain
// NCHW has an AVX-512 jit kernel (ShuffleNetV2's stem MaxPool, 24 channels 112x112, 2 threads:
// 0.12 ms plain against 0.38 ms for reorder in, nChw8c pooling and reorder out), so they run plain,
// unless their input is kept channels-last (layout.h): oneDNN pools that layout in AVX-512 code.
// The runtime still runs blocked where oneDNN offers only a reference kernel for the plain form.
bool PoolingRunsBlocked(const Graph& g, const Node& n, const LayoutTarget& target);

}  // namespace fusor
