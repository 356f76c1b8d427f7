// FusedLoop: one kernel for a group of elementwise, broadcast and injective nodes, so that no
// intermediate of the group reaches memory. The loop walks cache-sized tiles of each output (in
// parallel across cores) and pulls the whole expression through each tile: a node's tile is
// computed from its inputs' tiles in small per-thread buffers, an injective or broadcast node maps
// the tile's element indices to its input's indices (affine maps, compiled once), and only tensors
// from outside the group (leaves) are read from memory. Arithmetic runs on float32 arrays in loops
// the compiler vectorises (AVX-512 and AVX2 clones where the CPU has them); integer values travel
// as floats, which is exact below 2^24 (Build refuses a Gather whose axis is longer). Four things
// keep the passes over a tile few and in L1: a value that only one arithmetic node reads, at the
// same elements, is computed inside that node's single-pass chain (blocks of 8 vectors carried
// through every step in vector registers, no tile of its own); a binary node reads a broadcast
// leaf operand (bias, layer-norm weights, per-row or per-channel scale) in place, run by run,
// instead of copying it into a tile; a node overwrites the tile of a value only it reads; and the
// last node of each output writes straight into the output. A loop left with no tile buffers at
// all (it streams: chains and broadcast operands read in place) walks tiles up to 4x longer, as
// its per-tile setup is then what costs. A one-tile loop runs on the calling thread without
// entering an OpenMP region.
//
// Resize is classed injective but a linear Resize blends: it evaluates its input once per corner
// of the 2^k neighbours (k dims that blend, 4 for bilinear) and adds the weighted values, so a
// producer fused before it is computed that many times per output element. A Pad whose pads (or
// constant_value) are computed at run time reads them from their tensor in every tile.
//
// Build is in fused_loop_compile.cc, Run and EvalRange in fused_loop_eval.cc; the values' types
// are private to those two (fused_loop_internal.h).
//
// Ownership: Build copies what it needs from the graph; memory is bound by the caller (Bind) and
// must outlive Run. Run and EvalRange are const and safe to call from several threads once bound;
// Bind is not.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "lowering/loop_lowering.h"
#include "lowering/loop_program.h"
#include "lowering/threading.h"
#include "runtime/host_tensor.h"
#include "runtime/loop_simd.h"

namespace fusor {

// Element-index buffers and value buffers reused across tiles by one thread.
class LoopScratch;

class FusedLoop {
 public:
  using Lookup = std::function<const HostTensor*(TensorId)>;
  static constexpr int64_t kDefaultTile = kLoopTileElements;
  // Run's tiles: always kDefaultTile, or longer ones (StreamingTileElements, lowering/threading.h)
  // when the loop streams: no tile of it takes a buffer. Loops that a kernel drives through
  // EvalRange (reduction prologues) keep the default.
  enum class Tiles : uint8_t { kDefault, kLongerWhenStreaming };

  // Compiles the loop `program` names (lowering/loop_program.h: a group's GroupLowering holds
  // it): each step's operands read through the step's maps, its kernel's parameters from its
  // node. Tensors the steps read but do not compute are leaves. `known` returns the values of
  // weights and constants, for parameters decoded once (clip bounds, pad values); may return null.
  static StatusOr<std::unique_ptr<FusedLoop>> Build(const Graph& g, const LoopProgram& program,
                                                    const Lookup& known,
                                                    Tiles tiles = Tiles::kDefault);
  // The same for the program of `nodes` (ascending node ids) writing `outputs`.
  static StatusOr<std::unique_ptr<FusedLoop>> Build(const Graph& g,
                                                    const std::vector<NodeId>& nodes,
                                                    const std::vector<TensorId>& outputs,
                                                    const Lookup& known,
                                                    Tiles tiles = Tiles::kDefault);
  ~FusedLoop();

  const std::vector<TensorId>& leaves() const { return leaves_; }
  // Values computed inside another value's single-pass chain (no tile of their own).
  int chained_values() const;
  // Whether Run walks longer tiles, as the lowering decides (LoopLowering::streams): every value
  // the loop computes is chained or written straight into an output, its operands read in place.
  bool streams() const { return streams_; }
  const std::vector<TensorId>& outputs() const { return outputs_; }

  // Memory of a leaf (read) or an output (written), stored as float for floating-point tensors and
  // int64 for integer ones. An output may alias a leaf of the same shape (in-place epilogues).
  void Bind(TensorId t, void* data);
  bool IsBound() const;

  // Writes every output, tile by tile, in parallel.
  void Run() const;

  // What a run on `threads` threads does, observed on one thread walking every tile that run's
  // threads would: the tile buffers the walk takes once the values kept whole are kept (none when
  // the loop streams), and which values each thread keeps whole (hoisted). Tests compare it with
  // the cost model's account of the loop. Writes the outputs, as Run does.
  // `evaluated`: the elements each computed value is evaluated at over the counted walk (values
  // kept whole were evaluated before it), as the cost model counts them (LoopEvaluation).
  struct Observation {
    int64_t tiles = 0;
    int64_t tile_buffers = 0;
    std::vector<TensorId> hoisted;
    std::unordered_map<TensorId, int64_t> evaluated;
  };
  Observation Observe(int threads) const;

  // The values of tensor `t` (a leaf or computed by the loop) at flat indices [begin, begin + n),
  // for kernels that consume the loop's values directly (fused reductions). The pointer is valid
  // until the next call with the same scratch.
  const float* EvalRange(TensorId t, int64_t begin, int64_t n, LoopScratch* scratch) const;
  std::unique_ptr<LoopScratch, void (*)(LoopScratch*)> NewScratch() const;

  struct Value;  // One tensor of the loop: a leaf or a node output with its compiled index maps.

 private:
  FusedLoop() = default;
  Status AddStep(const Graph& g, const LoopStep& step, const Lookup& known);
  void RunOutputs(const std::vector<TensorId>& outs, int64_t total) const;
  // The outputs in passes: those with as many elements share one walk over the same tiles.
  std::vector<std::vector<TensorId>> Passes() const;
  void RunTile(const std::vector<TensorId>& outs, int64_t total, int64_t begin, int64_t n,
               LoopScratch* s) const;

  std::unordered_map<TensorId, std::unique_ptr<Value>> values_;
  std::vector<TensorId> leaves_, outputs_;
  std::unordered_map<TensorId, void*> output_data_;
  bool streams_ = false;
};

}  // namespace fusor
