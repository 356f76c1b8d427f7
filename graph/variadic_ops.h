// Rewrites ONNX's variadic elementwise ops (Max, Min, Sum, Mean: one or more inputs, broadcast
// together) into the binary ops the IR computes and fuses: a chain of Max / Min / Add nodes, a
// Mean's sum then divided by the input count, and a node of one input into an Identity, which the
// import removes. Works on the ONNX graph before shape inference, which types the new
// intermediate values. Stateless; thread-safe.
#pragma once

namespace onnx {
class GraphProto;
}

namespace fusor {

void SplitVariadicOps(onnx::GraphProto* g);

}  // namespace fusor
