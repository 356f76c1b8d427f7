// The fallback kernel: one node that Fusor neither fuses nor lowers (an opaque op such as
// InstanceNormalization, an LSTM oneDNN's RNN primitive does not take (runtime/rnn_kernel.h), or a
// single node whose lowering fails) runs as a group of its own through the reference
// interpreter's kernel for that op (runtime/reference.h), so that no op the interpreter knows
// fails a model. Each run copies the node's inputs out of their plain row-major buffers, runs the
// reference op and copies the outputs back: correct first, not fast. The cost model prices such a
// group by a stated rule (costmodel/cost_model.cc: its FLOPs at the elementwise rate on one core,
// one loop launch, its bytes), which underprices the reference loops (docs/coverage.md).
//
// Owned by its executor; Run is not reentrant. A run that fails (an index out of range in the
// data) logs the node and writes NaN / zero outputs rather than stopping the process.
#pragma once

#include <memory>

#include "base/status.h"
#include "runtime/group_kernel.h"

namespace fusor {

// A kernel for node `id`; Unimplemented, naming the node and op, when the reference interpreter
// has no kernel for the op, a dtype the runtime does not compute in, or fails on the node's
// attributes (it is run once on the node's constants and zero activations to find out).
StatusOr<std::unique_ptr<GroupKernel>> BuildReferenceKernel(const KernelContext& ctx, NodeId id);

}  // namespace fusor
