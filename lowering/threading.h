// Which fusion groups run on one thread. Waking a thread team costs more than a small kernel
// does: measured on a 2-core KVM guest, a parallel region costs ~7 us with OMP_WAIT_POLICY=passive
// and 0.5-2 us with libgomp's default spin-then-sleep (fitted `fork_ns`), while a Relu over 8192
// floats takes 0.5 us on one core and a 16x16x16 matmul 0.3 us. So a group whose work is below the
// thresholds here runs serially: the runtime sets one OpenMP thread while it builds and runs the
// group's kernels, and the cost model prices it on one core with no team to wake. One rule for
// both, so that the model predicts what the runtime does. An opaque node (run through the
// reference fallback, runtime/reference_kernel.h, or as oneDNN's RNN primitive) always runs
// serially; an LSTM or GRU on our recurrence loop (lowering/rnn_form.h) by the thresholds.
//
// Pure functions; thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "graph/graph.h"
#include "graph/plan.h"
#include "lowering/rnn_form.h"

namespace fusor {

// Below both, a group runs on the calling thread: ~10 us of work on one core of this class of
// machine (a few GFLOP/s of transcendentals, tens of GFLOP/s of FMA, ~10 GB/s of streaming).
inline constexpr double kSerialMaxFlops = 1 << 19;  // Transcendentals count 16 FLOPs each.
inline constexpr double kSerialMaxBytes = 1 << 17;  // Read and written, every node of the group.

// `rnn`: the implementation a recurrent group runs on when a caller forces one (benchmarks);
// unset, the lowering's (RnnPrimitiveForm).
bool RunsSerially(const Graph& g, const FusionGroup& group,
                  std::optional<RnnImplementation> rnn = std::nullopt);

// Elements per tile of our fused loop; a loop of one tile runs on the calling thread (no
// parallel region: even one that does not fork costs microseconds in libgomp).
inline constexpr int64_t kLoopTileElements = 4096;

// A fused loop whose tiles take no per-thread buffers (lowering/loop_lowering.h, streams: each
// value it computes is carried in registers inside a chain or written straight into an output,
// and its operands are read in place) walks longer tiles. Its ~90 ns of setup per tile was a
// quarter of a squeeze-and-excite Mul over 1x144x56x56 (53 us on one core against 43 us for the
// bare kernel, AVX-512 EPYC); a loop that keeps tiles in buffers stays at kLoopTileElements, where
// they sit in L1 (at 16384 such a loop took 8-27% longer). Four tiles per thread at least, for
// balance: `elements` split into 4 * threads, rounded up to 1024, within [kLoopTileElements,
// kStreamingTileElements]. One rule for the runtime and the cost model.
inline constexpr int64_t kStreamingTileElements = 16384;
int64_t StreamingTileElements(int64_t elements, int threads);
// The tile of a fused loop over `elements` on `threads`: longer when it streams.
inline int64_t LoopTileElements(bool streams, int64_t elements, int threads) {
  return streams ? StreamingTileElements(elements, threads) : kLoopTileElements;
}

// Our row reduction (RunsAsRowReduction) enters a parallel region only over more than one row
// and more than this many input elements; its epilogue loop only over more than one tile.
inline constexpr int64_t kRowReductionForkElements = 16384;
inline bool RowReductionForks(int64_t rows, int64_t len) {
  return rows > 1 && rows * len > kRowReductionForkElements;
}

// Our row reduction pulls its input through the fused prologue in pieces of at most a loop tile:
// rows shorter than a tile a block of whole rows at a time (GlobalAveragePool over 7x7, attention
// softmax over 128 pay the cost of a pull once per block, not once per row), a longer row chunk
// by chunk. The runtime pulls so; the cost model counts the pulls.
inline constexpr int64_t kRowReductionPullElements = kLoopTileElements;
// Rows per pull over rows of `len` elements (1 when a row takes several pulls).
inline int64_t RowReductionRowsPerPull(int64_t len) {
  return len >= kRowReductionPullElements ? 1
                                          : kRowReductionPullElements / std::max<int64_t>(len, 1);
}
// Pulls of the whole reduction over `rows` rows of `len`.
inline int64_t RowReductionPulls(int64_t rows, int64_t len) {
  if (len >= kRowReductionPullElements) {
    return rows * ((len + kRowReductionPullElements - 1) / kRowReductionPullElements);
  }
  const int64_t per = RowReductionRowsPerPull(len);
  return (rows + per - 1) / per;
}

}  // namespace fusor
