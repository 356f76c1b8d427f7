// Which recurrent nodes run as a recurrent kernel, in which form, and on which implementation:
// our recurrence loop (runtime/rnn_loop.h: the input projection of every step as one matmul, then
// the steps in one parallel region, each thread owning a slice of the hidden units) or oneDNN's
// RNN primitive (runtime/rnn_kernel.h: an ONNX LSTM as lstm_forward, a GRU as gru_forward for
// linear_before_reset 0 or lbr_gru_forward for 1). Decided here from the graph, read by the
// runtime (which builds the kernel), by lowering/threading.h (which gives it its threads) and by
// the cost model (which prices it step by step). A recurrent node without that form runs through
// the reference fallback (runtime/reference_kernel.h). Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "graph/graph.h"

namespace fusor {

enum class RnnCell { kLstm, kGru, kLbrGru };

// What runs a recurrent node of the form below.
enum class RnnImplementation : uint8_t {
  kLoop,       // Ours (runtime/rnn_loop.h), on the group's threads.
  kPrimitive,  // oneDNN's RNN primitive (runtime/rnn_kernel.h), on one thread.
};

// The primitive a recurrent node becomes, with its sizes (ONNX layout 0: X [seq, batch, input]).
struct RnnPrimitive {
  RnnCell cell = RnnCell::kLstm;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, directions = 1;
  bool reverse = false;  // A single direction, run from the last step to the first.
  RnnImplementation implementation = RnnImplementation::kLoop;

  // Gates of the weights (LSTM 4: i, f, c, o; GRU 3: u, r, o, which are ONNX's z, r, h).
  int64_t gates() const { return cell == RnnCell::kLstm ? 4 : 3; }
  // Gates of the bias: lbr_gru_forward keeps R's candidate bias apart (u, r, o, u').
  int64_t bias_gates() const { return cell == RnnCell::kGru ? 3 : 4; }
};

// The primitive `n` runs as: layout 0, the default activations, no clip, no input_forget, no
// peepholes, float32, and sequence_lens absent or a constant of the full length. Unimplemented,
// naming the node and what stands in the way, when it has another form; InvalidArgument when `n`
// is not an LSTM or GRU.
StatusOr<RnnPrimitive> RnnPrimitiveForm(const Graph& g, const Node& n);

// Whether `n` runs as a recurrent kernel, ours or oneDNN's (RnnPrimitiveForm succeeds).
bool RunsAsRnnPrimitive(const Graph& g, const Node& n);

// The implementation a recurrent node of form `p` runs on (see rnn_form.cc for the measurements
// behind the rule).
RnnImplementation RnnImplementationFor(const RnnPrimitive& p);

}  // namespace fusor
