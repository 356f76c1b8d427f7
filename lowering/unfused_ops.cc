#include "lowering/unfused_ops.h"

#include "graph/op_registry.h"
#include "lowering/kernel_form.h"
#include "lowering/rnn_form.h"

namespace fusor {

std::string UnfusedKernelName(const Graph& g, const Node& n) {
  if (RunsAsInstanceNormPrimitive(g, n)) return "oneDNN normalization";
  if (!RunsAsRnnPrimitive(g, n)) return "reference fallback";
  return RnnPrimitiveForm(g, n)->implementation == RnnImplementation::kLoop ? "recurrence loop"
                                                                            : "oneDNN RNN";
}

std::map<std::string, int64_t> UnfusedOps(const Graph& g) {
  std::map<std::string, int64_t> ops;
  for (const Node& n : g.nodes()) {
    if (ClassifyNode(g, n) != OpClass::kOpaque) continue;
    std::string op = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
    if (RunsAsRnnPrimitive(g, n) || RunsAsInstanceNormPrimitive(g, n)) {
      op += " (" + UnfusedKernelName(g, n) + ")";
    }
    ++ops[op];
  }
  return ops;
}

}  // namespace fusor
