#include "runtime/reference.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "graph/einsum.h"
#include "graph/narrow_float.h"
#include "graph/op_registry.h"
#include "graph/unique_values.h"
#include "runtime/dft.h"
#include "runtime/grid_sample.h"
#include "runtime/op_params.h"
#include "runtime/roi_align.h"
#include "runtime/tfidf_vectorizer.h"

namespace fusor {
namespace {

using Lookup = std::function<const HostTensor*(TensorId)>;

// ---------------------------------------------------------------------------------------------
// Broadcasting

std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out) {
  std::vector<int64_t> in_strides = RowMajorStrides(in);
  std::vector<int64_t> s(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[lead + i] = in[i] == 1 ? 0 : in_strides[i];
  return s;
}

// Calls f(out_flat, offsets) for every output element, offsets[j] being input j's flat index.
template <size_t N, typename F>
void ForEachBroadcast(const Shape& out, const std::array<Shape, N>& ins, F f) {
  std::array<std::vector<int64_t>, N> strides;
  for (size_t j = 0; j < N; ++j) strides[j] = BroadcastStrides(ins[j], out);
  int64_t total = NumElements(out);
  std::vector<int64_t> coord(out.size(), 0);
  std::array<int64_t, N> off{};
  for (int64_t e = 0; e < total; ++e) {
    f(e, off);
    for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
      ++coord[d];
      for (size_t j = 0; j < N; ++j) off[j] += strides[j][d];
      if (coord[d] < out[d]) break;
      for (size_t j = 0; j < N; ++j) off[j] -= strides[j][d] * coord[d];
      coord[d] = 0;
    }
  }
}

// Steps `coord` to the next position of `dims` in row-major order; false after the last one.
bool NextCoord(const Shape& dims, std::vector<int64_t>* coord) {
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    if (++(*coord)[d] < dims[d]) return true;
    (*coord)[d] = 0;
  }
  return false;
}

// The coordinates of every position of `dims`, flattened: entry p * rank + d is position p's d.
std::vector<int64_t> AllCoords(const Shape& dims) {
  std::vector<int64_t> all, coord(dims.size(), 0);
  all.reserve(NumElements(dims) * dims.size());
  do {
    all.insert(all.end(), coord.begin(), coord.end());
  } while (NextCoord(dims, &coord));
  return all;
}

// ---------------------------------------------------------------------------------------------
// Elementwise

std::function<float(float)> UnaryFloat(const Node& n, const std::pair<float, float>& clip) {
  const std::string& op = n.op_type;
  float alpha = static_cast<float>(FloatAttrOrDefault(n, "alpha"));
  float beta = static_cast<float>(FloatAttrOrDefault(n, "beta"));
  float gamma = static_cast<float>(FloatAttrOrDefault(n, "gamma"));
  float lambd = static_cast<float>(FloatAttrOrDefault(n, "lambd")),
        bias = static_cast<float>(FloatAttrOrDefault(n, "bias"));
  if (op == "Sqrt") return [](float x) { return std::sqrt(x); };
  if (op == "Erf") return [](float x) { return std::erf(x); };
  if (op == "Exp") return [](float x) { return std::exp(x); };
  if (op == "Log") return [](float x) { return std::log(x); };
  if (op == "Tanh") return [](float x) { return std::tanh(x); };
  if (op == "Relu") return [](float x) { return x > 0 ? x : 0.0f; };
  if (op == "LeakyRelu") return [alpha](float x) { return x >= 0 ? x : alpha * x; };
  if (op == "Sigmoid") return [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  if (op == "HardSigmoid") {
    return [alpha, beta](float x) { return std::clamp(alpha * x + beta, 0.0f, 1.0f); };
  }
  if (op == "HardSwish") {
    return [](float x) { return x * std::clamp(x / 6.0f + 0.5f, 0.0f, 1.0f); };
  }
  if (op == "Clip")
    return [clip](float x) { return std::min(std::max(x, clip.first), clip.second); };
  if (op == "Neg") return [](float x) { return -x; };
  if (op == "Abs") return [](float x) { return std::fabs(x); };
  if (op == "Reciprocal") return [](float x) { return 1.0f / x; };
  if (op == "Floor") return [](float x) { return std::floor(x); };
  if (op == "Ceil") return [](float x) { return std::ceil(x); };
  if (op == "Softplus") return [](float x) { return std::log1p(std::exp(x)); };
  if (op == "Elu") return [alpha](float x) { return x >= 0 ? x : alpha * std::expm1(x); };
  if (op == "Celu") {
    return [alpha](float x) {
      return std::max(0.0f, x) + std::min(0.0f, alpha * std::expm1(x / alpha));
    };
  }
  if (op == "Selu") {
    return [alpha, gamma](float x) { return gamma * (x > 0 ? x : alpha * std::expm1(x)); };
  }
  if (op == "ThresholdedRelu") return [alpha](float x) { return x > alpha ? x : 0.0f; };
  if (op == "Softsign") return [](float x) { return x / (1 + std::fabs(x)); };
  if (op == "Shrink") {
    return [lambd, bias](float x) { return x < -lambd ? x + bias : x > lambd ? x - bias : 0.0f; };
  }
  if (op == "Sign") return [](float x) { return static_cast<float>((x > 0) - (x < 0)); };
  if (op == "Round") return [](float x) { return std::nearbyint(x); };
  static const std::unordered_map<std::string, float (*)(float)> kMath = {
      {"Sin", std::sin},     {"Cos", std::cos},     {"Tan", std::tan},    {"Asin", std::asin},
      {"Acos", std::acos},   {"Atan", std::atan},   {"Sinh", std::sinh},  {"Cosh", std::cosh},
      {"Asinh", std::asinh}, {"Acosh", std::acosh}, {"Atanh", std::atanh}};
  if (auto it = kMath.find(op); it != kMath.end()) return it->second;
  return nullptr;
}

std::function<double(double, double)> Binary(const std::string& op, bool integer) {
  if (op == "Add") return [](double a, double b) { return a + b; };
  if (op == "Sub") return [](double a, double b) { return a - b; };
  if (op == "Mul") return [](double a, double b) { return a * b; };
  if (op == "Div" && integer) return [](double a, double b) { return std::trunc(a / b); };
  if (op == "Div") return [](double a, double b) { return a / b; };
  if (op == "Pow") return [](double a, double b) { return std::pow(a, b); };
  if (op == "Min") return [](double a, double b) { return std::min(a, b); };
  if (op == "Max") return [](double a, double b) { return std::max(a, b); };
  if (op == "Equal") return [](double a, double b) { return a == b ? 1.0 : 0.0; };
  if (op == "Less") return [](double a, double b) { return a < b ? 1.0 : 0.0; };
  if (op == "Greater") return [](double a, double b) { return a > b ? 1.0 : 0.0; };
  if (op == "And") return [](double a, double b) { return a != 0 && b != 0 ? 1.0 : 0.0; };
  if (op == "Or") return [](double a, double b) { return a != 0 || b != 0 ? 1.0 : 0.0; };
  if (op == "Xor") return [](double a, double b) { return (a != 0) != (b != 0) ? 1.0 : 0.0; };
  if (op == "LessOrEqual") return [](double a, double b) { return a <= b ? 1.0 : 0.0; };
  if (op == "GreaterOrEqual") return [](double a, double b) { return a >= b ? 1.0 : 0.0; };
  if (op == "PRelu") return [](double a, double b) { return a < 0 ? a * b : a; };
  return nullptr;
}

// A float16 or bfloat16 output holds only values its type can: every value stored rounds to it
// (Cast to float16 rounds as ONNX's does; a sum of float16 values is the float16 nearest it).
void Store(HostTensor* out, int64_t e, double v) {
  if (out->is_float()) {
    out->f[e] = RoundToDType(static_cast<float>(v), out->dtype);
  } else {
    out->i[e] = static_cast<int64_t>(v);
  }
}

Status RunBinary(const Node& n, const HostTensor& a, const HostTensor& b, HostTensor* out) {
  auto fn = Binary(n.op_type, !out->is_float());
  if (out->is_float() && a.is_float() && b.is_float()) {
    ForEachBroadcast<2>(out->dims, {a.dims, b.dims}, [&](int64_t e, const auto& off) {
      out->f[e] = static_cast<float>(fn(a.f[off[0]], b.f[off[1]]));
    });
    return Status::Ok();
  }
  ForEachBroadcast<2>(out->dims, {a.dims, b.dims}, [&](int64_t e, const auto& off) {
    Store(out, e, fn(a.at(off[0]), b.at(off[1])));
  });
  return Status::Ok();
}

// Mod-13: fmod 1 takes the dividend's sign (C's fmod), fmod 0 the divisor's (Python's %).
void RunMod(const Node& n, const HostTensor& a, const HostTensor& b, HostTensor* out) {
  const bool c_style = n.GetInt("fmod", 0) != 0;
  ForEachBroadcast<2>(out->dims, {a.dims, b.dims}, [&](int64_t e, const auto& off) {
    const double x = a.at(off[0]), y = b.at(off[1]);
    double r = std::fmod(x, y);
    if (!c_style && r != 0 && (r < 0) != (y < 0)) r += y;
    Store(out, e, r);
  });
}

// IsNaN, and IsInf with its detect_negative / detect_positive: bool outputs.
void RunIsSpecial(const Node& n, const HostTensor& x, HostTensor* out) {
  const bool nan = n.op_type == "IsNaN";
  const bool negative = n.GetInt("detect_negative", 1) != 0;
  const bool positive = n.GetInt("detect_positive", 1) != 0;
  for (int64_t e = 0; e < x.num_elements(); ++e) {
    const double v = x.at(e);
    out->i[e] = nan ? std::isnan(v) : std::isinf(v) && (v < 0 ? negative : positive);
  }
}

Status RunUnary(const Graph& g, const Node& n, const Lookup& lookup, const HostTensor& x,
                HostTensor* out) {
  std::pair<float, float> clip;
  if (n.op_type == "Clip") {
    FUSOR_ASSIGN_OR_RETURN(clip, ClipBounds(g, n, lookup));
  }
  auto fn = UnaryFloat(n, clip);
  if (n.op_type == "Clip" && !x.is_float() && !out->is_float()) {
    for (int64_t e = 0; e < x.num_elements(); ++e) {
      out->i[e] =
          static_cast<int64_t>(std::min<double>(std::max<double>(x.i[e], clip.first), clip.second));
    }
    return Status::Ok();
  }
  if (!x.is_float() || !out->is_float()) {
    return Status::Unimplemented(NodeLabel(n) + ": integer inputs are not supported");
  }
  for (int64_t e = 0; e < x.num_elements(); ++e) out->f[e] = fn(x.f[e]);
  return Status::Ok();
}

void RunCast(const HostTensor& x, HostTensor* out) {
  for (int64_t e = 0; e < x.num_elements(); ++e) {
    double v = x.at(e);
    if (out->dtype == DType::kBool) v = v != 0 ? 1 : 0;
    Store(out, e, out->is_float() ? v : std::trunc(v));
  }
}

void RunWhere(const HostTensor& c, const HostTensor& a, const HostTensor& b, HostTensor* out) {
  ForEachBroadcast<3>(out->dims, {c.dims, a.dims, b.dims}, [&](int64_t e, const auto& off) {
    Store(out, e, c.at(off[0]) != 0 ? a.at(off[1]) : b.at(off[2]));
  });
}

void RunBatchNorm(const Node& n, const std::array<const HostTensor*, 5>& in, HostTensor* out) {
  const HostTensor& x = *in[0];
  int64_t channels = x.dims[1], inner = x.num_elements() / x.dims[0] / channels;
  float eps = static_cast<float>(FloatAttrOrDefault(n, "epsilon"));
  for (int64_t e = 0; e < x.num_elements(); ++e) {
    int64_t c = (e / inner) % channels;
    float inv = 1.0f / std::sqrt(in[4]->f[c] + eps);
    out->f[e] = (x.f[e] - in[3]->f[c]) * inv * in[1]->f[c] + in[2]->f[c];
  }
}

// Training mode (BatchNormalization-15): normalises with the batch's own mean and (biased)
// variance per channel, and writes the running statistics, input * momentum + batch's *
// (1 - momentum), to the optional outputs.
void RunTrainingBatchNorm(const Node& n, const std::array<const HostTensor*, 5>& in,
                          const std::array<HostTensor*, 3>& out) {
  const HostTensor& x = *in[0];
  const int64_t batch = x.dims[0], channels = x.dims[1];
  const int64_t inner = x.num_elements() / batch / channels;
  const double eps = FloatAttrOrDefault(n, "epsilon"), momentum = FloatAttrOrDefault(n, "momentum");
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0, squares = 0;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < inner; ++i) sum += x.f[(b * channels + c) * inner + i];
    }
    const double mean = sum / static_cast<double>(batch * inner);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < inner; ++i) {
        const double d = x.f[(b * channels + c) * inner + i] - mean;
        squares += d * d;
      }
    }
    const double var = squares / static_cast<double>(batch * inner);
    const double scale = in[1]->f[c] / std::sqrt(var + eps);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t e = (b * channels + c) * inner + i;
        out[0]->f[e] = static_cast<float>((x.f[e] - mean) * scale + in[2]->f[c]);
      }
    }
    if (out[1]) out[1]->f[c] = static_cast<float>(in[3]->f[c] * momentum + mean * (1 - momentum));
    if (out[2]) out[2]->f[c] = static_cast<float>(in[4]->f[c] * momentum + var * (1 - momentum));
  }
}

// ---------------------------------------------------------------------------------------------
// Contractions

// Calls f(e, a_offset, b_offset, m, k, n) for each matrix product of numpy's batched MatMul: the
// e-th output matrix is a's matrix at a_offset times b's at b_offset (element offsets).
template <typename F>
void ForEachMatMul(const Shape& a_dims, const Shape& b_dims, F f) {
  Shape ad = a_dims, bd = b_dims;
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  Shape batch(std::max(ad.size(), bd.size()) - 2, 1);
  Shape a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  for (size_t i = 0; i < batch.size(); ++i) {
    int64_t da =
        i + a_batch.size() >= batch.size() ? a_batch[i + a_batch.size() - batch.size()] : 1;
    int64_t db =
        i + b_batch.size() >= batch.size() ? b_batch[i + b_batch.size() - batch.size()] : 1;
    batch[i] = std::max(da, db);
  }
  ForEachBroadcast<2>(batch, {a_batch, b_batch}, [&](int64_t e, const auto& off) {
    f(e, off[0] * m * k, off[1] * k * n, m, k, n);
  });
}

