#include "lowering/layout.h"

#include <algorithm>

#include "graph/op_registry.h"

namespace fusor {

namespace {

bool IsConvLike(const Node& n) { return n.op_type == "Conv" || n.op_type == "ConvTranspose"; }

bool IsPooling(const Node& n) { return n.op_type == "MaxPool" || n.op_type == "AveragePool"; }

bool MoreThanOnePixel(const Shape& s) { return s.size() == 4 && s[2] * s[3] > 1; }

// A conv whose output is a single pixel runs on plain layouts (oneDNN's choice), so it is no
// native reader or writer of blocked tensors.
bool IsBlockedConv(const Graph& g, const Node& n) {
  return IsConvLike(n) && !n.outputs.empty() && MoreThanOnePixel(g.tensor(n.outputs[0]).dims);
}

bool NativeProducer(const Graph& g, const Node& n) {
  if (IsBlockedConv(g, n) || IsPooling(n) || IsFlatElementwise(g, n)) return true;
  if (n.op_type == "BatchNormalization" && !n.inputs.empty()) {
    NodeId p = g.tensor(n.inputs[0]).producer;
    return p != kNoId && IsBlockedConv(g, g.node(p));
  }
  return false;
}

bool NativeConsumer(const Graph& g, const Node& n, TensorId t) {
  if (IsBlockedConv(g, n) || IsPooling(n)) {
    // The data input only: a weight or bias in blocked storage would be misread.
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      if (n.inputs[i] == t) return false;
    }
    return n.inputs[0] == t;
  }
  return IsFlatElementwise(g, n);
}

}  // namespace

int64_t ChannelBlockForIsa(std::string_view isa) {
  if (isa.find("avx512") != std::string_view::npos) return 16;
  if (isa.find("avx") != std::string_view::npos || isa.find("sse41") != std::string_view::npos) {
    return 8;
  }
  return 0;
}

bool IsFlatElementwise(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || ClassifyNode(g, n) != OpClass::kElementwise) return false;
  const Tensor& out = g.tensor(n.outputs[0]);
  if (out.dtype != DType::kFloat32) return false;
  for (TensorId t : n.inputs) {
    if (t == kNoId) continue;
    const Tensor& in = g.tensor(t);
    if (NumElements(in.dims) == 1) continue;
    if (in.dims != out.dims) return false;
  }
  return true;
}

bool KeptBlocked(const Graph& g, TensorId t, int64_t block) {
  if (block <= 0 || t == kNoId) return false;
  const Tensor& x = g.tensor(t);
  if (x.kind != TensorKind::kActivation || x.dtype != DType::kFloat32 || g.IsGraphOutput(t) ||
      x.producer == kNoId || !MoreThanOnePixel(x.dims) || x.dims[1] % block != 0 ||
      x.consumers.empty()) {
    return false;
  }
  const Node& producer = g.node(x.producer);
  if (!NativeProducer(g, producer)) return false;
  if (!std::all_of(x.consumers.begin(), x.consumers.end(),
                   [&](NodeId c) { return NativeConsumer(g, g.node(c), t); })) {
    return false;
  }
  if (!IsFlatElementwise(g, producer)) return true;
  // A flat node writes blocked only when it reads blocked: every non-scalar input kept too.
  return std::all_of(producer.inputs.begin(), producer.inputs.end(), [&](TensorId in) {
    return in == kNoId || NumElements(g.tensor(in).dims) == 1 || KeptBlocked(g, in, block);
  });
}

bool BrgemmConvsForIsa(std::string_view isa) {
  return isa.find("avx512_core_") != std::string_view::npos &&
         (isa.find("bf16") != std::string_view::npos || isa.find("amx") != std::string_view::npos);
}

bool ConvRunsChannelsLast(const Graph& g, const Node& n, int64_t block, bool brgemm) {
  if (!brgemm || block != 16 || (n.op_type != "Conv" && n.op_type != "ConvTranspose")) {
    return false;
  }
  const Shape& x = g.tensor(n.inputs[0]).dims;
  const Shape& y = g.tensor(n.outputs[0]).dims;
  if (x.size() != 4 || y.size() != 4 || !MoreThanOnePixel(y)) return false;
  if (KeptBlocked(g, n.inputs[0], block)) return StoredChannelsLast(g, n.inputs[0], block, brgemm);
  bool one_block = x[1] % 8 == 0 && y[1] % 8 == 0 && (x[1] % 16 == 0) == (y[1] % 16 == 0);
  return !one_block;
}

bool StoredChannelsLast(const Graph& g, TensorId t, int64_t block, bool brgemm) {
  if (!brgemm || !KeptBlocked(g, t, block)) return false;
  const Node& p = g.node(g.tensor(t).producer);
  if (p.op_type == "Conv" || p.op_type == "ConvTranspose") {
    return ConvRunsChannelsLast(g, p, block, brgemm);
  }
  if (p.op_type == "BatchNormalization") return StoredChannelsLast(g, p.inputs[0], block, brgemm);
  if (IsFlatElementwise(g, p)) {
    for (TensorId in : p.inputs) {
      if (in != kNoId && NumElements(g.tensor(in).dims) != 1) {
        return StoredChannelsLast(g, in, block, brgemm);
      }
    }
  }
  return false;  // Pooling writes the channel-blocked layout.
}

bool RunsFlatOnBlocked(const Graph& g, const FusionGroup& group,
                       const std::vector<TensorId>& inputs,
                       const std::vector<TensorId>& materialized, int64_t block) {
  if (group.kind != GroupKind::kLoop && group.kind != GroupKind::kSingle) return false;
  for (NodeId id : group.nodes) {
    if (!IsFlatElementwise(g, g.node(id))) return false;
  }
  for (TensorId t : inputs) {
    if (NumElements(g.tensor(t).dims) > 1 && !KeptBlocked(g, t, block)) return false;
  }
  return std::all_of(materialized.begin(), materialized.end(),
                     [&](TensorId t) { return KeptBlocked(g, t, block); });
}

}  // namespace fusor
