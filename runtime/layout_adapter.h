// Adapts a group kernel that indexes plain row-major buffers to tensors stored channel-blocked
// between groups (lowering/layout.h): before the kernel runs, each blocked tensor it reads but does
// not read natively (GroupKernel::NativeLayouts) is reordered into a plain copy in scratch, which
// the kernel is bound to instead; after it runs, each output its record stores blocked though the
// kernel writes it plain (ReorderKind::kBlockedOut) is reordered from a plain copy into oneDNN's
// channel-blocked layout, so its readers find it as the layout rule says. The reorders run inside
// the group, so they count in its time (the cost model charges the record's:
// lowering/reorders.h).
#pragma once

#include <memory>
#include <vector>

#include "lowering/group_lowering.h"
#include "runtime/group_kernel.h"

namespace fusor {

// Wraps `inner` when some of `reads` (the tensors the group reads) are stored blocked and not
// native to it, or when `record` stores an output blocked that `inner` writes plain; returns
// `inner` unchanged otherwise.
std::unique_ptr<GroupKernel> AdaptToStoredLayouts(const KernelContext& ctx,
                                                  std::unique_ptr<GroupKernel> inner,
                                                  const GroupLowering& record,
                                                  const std::vector<TensorId>& reads);

}  // namespace fusor