void MatMulBatched(const HostTensor& a, const HostTensor& b, HostTensor* out) {
  ForEachMatMul(a.dims, b.dims,
                [&](int64_t e, int64_t ao, int64_t bo, int64_t m, int64_t k, int64_t n) {
                  ReferenceGemm(m, n, k, a.f.data() + ao, k, b.f.data() + bo, n,
                                out->f.data() + e * m * n, n, false);
                });
}

// (a - a_zero) x (b - b_zero) of integer tensors, accumulated exactly in int64 (MatMulInteger,
// and QLinearMatMul before its rescale). A zero point is one value (per-tensor), or absent.
std::vector<int64_t> IntegerMatMul(const HostTensor& a, const HostTensor* a_zero,
                                   const HostTensor& b, const HostTensor* b_zero, int64_t size) {
  const int64_t az = a_zero == nullptr ? 0 : a_zero->i.at(0);
  const int64_t bz = b_zero == nullptr ? 0 : b_zero->i.at(0);
  std::vector<int64_t> c(size, 0);
  ForEachMatMul(a.dims, b.dims,
                [&](int64_t e, int64_t ao, int64_t bo, int64_t m, int64_t k, int64_t n) {
                  for (int64_t i = 0; i < m; ++i) {
                    for (int64_t p = 0; p < k; ++p) {
                      const int64_t av = a.i[ao + i * k + p] - az;
                      for (int64_t j = 0; j < n; ++j)
                        c[e * m * n + i * n + j] += av * (b.i[bo + p * n + j] - bz);
                    }
                  }
                });
  return c;
}

// Returns a row-major copy of a 2-D matrix, transposed when asked.
std::vector<float> Matrix(const HostTensor& t, bool transpose) {
  if (!transpose) return t.f;
  int64_t r = t.dims[0], c = t.dims[1];
  std::vector<float> m(t.f.size());
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) m[j * r + i] = t.f[i * c + j];
  }
  return m;
}

void RunGemm(const Node& n, const HostTensor& a, const HostTensor& b, const HostTensor* c,
             HostTensor* out) {
  bool ta = n.GetInt("transA", 0) != 0, tb = n.GetInt("transB", 0) != 0;
  float alpha = static_cast<float>(FloatAttrOrDefault(n, "alpha"));
  float beta = static_cast<float>(FloatAttrOrDefault(n, "beta"));
  int64_t m = out->dims[0], nn = out->dims[1], k = ta ? a.dims[0] : a.dims[1];
  std::vector<float> am = Matrix(a, ta), bm = Matrix(b, tb);
  ReferenceGemm(m, nn, k, am.data(), k, bm.data(), nn, out->f.data(), nn, false);
  for (auto& v : out->f) v *= alpha;
  if (c == nullptr) return;
  ForEachBroadcast<1>(out->dims, {c->dims},
                      [&](int64_t e, const auto& off) { out->f[e] += beta * c->f[off[0]]; });
}

// The flat index in `sp` of the position coord * stride - pad_begin + k * dilation (per spatial
// dim), or -1 when it lies outside: where a window reads (Conv) or writes (ConvTranspose).
int64_t WindowOffset(const Window& w, const int64_t* coord, const int64_t* k, const Shape& sp) {
  int64_t off = 0;
  for (size_t d = 0; d < sp.size(); ++d) {
    int64_t p = coord[d] * w.strides[d] - w.pad_begin[d] + k[d] * w.dilations[d];
    if (p < 0 || p >= sp[d]) return -1;
    off = off * sp[d] + p;
  }
  return off;
}

// Conv as im2col + ReferenceGemm per (image, group): plain loops, no oneDNN.
void RunConv(const Node& n, const Window& w, const HostTensor& x, const HostTensor& wt,
             const HostTensor* bias, HostTensor* out) {
  int64_t groups = n.GetInt("group", 1);
  int64_t batch = x.dims[0], ic = x.dims[1] / groups, oc = wt.dims[0] / groups;
  Shape in_sp(x.dims.begin() + 2, x.dims.end()), out_sp(out->dims.begin() + 2, out->dims.end());
  int64_t in_size = NumElements(in_sp), out_size = NumElements(out_sp);
  int64_t kernel = NumElements(w.kernel), rows = ic * kernel;
  size_t s = in_sp.size();
  std::vector<float> col(rows * out_size);
  std::vector<int64_t> ocoord = AllCoords(out_sp), kcoord = AllCoords(w.kernel);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* src = x.f.data() + (b * x.dims[1] + gi * ic) * in_size;
      // col[(c, kpos), opos] = x[c, opos * stride - pad + kpos * dilation], zero outside.
#pragma omp parallel for
      for (int64_t r = 0; r < rows; ++r) {
        int64_t c = r / kernel;
        const int64_t* kc = &kcoord[(r % kernel) * s];
        for (int64_t o = 0; o < out_size; ++o) {
          int64_t off = WindowOffset(w, &ocoord[o * s], kc, in_sp);
          col[r * out_size + o] = off >= 0 ? src[c * in_size + off] : 0.0f;
        }
      }
      float* dst = out->f.data() + (b * out->dims[1] + gi * oc) * out_size;
      ReferenceGemm(oc, out_size, rows, wt.f.data() + gi * oc * rows, rows, col.data(), out_size,
                    dst, out_size, false);
      for (int64_t o = 0; bias && o < oc; ++o) {
        for (int64_t p = 0; p < out_size; ++p) dst[o * out_size + p] += bias->f[gi * oc + o];
      }
    }
  }
}

// ConvTranspose as a GEMM and a scatter per (group, image): col[(oc, kpos), i] = sum_c W[c, oc,
// kpos] * x[c, i] is added to output position i * stride - pad_begin + kpos * dilation when that
// lies inside the output (output_padding and end padding only decide the output's dims).
void RunConvTranspose(const Node& n, const Window& w, const HostTensor& x, const HostTensor& wt,
                      const HostTensor* bias, HostTensor* out) {
  int64_t groups = n.GetInt("group", 1);
  int64_t cg = x.dims[1] / groups, mg = wt.dims[1];
  Shape in_sp(x.dims.begin() + 2, x.dims.end()), out_sp(out->dims.begin() + 2, out->dims.end());
  int64_t in_size = NumElements(in_sp), out_size = NumElements(out_sp);
  int64_t kernel = NumElements(w.kernel), rows = mg * kernel;
  size_t s = in_sp.size();
  std::vector<int64_t> icoord = AllCoords(in_sp), kcoord = AllCoords(w.kernel);
  std::vector<float> col(rows * in_size), wt_g(rows * cg);
  for (int64_t gi = 0; gi < groups; ++gi) {
    for (int64_t c = 0; c < cg; ++c) {  // W of the group as [(oc, kpos), c].
      for (int64_t r = 0; r < rows; ++r) wt_g[r * cg + c] = wt.f[(gi * cg + c) * rows + r];
    }
    for (int64_t b = 0; b < x.dims[0]; ++b) {
      const float* src = x.f.data() + (b * x.dims[1] + gi * cg) * in_size;
      ReferenceGemm(rows, in_size, cg, wt_g.data(), cg, src, in_size, col.data(), in_size, false);
      float* dst = out->f.data() + (b * out->dims[1] + gi * mg) * out_size;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t* kc = &kcoord[(r % kernel) * s];
        for (int64_t i = 0; i < in_size; ++i) {
          int64_t off = WindowOffset(w, &icoord[i * s], kc, out_sp);
          if (off >= 0) dst[(r / kernel) * out_size + off] += col[r * in_size + i];
        }
      }
      for (int64_t o = 0; bias && o < mg; ++o) {
        for (int64_t p = 0; p < out_size; ++p) dst[o * out_size + p] += bias->f[gi * mg + o];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Reductions

// Calls f(out_index, in_index) for each input element, out_index being its reduced position.
template <typename F>
void ForEachReduced(const Shape& in, const std::vector<int64_t>& axes, F f) {
  Shape kept = in;
  for (int64_t a : axes) kept[a] = 1;
  std::vector<int64_t> out_strides = BroadcastStrides(kept, in);
  ForEachBroadcast<1>(in, {kept}, [&](int64_t e, const auto& off) { f(off[0], e); });
}

// How each Reduce* op starts, folds in one element and finishes a reduced value.
struct ReduceRule {
  double init;
  double (*add)(double acc, double x);
  double (*finish)(double acc, int64_t count);
};

const ReduceRule* ReduceRuleOf(const std::string& op) {
  using R = ReduceRule;
  static const auto* kRules = new std::unordered_map<std::string, ReduceRule>{
      {"ReduceSum",
       R{0, [](double a, double x) { return a + x; }, [](double a, int64_t) { return a; }}},
      {"ReduceMean", R{0, [](double a, double x) { return a + x; },
                       [](double a, int64_t c) { return a / static_cast<double>(c); }}},
      {"ReduceMax",
       R{-std::numeric_limits<double>::infinity(),
         [](double a, double x) { return std::max(a, x); }, [](double a, int64_t) { return a; }}},
      {"ReduceMin",
       R{std::numeric_limits<double>::infinity(), [](double a, double x) { return std::min(a, x); },
         [](double a, int64_t) { return a; }}},
      {"ReduceProd",
       R{1, [](double a, double x) { return a * x; }, [](double a, int64_t) { return a; }}},
      {"ReduceL1", R{0, [](double a, double x) { return a + std::fabs(x); },
                     [](double a, int64_t) { return a; }}},
      {"ReduceL2", R{0, [](double a, double x) { return a + x * x; },
                     [](double a, int64_t) { return std::sqrt(a); }}},
      {"ReduceSumSquare",
       R{0, [](double a, double x) { return a + x * x; }, [](double a, int64_t) { return a; }}},
      {"ReduceLogSum", R{0, [](double a, double x) { return a + x; },
                         [](double a, int64_t) { return std::log(a); }}},
      {"ReduceLogSumExp", R{0, [](double a, double x) { return a + std::exp(x); },
                            [](double a, int64_t) { return std::log(a); }}}};
  auto it = kRules->find(op);
  return it == kRules->end() ? nullptr : &it->second;
}

Status RunReduce(const Graph& g, const Node& n, const HostTensor& x, HostTensor* out) {
  FUSOR_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReduceAxes(g, n));
  const ReduceRule& rule = *ReduceRuleOf(n.op_type);
  std::vector<double> acc(out->f.size(), rule.init);
  int64_t count = 1;
  for (int64_t a : axes) count *= x.dims[a];
  ForEachReduced(x.dims, axes, [&](int64_t o, int64_t e) { acc[o] = rule.add(acc[o], x.f[e]); });
  for (size_t o = 0; o < acc.size(); ++o) {
    out->f[o] = static_cast<float>(rule.finish(acc[o], count));
  }
  return Status::Ok();
}

// ArgMax / ArgMin: the index along `axis` of the first (or, select_last_index, the last) extreme.
void RunArgExtreme(const Node& n, const HostTensor& x, HostTensor* out) {
  const int64_t axis = NormalizeAxis(n.GetInt("axis", 0), x.dims.size());
  const bool max = n.op_type == "ArgMax", last = n.GetInt("select_last_index", 0) != 0;
  const int64_t outer = NumElements(Shape(x.dims.begin(), x.dims.begin() + axis));
  const int64_t len = x.dims[axis],
                inner = NumElements(Shape(x.dims.begin() + axis + 1, x.dims.end()));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t j = 1; j < len; ++j) {
        const double v = x.at((o * len + j) * inner + i), b = x.at((o * len + best) * inner + i);
        if (max ? (v > b || (last && v == b)) : (v < b || (last && v == b))) best = j;
      }
      out->i[o * inner + i] = best;
    }
  }
}

// Splits x's dims at the softmax / layer-norm axis into outer rows and normalised inner length.
void RowsOf(const Shape& dims, int64_t axis, bool to_end, int64_t* outer, int64_t* len,
            int64_t* inner) {
  *outer = std::accumulate(dims.begin(), dims.begin() + axis, int64_t{1}, std::multiplies<>());
  *len = to_end ? NumElements(Shape(dims.begin() + axis, dims.end())) : dims[axis];
  *inner = to_end ? 1 : NumElements(Shape(dims.begin() + axis + 1, dims.end()));
}

// Calls f(first, len, stride) for each row along Softmax's axis in the node's opset (also
// LogSoftmax's and Hardmax's): the row's elements are at first + j * stride, j < len.
template <typename F>
void ForEachSoftmaxRow(const Graph& g, const Node& n, const Shape& dims, F f) {
  SoftmaxAxis sa = SoftmaxAxisOf(g, n);
  int64_t outer, len, inner;
  RowsOf(dims, sa.axis, sa.coerce_2d, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) f(o * len * inner + i, len, inner);
  }
}

// Softmax, or LogSoftmax (the same rows, the log of each value computed without its exp).
void RunSoftmax(const Graph& g, const Node& n, const HostTensor& x, HostTensor* out) {
  const bool log = n.op_type == "LogSoftmax";
  ForEachSoftmaxRow(g, n, x.dims, [&](int64_t first, int64_t len, int64_t inner) {
    const float* src = x.f.data() + first;
    float* dst = out->f.data() + first;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < len; ++j) mx = std::max(mx, src[j * inner]);
    double sum = 0;
    for (int64_t j = 0; j < len; ++j) sum += std::exp(static_cast<double>(src[j * inner] - mx));
    for (int64_t j = 0; j < len; ++j) {
      const double shifted = static_cast<double>(src[j * inner] - mx);
      dst[j * inner] = static_cast<float>(log ? shifted - std::log(sum) : std::exp(shifted) / sum);
    }
  });
}

// 1 at the first largest value of each row, 0 elsewhere.
void RunHardmax(const Graph& g, const Node& n, const HostTensor& x, HostTensor* out) {
  ForEachSoftmaxRow(g, n, x.dims, [&](int64_t first, int64_t len, int64_t inner) {
    const float* src = x.f.data() + first;
    int64_t best = 0;
    for (int64_t j = 1; j < len; ++j) best = src[j * inner] > src[best * inner] ? j : best;
    out->f[first + best * inner] = 1.0f;
  });
}

// The mean of `len` values and 1 / sqrt(variance + eps), for a normalisation.
std::pair<double, double> Moments(const float* src, int64_t len, double eps) {
  double mean = 0, var = 0;
  for (int64_t j = 0; j < len; ++j) mean += src[j];
  mean /= static_cast<double>(len);
  for (int64_t j = 0; j < len; ++j) var += (src[j] - mean) * (src[j] - mean);
  var /= static_cast<double>(len);
  return {mean, 1.0 / std::sqrt(var + eps)};
}

