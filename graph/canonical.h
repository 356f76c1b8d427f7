// The canonical form of a graph: an order of its nodes and a structural hash that depend only on
// the computation, not on node names, tensor names or the order of nodes in the file. Weight values
// never enter the hash (plans depend on shapes only); the values of small constants do, because
// they parameterise ops (a Slice's starts, a Clip's bounds).
//
// How: each node gets a forward digest (op, domain, attributes, output dtypes and dims, and the
// digests of what feeds each input slot: a producer's digest and output index, a graph input's
// position, a weight's dtype and dims, a constant's values) and a backward digest (the digests of
// its consumers and the slots they read it through, and graph-output positions). Nodes are sorted
// topologically with ties broken by (forward, backward) digest; the hash is SHA-256 over the graph
// serialised in that order with every edge named by canonical indices, so sharing (one weight or
// activation read by two nodes) is part of it. Nodes equal in both digests are interchangeable in
// all graphs Fusor has seen; the rare exception (an automorphism the digests cannot tell apart) can
// only give two hashes for one computation, never one hash for two computations.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"

namespace fusor {

// The canonical topological order of the nodes of a linked, acyclic graph.
std::vector<NodeId> CanonicalOrder(const Graph& g);

// The graph with its nodes in canonical order (node ids become canonical indices).
Graph Canonicalize(const Graph& g);

// 64 hex characters of SHA-256 over the canonical serialisation.
std::string CanonicalHash(const Graph& g);

}  // namespace fusor
