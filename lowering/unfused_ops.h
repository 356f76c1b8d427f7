// The nodes that never fuse, counted per op and by how they run: each opaque node (op class
// kOpaque) runs as a group of its own, an LSTM or GRU of the form lowering/rnn_form.h accepts on
// the recurrent kernel it picks, marked "LSTM (recurrence loop)" or "LSTM (oneDNN RNN)", any other
// through the reference fallback (runtime/reference_kernel.h). `fusor inspect` and `fusor tune`'s
// summary print it. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "graph/graph.h"

namespace fusor {

// How an opaque node runs, as `fusor plan explain` names it: "recurrence loop", "oneDNN RNN" or
// "reference fallback". The cost model prices the first two step by step and the last by the
// fallback's stated rule (costmodel/cost_model.h).
std::string UnfusedKernelName(const Graph& g, const Node& n);

// Opaque nodes per op name ("domain.op" outside the default domain).
std::map<std::string, int64_t> UnfusedOps(const Graph& g);

}  // namespace fusor