// Writes Y, and the optional Mean and InvStdDev (one value per normalised row) when given.
void RunLayerNorm(const Node& n, const HostTensor& x, const HostTensor& scale,
                  const HostTensor* bias, const std::array<HostTensor*, 3>& out) {
  int64_t axis = NormalizeAxis(n.GetInt("axis", -1), x.dims.size());
  float eps = static_cast<float>(FloatAttrOrDefault(n, "epsilon"));
  int64_t outer, len, inner;
  RowsOf(x.dims, axis, true, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; ++o) {
    const float* src = x.f.data() + o * len;
    auto [mean, inv] = Moments(src, len, eps);
    for (int64_t j = 0; j < len; ++j) {
      double v = (src[j] - mean) * inv * scale.f[j] + (bias ? bias->f[j] : 0.0f);
      out[0]->f[o * len + j] = static_cast<float>(v);
    }
    if (out[1]) out[1]->f[o] = static_cast<float>(mean);
    if (out[2]) out[2]->f[o] = static_cast<float>(inv);
  }
}

// The column-major flat index of position `pos` in `dims`.
int64_t ColumnMajor(const std::vector<int64_t>& pos, const Shape& dims) {
  int64_t off = 0;
  for (size_t d = dims.size(); d-- > 0;) off = off * dims[d] + pos[d];
  return off;
}

// MaxPool's Indices output, when asked for, holds each maximum's flat index in x (the first of
// equal maxima), row-major, or with storage_order 1 its spatial part column-major.
Status RunPool(const Graph& g, const Node& n, const HostTensor& x, HostTensor* out,
               HostTensor* indices = nullptr) {
  FUSOR_ASSIGN_OR_RETURN(Window w, PoolWindow(g, n));
  bool is_max = n.op_type == "MaxPool";
  bool include_pad = n.GetInt("count_include_pad", 0) != 0;
  const bool column_major = n.GetInt("storage_order", 0) != 0;
  Shape in_sp(x.dims.begin() + 2, x.dims.end()), out_sp(out->dims.begin() + 2, out->dims.end());
  int64_t planes = x.dims[0] * x.dims[1], in_size = NumElements(in_sp);
  int64_t out_size = NumElements(out_sp), kernel = NumElements(w.kernel);
  size_t s = in_sp.size();
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t o = 0; o < out_size; ++o) {
      double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
      int64_t valid = 0, counted = 0, argmax = 0;
      for (int64_t k = 0; k < kernel; ++k) {
        int64_t off = 0, orem = o, krem = k;
        bool inside = true, in_declared = true;
        std::vector<int64_t> pos(s);
        for (int64_t d = static_cast<int64_t>(s) - 1; d >= 0; --d) {
          int64_t od = orem % out_sp[d], kd = krem % w.kernel[d];
          orem /= out_sp[d];
          krem /= w.kernel[d];
          pos[d] = od * w.strides[d] - w.pad_begin[d] + kd * w.dilations[d];
          if (pos[d] < 0 || pos[d] >= in_sp[d]) inside = false;
          if (pos[d] >= in_sp[d] + w.declared_pad_end[d]) in_declared = false;
        }
        for (size_t d = 0; d < s; ++d) off = off * in_sp[d] + pos[d];
        counted += in_declared ? 1 : 0;
        if (!inside) continue;
        ++valid;
        double v = x.at(p * in_size + off);
        if (is_max && (valid == 1 || v > acc))
          argmax = column_major ? ColumnMajor(pos, in_sp) : off;
        acc = is_max ? std::max(acc, v) : acc + v;
      }
      double denom = include_pad ? counted : valid;
      Store(out, p * out_size + o, is_max ? acc : acc / denom);
      if (indices != nullptr) indices->i[p * out_size + o] = p * in_size + argmax;
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Injective

// Copies in -> out where out element e reads input element base + sum(coord_d(e) * coef[d]).
void AffineCopy(const HostTensor& in, const std::vector<int64_t>& coef, int64_t base,
                HostTensor* out) {
  int64_t total = out->num_elements();
  std::vector<int64_t> coord(out->dims.size(), 0);
  int64_t off = base;
  for (int64_t e = 0; e < total; ++e) {
    if (out->is_float()) {
      out->f[e] = in.f[off];
    } else {
      out->i[e] = in.i[off];
    }
    for (int d = static_cast<int>(coord.size()) - 1; d >= 0; --d) {
      ++coord[d];
      off += coef[d];
      if (coord[d] < out->dims[d]) break;
      off -= coef[d] * coord[d];
      coord[d] = 0;
    }
  }
}

void RunTranspose(const Graph& g, const Node& n, const HostTensor& x, HostTensor* out) {
  std::vector<int64_t> perm = TransposePerm(g, n), in_strides = RowMajorStrides(x.dims);
  std::vector<int64_t> coef(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) coef[d] = in_strides[perm[d]];
  AffineCopy(x, coef, 0, out);
}

Status RunSlice(const Graph& g, const Node& n, const HostTensor& x, HostTensor* out) {
  FUSOR_ASSIGN_OR_RETURN(SliceParams p, SliceOf(g, n));
  std::vector<int64_t> in_strides = RowMajorStrides(x.dims), coef(x.dims.size());
  int64_t base = 0;
  for (size_t d = 0; d < x.dims.size(); ++d) {
    base += p.start[d] * in_strides[d];
    coef[d] = p.step[d] * in_strides[d];
  }
  AffineCopy(x, coef, base, out);
  return Status::Ok();
}

// Concat (axis) of several inputs, or Split of one input into several outputs.
void CopyAlongAxis(const HostTensor& src, int64_t axis, int64_t src_offset, HostTensor* dst,
                   int64_t dst_offset, int64_t len) {
  int64_t outer = NumElements(Shape(src.dims.begin(), src.dims.begin() + axis));
  int64_t inner = NumElements(Shape(src.dims.begin() + axis + 1, src.dims.end()));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < len * inner; ++j) {
      int64_t s = (o * src.dims[axis] + src_offset) * inner + j;
      int64_t d = (o * dst->dims[axis] + dst_offset) * inner + j;
      if (dst->is_float()) {
        dst->f[d] = src.f[s];
      } else {
        dst->i[d] = src.i[s];
      }
    }
  }
}

Status RunGather(const Node& n, const HostTensor& data, const HostTensor& idx, HostTensor* out) {
  int64_t axis = NormalizeAxis(n.GetInt("axis", 0), data.dims.size());
  int64_t outer = NumElements(Shape(data.dims.begin(), data.dims.begin() + axis));
  int64_t inner = NumElements(Shape(data.dims.begin() + axis + 1, data.dims.end()));
  int64_t len = data.dims[axis], count = idx.num_elements();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < count; ++j) {
      int64_t k = idx.i[j] < 0 ? idx.i[j] + len : idx.i[j];
      if (k < 0 || k >= len) {
        return Status::InvalidArgument(NodeLabel(n) + ": index " + std::to_string(idx.i[j]) +
                                       " is outside the gathered axis of size " +
                                       std::to_string(len));
      }
      for (int64_t i = 0; i < inner; ++i) {
        int64_t s = (o * len + k) * inner + i, d = (o * count + j) * inner + i;
        if (out->is_float()) {
          out->f[d] = data.f[s];
        } else {
          out->i[d] = data.i[s];
        }
      }
    }
  }
  return Status::Ok();
}

void RunPad(const PadParams& p, const HostTensor& x, HostTensor* out) {
  std::vector<int64_t> in_strides = RowMajorStrides(x.dims);
  std::vector<int64_t> coord(out->dims.size(), 0);
  for (int64_t e = 0; e < out->num_elements(); ++e, NextCoord(out->dims, &coord)) {
    int64_t off = 0;
    bool inside = true;
    for (size_t d = 0; d < coord.size(); ++d) {
      int64_t c = PadSourceIndex(p.mode, coord[d] - p.begin[d], x.dims[d]);
      if (c < 0 || c >= x.dims[d]) inside = false;
      off += c * in_strides[d];
    }
    Store(out, e, inside ? x.at(off) : p.value);
  }
}

// The input positions and weights output position x of dim d reads: one for nearest, two for
// linear, four for cubic; none where tf_crop_and_resize reads outside the input (the element is
// extrapolation_value).
std::vector<WeightedTap> ResizeTaps(const ResizeParams& p, size_t d, int64_t x) {
  if (p.coordinate_mode == "tf_crop_and_resize") {
    const double pos = ResizeSourceCoordinate(p, d, x);
    if (pos < 0 || pos > static_cast<double>(p.in[d] - 1)) return {};
  }
  if (p.cubic) {
    std::array<WeightedTap, 4> taps = CubicResizeTapsOf(p, d, x);
    return {taps.begin(), taps.end()};
  }
  ResizeTap t = ResizeTapOf(p, d, x);
  if (!p.linear) return {{t.i0, 1.0}};
  return {{t.i0, 1 - t.w}, {t.i1, t.w}};
}

// Resize from its definition: an output element is the sum over the combinations of its per-dim
// taps of the input there times the product of the taps' weights.
Status RunResize(const Graph& g, const Node& n, const HostTensor& x, HostTensor* out) {
  FUSOR_ASSIGN_OR_RETURN(ResizeParams p, ResizeOf(g, n, /*reference_forms=*/true));
  const size_t rank = p.out.size();
  std::vector<std::vector<std::vector<WeightedTap>>> taps(rank);  // [d][position]: its taps.
  for (size_t d = 0; d < rank; ++d) {
    for (int64_t c = 0; c < p.out[d]; ++c) taps[d].push_back(ResizeTaps(p, d, c));
  }
  std::vector<int64_t> in_strides = RowMajorStrides(x.dims), coord(rank, 0), pick(rank, 0);
  Shape counts(rank);
  for (int64_t e = 0; e < out->num_elements(); ++e, NextCoord(out->dims, &coord)) {
    bool outside = false;
    for (size_t d = 0; d < rank; ++d) {
      counts[d] = static_cast<int64_t>(taps[d][coord[d]].size());
      outside |= counts[d] == 0;
    }
    if (outside) {
      Store(out, e, p.extrapolation_value);
      continue;
    }
    double acc = 0;
    do {
      double weight = 1;
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d) {
        const WeightedTap& t = taps[d][coord[d]][pick[d]];
        weight *= t.w;
        off += t.i * in_strides[d];
      }
      if (weight != 0) acc += weight * x.at(off);
    } while (NextCoord(counts, &pick));
    Store(out, e, acc);
  }
  return Status::Ok();
}

// CumSum along the axis its second input holds: each element the sum of those before it (and
// itself unless `exclusive`), from the end when `reverse`.
Status RunCumSum(const Node& n, const HostTensor& x, const HostTensor& axis_value,
                 HostTensor* out) {
  if (axis_value.num_elements() != 1) {
    return Status::InvalidArgument(NodeLabel(n) + ": axis must hold one value, not " +
                                   std::to_string(axis_value.num_elements()));
  }
  const int64_t rank = static_cast<int64_t>(x.dims.size()), axis = axis_value.i[0];
  if (axis < -rank || axis >= rank) {
    return Status::InvalidArgument(NodeLabel(n) + ": axis " + std::to_string(axis) +
                                   " is outside [-" + std::to_string(rank) + ", " +
                                   std::to_string(rank) + ")");
  }
  int64_t outer = 0, len = 0, inner = 0;
  RowsOf(x.dims, NormalizeAxis(axis, x.dims.size()), false, &outer, &len, &inner);
  const bool exclusive = n.GetInt("exclusive", 0) != 0, reverse = n.GetInt("reverse", 0) != 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      double sum = 0;
      for (int64_t k = 0; k < len; ++k) {
        const int64_t e = (o * len + (reverse ? len - 1 - k : k)) * inner + in;
        if (!exclusive) sum += x.at(e);
        Store(out, e, sum);
        if (exclusive) sum += x.at(e);
      }
    }
  }
  return Status::Ok();
}

// HannWindow, HammingWindow, BlackmanWindow: a sum of cosines over the output's length N,
// periodic (period N, the default) or symmetric (period N - 1).
void RunWindow(const Node& n, HostTensor* out) {
  const int64_t len = out->dims[0];
  const double period = static_cast<double>(n.GetInt("periodic", 1) != 0 ? len : len - 1);
  // Coefficients of 1, cos(2 pi k / period) and cos(4 pi k / period).
  std::array<double, 3> c = {0.5, -0.5, 0};
  if (n.op_type == "HammingWindow") c = {25.0 / 46, -21.0 / 46, 0};
  if (n.op_type == "BlackmanWindow") c = {0.42, -0.5, 0.08};
  for (int64_t k = 0; k < len; ++k) {
    const double phase = 2 * M_PI * static_cast<double>(k) / period;
    Store(out, k, c[0] + c[1] * std::cos(phase) + c[2] * std::cos(2 * phase));
  }
}

// OneHot: along `axis` of the output, `on` (values[1]) where the position equals the index (a
// negative index counts from depth), `off` (values[0]) elsewhere; an index outside [-depth, depth)
// gives a row of `off`.
void RunOneHot(const Node& n, const HostTensor& indices, const HostTensor& values,
               HostTensor* out) {
  const int64_t rank = static_cast<int64_t>(out->dims.size());
  int64_t outer = 0, depth = 0, inner = 0;
  RowsOf(out->dims, NormalizeAxis(n.GetInt("axis", -1), rank), false, &outer, &depth, &inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      int64_t index = static_cast<int64_t>(indices.at(o * inner + in));
      if (index < 0) index += depth;
      for (int64_t k = 0; k < depth; ++k) {
        Store(out, (o * depth + k) * inner + in, values.at(k == index ? 1 : 0));
      }
    }
  }
}

// Compress: the slices along `axis` (without one: the elements of the flattened input) whose
// condition entry is true, in order.
void RunCompress(const Node& n, const HostTensor& x, const HostTensor& condition, HostTensor* out) {
  const bool has_axis = n.FindAttr("axis") != nullptr;
  int64_t outer = 1, len = x.num_elements(), inner = 1;
  if (has_axis) {
    RowsOf(x.dims, NormalizeAxis(n.GetInt("axis", 0), x.dims.size()), false, &outer, &len, &inner);
  }
  int64_t e = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < std::min(len, condition.num_elements()); ++k) {
      if (condition.at(k) == 0) continue;
      for (int64_t in = 0; in < inner; ++in) Store(out, e++, x.at((o * len + k) * inner + in));
    }
  }
}

