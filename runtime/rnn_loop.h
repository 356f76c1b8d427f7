// Our recurrent kernel: an ONNX LSTM or GRU of the form lowering/rnn_form.h accepts (default
// activations, no clip / peepholes / input_forget, layout 0; forward, reverse or bidirectional;
// GRU with linear_before_reset 0 or 1) computed as fast CPU LSTMs are:
//   1. the input projection of every step and direction at once, G = X W^T + bias, as one oneDNN
//      matmul primitive on the group's threads (the bias is Wb + Rb, except GRU's candidate Rb
//      under linear_before_reset 1, which the reset gate multiplies and the steps add);
//   2. the recurrence in one OpenMP parallel region over all steps: each thread owns a slice of
//      the hidden units (in blocks of 16) of every direction, computes the gate rows of its units
//      (R rows j, h+j, 2h+j (, 3h+j)) against h_{t-1}, then their gate arithmetic and c / h
//      updates, all thread-local; one barrier per step publishes h_t (GRU with linear_before_reset
//      0 has a second: its candidate reads r * h_{t-1} of every unit). Both directions of a
//      bidirectional node advance in the same step.
// W and R are repacked once, at Build: W for the matmul (reordered to its layout at Bind), R into
// per-block panels, each k of a panel holding the block's 16 units of every gate side by side, so
// a step streams each thread's panels once and broadcasts h_{t-1}; the panels start on a cache
// line (runtime/cache_line_vector.h), so no vector load of them reads two. The products and the
// gate math are compiled per ISA (AVX-512, AVX2, SSE) with vector_math.h's exp / sigmoid, the CPU's
// best picked at Build.
//
// X, initial_h / initial_c, Y, Y_h, Y_c are read and written in place in ONNX's layouts; the
// projection and the states live in the kernel's scratch. BuildRnnKernel (runtime/rnn_kernel.h)
// calls this once it has checked the form and that W, R and B are known at build.
//
// Owned by its executor; Run is not reentrant. Run uses the OpenMP threads the executor set for
// the group (lowering/threading.h).
#pragma once

#include <memory>

#include "base/status.h"
#include "lowering/rnn_form.h"
#include "runtime/group_kernel.h"

namespace fusor {

StatusOr<std::unique_ptr<GroupKernel>> BuildRnnLoopKernel(const KernelContext& ctx, NodeId id,
                                                          const RnnPrimitive& form);

}  // namespace fusor
