// In-place concat: a Concat whose producers write straight into their slice of its output, so
// that the Concat group launches nothing and each concatenated tensor is written once, not twice.
// The decision is made here once, as data: LowerGroup names it as the group's form
// (KernelForm::kInPlaceConcat), the runtime's memory plan places each input inside the output's
// buffer (runtime/memory_plan.h), and the cost model prices the group at nothing moved, the
// producers' writes being priced as they are.
//
// A lone Concat runs in place when every input's slice is one contiguous range of the output and
// the input has no buffer of its own to keep:
//   - every dimension before the axis is 1 (batch 1 over channels in NCHW, or the outermost
//     dimension), so an input stored row-major is its slice of the output stored row-major; a
//     strided slice (batch > 1 over channels) keeps the copy, since every producer would need a
//     strided form of its kernel;
//   - each input is an activation a node of the graph computes (a graph input is the caller's
//     buffer, a weight or constant is shared), appears once among the inputs, and this is the first
//     Concat (in node order) reading it: a tensor has one place, so of several Concats reading it
//     only the first can hold it;
//   - the output is read or is a graph output (it has a buffer to hold the slices).
// Other readers of an input read it from the slice, which holds exactly its values. Where the
// Concat joins whole channel blocks of one image, its parts and output may be kept channel-blocked
// (lowering/layout.h): the slice of an nChw16c image holding channels [c0, c0 + k), c0 and k
// multiples of 16, is itself an nChw16c image of k channels starting c0 * H * W elements in, where
// the plain slice starts, so the same offsets hold in either layout.
//
// Pure functions of the graph and plan; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.h"
#include "graph/plan.h"

namespace fusor {

// Whether Concat `concat` meets the conditions above that do not depend on the plan.
bool ConcatFitsInPlace(const Graph& g, NodeId concat);

// Whether `group` is a lone Concat whose inputs are written in place (see above).
bool ConcatRunsInPlace(const Graph& g, const FusionGroup& group);

// Where an input of an in-place Concat is stored: inside `whole`, starting `offset` elements in.
// `whole` is the outermost in-place Concat output holding it: an input of a Concat whose output is
// itself an input of an in-place Concat sits in the latter's output.
struct ConcatSlice {
  TensorId part = kNoId;
  TensorId whole = kNoId;
  int64_t offset = 0;
};

// The slices of every in-place Concat group of `plan`, each part once.
std::vector<ConcatSlice> InPlaceConcatSlices(const Graph& g, const FusionPlan& plan);

}  // namespace fusor
