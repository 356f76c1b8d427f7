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

// The implementation a recurrent node of form `p` runs on: ours, except a GRU over at least
// kRnnPrimitiveMinGruBatch batch entries, which runs on oneDNN's primitive. Measured side by side
// (bench/rnn_bench --sweep: 16 steps, input = hidden, batch 1-32, hidden 64-1024; a 2-vCPU Xeon
// guest with AVX-512 at load 9-10, so single ratios are rough; docs/benchmarks.md): oneDNN 2.6's
// LSTM (brgemm) was slower than ours on one core in every shape but two within noise (ours
// 1.0-2.9x faster); its GEMM-based GRU beat ours on one core from batch 8 (ours 0.76-0.84x of its
// speed) and the team only brought ours to a tie there (1.01-1.31x), while below batch 8 ours led
// on the team at hidden 64 and 256 (1.04-1.80x). At a tie the primitive wins: it runs on one
// thread, with no per-step barrier to wait at when the host is loaded.
inline constexpr int64_t kRnnPrimitiveMinGruBatch = 8;
RnnImplementation RnnImplementationFor(const RnnPrimitive& p);

}  // namespace fusor
