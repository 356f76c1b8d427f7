// The kernel of an anchor group as a choice among oneDNN's implementations. oneDNN offers, for
// one primitive descriptor (the group's layouts and post-ops), a list of implementations in its
// order of preference (primitive_desc::next_impl), each named by impl_info_str ("gemm:jit:f32",
// "brg_matmul:avx2", "brgconv:avx512_core", "ref:any"). Its first choice is not always the
// fastest (with DNNL_MAX_CPU_ISA=AVX2 on a Zen 5 host, gemm:jit:f32 against brg_matmul:avx2 on a
// 128x768x3072 MatMul: 1.7x), so the tuner times the offered ones (search/kernel_choice.h) and the
// plan records the winner by name (FusionGroup::kernel). A run builds exactly the named one; when
// this CPU or this oneDNN does not offer it, the group is refused with an error naming it and the
// ones offered, never silently run on another (docs/decisions.md, "The kernel is part of the
// plan").
//
// Pure functions over oneDNN primitive descriptors; thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "base/status.h"

namespace fusor {

// What a group's primitive was built as, and what it could have been.
struct KernelImplementations {
  std::string built;                 // The implementation running: oneDNN's name for it.
  std::vector<std::string> offered;  // Every implementation offered, oneDNN's first choice first.
};

// The names of the implementations a fresh descriptor from `make` steps through, first first,
// each once. `make` may throw dnnl::error (the caller's descriptor is refused outright).
std::vector<std::string> OfferedImplementations(const std::function<dnnl::primitive_desc()>& make);

// The error for a plan naming `kernel` for `what` ("node 'mm_3'") where only `offered` exist.
Status KernelNotOffered(const std::string& what, const std::string& kernel,
                        const std::vector<std::string>& offered);

// A descriptor from `make` stepped to the implementation named `kernel` (oneDNN's first choice
// when `kernel` is empty), with what was offered in `*implementations`; FailedPrecondition
// (KernelNotOffered) when no implementation has that name. `make` may throw dnnl::error.
template <typename Pd>
StatusOr<Pd> ChooseImplementation(const std::function<Pd()>& make, const std::string& kernel,
                                  const std::string& what, KernelImplementations* implementations) {
  implementations->offered = OfferedImplementations([&] { return make(); });
  Pd pd = make();
  while (!kernel.empty() && pd.impl_info_str() != kernel) {
    if (!pd.next_impl()) return KernelNotOffered(what, kernel, implementations->offered);
  }
  implementations->built = pd.impl_info_str();
  return pd;
}

}  // namespace fusor