Status RunTrilu(const Graph& g, const Node& n, const HostTensor& x, HostTensor* out) {
  int64_t k = 0;
  if (n.input(1) != kNoId) {
    FUSOR_ASSIGN_OR_RETURN(std::vector<int64_t> kv, ConstantInts(g, n, 1));
    k = kv.empty() ? 0 : kv[0];
  }
  bool upper = n.GetInt("upper", 1) != 0;
  int64_t rows = x.dims[x.dims.size() - 2], cols = x.dims.back();
  for (int64_t e = 0; e < x.num_elements(); ++e) {
    int64_t c = e % cols, r = (e / cols) % rows;
    bool keep = upper ? c - r >= k : c - r <= k;
    Store(out, e, keep ? x.at(e) : 0.0);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Normalisation and recurrence (ops Fusor runs only through this interpreter)

// InstanceNormalization: each (image, channel) plane is normalised by its own mean and variance,
// then scaled and shifted per channel.
void RunInstanceNorm(const Node& n, const HostTensor& x, const HostTensor& scale,
                     const HostTensor& bias, HostTensor* out) {
  int64_t channels = x.dims[1], planes = x.dims[0] * channels;
  int64_t len = planes == 0 ? 0 : x.num_elements() / planes;
  double eps = FloatAttrOrDefault(n, "epsilon");
  for (int64_t p = 0; p < planes; ++p) {
    const float* src = x.f.data() + p * len;
    auto [mean, inv] = Moments(src, len, eps);
    int64_t c = p % channels;
    for (int64_t j = 0; j < len; ++j) {
      out->f[p * len + j] = static_cast<float>((src[j] - mean) * inv * scale.f[c] + bias.f[c]);
    }
  }
}

// The tensors of one LSTM node (ONNX LSTM-14; layout 0: X [seq, batch, input]).
struct LstmIo {
  const HostTensor *x, *w, *r, *b, *lens, *h0, *c0, *p;
  HostTensor *y, *yh, *yc;
};

float Sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// One direction of an LSTM over every batch entry, from the ONNX definition (gates i, o, f, c):
//   i = sigmoid(Wi x + Ri h + Pi . c + b_i)    f = sigmoid(Wf x + Rf h + Pf . c + b_f)
//   c' = f . c + i . tanh(Wc x + Rc h + b_c)   o = sigmoid(Wo x + Ro h + Po . c' + b_o)
//   h' = o . tanh(c')
// A batch entry's steps stop at its sequence length (reverse: start there); Y is zero beyond it.
void RunLstmDirection(const Node& n, const LstmIo& io, int64_t dir, int64_t dirs, bool reverse) {
  int64_t seq = io.x->dims[0], batch = io.x->dims[1], in = io.x->dims[2];
  int64_t hid = n.GetInt("hidden_size", io.r->dims.back());
  float clip = static_cast<float>(n.GetFloat("clip", 0.0));
  bool couple = n.GetInt("input_forget", 0) != 0;
  const float* w = io.w->f.data() + dir * 4 * hid * in;
  const float* r = io.r->f.data() + dir * 4 * hid * hid;
  std::vector<float> xw(seq * batch * 4 * hid), gates(4 * hid);
  // X W^T for every step at once: [seq * batch, in] x [in, 4 hid].
  std::vector<float> wt(in * 4 * hid);
  for (int64_t g = 0; g < 4 * hid; ++g) {
    for (int64_t k = 0; k < in; ++k) wt[k * 4 * hid + g] = w[g * in + k];
  }
  ReferenceGemm(seq * batch, 4 * hid, in, io.x->f.data(), in, wt.data(), 4 * hid, xw.data(),
                4 * hid, false);
  auto clipped = [clip](float v) { return clip > 0 ? std::clamp(v, -clip, clip) : v; };
  for (int64_t b = 0; b < batch; ++b) {
    int64_t len = io.lens ? std::clamp<int64_t>(io.lens->i[b], 0, seq) : seq;
    std::vector<float> h(hid, 0.0f), c(hid, 0.0f);
    for (int64_t j = 0; j < hid; ++j) {
      if (io.h0) h[j] = io.h0->f[(dir * batch + b) * hid + j];
      if (io.c0) c[j] = io.c0->f[(dir * batch + b) * hid + j];
    }
    for (int64_t s = 0; s < len; ++s) {
      int64_t t = reverse ? len - 1 - s : s;
      for (int64_t g = 0; g < 4 * hid; ++g) {
        double acc = xw[(t * batch + b) * 4 * hid + g];
        for (int64_t k = 0; k < hid; ++k) acc += static_cast<double>(r[g * hid + k]) * h[k];
        if (io.b) acc += io.b->f[dir * 8 * hid + g] + io.b->f[dir * 8 * hid + 4 * hid + g];
        gates[g] = static_cast<float>(acc);
      }
      for (int64_t j = 0; j < hid; ++j) {
        const float* pp = io.p ? io.p->f.data() + dir * 3 * hid : nullptr;
        float gi = Sigmoid(clipped(gates[j] + (pp ? pp[j] * c[j] : 0.0f)));
        float gf = couple
                       ? 1.0f - gi
                       : Sigmoid(clipped(gates[2 * hid + j] + (pp ? pp[2 * hid + j] * c[j] : 0)));
        float gc = std::tanh(clipped(gates[3 * hid + j]));
        c[j] = gf * c[j] + gi * gc;
        float go = Sigmoid(clipped(gates[hid + j] + (pp ? pp[hid + j] * c[j] : 0.0f)));
        h[j] = go * std::tanh(c[j]);
      }
      if (io.y) {
        float* dst = io.y->f.data() + ((t * dirs + dir) * batch + b) * hid;
        std::copy(h.begin(), h.end(), dst);
      }
    }
    for (int64_t j = 0; j < hid; ++j) {
      if (io.yh) io.yh->f[(dir * batch + b) * hid + j] = h[j];
      if (io.yc) io.yc->f[(dir * batch + b) * hid + j] = c[j];
    }
  }
}

Status RunLstm(const Node& n, const Lookup& in, TensorValues* values) {
  std::vector<std::string> acts;
  if (const Attribute* a = n.FindAttr("activations")) {
    acts = std::get<std::vector<std::string>>(a->value);
  }
  for (size_t i = 0; i < acts.size(); ++i) {
    const char* want = i % 3 == 0 ? "Sigmoid" : "Tanh";
    if (acts[i] != want) {
      return Status::Unimplemented(NodeLabel(n) + ": LSTM activation '" + acts[i] +
                                   "' is not supported; only the default Sigmoid, Tanh, Tanh");
    }
  }
  auto opt = [&](size_t i) { return n.input(i) == kNoId ? nullptr : in(n.inputs[i]); };
  auto out = [&](size_t i) { return i < n.outputs.size() ? &(*values)[n.outputs[i]] : nullptr; };
  std::string direction = n.GetString("direction", "forward");
  int64_t dirs = direction == "bidirectional" ? 2 : 1;
  LstmIo io{opt(0), opt(1), opt(2), opt(3), opt(4), opt(5), opt(6), opt(7), out(0), out(1), out(2)};
  for (int64_t d = 0; d < dirs; ++d) {
    RunLstmDirection(n, io, d, dirs, direction == "reverse" || d == 1);
  }
  return Status::Ok();
}

// The tensors of one GRU node (ONNX GRU-14; layout 0: X [seq, batch, input]).
struct GruIo {
  const HostTensor *x, *w, *r, *b, *lens, *h0;
  HostTensor *y, *yh;
};

// One direction of a GRU over every batch entry, from the ONNX definition (gates z, r, h; W and
// R stacked in that order, B = [Wb, Rb]):
//   z = sigmoid(Wz x + Rz h + Wbz + Rbz)     r = sigmoid(Wr x + Rr h + Wbr + Rbr)
//   linear_before_reset 0: h~ = tanh(Wh x + Rh (r . h) + Rbh + Wbh)
//   linear_before_reset 1: h~ = tanh(Wh x + r . (Rh h + Rbh) + Wbh)
//   h' = (1 - z) . h~ + z . h
// A batch entry's steps stop at its sequence length (reverse: start there); Y is zero beyond it.
void RunGruDirection(const RecurrentAttrs& a, const GruIo& io, int64_t dir, bool reverse) {
  const int64_t seq = io.x->dims[0], batch = io.x->dims[1], in = io.x->dims[2];
  const int64_t hid = a.hidden, dirs = a.directions;
  const float clip = static_cast<float>(a.clip);
  const float* w = io.w->f.data() + dir * 3 * hid * in;
  const float* r = io.r->f.data() + dir * 3 * hid * hid;
  const float* wb = io.b ? io.b->f.data() + dir * 6 * hid : nullptr;
  const float* rb = wb ? wb + 3 * hid : nullptr;
  // X W^T for every step at once: [seq * batch, in] x [in, 3 hid].
  std::vector<float> xw(seq * batch * 3 * hid), wt(in * 3 * hid);
  for (int64_t g = 0; g < 3 * hid; ++g) {
    for (int64_t k = 0; k < in; ++k) wt[k * 3 * hid + g] = w[g * in + k];
  }
  ReferenceGemm(seq * batch, 3 * hid, in, io.x->f.data(), in, wt.data(), 3 * hid, xw.data(),
                3 * hid, false);
  auto clipped = [clip](double v) {
    return static_cast<float>(clip > 0 ? std::clamp<double>(v, -clip, clip) : v);
  };
  auto bias = [](const float* p, int64_t g) { return p ? static_cast<double>(p[g]) : 0.0; };
  // Row g of R times v.
  auto rdot = [&](int64_t g, const std::vector<float>& v) {
    double acc = 0;
    for (int64_t k = 0; k < hid; ++k) acc += static_cast<double>(r[g * hid + k]) * v[k];
    return acc;
  };
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = io.lens ? std::clamp<int64_t>(io.lens->i[b], 0, seq) : seq;
    std::vector<float> h(hid, 0.0f), z(hid), rh(hid), next(hid);
    if (io.h0) std::copy_n(io.h0->f.data() + (dir * batch + b) * hid, hid, h.begin());
    for (int64_t s = 0; s < len; ++s) {
      const int64_t t = reverse ? len - 1 - s : s;
      const float* x = xw.data() + (t * batch + b) * 3 * hid;
      for (int64_t j = 0; j < hid; ++j) {
        z[j] = Sigmoid(clipped(x[j] + rdot(j, h) + bias(wb, j) + bias(rb, j)));
        const float reset =
            Sigmoid(clipped(x[hid + j] + rdot(hid + j, h) + bias(wb, hid + j) + bias(rb, hid + j)));
        rh[j] = a.linear_before_reset ? reset : reset * h[j];
      }
      for (int64_t j = 0; j < hid; ++j) {
        const int64_t g = 2 * hid + j;
        const double recurrent =
            a.linear_before_reset ? rh[j] * (rdot(g, h) + bias(rb, g)) : rdot(g, rh) + bias(rb, g);
        const float candidate = std::tanh(clipped(x[g] + recurrent + bias(wb, g)));
        next[j] = (1.0f - z[j]) * candidate + z[j] * h[j];
      }
      h.swap(next);
      if (io.y)
        std::copy(h.begin(), h.end(), io.y->f.data() + ((t * dirs + dir) * batch + b) * hid);
    }
    if (io.yh) std::copy(h.begin(), h.end(), io.yh->f.data() + (dir * batch + b) * hid);
  }
}

// RNN (ONNX RNN-14, default Tanh activation): h' = tanh(Wi x + Ri h + Wbi + Rbi) per direction,
// with GruIo's tensors and sequence lengths as GRU has them.
void RunRnnDirection(const RecurrentAttrs& a, const GruIo& io, int64_t dir, bool reverse) {
  const int64_t seq = io.x->dims[0], batch = io.x->dims[1], in = io.x->dims[2];
  const int64_t hid = a.hidden, dirs = a.directions;
  const float* w = io.w->f.data() + dir * hid * in;
  const float* r = io.r->f.data() + dir * hid * hid;
  const float* wb = io.b ? io.b->f.data() + dir * 2 * hid : nullptr;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = io.lens ? std::clamp<int64_t>(io.lens->i[b], 0, seq) : seq;
    std::vector<float> h(hid, 0.0f), next(hid);
    if (io.h0) std::copy_n(io.h0->f.data() + (dir * batch + b) * hid, hid, h.begin());
    for (int64_t s = 0; s < len; ++s) {
      const int64_t t = reverse ? len - 1 - s : s;
      const float* x = io.x->f.data() + (t * batch + b) * in;
      for (int64_t j = 0; j < hid; ++j) {
        double acc = wb ? static_cast<double>(wb[j]) + wb[hid + j] : 0.0;
        for (int64_t k = 0; k < in; ++k) acc += static_cast<double>(w[j * in + k]) * x[k];
        for (int64_t k = 0; k < hid; ++k) acc += static_cast<double>(r[j * hid + k]) * h[k];
        if (a.clip > 0) acc = std::clamp(acc, -a.clip, a.clip);
        next[j] = static_cast<float>(std::tanh(acc));
      }
      h.swap(next);
      if (io.y)
        std::copy(h.begin(), h.end(), io.y->f.data() + ((t * dirs + dir) * batch + b) * hid);
    }
    if (io.yh) std::copy(h.begin(), h.end(), io.yh->f.data() + (dir * batch + b) * hid);
  }
}

// GRU, and RNN through the same tensors.
Status RunGru(const Graph& g, const Node& n, const Lookup& in, TensorValues* values) {
  FUSOR_ASSIGN_OR_RETURN(RecurrentAttrs a, RecurrentAttrsOf(g, n));
  if (!a.non_default_activation.empty()) {
    return Status::Unimplemented(
        NodeLabel(n) + ": " + n.op_type + " activation '" + a.non_default_activation +
        "' is not supported; only the default " + (n.op_type == "RNN" ? "Tanh" : "Sigmoid, Tanh"));
  }
  auto opt = [&](size_t i) { return n.input(i) == kNoId ? nullptr : in(n.inputs[i]); };
  auto out = [&](size_t i) { return i < n.outputs.size() ? &(*values)[n.outputs[i]] : nullptr; };
  GruIo io{opt(0), opt(1), opt(2), opt(3), opt(4), opt(5), out(0), out(1)};
  for (int64_t d = 0; d < a.directions; ++d) {
    const bool reverse = a.reverse || d == 1;
    n.op_type == "RNN" ? RunRnnDirection(a, io, d, reverse) : RunGruDirection(a, io, d, reverse);
  }
  return Status::Ok();
}

