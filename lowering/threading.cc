#include "lowering/threading.h"

#include <algorithm>

#include "graph/op_registry.h"
#include "lowering/kernel_form.h"

namespace fusor {

bool RunsSerially(const Graph& g, const FusionGroup& group, std::optional<RnnImplementation> rnn) {
  // An opaque node runs through the reference fallback, whose loops are written for one core, or
  // on oneDNN's RNN primitive, whose steps at batch 1 are too small to share; our recurrence loop
  // splits every step's hidden units among the team.
  if (group.nodes.size() == 1 && ClassifyNode(g, g.node(group.nodes[0])) == OpClass::kOpaque) {
    const Node& n = g.node(group.nodes[0]);
    if (RunsAsInstanceNormPrimitive(g, n)) {
      // oneDNN's normalization splits the planes among the team: the thresholds decide.
    } else if (!RunsAsRnnPrimitive(g, n)) {
      return true;
    } else if (rnn.value_or(RnnPrimitiveForm(g, n)->implementation) != RnnImplementation::kLoop) {
      return true;
    }
  }
  double flops = 0, bytes = 0;
  for (NodeId id : group.nodes) {
    OpCost c = CostOfNode(g, g.node(id));
    flops += c.flops + 16 * c.transcendentals;
    bytes += static_cast<double>(c.bytes_read + c.bytes_written);
  }
  // Views move no data inside a group, but a group of views alone is a copy into its output's
  // own buffer (a 393 KB Reshape copied on one thread took longer than the Transpose after it).
  if (bytes == 0) {
    for (TensorId t : g.node(group.nodes.back()).outputs) {
      bytes += 2 * static_cast<double>(g.tensor(t).bytes());
    }
  }
  return flops < kSerialMaxFlops && bytes < kSerialMaxBytes;
}

int64_t StreamingTileElements(int64_t elements, int threads) {
  const int64_t parts = 4 * std::max(threads, 1);
  const int64_t share = (elements + parts - 1) / parts;
  return std::clamp((share + 1023) / 1024 * 1024, kLoopTileElements, kStreamingTileElements);
}

}  // namespace fusor
