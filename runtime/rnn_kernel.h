// The recurrent lowering: an ONNX LSTM or GRU node of the form lowering/rnn_form.h names runs on
// the implementation that lowering gives it: our recurrence loop (runtime/rnn_loop.h) or
// oneDNN's RNN primitive (lstm_forward, gru_forward for linear_before_reset 0, lbr_gru_forward
// for 1; inference) instead of the reference fallback. Building it converts the node's known W, R
// and B to oneDNN's weights (ONNX stores LSTM's gates i, o, f, c, oneDNN wants i, f, c, o; GRU's
// z, r, h are oneDNN's u, r, o; lbr_gru_forward keeps the candidate's recurrent bias as a fourth
// bias gate) and reorders them into the primitive's layout once, at Bind. X, initial_h (and
// LSTM's initial_c), Y_h (and Y_c) are read and written in place (ONNX's [seq, batch, input] and
// [directions, batch, hidden] are oneDNN's tnc and ldnc; oneDNN takes LSTM's state pairs whole,
// so the missing half of a pair is zeros or scratch); Y goes through scratch when bidirectional
// (oneDNN concatenates the directions per step, ONNX keeps them apart) or when nothing reads it.
//
// A node without the primitive's form, or whose weights are unknown at build, gets Unimplemented
// naming the reason, and the executor runs it through the reference fallback.
//
// Owned by its executor; Run is not reentrant.
#pragma once

#include <memory>
#include <optional>

#include "base/status.h"
#include "lowering/rnn_form.h"
#include "runtime/group_kernel.h"

namespace fusor {

// The kernel of recurrent node `id`: on the lowering's implementation, or on `forced` (benchmarks
// and tests compare them).
StatusOr<std::unique_ptr<GroupKernel>> BuildRnnKernel(
    const KernelContext& ctx, NodeId id, std::optional<RnnImplementation> forced = std::nullopt);

}  // namespace fusor