// `t` with its dims permuted: output dim d is input dim perm[d].
HostTensor Transposed(const HostTensor& t, const std::vector<size_t>& perm) {
  const std::vector<int64_t> strides = RowMajorStrides(t.dims);
  Shape dims;
  std::vector<int64_t> coef;
  for (size_t d : perm) {
    dims.push_back(t.dims[d]);
    coef.push_back(strides[d]);
  }
  HostTensor out = HostTensor::Zeros(t.dtype, dims);
  AffineCopy(t, coef, 0, &out);
  return out;
}

// LSTM, GRU and RNN. The recurrences run in layout 0's order (X [seq, batch, input], initial
// states [dirs, batch, hidden], Y [seq, dirs, batch, hidden]); with layout 1 (batch first: X
// [batch, seq, input], states [batch, dirs, hidden], Y [batch, seq, dirs, hidden]) the inputs are
// transposed into it and the outputs out of it.
Status RunRecurrent(const Graph& g, const Node& n, const Lookup& in, TensorValues* values) {
  auto run = [&](const Lookup& lookup, TensorValues* out) {
    return n.op_type == "LSTM" ? RunLstm(n, lookup, out) : RunGru(g, n, lookup, out);
  };
  if (n.GetInt("layout", 0) == 0) return run(in, values);
  TensorValues local;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i] == kNoId) continue;
    const bool batch_major = i == 0 || i == 5 || (i == 6 && n.op_type == "LSTM");
    local[n.inputs[i]] = batch_major ? Transposed(*in(n.inputs[i]), {1, 0, 2}) : *in(n.inputs[i]);
  }
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const HostTensor& given = (*values)[n.outputs[k]];
    local[n.outputs[k]] = k == 0 ? Transposed(given, {1, 2, 0, 3}) : Transposed(given, {1, 0, 2});
  }
  FUSOR_RETURN_IF_ERROR(run(
      [&local](TensorId t) -> const HostTensor* {
        auto it = local.find(t);
        return it == local.end() ? nullptr : &it->second;
      },
      &local));
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const HostTensor& computed = local[n.outputs[k]];
    (*values)[n.outputs[k]] =
        k == 0 ? Transposed(computed, {2, 0, 1, 3}) : Transposed(computed, {1, 0, 2});
  }
  return Status::Ok();
}

// ScatterND: a copy of `data` with slices at `indices` replaced by (or combined with) `updates`.
// Exporters build masks with it from constants (Swin's shifted-window mask), so it is folded.
Status RunScatterNd(const Node& n, const HostTensor& data, const HostTensor& idx,
                    const HostTensor& updates, HostTensor* out) {
  const std::string reduction = n.GetString("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul") {
    return Status::Unimplemented(NodeLabel(n) + ": reduction '" + reduction +
                                 "' is not supported (none, add, mul are)");
  }
  const int64_t k = idx.dims.empty() ? 0 : idx.dims.back();
  if (idx.dims.empty() || k > static_cast<int64_t>(data.dims.size())) {
    return Status::InvalidArgument(NodeLabel(n) +
                                   ": indices need a last dim of at most the data's rank " +
                                   std::to_string(data.dims.size()));
  }
  out->f = data.f;
  out->i = data.i;
  const int64_t slice = NumElements(Shape(data.dims.begin() + k, data.dims.end()));
  const std::vector<int64_t> strides = RowMajorStrides(data.dims);
  const int64_t count = k == 0 ? 0 : idx.num_elements() / k;
  if (updates.num_elements() != count * slice) {
    return Status::InvalidArgument(
        NodeLabel(n) + ": updates have " + std::to_string(updates.num_elements()) +
        " elements, the indices select " + std::to_string(count * slice));
  }
  for (int64_t j = 0; j < count; ++j) {
    int64_t base = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t c = idx.i[j * k + d];
      if (c < 0) c += data.dims[d];
      if (c < 0 || c >= data.dims[d]) {
        return Status::InvalidArgument(
            NodeLabel(n) + ": index " + std::to_string(idx.i[j * k + d]) + " is outside dim " +
            std::to_string(d) + " of size " + std::to_string(data.dims[d]));
      }
      base += c * strides[d];
    }
    for (int64_t e = 0; e < slice; ++e) {
      double u = updates.at(j * slice + e), old = out->at(base + e);
      Store(out, base + e, reduction == "add" ? old + u : reduction == "mul" ? old * u : u);
    }
  }
  return Status::Ok();
}

// GatherElements' and ScatterElements' addressing: calls f(p, offset) for each position p of
// `idx`, offset being data's flat index of p with its `axis` coordinate replaced by idx[p].
template <typename F>
Status ForEachElementIndex(const Node& n, const HostTensor& data, const HostTensor& idx, F f) {
  const int64_t axis = NormalizeAxis(n.GetInt("axis", 0), data.dims.size());
  const std::vector<int64_t> strides = RowMajorStrides(data.dims);
  const int64_t len = data.dims[axis];
  std::vector<int64_t> coord(idx.dims.size(), 0);
  for (int64_t e = 0; e < idx.num_elements(); ++e, NextCoord(idx.dims, &coord)) {
    const int64_t k = idx.i[e] < 0 ? idx.i[e] + len : idx.i[e];
    if (k < 0 || k >= len) {
      return Status::InvalidArgument(NodeLabel(n) + ": index " + std::to_string(idx.i[e]) +
                                     " is outside axis " + std::to_string(axis) + " of size " +
                                     std::to_string(len));
    }
    int64_t offset = 0;
    for (size_t d = 0; d < coord.size(); ++d) {
      offset += (static_cast<int64_t>(d) == axis ? k : coord[d]) * strides[d];
    }
    f(e, offset);
  }
  return Status::Ok();
}

Status RunGatherElements(const Node& n, const HostTensor& data, const HostTensor& idx,
                         HostTensor* out) {
  return ForEachElementIndex(n, data, idx,
                             [&](int64_t e, int64_t src) { Store(out, e, data.at(src)); });
}

// A copy of data with each addressed element replaced by its update, or combined with it
// (reduction add / mul), in index order.
Status RunScatterElements(const Node& n, const HostTensor& data, const HostTensor& idx,
                          const HostTensor& updates, HostTensor* out) {
  out->f = data.f;
  out->i = data.i;
  const std::string reduction = n.GetString("reduction", "none");
  return ForEachElementIndex(n, data, idx, [&](int64_t e, int64_t dst) {
    const double u = updates.at(e), old = out->at(dst);
    Store(out, dst, reduction == "add" ? old + u : reduction == "mul" ? old * u : u);
  });
}

// DepthToSpace (DCR or CRD) and SpaceToDepth on [N, C, H, W]: each output element's source.
void RunSpaceDepth(const Node& n, const HostTensor& x, HostTensor* out) {
  const int64_t b = n.GetInt("blocksize", 1);
  const bool to_space = n.op_type == "DepthToSpace", crd = n.GetString("mode", "DCR") == "CRD";
  const Shape& o = out->dims;
  const Shape& in = x.dims;
  std::vector<int64_t> c(4, 0);
  for (int64_t e = 0; e < out->num_elements(); ++e, NextCoord(o, &c)) {
    int64_t ch, h, w;
    if (to_space) {
      const int64_t bh = c[2] % b, bw = c[3] % b;
      ch = crd ? c[1] * b * b + bh * b + bw : (bh * b + bw) * o[1] + c[1];
      h = c[2] / b;
      w = c[3] / b;
    } else {
      const int64_t block = c[1] / in[1];
      ch = c[1] % in[1];
      h = c[2] * b + block / b;
      w = c[3] * b + block % b;
    }
    Store(out, e, x.at(((c[0] * in[1] + ch) * in[2] + h) * in[3] + w));
  }
}

// Tile: output coordinate d reads input coordinate d modulo the input's dim.
void RunTile(const HostTensor& x, HostTensor* out) {
  const std::vector<int64_t> strides = RowMajorStrides(x.dims);
  std::vector<int64_t> c(out->dims.size(), 0);
  for (int64_t e = 0; e < out->num_elements(); ++e, NextCoord(out->dims, &c)) {
    int64_t src = 0;
    for (size_t d = 0; d < c.size(); ++d) src += (c[d] % x.dims[d]) * strides[d];
    Store(out, e, x.at(src));
  }
}

// GatherND: each index tuple of the last dim of `idx` (after batch_dims leading dims shared with
// data) addresses a slice of data, copied whole.
Status RunGatherNd(const Node& n, const HostTensor& data, const HostTensor& idx, HostTensor* out) {
  const int64_t batch_dims = n.GetInt("batch_dims", 0);
  const int64_t depth = idx.dims.back();
  const std::vector<int64_t> strides = RowMajorStrides(data.dims);
  const int64_t batches = NumElements(Shape(data.dims.begin(), data.dims.begin() + batch_dims));
  const int64_t slice = NumElements(Shape(data.dims.begin() + batch_dims + depth, data.dims.end()));
  const int64_t tuples = idx.num_elements() / std::max<int64_t>(1, depth);
  const int64_t per_batch = tuples / std::max<int64_t>(1, batches);
  const int64_t batch_stride = batch_dims == 0 ? 0 : strides[batch_dims - 1];
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t src = (t / per_batch) * batch_stride;
    for (int64_t d = 0; d < depth; ++d) {
      const int64_t len = data.dims[batch_dims + d];
      const int64_t k =
          idx.i[t * depth + d] < 0 ? idx.i[t * depth + d] + len : idx.i[t * depth + d];
      if (k < 0 || k >= len) {
        return Status::InvalidArgument(NodeLabel(n) + ": index " + std::to_string(k) +
                                       " is outside dim " + std::to_string(batch_dims + d) +
                                       " of length " + std::to_string(len));
      }
      src += k * strides[batch_dims + d];
    }
    for (int64_t s = 0; s < slice; ++s) Store(out, t * slice + s, data.at(src + s));
  }
  return Status::Ok();
}

// ReverseSequence: along time_axis, the first sequence_lens[b] elements of each batch entry b
// (along batch_axis) reversed, the rest copied.
void RunReverseSequence(const Node& n, const HostTensor& x, const HostTensor& lens,
                        HostTensor* out) {
  const int64_t time_axis = n.GetInt("time_axis", 0), batch_axis = n.GetInt("batch_axis", 1);
  const std::vector<int64_t> strides = RowMajorStrides(x.dims);
  std::vector<int64_t> c(x.dims.size(), 0);
  for (int64_t e = 0; e < x.num_elements(); ++e, NextCoord(x.dims, &c)) {
    const int64_t t = c[time_axis], len = lens.i[c[batch_axis]];
    const int64_t src = e + (t < len ? (len - 1 - 2 * t) * strides[time_axis] : 0);
    Store(out, e, x.at(src));
  }
}

// EyeLike: ones on the diagonal shifted by k, zeros elsewhere, in the output's dtype.
void RunEyeLike(const Node& n, HostTensor* out) {
  const int64_t k = n.GetInt("k", 0), rows = out->dims[0], cols = out->dims[1];
  for (int64_t r = 0; r < rows; ++r) {
    if (r + k >= 0 && r + k < cols) Store(out, r * cols + r + k, 1);
  }
}

// GlobalMaxPool: the largest value of each [N, C] plane.
void RunGlobalMaxPool(const HostTensor& x, HostTensor* out) {
  const int64_t planes = x.dims[0] * x.dims[1],
                size = x.num_elements() / std::max<int64_t>(1, planes);
  for (int64_t p = 0; p < planes; ++p) {
    double best = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < size; ++j) best = std::max(best, x.at(p * size + j));
    Store(out, p, best);
  }
}

// MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over `axes` (default N, H, W), as
// ONNX's function body defines it.
void RunMeanVarianceNorm(const Node& n, const HostTensor& x, HostTensor* out) {
  std::vector<int64_t> axes = n.GetInts("axes");
  if (axes.empty()) axes = {0, 2, 3};
  std::vector<bool> reduced(x.dims.size(), false);
  for (int64_t a : axes) reduced[NormalizeAxis(a, x.dims.size())] = true;
  Shape kept = x.dims;
  for (size_t d = 0; d < kept.size(); ++d) kept[d] = reduced[d] ? 1 : kept[d];
  const std::vector<int64_t> kept_strides = RowMajorStrides(kept);
  auto group_of = [&](const std::vector<int64_t>& c) {
    int64_t gi = 0;
    for (size_t d = 0; d < c.size(); ++d) gi += (reduced[d] ? 0 : c[d]) * kept_strides[d];
    return gi;
  };
  std::vector<double> sum(NumElements(kept), 0), sq(NumElements(kept), 0);
  const double count = static_cast<double>(x.num_elements()) / NumElements(kept);
  std::vector<int64_t> c(x.dims.size(), 0);
  for (int64_t e = 0; e < x.num_elements(); ++e, NextCoord(x.dims, &c)) {
    sum[group_of(c)] += x.at(e);
    sq[group_of(c)] += x.at(e) * x.at(e);
  }
  std::fill(c.begin(), c.end(), 0);
  for (int64_t e = 0; e < x.num_elements(); ++e, NextCoord(x.dims, &c)) {
    const int64_t gi = group_of(c);
    const double mean = sum[gi] / count, var = sq[gi] / count - mean * mean;
    Store(out, e, (x.at(e) - mean) / (std::sqrt(std::max(var, 0.0)) + 1e-9));
  }
}

// LRN across channels: x / (bias + alpha / size * sum of x^2 over the channel window)^beta.
void RunLrn(const Node& n, const HostTensor& x, HostTensor* out) {
  const double alpha = FloatAttrOrDefault(n, "alpha"), beta = FloatAttrOrDefault(n, "beta");
  const double bias = FloatAttrOrDefault(n, "bias");
  const int64_t size = n.GetInt("size", 1), channels = x.dims[1];
  const int64_t inner = x.num_elements() / std::max<int64_t>(1, x.dims[0] * channels);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  for (int64_t b = 0; b < x.dims[0]; ++b) {
    for (int64_t ch = 0; ch < channels; ++ch) {
      for (int64_t i = 0; i < inner; ++i) {
        double sq = 0;
        for (int64_t j = std::max<int64_t>(0, ch - before);
             j <= std::min<int64_t>(channels - 1, ch + after); ++j) {
          const double v = x.at((b * channels + j) * inner + i);
          sq += v * v;
        }
        const int64_t e = (b * channels + ch) * inner + i;
        Store(out, e, x.at(e) / std::pow(bias + alpha / size * sq, beta));
      }
    }
  }
}

