// Whether a MatMul could read its operands as views: the transformers' attention MatMuls read Q,
// K^T and V as heads split out of a [seq, heads * d] projection (Reshape + Transpose, and in Swin-T
// a Gather of one of three), which Fusor copies into plain tensors first (a fused loop per
// operand). oneDNN's matmul takes operands with arbitrary strides, so the copy could be a view the
// primitive reads in place. For each shape the probe builds the two ways, checks that they agree,
// and times them side by side (runtime/measurer.h TimeSideBySide):
//   - copy + plain: each viewed operand reordered into a plain buffer (oneDNN's reorder, as
//     quick as Fusor's transpose loops), then the matmul on plain operands;
//   - view: one matmul whose source and weights descriptors carry the view's strides.
// It prints the implementation oneDNN picks for each (brgemm `brg:<isa>` for plain operands;
// strided ones fall back to `gemm:jit`). The measurements behind docs/benchmarks.md, "Where the
// transformers spend their time".
//
//   ./build/bench/matmul_view_probe [--threads N]   (default 2)
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "runtime/measurer.h"

namespace fusor {
namespace {

using dnnl::memory;
using Dt = memory::data_type;
using Tag = memory::format_tag;

// [batch, m, k] x [batch, k, n] with `batch` heads. A is a view of a [m, batch * k] projection
// (Q: head b's row i at i * batch * k + b * k) when a_view; B is a view of a [n, batch * k]
// projection read transposed (K^T) when b_transposed, else of a [k, batch * n] one (V).
struct Shape3 {
  const char* name;
  int64_t batch, m, k, n;
  bool a_view, b_transposed;
};

const Shape3 kShapes[] = {
    {"BERT Q K^T (seq 128, 12 heads of 64)", 12, 128, 64, 128, true, true},
    {"BERT P V (V a view)", 12, 128, 128, 64, false, false},
    {"ViT-B/32 Q K^T (seq 50)", 12, 50, 64, 50, true, true},
    {"Swin-T stage 1 Q K^T (64 windows x 3 heads)", 192, 49, 32, 49, true, true},
};

void Fill(const memory& m, int seed) {
  auto* p = static_cast<float*>(m.get_data_handle());
  size_t n = m.get_desc().get_size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>((i * 7 + seed) % 23) * 0.05f - 0.5f;
}

std::vector<float> Values(const memory& m) {
  const auto* p = static_cast<const float*>(m.get_data_handle());
  return std::vector<float>(p, p + m.get_desc().get_size() / sizeof(float));
}

void Probe(const dnnl::engine& eng, dnnl::stream& s, const Shape3& c) {
  const int64_t b = c.batch, m = c.m, k = c.k, n = c.n;
  const memory::dims ad = {b, m, k}, bd = {b, k, n}, yd = {b, m, n};
  const memory::desc a_plain(ad, Dt::f32, Tag::abc), b_plain(bd, Dt::f32, Tag::abc);
  const memory::desc y_md(yd, Dt::f32, Tag::abc);
  const memory::desc a_view =
      c.a_view ? memory::desc(ad, Dt::f32, memory::dims{k, b * k, 1}) : a_plain;
  const memory::desc b_view = c.b_transposed ? memory::desc(bd, Dt::f32, memory::dims{k, 1, b * k})
                                             : memory::desc(bd, Dt::f32, memory::dims{n, b * n, 1});
  // The projections (the views' storage) and the plain copies.
  memory a_src(a_view, eng), b_src(b_view, eng), a_copy(a_plain, eng), b_copy(b_plain, eng);
  memory y_copy(y_md, eng), y_view(y_md, eng);
  Fill(a_src, 1);
  Fill(b_src, 2);
  dnnl::matmul::primitive_desc plain_pd(eng, a_plain, b_plain, y_md);
  dnnl::matmul::primitive_desc view_pd(eng, a_view, b_view, y_md);
  dnnl::matmul plain(plain_pd), view(view_pd);
  dnnl::reorder a_reorder(a_src, a_copy), b_reorder(b_src, b_copy);
  auto copy_then_plain = [&] {
    if (c.a_view) a_reorder.execute(s, a_src, a_copy);
    b_reorder.execute(s, b_src, b_copy);
    plain.execute(s, {{DNNL_ARG_SRC, c.a_view ? a_copy : a_src},
                      {DNNL_ARG_WEIGHTS, b_copy},
                      {DNNL_ARG_DST, y_copy}});
    s.wait();
  };
  auto in_place = [&] {
    view.execute(s, {{DNNL_ARG_SRC, a_src}, {DNNL_ARG_WEIGHTS, b_src}, {DNNL_ARG_DST, y_view}});
    s.wait();
  };
  copy_then_plain();
  in_place();
  std::vector<float> y1 = Values(y_copy), y2 = Values(y_view);
  float diff = 0;
  for (size_t i = 0; i < y1.size(); ++i) diff = std::max(diff, std::abs(y1[i] - y2[i]));
  TimingOptions timing;
  timing.min_total_ns = 100'000'000;
  timing.retries = 0;
  std::vector<Measurement> t = TimeSideBySide({copy_then_plain, in_place}, timing);
  // The quickest runs: on a loaded host a 2-thread run waits whole scheduler slices.
  auto us = [](int64_t ns) { return static_cast<double>(ns) / 1e3; };
  std::printf("%-46s max|diff| %-8.2g copy + plain (%s) %7.1f us, view (%s) %7.1f us: %.2fx%s\n",
              c.name, diff, plain_pd.impl_info_str(), us(t[0].min_ns), view_pd.impl_info_str(),
              us(t[1].min_ns), static_cast<double>(t[0].min_ns) / static_cast<double>(t[1].min_ns),
              diff > 1e-3f ? "  WRONG RESULT" : "");
}

int Main(int argc, char** argv) {
  int threads = 2;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--threads N]\n", argv[0]);
      return 2;
    }
  }
  if (threads < 1) {
    std::fprintf(stderr, "--threads takes a positive number\n");
    return 2;
  }
  omp_set_num_threads(threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  std::printf("%d threads; ratio above 1: the view is quicker\n", threads);
  for (const Shape3& c : kShapes) Probe(eng, s, c);
  return 0;
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) { return fusor::Main(argc, argv); }
