// The LSTM lowering: an ONNX LSTM node runs as oneDNN's RNN primitive (lstm_forward, inference)
// instead of the reference fallback. Building it converts the node's known W, R and B to oneDNN's
// weights (ONNX stores the gates i, o, f, c; oneDNN wants i, f, c, o) and reorders them into the
// primitive's layout once, at Bind. X, initial_h / initial_c, Y_h and Y_c are read and written in
// place (ONNX's [seq, batch, input] and [directions, batch, hidden] are oneDNN's tnc and ldnc;
// oneDNN takes each state pair whole, so the missing half of a pair is zeros or scratch);
// Y goes through scratch when bidirectional (oneDNN concatenates the directions per step, ONNX
// keeps them apart) or when nothing reads it.
//
// What it does not lower stays on the reference fallback, with the reason in the Unimplemented
// status: a batch-first layout, activations other than the defaults, clip, input_forget,
// peepholes, sequence_lens that are not all the full length, weights unknown at build time.
//
// Owned by its executor; Run is not reentrant.
#pragma once

#include <memory>

#include "base/status.h"
#include "runtime/group_kernel.h"

namespace fusor {

StatusOr<std::unique_ptr<GroupKernel>> BuildLstmKernel(const KernelContext& ctx, NodeId id);

}  // namespace fusor