// Det of each trailing [M, M] matrix: Gaussian elimination with partial pivoting, in double.
void RunDet(const HostTensor& x, HostTensor* out) {
  const int64_t m = x.dims.back(), count = out->num_elements();
  std::vector<double> a(m * m);
  for (int64_t b = 0; b < count; ++b) {
    for (int64_t e = 0; e < m * m; ++e) a[e] = x.at(b * m * m + e);
    double det = 1;
    for (int64_t col = 0; col < m && det != 0; ++col) {
      int64_t pivot = col;
      for (int64_t r = col + 1; r < m; ++r) {
        if (std::abs(a[r * m + col]) > std::abs(a[pivot * m + col])) pivot = r;
      }
      if (pivot != col) {
        for (int64_t j = 0; j < m; ++j) std::swap(a[col * m + j], a[pivot * m + j]);
        det = -det;
      }
      det *= a[col * m + col];
      if (det == 0) break;
      for (int64_t r = col + 1; r < m; ++r) {
        const double f = a[r * m + col] / a[col * m + col];
        for (int64_t j = col; j < m; ++j) a[r * m + j] -= f * a[col * m + j];
      }
    }
    Store(out, b, det);
  }
}

// TopK along `axis`: the K largest (or smallest) values in order and their indices; among equal
// values the lower index comes first, as ONNX specifies. K is a constant (ConstantInts).
Status RunTopK(const Graph& g, const Node& n, const Lookup& in, TensorValues* values) {
  const HostTensor& x = *in(n.inputs[0]);
  FUSOR_ASSIGN_OR_RETURN(std::vector<int64_t> kv, ConstantInts(g, n, 1));
  const int64_t axis = NormalizeAxis(n.GetInt("axis", -1), x.dims.size());
  const bool largest = n.GetInt("largest", 1) != 0;
  const int64_t k = kv.at(0), len = x.dims[axis];
  const int64_t inner = NumElements(Shape(x.dims.begin() + axis + 1, x.dims.end()));
  const int64_t outer = x.num_elements() / std::max<int64_t>(1, len * inner);
  HostTensor& vals = (*values)[n.outputs[0]];
  HostTensor& idxs = (*values)[n.outputs[1]];
  std::vector<int64_t> order(len);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return x.at((o * len + j) * inner + i); };
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return largest ? at(a) > at(b) : at(a) < at(b);
      });
      for (int64_t j = 0; j < k; ++j) {
        Store(&vals, (o * k + j) * inner + i, at(order[j]));
        idxs.i[(o * k + j) * inner + i] = order[j];
      }
    }
  }
  return Status::Ok();
}

// BitShift of unsigned integers, the left shift wrapping at the output's width.
void RunBitShift(const Node& n, const HostTensor& a, const HostTensor& b, HostTensor* out) {
  const bool left = n.GetString("direction", "") == "LEFT";
  const int bits = static_cast<int>(DTypeSize(out->dtype) * 8);
  const uint64_t mask = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  ForEachBroadcast<2>(out->dims, {a.dims, b.dims}, [&](int64_t e, const auto& off) {
    const uint64_t x = static_cast<uint64_t>(a.i[off[0]]), s = static_cast<uint64_t>(b.i[off[1]]);
    const uint64_t v = s >= 64 ? 0 : left ? (x << s) & mask : x >> s;
    out->i[e] = static_cast<int64_t>(v);
  });
}

// Element e's index into a quantization parameter of one value, or one value per slice along
// `axis` (QuantizeLinear / DequantizeLinear's per-axis form).
int64_t QuantParamIndex(const Shape& dims, int64_t axis, const HostTensor& param, int64_t e) {
  if (param.num_elements() <= 1) return 0;
  const int64_t inner = NumElements(Shape(dims.begin() + axis + 1, dims.end()));
  return (e / inner) % dims[axis];
}

// The values an integer dtype holds (QuantizeLinear's outputs: 8 to 32 bits).
std::pair<double, double> IntegerRange(DType t) {
  switch (t) {
    case DType::kUInt8:
      return {0, 255};
    case DType::kInt8:
      return {-128, 127};
    case DType::kUInt16:
      return {0, 65535};
    case DType::kInt16:
      return {-32768, 32767};
    default:
      return {-2147483648.0, 2147483647.0};
  }
}

// Rounds half to even and saturates to the range of the integer dtype `to`.
double QuantizeValue(double v, DType to) {
  const auto [lo, hi] = IntegerRange(to);
  return std::clamp(std::nearbyint(v), lo, hi);
}

// QuantizeLinear: saturate(round(x / scale) + zero_point); DequantizeLinear: (x - zero_point) *
// scale. The zero point is optional (0).
void RunLinearQuantization(const Node& n, const HostTensor& x, const HostTensor& scale,
                           const HostTensor* zero, HostTensor* out) {
  const int64_t axis = NormalizeAxis(n.GetInt("axis", 1), std::max<size_t>(1, x.dims.size()));
  const bool quantize = n.op_type == "QuantizeLinear";
  for (int64_t e = 0; e < x.num_elements(); ++e) {
    const int64_t k = QuantParamIndex(x.dims, axis, scale, e);
    const double z = zero == nullptr ? 0 : zero->at(k);
    if (quantize) {
      const float q = static_cast<float>(x.at(e)) / static_cast<float>(scale.at(k));
      Store(out, e, QuantizeValue(std::nearbyint(q) + z, out->dtype));
    } else {
      Store(out, e, static_cast<float>(x.at(e) - z) * static_cast<float>(scale.at(k)));
    }
  }
}

// DynamicQuantizeLinear: uint8 quantization over the range of x widened to hold 0, with its
// scale and zero point as outputs, in float32 as ONNX's definition computes them.
void RunDynamicQuantize(const Node& n, const HostTensor& x, TensorValues* values) {
  float lo = 0, hi = 0;
  for (float v : x.f) lo = std::min(lo, v), hi = std::max(hi, v);
  // All zeros: any scale quantizes them to the zero point; 1 keeps the divisions finite.
  const float scale = hi > lo ? (hi - lo) / 255.0f : 1.0f;
  const float zero = static_cast<float>(QuantizeValue(0.0f - lo / scale, DType::kUInt8));
  HostTensor& y = (*values)[n.outputs[0]];
  for (int64_t e = 0; e < x.num_elements(); ++e) {
    y.i[e] =
        static_cast<int64_t>(QuantizeValue(std::nearbyint(x.f[e] / scale) + zero, DType::kUInt8));
  }
  if (n.outputs.size() > 1) (*values)[n.outputs[1]].f.assign(1, scale);
  if (n.outputs.size() > 2) (*values)[n.outputs[2]].i.assign(1, static_cast<int64_t>(zero));
}

// MatMulInteger and QLinearMatMul with per-tensor zero points and scales (one value each); the
// per-row / per-column forms are refused by name.
Status CheckPerTensor(const Node& n, std::initializer_list<const HostTensor*> params) {
  for (const HostTensor* p : params) {
    if (p != nullptr && p->num_elements() != 1) {
      return Status::Unimplemented(NodeLabel(n) + ": a zero point or scale of " +
                                   std::to_string(p->num_elements()) +
                                   " values; only per-tensor (one value) is supported");
    }
  }
  return Status::Ok();
}

Status RunMatMulInteger(const Node& n, const Lookup& in, HostTensor* out) {
  auto opt = [&](size_t i) { return n.input(i) == kNoId ? nullptr : in(n.inputs[i]); };
  FUSOR_RETURN_IF_ERROR(CheckPerTensor(n, {opt(2), opt(3)}));
  out->i = IntegerMatMul(*opt(0), opt(2), *opt(1), opt(3), out->num_elements());
  return Status::Ok();
}

// QLinearMatMul: the integer product rescaled by a_scale * b_scale / y_scale in float32, rounded
// half to even, plus y's zero point, saturated, as ONNX's reference computes it.
Status RunQLinearMatMul(const Node& n, const Lookup& in, HostTensor* out) {
  auto opt = [&](size_t i) { return n.input(i) == kNoId ? nullptr : in(n.inputs[i]); };
  FUSOR_RETURN_IF_ERROR(CheckPerTensor(n, {opt(1), opt(2), opt(4), opt(5), opt(6), opt(7)}));
  const std::vector<int64_t> c =
      IntegerMatMul(*opt(0), opt(2), *opt(3), opt(5), out->num_elements());
  const float scale = static_cast<float>(opt(1)->at(0)) * static_cast<float>(opt(4)->at(0)) /
                      static_cast<float>(opt(6)->at(0));
  const double zero = opt(7) == nullptr ? 0 : opt(7)->at(0);
  for (int64_t e = 0; e < out->num_elements(); ++e) {
    out->i[e] = static_cast<int64_t>(
        QuantizeValue(std::nearbyint(static_cast<float>(c[e]) * scale) + zero, out->dtype));
  }
  return Status::Ok();
}

// t - zero as float32 (exact for 8-bit values); `zero` holds one value or one per slice of
// `slice` elements (a per-output-channel weight zero point).
HostTensor ShiftedToFloat(const HostTensor& t, const HostTensor* zero, int64_t slice) {
  HostTensor f = HostTensor::Zeros(DType::kFloat32, t.dims);
  for (int64_t e = 0; e < t.num_elements(); ++e) {
    const double z = zero == nullptr ? 0 : zero->at(zero->num_elements() == 1 ? 0 : e / slice);
    f.f[e] = static_cast<float>(t.at(e) - z);
  }
  return f;
}

// The integer convolution of ConvInteger (inputs x, w, x_zero_point, w_zero_point) and
// QLinearConv (x, x_scale, x_zero_point, w, w_scale, w_zero_point, ...): (x - x_zero) conv
// (w - w_zero), padding with x's zero point, as exact float sums (ReferenceGemm sums in double).
StatusOr<HostTensor> IntegerConv(const Graph& g, const Node& n, const Lookup& in, size_t x_at,
                                 size_t x_zero_at, size_t w_at, size_t w_zero_at) {
  auto opt = [&](size_t i) { return n.input(i) == kNoId ? nullptr : in(n.inputs[i]); };
  const HostTensor& w = *opt(w_at);
  FUSOR_ASSIGN_OR_RETURN(Window window, ConvWindow(g, n));
  HostTensor out = HostTensor::Zeros(DType::kFloat32, g.tensor(n.outputs[0]).dims);
  RunConv(n, window, ShiftedToFloat(*opt(x_at), opt(x_zero_at), 1),
          ShiftedToFloat(w, opt(w_zero_at), w.num_elements() / w.dims[0]), nullptr, &out);
  return out;
}

Status RunConvInteger(const Graph& g, const Node& n, const Lookup& in, HostTensor* out) {
  FUSOR_ASSIGN_OR_RETURN(HostTensor c, IntegerConv(g, n, in, 0, 2, 1, 3));
  for (int64_t e = 0; e < out->num_elements(); ++e) out->i[e] = std::llround(c.f[e]);
  return Status::Ok();
}

// QLinearConv: the integer convolution plus the int32 bias, rescaled by x_scale * w_scale /
// y_scale (w_scale per output channel or one) in float32, rounded half to even, plus y's zero
// point, saturated.
Status RunQLinearConv(const Graph& g, const Node& n, const Lookup& in, HostTensor* out) {
  auto opt = [&](size_t i) { return n.input(i) == kNoId ? nullptr : in(n.inputs[i]); };
  FUSOR_RETURN_IF_ERROR(CheckPerTensor(n, {opt(1), opt(2), opt(6), opt(7)}));
  FUSOR_ASSIGN_OR_RETURN(HostTensor c, IntegerConv(g, n, in, 0, 2, 3, 5));
  const HostTensor& w_scale = *opt(4);
  const HostTensor* bias = opt(8);
  const int64_t channels = out->dims[1], plane = out->num_elements() / (out->dims[0] * channels);
  const double zero = opt(7) == nullptr ? 0 : opt(7)->at(0);
  for (int64_t e = 0; e < out->num_elements(); ++e) {
    const int64_t oc = e / plane % channels;
    const float scale = static_cast<float>(opt(1)->at(0)) *
                        static_cast<float>(w_scale.at(w_scale.num_elements() == 1 ? 0 : oc)) /
                        static_cast<float>(opt(6)->at(0));
    const double acc = std::llround(c.f[e]) + (bias == nullptr ? 0 : bias->at(oc));
    out->i[e] = static_cast<int64_t>(
        QuantizeValue(std::nearbyint(static_cast<float>(acc) * scale) + zero, out->dtype));
  }
  return Status::Ok();
}

// Einsum from its definition: each output element is the sum, over the labels only the operands
// carry, of the product of the operands at those labels (a label twice on one operand reads its
// diagonal; a broadcast ellipsis dim of length 1 reads index 0).
Status RunEinsum(const Node& n, const Lookup& in, HostTensor* out) {
  std::vector<const HostTensor*> operands;
  std::vector<Shape> shapes;
  for (TensorId t : n.inputs) {
    operands.push_back(in(t));
    shapes.push_back(operands.back()->dims);
  }
  FUSOR_ASSIGN_OR_RETURN(EinsumSpec spec, ParseEinsum(n.GetString("equation", ""), shapes));
  // Labels in iteration order: the output's, then the summed ones.
  std::vector<int> order = spec.output;
  for (int label = 0; label < static_cast<int>(spec.label_dims.size()); ++label) {
    if (spec.label_dims[label] > 0 && std::find(order.begin(), order.end(), label) == order.end()) {
      order.push_back(label);
    }
  }
  Shape extent;
  for (int label : order) extent.push_back(spec.label_dims[label]);
  // stride[k][j]: how far operand k's offset moves per step of label order[j].
  std::vector<std::vector<int64_t>> stride(operands.size(), std::vector<int64_t>(order.size(), 0));
  for (size_t k = 0; k < operands.size(); ++k) {
    const std::vector<int64_t> dim_strides = RowMajorStrides(shapes[k]);
    for (size_t d = 0; d < shapes[k].size(); ++d) {
      const int label = spec.operands[k][d];
      const size_t j = std::find(order.begin(), order.end(), label) - order.begin();
      if (shapes[k][d] == spec.label_dims[label]) stride[k][j] += dim_strides[d];
    }
  }
  const int64_t summed = NumElements(Shape(extent.begin() + spec.output.size(), extent.end()));
  std::vector<int64_t> coord(order.size(), 0);
  for (int64_t o = 0; o < out->num_elements(); ++o) {
    double acc = 0;
    for (int64_t s = 0; s < summed; ++s, NextCoord(extent, &coord)) {
      double product = 1;
      for (size_t k = 0; k < operands.size(); ++k) {
        int64_t off = 0;
        for (size_t j = 0; j < order.size(); ++j) off += coord[j] * stride[k][j];
        product *= operands[k]->at(off);
      }
      acc += product;
    }
    Store(out, o, acc);
  }
  return Status::Ok();
}

