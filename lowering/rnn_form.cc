#include "lowering/rnn_form.h"

#include <algorithm>
#include <string>
#include <vector>

#include "graph/dtype.h"
#include "graph/node_attrs.h"

namespace fusor {
namespace {

Status NoPrimitive(const Node& n, const std::string& why) {
  return Status::Unimplemented(NodeLabel(n) + ": " + n.op_type + " " + why +
                               " has no recurrent kernel; it runs through the reference fallback");
}

// oneDNN's RNN primitives have no per-entry sequence length: a sequence_lens must give every
// batch entry the full sequence.
bool FullSequenceLens(const Graph& g, const Node& n) {
  if (n.input(4) == kNoId) return true;
  const int64_t seq = g.tensor(n.inputs[0]).dims[0];
  StatusOr<std::vector<int64_t>> lens = ConstantInts(g, n, 4);
  return lens.ok() &&
         std::all_of(lens->begin(), lens->end(), [seq](int64_t v) { return v == seq; });
}

}  // namespace

StatusOr<RnnPrimitive> RnnPrimitiveForm(const Graph& g, const Node& n) {
  FUSOR_ASSIGN_OR_RETURN(RecurrentAttrs a, RecurrentAttrsOf(g, n));
  if (n.op_type != "LSTM" && n.op_type != "GRU")
    return NoPrimitive(n, "(only LSTM and GRU have one)");
  const Shape& x = g.tensor(n.inputs[0]).dims;
  if (x.size() != 3) return NoPrimitive(n, "over a rank != 3 X");
  if (a.batch_first) return NoPrimitive(n, "with layout=1 (batch first)");
  if (a.clip != 0.0) return NoPrimitive(n, "with clip");
  if (a.input_forget) return NoPrimitive(n, "with input_forget");
  if (!a.non_default_activation.empty()) {
    return NoPrimitive(n, "with activation '" + a.non_default_activation + "'");
  }
  if (n.op_type == "LSTM" && n.input(7) != kNoId) return NoPrimitive(n, "with peepholes");
  if (!FullSequenceLens(g, n))
    return NoPrimitive(n, "with sequence_lens other than the full length");
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    TensorId t = n.inputs[i];
    if (i != 4 && t != kNoId && g.tensor(t).dtype != DType::kFloat32) {
      return NoPrimitive(n, "over " + std::string(DTypeName(g.tensor(t).dtype)));
    }
  }
  RnnPrimitive p;
  p.cell = n.op_type == "LSTM"     ? RnnCell::kLstm
           : a.linear_before_reset ? RnnCell::kLbrGru
                                   : RnnCell::kGru;
  p.seq = x[0];
  p.batch = x[1];
  p.input = x[2];
  p.hidden = a.hidden;
  p.directions = a.directions;
  p.reverse = a.reverse;
  p.implementation = RnnImplementationFor(p);
  return p;
}

RnnImplementation RnnImplementationFor(const RnnPrimitive& p) {
  const bool gru = p.cell != RnnCell::kLstm;
  return gru && p.batch >= kRnnPrimitiveMinGruBatch ? RnnImplementation::kPrimitive
                                                    : RnnImplementation::kLoop;
}

bool RunsAsRnnPrimitive(const Graph& g, const Node& n) {
  return (n.op_type == "LSTM" || n.op_type == "GRU") &&
         (n.domain.empty() || n.domain == "ai.onnx") && RnnPrimitiveForm(g, n).ok();
}

}  // namespace fusor
