// Conversion between the IR and the wire form fusor.v1.Graph. ToProto(FromProto(p)) == p and
// FromProto(ToProto(g)) reproduces g exactly (names, order, attributes, constants). FromProto takes
// untrusted input (it is what the server receives): unknown tensor names, bad enum values and
// duplicate names are errors naming the offender; it links and validates the result.
// Pure functions; thread-safe.
#pragma once

#include "base/status.h"
#include "graph/graph.h"
#include "graph/validate.h"
#include "proto/graph.pb.h"

namespace fusor {

fusor::v1::Graph ToProto(const Graph& g);
StatusOr<Graph> FromProto(const fusor::v1::Graph& p, const ValidationLimits& limits = {});

}  // namespace fusor