// NonZero: the coordinates of the non-zero elements, row-major, as [rank, count].
void RunNonZero(const HostTensor& x, HostTensor* out) {
  const int64_t count = out->dims[1];
  std::vector<int64_t> coord(x.dims.size(), 0);
  int64_t k = 0;
  for (int64_t e = 0; e < x.num_elements() && k < count; ++e, NextCoord(x.dims, &coord)) {
    if (x.at(e) == 0) continue;
    for (size_t d = 0; d < coord.size(); ++d) out->i[d * count + k] = coord[d];
    ++k;
  }
}

// Unique: the unique slices (graph/unique_values.h) and, when asked, their first indices, each
// input slice's unique position and their counts.
Status RunUnique(const Node& n, const HostTensor& x, TensorValues* values) {
  std::optional<int64_t> axis;
  if (n.FindAttr("axis") != nullptr) axis = NormalizeAxis(n.GetInt("axis", 0), x.dims.size());
  std::vector<double> flat(x.num_elements());
  for (int64_t e = 0; e < x.num_elements(); ++e) flat[e] = x.at(e);
  const UniqueSlices u = FindUniqueSlices(flat, x.dims, axis, n.GetInt("sorted", 1) != 0);
  HostTensor& y = (*values)[n.outputs[0]];
  if (y.dims.empty() || y.dims[axis.value_or(0)] != static_cast<int64_t>(u.first.size())) {
    return Status::FailedPrecondition(NodeLabel(n) + ": the input has " +
                                      std::to_string(u.first.size()) +
                                      " unique slices, not the count the import sized Y for");
  }
  HostTensor flattened;
  const HostTensor* source = &x;
  if (!axis) {
    flattened = x;
    flattened.dims = {x.num_elements()};
    source = &flattened;
  }
  for (size_t p = 0; p < u.first.size(); ++p) {
    CopyAlongAxis(*source, axis.value_or(0), u.first[p], &y, static_cast<int64_t>(p), 1);
  }
  const std::vector<int64_t>* rest[] = {&u.first, &u.inverse, &u.counts};
  for (size_t k = 1; k < n.outputs.size() && k < 4; ++k) {
    if (n.outputs[k] != kNoId) (*values)[n.outputs[k]].i = *rest[k - 1];
  }
  return Status::Ok();
}

// MaxUnpool: zeros, with each x written where its index (MaxPool's Indices, flat in the shape
// the pooling inverts: (x - 1) * stride + kernel - pads per spatial dim) points; a larger
// output_shape keeps those coordinates, the rest of it zeros.
Status RunMaxUnpool(const Node& n, const HostTensor& x, const HostTensor& indices,
                    HostTensor* out) {
  const std::vector<int64_t> kernel = n.GetInts("kernel_shape");
  std::vector<int64_t> strides = n.GetInts("strides"), pads = n.GetInts("pads");
  const size_t s = x.dims.size() - 2;
  if (kernel.size() != s) {
    return Status::InvalidArgument(NodeLabel(n) + ": kernel_shape has " +
                                   std::to_string(kernel.size()) + " dims, X has " +
                                   std::to_string(s) + " spatial dims");
  }
  if (strides.size() != s) strides.assign(s, 1);
  if (pads.size() != 2 * s) pads.assign(2 * s, 0);
  Shape unpooled = {x.dims[0], x.dims[1]};
  for (size_t d = 0; d < s; ++d) {
    unpooled.push_back((x.dims[d + 2] - 1) * strides[d] + kernel[d] - pads[d] - pads[d + s]);
  }
  const std::vector<int64_t> strides_in = RowMajorStrides(unpooled);
  const std::vector<int64_t> strides_out = RowMajorStrides(out->dims);
  for (int64_t e = 0; e < x.num_elements(); ++e) {
    int64_t rest = indices.i[e], at = 0;
    if (rest < 0 || rest >= NumElements(unpooled)) {
      return Status::InvalidArgument(NodeLabel(n) + ": index " + std::to_string(rest) +
                                     " is outside the unpooled " + ShapeString(unpooled));
    }
    for (size_t d = 0; d < unpooled.size(); ++d) {
      const int64_t c = rest / strides_in[d];
      rest %= strides_in[d];
      if (c >= out->dims[d]) at = -1;
      if (at >= 0) at += c * strides_out[d];
    }
    if (at >= 0) Store(out, at, x.at(e));
  }
  return Status::Ok();
}

// MelWeightMatrix [dft_length / 2 + 1, num_mel_bins] as ONNX's reference builds it: num_mel_bins
// + 2 points evenly spaced in mel between the edges, mapped to spectrogram bins (floored), and a
// triangle per mel bin rising from its left point to its centre and falling to its right one.
void RunMelWeightMatrix(const Node& n, const Lookup& in, HostTensor* out) {
  auto value = [&](size_t i) { return in(n.inputs[i])->at(0); };
  const int64_t mels = out->dims[1], dft = static_cast<int64_t>(value(1));
  const double rate = value(2);
  auto mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double low = mel(value(3)), step = (mel(value(4)) - low) / static_cast<double>(mels + 2);
  std::vector<int64_t> bins;
  for (int64_t k = 0; k < mels + 2; ++k) {
    const double hz = 700 * (std::pow(10.0, (static_cast<double>(k) * step + low) / 2595) - 1);
    bins.push_back(static_cast<int64_t>(std::floor(static_cast<double>(dft + 1) * hz / rate)));
  }
  auto set = [&](int64_t row, int64_t col, double v) {
    if (row >= 0 && row < out->dims[0]) Store(out, row * mels + col, v);
  };
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t left = bins[i], centre = bins[i + 1], right = bins[i + 2];
    if (centre == left) set(centre, i, 1);
    for (int64_t j = left; centre != left && j <= centre; ++j) {
      set(j, i, static_cast<double>(j - left) / static_cast<double>(centre - left));
    }
    for (int64_t j = centre; j < right; ++j) {
      set(j, i, static_cast<double>(right - j) / static_cast<double>(right - centre));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Dispatch

// What the dispatch below returns for an op it has no kernel for (RunReferenceKernel).
Status NoKernel(const Node& n) {
  return Status::Unimplemented(NodeLabel(n) + ": op is not supported by the runtime");
}

bool IsUnary(const std::string& op) {
  static const char* kOps[] = {
      "Sqrt",      "Erf",      "Exp",        "Log",   "Tanh", "Relu",    "Clip",
      "Neg",       "Abs",      "Reciprocal", "Floor", "Ceil", "Sigmoid", "HardSigmoid",
      "HardSwish", "Softplus", "LeakyRelu",  "Elu",   "Celu", "Selu",    "ThresholdedRelu",
      "Softsign",  "Shrink",   "Sign",       "Round", "Sin",  "Cos",     "Tan",
      "Asin",      "Acos",     "Atan",       "Sinh",  "Cosh", "Asinh",   "Acosh",
      "Atanh"};
  return std::any_of(std::begin(kOps), std::end(kOps), [&](const char* o) { return op == o; });
}

Status RunInjective(const Graph& g, const Node& n, const Lookup& in, TensorValues* values) {
  const std::string& op = n.op_type;
  HostTensor& out = (*values)[n.outputs[0]];
  const HostTensor& x = *in(n.inputs[0]);
  if (IsViewOp(op)) {
    out.f = x.f;
    out.i = x.i;
    return Status::Ok();
  }
  if (op == "Transpose") return RunTranspose(g, n, x, &out), Status::Ok();
  if (op == "Slice") return RunSlice(g, n, x, &out);
  if (op == "Expand") {
    return AffineCopy(x, BroadcastStrides(x.dims, out.dims), 0, &out), Status::Ok();
  }
  if (op == "Gather") return RunGather(n, x, *in(n.inputs[1]), &out);
  if (op == "Trilu") return RunTrilu(g, n, x, &out);
  if (op == "Pad") {
    FUSOR_ASSIGN_OR_RETURN(PadParams p, PadOf(g, n, in));
    return RunPad(p, x, &out), Status::Ok();
  }
  if (op == "Resize") return RunResize(g, n, x, &out);
  if (op == "ScatterND") return RunScatterNd(n, x, *in(n.inputs[1]), *in(n.inputs[2]), &out);
  if (op == "GatherElements") return RunGatherElements(n, x, *in(n.inputs[1]), &out);
  if (op == "ScatterElements") {
    return RunScatterElements(n, x, *in(n.inputs[1]), *in(n.inputs[2]), &out);
  }
  if (op == "DepthToSpace" || op == "SpaceToDepth") return RunSpaceDepth(n, x, &out), Status::Ok();
  if (op == "Tile") return RunTile(x, &out), Status::Ok();
  if (op == "GatherND") return RunGatherNd(n, x, *in(n.inputs[1]), &out);
  if (op == "ReverseSequence") {
    return RunReverseSequence(n, x, *in(n.inputs[1]), &out), Status::Ok();
  }
  int64_t axis = NormalizeAxis(n.GetInt("axis", 0), x.dims.size());
  if (op == "Concat") {
    for (size_t j = 0, offset = 0; j < n.inputs.size(); ++j) {
      const HostTensor& part = *in(n.inputs[j]);
      CopyAlongAxis(part, axis, 0, &out, static_cast<int64_t>(offset), part.dims[axis]);
      offset += part.dims[axis];
    }
    return Status::Ok();
  }
  if (op == "Split") {
    for (size_t j = 0, offset = 0; j < n.outputs.size(); ++j) {
      HostTensor& part = (*values)[n.outputs[j]];
      CopyAlongAxis(x, axis, static_cast<int64_t>(offset), &part, 0, part.dims[axis]);
      offset += part.dims[axis];
    }
    return Status::Ok();
  }
  return NoKernel(n);
}

// NegativeLogLikelihoodLoss of log-probabilities `logp` [N, C, D...] at `target` [N, D...] with
// optional per-class `weight`: per element -logp[n, target, d] * weight[target] (0 where the target
// is ignore_index), then none (that tensor), sum, or mean (divided by the weights summed).
Status RunNllLoss(const Node& n, const HostTensor& logp, const HostTensor& target,
                  const HostTensor* weight, HostTensor* out) {
  const int64_t batch = logp.dims[0], classes = logp.dims[1];
  const int64_t inner = logp.num_elements() / std::max<int64_t>(1, batch * classes);
  const bool ignores = n.FindAttr("ignore_index") != nullptr;
  const int64_t ignore = n.GetInt("ignore_index", 0);
  const std::string reduction = n.GetString("reduction", "mean");
  double sum = 0, weights = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t d = 0; d < inner; ++d) {
      const int64_t c = target.i[b * inner + d];
      double loss = 0, w = 0;
      if (!ignores || c != ignore) {
        if (c < 0 || c >= classes) {
          return Status::InvalidArgument(NodeLabel(n) + ": target class " + std::to_string(c) +
                                         " is outside [0, " + std::to_string(classes) + ")");
        }
        w = weight != nullptr ? weight->f[c] : 1.0;
        loss = -logp.f[(b * classes + c) * inner + d] * w;
      }
      if (reduction == "none") out->f[b * inner + d] = static_cast<float>(loss);
      sum += loss;
      weights += w;
    }
  }
  if (reduction != "none") out->f[0] = static_cast<float>(reduction == "sum" ? sum : sum / weights);
  return Status::Ok();
}

// SoftmaxCrossEntropyLoss: the NegativeLogLikelihoodLoss of LogSoftmax over axis 1, and that
// log-probability as the optional second output.
Status RunSoftmaxCrossEntropy(const Node& n, const Lookup& in, TensorValues* values) {
  const HostTensor& x = *in(n.inputs[0]);
  HostTensor logp = HostTensor::Zeros(x.dtype, x.dims);
  const int64_t classes = x.dims[1];
  const int64_t inner = x.num_elements() / std::max<int64_t>(1, x.dims[0] * classes);
  for (int64_t b = 0; b < x.dims[0]; ++b) {
    for (int64_t d = 0; d < inner; ++d) {
      const float* src = x.f.data() + b * classes * inner + d;
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t c = 0; c < classes; ++c) mx = std::max<double>(mx, src[c * inner]);
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(src[c * inner] - mx);
      for (int64_t c = 0; c < classes; ++c) {
        logp.f[(b * classes + c) * inner + d] =
            static_cast<float>(src[c * inner] - mx - std::log(sum));
      }
    }
  }
  const HostTensor* weight = n.input(2) == kNoId ? nullptr : in(n.inputs[2]);
  FUSOR_RETURN_IF_ERROR(RunNllLoss(n, logp, *in(n.inputs[1]), weight, &(*values)[n.outputs[0]]));
  if (n.outputs.size() > 1) (*values)[n.outputs[1]].f = std::move(logp.f);
  return Status::Ok();
}

// Dropout at inference (CheckDropout refuses training mode): Y is X, the mask all true.
void RunDropout(const Node& n, const Lookup& in, TensorValues* values) {
  const HostTensor& x = *in(n.inputs[0]);
  HostTensor& y = (*values)[n.outputs[0]];
  y.f = x.f;
  y.i = x.i;
  if (n.outputs.size() > 1) {
    HostTensor& mask = (*values)[n.outputs[1]];
    std::fill(mask.i.begin(), mask.i.end(), 1);
  }
}

// The normalisations whose optional outputs the reference computes: LayerNormalization, and
// BatchNormalization in training mode (OnlyReferenceComputes).
void RunWithOptionalOutputs(const Node& n, const Lookup& in, TensorValues* values) {
  std::array<HostTensor*, 3> out{};
  for (size_t k = 0; k < std::min<size_t>(3, n.outputs.size()); ++k) {
    out[k] = &(*values)[n.outputs[k]];
  }
  auto opt = [&](size_t i) { return n.input(i) == kNoId ? nullptr : in(n.inputs[i]); };
  if (n.op_type == "LayerNormalization") return RunLayerNorm(n, *opt(0), *opt(1), opt(2), out);
  RunTrainingBatchNorm(n, {opt(0), opt(1), opt(2), opt(3), opt(4)}, out);
}

