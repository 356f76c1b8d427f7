// Adapts a group kernel that indexes plain row-major buffers to inputs stored channel-blocked
// between groups (lowering/layout.h): before the kernel runs, each blocked tensor it reads but does
// not read natively (GroupKernel::NativeLayouts) is reordered into a plain copy in scratch, which
// the kernel is bound to instead. The reorders run inside the group, so they count in its time
// (the cost model charges them: costmodel/cost_model.cc AddReorders). Outputs need no adapting: a
// kernel that cannot write blocked writes plain, and the tensor is stored plain.
#pragma once

#include <memory>
#include <vector>

#include "runtime/group_kernel.h"

namespace fusor {

// Wraps `inner` when some of `reads` (the tensors the group reads) are stored blocked and not
// native to it; returns `inner` unchanged otherwise.
std::unique_ptr<GroupKernel> AdaptToStoredLayouts(const KernelContext& ctx,
                                                  std::unique_ptr<GroupKernel> inner,
                                                  const std::vector<TensorId>& reads);

}  // namespace fusor
