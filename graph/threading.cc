#include "graph/threading.h"

#include "graph/op_registry.h"

namespace fusor {

bool RunsSerially(const Graph& g, const FusionGroup& group) {
  double flops = 0, bytes = 0;
  for (NodeId id : group.nodes) {
    OpCost c = CostOfNode(g, g.node(id));
    flops += c.flops + 16 * c.transcendentals;
    bytes += static_cast<double>(c.bytes_read + c.bytes_written);
  }
  return flops < kSerialMaxFlops && bytes < kSerialMaxBytes;
}

}  // namespace fusor