Status RunCompute(const Graph& g, const Node& n, const Lookup& in, HostTensor* out) {
  const std::string& op = n.op_type;
  auto opt = [&](size_t i) { return n.input(i) == kNoId ? nullptr : in(n.inputs[i]); };
  if (opt(0) == nullptr) {  // Every op below reads a first input; one without it is unknown here.
    return NoKernel(n);
  }
  const HostTensor& x = *in(n.inputs[0]);
  if (IsUnary(op)) return RunUnary(g, n, in, x, out);
  if (Binary(op, false)) return RunBinary(n, x, *in(n.inputs[1]), out);
  if (op == "Cast" && out->dtype == DType::kBFloat16 && x.dtype != DType::kBFloat16) {
    // ONNX's own test data truncates to bfloat16 where ONNX Runtime rounds to nearest: with no
    // one answer to match, Fusor refuses rather than pick one.
    return Status::Unimplemented(NodeLabel(n) + ": Cast to bfloat16 is not supported (ONNX's " +
                                 "test data truncates, ONNX Runtime rounds to nearest even)");
  }
  if (op == "Cast") return RunCast(x, out), Status::Ok();
  if (op == "Mod") return RunMod(n, x, *in(n.inputs[1]), out), Status::Ok();
  if (op == "IsNaN" || op == "IsInf") return RunIsSpecial(n, x, out), Status::Ok();
  if (op == "ArgMax" || op == "ArgMin") return RunArgExtreme(n, x, out), Status::Ok();
  if (op == "LogSoftmax") return RunSoftmax(g, n, x, out), Status::Ok();
  if (op == "Hardmax") return RunHardmax(g, n, x, out), Status::Ok();
  if (op == "NegativeLogLikelihoodLoss") return RunNllLoss(n, x, *opt(1), opt(2), out);
  if (op == "Not") {
    for (int64_t e = 0; e < x.num_elements(); ++e) Store(out, e, x.at(e) == 0 ? 1 : 0);
    return Status::Ok();
  }
  if (op == "Where") return RunWhere(x, *opt(1), *opt(2), out), Status::Ok();
  if (op == "BatchNormalization") {
    return RunBatchNorm(n, {&x, opt(1), opt(2), opt(3), opt(4)}, out), Status::Ok();
  }
  if (op == "MatMul") return MatMulBatched(x, *opt(1), out), Status::Ok();
  if (op == "Gemm") return RunGemm(n, x, *opt(1), opt(2), out), Status::Ok();
  if (op == "Conv") {
    FUSOR_ASSIGN_OR_RETURN(Window w, ConvWindow(g, n));
    return RunConv(n, w, x, *opt(1), opt(2), out), Status::Ok();
  }
  if (op == "ConvTranspose") {
    FUSOR_ASSIGN_OR_RETURN(Window w, ConvTransposeWindow(g, n));
    return RunConvTranspose(n, w, x, *opt(1), opt(2), out), Status::Ok();
  }
  if (op.rfind("Reduce", 0) == 0) return RunReduce(g, n, x, out);
  if (op == "Softmax") return RunSoftmax(g, n, x, out), Status::Ok();
  if (op == "EyeLike") return RunEyeLike(n, out), Status::Ok();
  if (op == "GlobalMaxPool") return RunGlobalMaxPool(x, out), Status::Ok();
  if (op == "MeanVarianceNormalization") return RunMeanVarianceNorm(n, x, out), Status::Ok();
  if (op == "LRN") return RunLrn(n, x, out), Status::Ok();
  if (op == "Det") return RunDet(x, out), Status::Ok();
  if (op == "CumSum") return RunCumSum(n, x, *opt(1), out);
  if (op == "OneHot") return RunOneHot(n, x, *opt(2), out), Status::Ok();
  if (op == "Compress") return RunCompress(n, x, *opt(1), out), Status::Ok();
  if (op.ends_with("Window")) return RunWindow(n, out), Status::Ok();
  if (op == "GridSample") return RunGridSample(n, x, *opt(1), out);
  if (op == "TfIdfVectorizer") return RunTfIdfVectorizer(n, x, out);
  if (op == "DFT") return RunDft(n, x, opt(1), opt(2), out);
  if (op == "RoiAlign") return RunRoiAlign(n, x, *opt(1), *opt(2), out);
  if (op == "MaxUnpool") return RunMaxUnpool(n, x, *opt(1), out);
  if (op == "BitShift") return RunBitShift(n, x, *opt(1), out), Status::Ok();
  if (op == "QuantizeLinear" || op == "DequantizeLinear") {
    return RunLinearQuantization(n, x, *opt(1), opt(2), out), Status::Ok();
  }
  if (op == "InstanceNormalization") {
    return RunInstanceNorm(n, x, *opt(1), *opt(2), out), Status::Ok();
  }
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool") {
    return RunPool(g, n, x, out);
  }
  return NoKernel(n);
}

bool IsInjectiveOp(const std::string& op) {
  return IsViewOp(op) || op == "Transpose" || op == "Slice" || op == "Expand" || op == "Gather" ||
         op == "Trilu" || op == "Pad" || op == "Concat" || op == "Split" || op == "Resize" ||
         op == "ScatterND" || op == "GatherElements" || op == "DepthToSpace" ||
         op == "SpaceToDepth" || op == "Tile" || op == "ScatterElements" || op == "GatherND" ||
         op == "ReverseSequence";
}

// PRelu's slope broadcasts to its input by numpy's rules (opset 7 on); a slope of one value per
// channel, which opset 6 exporters wrote for [N, C, ...] inputs, does not.
Status CheckSlopeBroadcasts(const Graph& g, const Node& n) {
  const Shape& x = g.tensor(n.input(0)).dims;
  const Shape& slope = g.tensor(n.input(1)).dims;
  bool fits = slope.size() <= x.size();
  for (size_t i = 0; fits && i < slope.size(); ++i) {
    const int64_t d = slope[slope.size() - 1 - i];
    fits = d == 1 || d == x[x.size() - 1 - i];
  }
  if (fits) return Status::Ok();
  return Status::InvalidArgument(NodeLabel(n) + ": slope of shape " + ShapeString(slope) +
                                 " does not broadcast to the input's " + ShapeString(x) +
                                 " (numpy rules, PRelu-7 on)");
}

// Training-mode Dropout draws a random mask; the reference runs the inference form only: no
// training_mode input, or a constant false one, or a constant ratio of 0.
Status CheckDropout(const Graph& g, const Node& n) {
  auto constant_zero = [&](size_t i) {
    if (n.input(i) == kNoId) return true;
    const Tensor& t = g.tensor(n.input(i));
    StatusOr<HostTensor> v = ConstantValue(t);
    if (t.kind != TensorKind::kConstant || !v.ok()) return false;
    for (int64_t e = 0; e < v->num_elements(); ++e) {
      if (v->at(e) != 0) return false;
    }
    return true;
  };
  if (n.inputs.size() < 3 || constant_zero(2) || (n.inputs.size() >= 2 && constant_zero(1))) {
    return Status::Ok();
  }
  // A ratio or training_mode given at run time may well be 0 / false: say how to fix it.
  std::string fix;
  for (size_t i : {1, 2}) {
    const Tensor& t = g.tensor(n.input(i));
    if (fix.empty() && t.kind == TensorKind::kGraphInput) {
      fix = " (if graph input '" + t.name + "' is fixed, give it at import with --const-input " +
            t.name + "=FILE)";
    }
  }
  return Status::Unimplemented(NodeLabel(n) +
                               ": Dropout in training mode (training_mode not a constant false, "
                               "ratio not 0) draws a random mask; Fusor runs inference only" +
                               fix);
}

Status CheckFloatOnly(const Graph& g, const Node& n) {
  const bool int_ok = ReferenceKernelWritesIntegers(n.op_type);
  for (TensorId t : n.outputs) {
    if (!IsSupportedDType(g.tensor(t).dtype)) {
      return Status::Unimplemented(NodeLabel(n) + ": output dtype " +
                                   std::string(DTypeName(g.tensor(t).dtype)) +
                                   " is not supported; the runtime computes in float32 and int64");
    }
    if (!int_ok && !IsFloatingPoint(g.tensor(t).dtype)) {
      return Status::Unimplemented(NodeLabel(n) + ": integer outputs are not supported");
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckReferenceKernel(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (!HasReferenceKernel(n.domain, n.op_type)) {
    return Status::Unimplemented(NodeLabel(n) + ": Fusor has no implementation of op '" +
                                 (n.domain.empty() ? "" : n.domain + ".") + n.op_type +
                                 "' (neither a lowering nor a reference kernel); the model "
                                 "cannot run until it is replaced or supported");
  }
  if (n.op_type == "Dropout") FUSOR_RETURN_IF_ERROR(CheckDropout(g, n));
  if (n.op_type == "PRelu") FUSOR_RETURN_IF_ERROR(CheckSlopeBroadcasts(g, n));
  return CheckFloatOnly(g, n);
}

void ReferenceGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                   int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  // Row blocks of 4 reuse each streamed row of B four times; columns in blocks of 512 and K in
  // blocks of 128 keep the B panel in L2. Plain loops the compiler vectorises; no oneDNN. Sums
  // are kept in double: the reference judges float32 runtimes, and a float32 sum of its own
  // carries an error of their size (LR-ASPP's 960-channel sums before a Sigmoid gate put it
  // outside the parity tolerance from the exact value; docs/benchmarks.md, "Parity and float32").
  constexpr int64_t kNb = 512, kKb = 128;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i0 = 0; i0 < m; i0 += 4) {
    int64_t rows = std::min<int64_t>(4, m - i0);
    double acc[4][kNb];
    for (int64_t j0 = 0; j0 < n; j0 += kNb) {
      int64_t cols = std::min(kNb, n - j0);
      for (int64_t r = 0; r < rows; ++r) {
        const float* crow = c + (i0 + r) * ldc + j0;
        for (int64_t j = 0; j < cols; ++j) acc[r][j] = accumulate ? crow[j] : 0.0;
      }
      for (int64_t k0 = 0; k0 < k; k0 += kKb) {
        int64_t kk = std::min(kKb, k - k0);
        for (int64_t r = 0; r < rows; ++r) {
          const float* arow = a + (i0 + r) * lda + k0;
          for (int64_t p = 0; p < kk; ++p) {
            double av = arow[p];
            const float* brow = b + (k0 + p) * ldb + j0;
#pragma omp simd
            for (int64_t j = 0; j < cols; ++j) acc[r][j] += av * brow[j];
          }
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        float* crow = c + (i0 + r) * ldc + j0;
        for (int64_t j = 0; j < cols; ++j) crow[j] = static_cast<float>(acc[r][j]);
      }
    }
  }
}

Status RunReferenceNode(const Graph& g, NodeId id, TensorValues* values) {
  const Node& n = g.node(id);
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i] != kNoId && values->count(n.inputs[i]) == 0) {
      return Status::FailedPrecondition(NodeLabel(n) + ": input '" + g.tensor(n.inputs[i]).name +
                                        "' has no value");
    }
  }
  FUSOR_RETURN_IF_ERROR(CheckReferenceKernel(g, id));
  return RunReferenceKernel(g, id, values);
}

Status RunReferenceKernel(const Graph& g, NodeId id, TensorValues* values) {
  const Node& n = g.node(id);
  Lookup in = [values](TensorId t) -> const HostTensor* {
    auto it = values->find(t);
    return it == values->end() ? nullptr : &it->second;
  };
  for (TensorId t : n.outputs) {
    (*values)[t] = HostTensor::Zeros(g.tensor(t).dtype, g.tensor(t).dims);
  }
  if (IsInjectiveOp(n.op_type)) return RunInjective(g, n, in, values);
  if (n.op_type == "LSTM" || n.op_type == "GRU" || n.op_type == "RNN") {
    return RunRecurrent(g, n, in, values);
  }
  if (n.op_type == "TopK") return RunTopK(g, n, in, values);
  if (n.op_type == "MatMulInteger") return RunMatMulInteger(n, in, &(*values)[n.outputs[0]]);
  if (n.op_type == "QLinearMatMul") return RunQLinearMatMul(n, in, &(*values)[n.outputs[0]]);
  if (n.op_type == "ConvInteger") return RunConvInteger(g, n, in, &(*values)[n.outputs[0]]);
  if (n.op_type == "Einsum") return RunEinsum(n, in, &(*values)[n.outputs[0]]);
  if (n.op_type == "Unique") return RunUnique(n, *in(n.inputs[0]), values);
  if (n.op_type == "MelWeightMatrix") {
    return RunMelWeightMatrix(n, in, &(*values)[n.outputs[0]]), Status::Ok();
  }
  if (n.op_type == "NonZero") {
    return RunNonZero(*in(n.inputs[0]), &(*values)[n.outputs[0]]), Status::Ok();
  }
  if (n.op_type == "QLinearConv") return RunQLinearConv(g, n, in, &(*values)[n.outputs[0]]);
  if (n.op_type == "DynamicQuantizeLinear") {
    return RunDynamicQuantize(n, *in(n.inputs[0]), values), Status::Ok();
  }
  if (n.op_type == "Dropout") return RunDropout(n, in, values), Status::Ok();
  if (n.op_type == "SoftmaxCrossEntropyLoss") return RunSoftmaxCrossEntropy(n, in, values);
  if (n.op_type == "MaxPool" && n.outputs.size() > 1) {
    return RunPool(g, n, *in(n.inputs[0]), &(*values)[n.outputs[0]], &(*values)[n.outputs[1]]);
  }
  if (n.op_type == "LayerNormalization" ||
      (n.op_type == "BatchNormalization" && OnlyReferenceComputes(g, n))) {
    return RunWithOptionalOutputs(n, in, values), Status::Ok();
  }
  return RunCompute(g, n, in, &(*values)[n.outputs[0]]);
}

StatusOr<TensorValues> RunReference(const Graph& g, const TensorValues& leaves) {
  TensorValues values = leaves;
  std::vector<int> readers(g.num_tensors(), 0);
  for (TensorId t = 0; t < static_cast<TensorId>(g.num_tensors()); ++t) {
    readers[t] = static_cast<int>(g.tensor(t).consumers.size());
  }
  for (NodeId id = 0; id < static_cast<NodeId>(g.num_nodes()); ++id) {
    FUSOR_RETURN_IF_ERROR(RunReferenceNode(g, id, &values));
    std::vector<TensorId> read = g.node(id).inputs;
    std::sort(read.begin(), read.end());
    read.erase(std::unique(read.begin(), read.end()), read.end());
    for (TensorId t : read) {
      bool keep = t == kNoId || g.IsGraphOutput(t) || g.tensor(t).kind != TensorKind::kActivation;
      if (!keep && --readers[t] == 0) values.erase(t);
    }
  }
  TensorValues outputs;
  for (TensorId t : g.outputs()) outputs[t] = values.at(t);
  return outputs;
}

}  // namespace fusor
