// Builds the kernels of one fusion group as its lowering record (lowering/group_lowering.h) names
// them: the record's form, and the alternative it names where oneDNN builds it. The executor
// builds every group through this, and tests/lowering checks over every bundled model that what
// is built is what the record names. Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "lowering/group_lowering.h"
#include "runtime/group_kernel.h"

namespace fusor {

// Which kernel an elementwise group with a primitive-chain form runs as.
enum class ChainBackend : uint8_t {
  kAuto = 0,       // Time both once at Create and keep the faster.
  kOneDnn = 1,     // The oneDNN primitive whenever the chain has that form.
  kFusedLoop = 2,  // Always our fused loop.
};

// How a Conv group with a per-element Add right after the conv takes the residual: as a binary
// post-op reading it, or as a sum post-op on a copy of it in dst (group_kernel.h).
enum class ResidualAdd : uint8_t {
  kTimed = 0,  // Time both once at Create and keep the faster.
  kBinary = 1,
  kSum = 2,  // Wherever oneDNN takes it.
};

struct BuildChoices {
  ChainBackend chain_backend = ChainBackend::kAuto;
  ResidualAdd residual_add = ResidualAdd::kTimed;
  // Run LSTM and GRU nodes as oneDNN's RNN primitive (runtime/rnn_kernel.h); false runs them
  // through the reference fallback (for measuring what the lowering saves).
  bool lower_rnn = true;
};

struct GroupKernels {
  std::unique_ptr<GroupKernel> kernel;
  // The record's alternative, built, when it is to be timed against `kernel` (ChooseBackends).
  std::unique_ptr<GroupKernel> alternative;
  // What `kernel` is: the record's form, or kReference for a node that fell back to the
  // reference interpreter because its lowering was refused.
  KernelForm form = KernelForm::kFusedLoop;
  // The record's alternative when it was built (as `alternative`, or as `kernel` when the
  // choices ask for it outright); kNone when the record names none or oneDNN refused it.
  KernelAlternative built_alternative = KernelAlternative::kNone;
  // `kernel` is the alternative (ChainBackend::kOneDnn with a primitive chain, ResidualAdd::kSum).
  bool alternative_is_kernel = false;
};

StatusOr<GroupKernels> BuildGroupKernels(const KernelContext& ctx, const GroupLowering& record,
                                         const BuildChoices& choices = {});

}  // namespace fusor
