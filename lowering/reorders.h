// The reorders a fusion group runs between plain row-major and oneDNN's channel-blocked layout
// (layout.h), as part of its record (group_lowering.h): decided here once, built by the runtime
// (the layout adapter's plain copies, an anchor's or pooling's reorders in, out and of post-op
// operands) and summed by the cost model (one kernel over the tensor each, a transpose where
// channels-last is involved). Plain data; the functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "graph/plan.h"
#include "lowering/layout.h"

namespace fusor {

enum class ReorderKind : uint8_t {
  // A blocked input the group's kernel cannot read copied to plain before it runs (the executor's
  // layout adapter); in a pooling with a prologue, every blocked input the prologue loop reads.
  kPlainCopy,
  // A blocked output the group's kernel writes plain, reordered after it into the layout the
  // tensor is stored in (channel-blocked, or channels-last where StoredChannelsLast says so).
  kBlockedOut,
  // A conv's or pooling's source into the primitive's blocked layout (from plain, or from the
  // prologue's plain scratch).
  kIn,
  // A conv's or pooling's blocked destination out to the plain tensor, or into the other kept form
  // (a channels-last destination into a blocked Concat's part, layout.h: a transpose).
  kOut,
  // A conv's plain per-element post-op operand into its blocked destination layout.
  kOperand,
};
std::string_view ReorderKindName(ReorderKind kind);

struct LayoutReorder {
  TensorId tensor = kNoId;
  ReorderKind kind = ReorderKind::kPlainCopy;
  bool transposed = false;  // To or from channels-last: a transpose, several times slower.
};

// The reorders of `group`, reading `inputs` from other groups and writing `materialized`, on
// `target`; its anchor or reduction (the first, or the one after a reduction's prologue) decides:
//   - a Conv / ConvTranspose (more than one output pixel) or a 4-D pooling that runs blocked
//     (kernel_form.h PoolingRunsBlocked) runs on blocked data: it reorders a plain input in (not a
//     stem conv, which reads it as it is: StemConvReadsPlain, or an input of one channel) or a
//     channel-blocked one into a conv that writes partial blocks channels-last (layout.h), a plain
//     output out, and a per-element binary post-op operand of a Conv that is plain or kept in the
//     other form (channels-last against blocked); with a prologue, the prologue reads plain copies
//     of blocked inputs and writes the pooling's input plain, reordered in;
//   - any other group reads a plain copy of each blocked tensor it reads and writes a blocked
//     output through a plain copy, except a loop of flat elementwise nodes over blocked tensors
//     only, which runs on them as they are.
// Where the conv runs channels-last, or a kept tensor is stored so (and so the pooling reading it
// writes), the reorder is a transpose.
std::vector<LayoutReorder> LowerReorders(const Graph& g, const FusionGroup& group,
                                         const std::vector<TensorId>& inputs,
                                         const std::vector<TensorId>& materialized,
                                         const LayoutTarget& target);

}  // namespace fusor
