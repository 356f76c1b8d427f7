#include "graph/synthetic.h"

#include <cmath>

#include "graph/canonical.h"
#include "graph/graph_builder.h"
#include "graph/validate.h"

namespace fusor {
namespace {

TensorId LayerNorm(GraphBuilder& b, TensorId x, const Shape& s) {
  Shape row = {s[0], s[1], 1};
  Attribute axes{"axes", std::vector<int64_t>{-1}};
  TensorId mean = b.Op("ReduceMean", {x}, row, {axes});
  TensorId centred = b.Op("Sub", {x, mean}, s);
  TensorId sq = b.Op("Pow", {centred, b.Scalar(2.0)}, s);
  TensorId var = b.Op("ReduceMean", {sq}, row, {axes});
  TensorId eps = b.Op("Add", {var, b.Scalar(1e-5)}, row);
  TensorId stdev = b.Op("Sqrt", {eps}, row);
  TensorId norm = b.Op("Div", {centred, stdev}, s);
  TensorId scaled = b.Op("Mul", {norm, b.Weight({s[2]})}, s);
  return b.Op("Add", {scaled, b.Weight({s[2]})}, s);
}

TensorId Linear(GraphBuilder& b, TensorId x, const Shape& in, int64_t out) {
  Shape s = {in[0], in[1], out};
  TensorId mm = b.Op("MatMul", {x, b.Weight({in[2], out})}, s);
  return b.Op("Add", {b.Weight({out}), mm}, s);
}

TensorId Attention(GraphBuilder& b, TensorId x, const TransformerShape& t) {
  const int64_t n = t.sequence, d = t.hidden, h = t.heads, hd = d / h;
  Shape s = {1, n, d};
  TensorId qkv = Linear(b, x, s, 3 * d);
  Shape split = {1, n, h, hd}, heads = {1, h, n, hd};
  std::vector<TensorId> parts;
  for (int i = 0; i < 3; ++i) {
    TensorId slice = b.Op("Slice", {qkv, b.Ints({i * d}), b.Ints({(i + 1) * d}), b.Ints({2})}, s);
    TensorId r = b.Op("Reshape", {slice, b.Ints(split)}, split);
    parts.push_back(b.Op("Transpose", {r}, heads, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}));
  }
  TensorId kt =
      b.Op("Transpose", {parts[1]}, {1, h, hd, n}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  TensorId scores = b.Op("MatMul", {parts[0], kt}, {1, h, n, n});
  TensorId scaled =
      b.Op("Div", {scores, b.Scalar(std::sqrt(static_cast<double>(hd)))}, {1, h, n, n});
  TensorId probs = b.Op("Softmax", {scaled}, {1, h, n, n}, {{"axis", int64_t{-1}}});
  TensorId ctx = b.Op("MatMul", {probs, parts[2]}, heads);
  TensorId back = b.Op("Transpose", {ctx}, split, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  TensorId merged = b.Op("Reshape", {back, b.Ints(s)}, s);
  return Linear(b, merged, s, d);
}

TensorId FeedForward(GraphBuilder& b, TensorId x, const TransformerShape& t) {
  Shape s = {1, t.sequence, t.hidden}, wide = {1, t.sequence, 4 * t.hidden};
  TensorId up = Linear(b, x, s, 4 * t.hidden);
  TensorId div = b.Op("Div", {up, b.Scalar(std::sqrt(2.0))}, wide);
  TensorId erf = b.Op("Erf", {div}, wide);
  TensorId one = b.Op("Add", {erf, b.Scalar(1.0)}, wide);
  TensorId gate = b.Op("Mul", {up, one}, wide);
  TensorId half = b.Op("Mul", {gate, b.Scalar(0.5)}, wide);
  return Linear(b, half, wide, t.hidden);
}

}  // namespace

StatusOr<Graph> SyntheticTransformer(const TransformerShape& t) {
  if (t.layers < 1 || t.sequence < 1 || t.hidden < 1 || t.heads < 1 || t.hidden % t.heads) {
    return Status::InvalidArgument(
        "synthetic transformer: layers, sequence, hidden and heads must "
        "be positive and hidden divisible by heads");
  }
  GraphBuilder b;
  b.graph().model_name = "synthetic_transformer_" + std::to_string(t.layers);
  b.graph().opset = 13;
  Shape s = {1, t.sequence, t.hidden};
  TensorId x = b.Input(s, "input");
  for (int layer = 0; layer < t.layers; ++layer) {
    TensorId attn = b.Op("Add", {x, Attention(b, x, t)}, s);
    TensorId norm1 = LayerNorm(b, attn, s);
    TensorId ffn = b.Op("Add", {norm1, FeedForward(b, norm1, t)}, s);
    x = LayerNorm(b, ffn, s);
  }
  b.Output(x);
  b.Linked();
  ValidationLimits limits;
  limits.max_nodes = 10'000'000;
  FUSOR_RETURN_IF_ERROR(Validate(b.graph(), limits));
  return Canonicalize(b.graph());
}

}  // namespace fusor
