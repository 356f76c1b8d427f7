// oneDNN's depthwise post-op (post_ops::append_dw: a 1x1 conv followed by a 3x3 depthwise conv in
// one primitive) on the expand -> depthwise pairs of the shared mobile nets, against the two convs
// run apart as Fusor runs them (two primitives, the 1x1 conv's output written to memory between
// them). For each pair, batch and layout it prints the implementation oneDNN picks for the fused
// primitive (a `ref_fused_convolution:...` name runs the two convs one after the other through a
// scratchpad; only `jit_1x1:<isa>` computes the depthwise conv tile by tile from the 1x1 conv's
// output while it is in cache), the intermediate's size, the largest difference between the fused
// and the apart outputs, and both timed side by side (runtime/measurer.h TimeSideBySide) with
// their ratio. The measurements behind docs/benchmarks.md, "oneDNN's depthwise post-op".
//
// oneDNN 2.6 takes the jit path only when the 1x1 conv's output is larger than twice the L2 cache
// of all its threads (per-core L2 x OpenMP threads, read from the CPU); below that it answers with
// ref_fused_convolution. The probe prints that threshold for the threads it runs with.
//
//   ./build/bench/dw_postop_probe [--threads N] [--batch N]...   (default: 2 threads, batch 1 and
//   2) DNNL_MAX_CPU_ISA=AVX2 ./build/bench/dw_postop_probe           (the AVX2 kernels, nChw8c)
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "runtime/measurer.h"

namespace fusor {
namespace {

using dnnl::algorithm;
using dnnl::memory;
using Dt = memory::data_type;
using Tag = memory::format_tag;
using ConvPd = dnnl::convolution_forward::primitive_desc;

struct Activation {
  const char* name;
  algorithm alg;
  float alpha, beta;
};
constexpr Activation kRelu{"Relu", algorithm::eltwise_relu, 0, 0};
constexpr Activation kRelu6{"Relu6", algorithm::eltwise_clip, 0, 6};
constexpr Activation kSilu{"SiLU", algorithm::eltwise_swish, 1, 0};
constexpr Activation kHardSwish{"HardSwish", algorithm::eltwise_hardswish, 0, 0};

// One expand (1x1) -> depthwise 3x3 pair at batch 1, the activation after each conv.
struct Pair {
  const char* model;
  int64_t in_channels, channels, size, stride;
  Activation activation;
};

// The shared models' 1x1 -> 3x3 depthwise pairs (stride 1 or 2, pad 1) with the largest
// intermediates, read from the ONNX files (the 5x5 depthwise convs take no dw post-op), one
// channel count that is no multiple of 16 and a large stride-1 pair.
const std::vector<Pair>& Pairs() {
  static const std::vector<Pair> pairs = {
      {"mobilenet_v2 features.2", 16, 96, 112, 2, kRelu6},
      {"mobilenet_v2 features.3", 24, 144, 56, 1, kRelu6},
      {"mobilenet_v2 features.4", 24, 144, 56, 2, kRelu6},
      {"mobilenet_v2 features.5", 32, 192, 28, 1, kRelu6},
      {"mobilenet_v2 features.12", 96, 576, 14, 1, kRelu6},
      {"efficientnet_b0 features.2.0", 16, 96, 112, 2, kSilu},
      {"efficientnet_b0 features.2.1", 24, 144, 56, 1, kSilu},
      {"efficientnet_v2_s features.4.0", 64, 256, 28, 2, kSilu},
      {"lraspp_mobilenet_v3 backbone.2", 16, 64, 160, 2, kRelu},
      {"lraspp_mobilenet_v3 backbone.3", 24, 72, 80, 1, kRelu},
      {"mobilenet_v3_small features.2", 16, 72, 56, 2, kRelu},
      {"shufflenet_v2 stage2.0 branch2", 24, 24, 56, 2, kRelu},
      {"mobilenet_v3 style, 40 -> 120", 40, 120, 28, 1, kHardSwish},
      {"(90 channels, no 16-block)", 13, 90, 112, 2, kRelu},
      {"(stride 1 at 112x112)", 16, 96, 112, 1, kRelu6},
  };
  return pairs;
}

void Fill(const memory& m, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  float* p = static_cast<float*>(m.get_data_handle());
  for (size_t i = 0; i < m.get_desc().get_size() / sizeof(float); ++i) p[i] = d(gen);
}

memory Reordered(const dnnl::engine& eng, dnnl::stream& s, memory from, const memory::desc& md) {
  if (from.get_desc() == md) return from;
  memory to(md, eng);
  dnnl::reorder(from, to).execute(s, from, to);
  s.wait();
  return to;
}

dnnl::primitive_attr Attr(const Activation& a, const Pair* dw_of = nullptr) {
  dnnl::post_ops po;
  po.append_eltwise(a.alg, a.alpha, a.beta);
  if (dw_of != nullptr) {
    po.append_dw(Dt::f32, Dt::f32, Dt::f32, 3, dw_of->stride, 1);
    po.append_eltwise(a.alg, a.alpha, a.beta);
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  return attr;
}

ConvPd Conv(const dnnl::engine& eng, const memory::desc& src, const memory::desc& wei,
            const memory::desc& bias, const memory::desc& dst, int64_t stride, int64_t pad,
            const dnnl::primitive_attr& attr) {
  return ConvPd(eng, dnnl::prop_kind::forward_inference, algorithm::convolution_direct, src, wei,
                bias, dst, {stride, stride}, {pad, pad}, {pad, pad}, attr);
}

// The pair's data in plain layouts, shared by every way of running it.
struct PairData {
  memory src, w1, b1, wdw, bdw;
};

// One way of running the pair: its primitives and their memories, and the output as plain NCHW.
struct Run {
  std::string impl;
  std::function<void()> run;
  std::function<std::vector<float>()> output;
};

// Reads `m` back as plain NCHW floats.
std::function<std::vector<float>()> PlainCopy(const dnnl::engine& eng, dnnl::stream& s, memory m) {
  return [&eng, &s, m]() mutable {
    memory plain({m.get_desc().get_dims(), Dt::f32, Tag::nchw}, eng);
    dnnl::reorder(m, plain).execute(s, m, plain);
    s.wait();
    const float* f = static_cast<const float*>(plain.get_data_handle());
    return std::vector<float>(f, f + plain.get_desc().get_size() / sizeof(float));
  };
}

Run Apart(const dnnl::engine& eng, dnnl::stream& s, const Pair& p, int64_t n, Tag tag,
          const PairData& d) {
  const int64_t h = p.size, oh = (h - 1) / p.stride + 1, c = p.channels;
  ConvPd pd1 = Conv(eng, {{n, p.in_channels, h, h}, Dt::f32, tag},
                    {{c, p.in_channels, 1, 1}, Dt::f32, Tag::any}, d.b1.get_desc(),
                    {{n, c, h, h}, Dt::f32, tag}, 1, 0, Attr(p.activation));
  ConvPd pd2 = Conv(eng, pd1.dst_desc(), {{c, 1, 1, 3, 3}, Dt::f32, Tag::any}, d.bdw.get_desc(),
                    {{n, c, oh, oh}, Dt::f32, tag}, p.stride, 1, Attr(p.activation));
  auto c1 = std::make_shared<dnnl::convolution_forward>(pd1);
  auto c2 = std::make_shared<dnnl::convolution_forward>(pd2);
  memory src = Reordered(eng, s, d.src, pd1.src_desc());
  memory w1 = Reordered(eng, s, d.w1, pd1.weights_desc());
  memory wdw = Reordered(eng, s, d.wdw, pd2.weights_desc());
  memory mid(pd1.dst_desc(), eng), dst(pd2.dst_desc(), eng);
  Run r;
  r.impl = std::string(pd1.impl_info_str()) + " + " + pd2.impl_info_str();
  r.run = [=, &s, b1 = d.b1, bdw = d.bdw] {
    c1->execute(
        s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w1}, {DNNL_ARG_BIAS, b1}, {DNNL_ARG_DST, mid}});
    c2->execute(
        s,
        {{DNNL_ARG_SRC, mid}, {DNNL_ARG_WEIGHTS, wdw}, {DNNL_ARG_BIAS, bdw}, {DNNL_ARG_DST, dst}});
    s.wait();
  };
  r.output = PlainCopy(eng, s, dst);
  return r;
}

// The pair as one primitive with the dw post-op, or an empty impl when oneDNN refuses it.
Run Fused(const dnnl::engine& eng, dnnl::stream& s, const Pair& p, int64_t n, Tag tag,
          const PairData& d) {
  const int64_t h = p.size, c = p.channels;
  Run r;
  try {
    ConvPd pd = Conv(eng, {{n, p.in_channels, h, h}, Dt::f32, tag},
                     {{c, p.in_channels, 1, 1}, Dt::f32, Tag::any}, d.b1.get_desc(),
                     {{n, c, h, h}, Dt::f32, tag}, 1, 0, Attr(p.activation, &p));
    auto conv = std::make_shared<dnnl::convolution_forward>(pd);
    memory src = Reordered(eng, s, d.src, pd.src_desc());
    memory w1 = Reordered(eng, s, d.w1, pd.weights_desc());
    memory wdw = Reordered(
        eng, s, d.wdw,
        pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS));
    memory dst(pd.dst_desc(), eng);
    r.impl = pd.impl_info_str();
    r.run = [=, &s, b1 = d.b1, bdw = d.bdw] {
      conv->execute(s, {{DNNL_ARG_SRC, src},
                        {DNNL_ARG_WEIGHTS, w1},
                        {DNNL_ARG_BIAS, b1},
                        {DNNL_ARG_DST, dst},
                        {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, wdw},
                        {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, bdw}});
      s.wait();
    };
    r.output = PlainCopy(eng, s, dst);
  } catch (const dnnl::error&) {
    r.impl.clear();  // Refused: the caller prints so.
  }
  return r;
}

float MaxDifference(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

void Probe(const dnnl::engine& eng, dnnl::stream& s, const Pair& p, int64_t n, Tag tag,
           const char* layout) {
  const int64_t h = p.size, c = p.channels;
  PairData d{memory({{n, p.in_channels, h, h}, Dt::f32, Tag::nchw}, eng),
             memory({{c, p.in_channels, 1, 1}, Dt::f32, Tag::oihw}, eng),
             memory({{c}, Dt::f32, Tag::x}, eng),
             memory({{c, 1, 1, 3, 3}, Dt::f32, Tag::goihw}, eng),
             memory({{c}, Dt::f32, Tag::x}, eng)};
  Fill(d.src, 1);
  Fill(d.w1, 2);
  Fill(d.b1, 3);
  Fill(d.wdw, 4);
  Fill(d.bdw, 5);
  Run apart = Apart(eng, s, p, n, tag, d);
  Run fused = Fused(eng, s, p, n, tag, d);
  double mid_mb = static_cast<double>(n * c * h * h * 4) / (1 << 20);
  std::printf("%-32s %-9s b%lld %5.1f MiB  ", p.model, layout, static_cast<long long>(n), mid_mb);
  if (fused.impl.empty()) {
    std::printf("fused: refused by oneDNN\n");
    return;
  }
  apart.run();
  fused.run();
  float diff = MaxDifference(apart.output(), fused.output());
  TimingOptions timing;
  timing.min_total_ns = 100'000'000;
  timing.retries = 0;
  std::vector<Measurement> m = TimeSideBySide({apart.run, fused.run}, timing);
  // On a loaded host a 2-thread run waits whole scheduler slices for a descheduled thread, which
  // moves medians by milliseconds; the quickest run of each is the comparison that survives it.
  auto ratio = [](int64_t a, int64_t b) { return static_cast<double>(a) / static_cast<double>(b); };
  std::printf(
      "%-58s max|diff| %-8.2g apart/fused: quickest %7.1f / %7.1f us = %.2fx, median %.2fx%s\n",
      fused.impl.c_str(), diff, m[0].min_ns / 1e3, m[1].min_ns / 1e3,
      ratio(m[0].min_ns, m[1].min_ns), ratio(m[0].median_ns, m[1].median_ns),
      diff > 1e-3f ? "  WRONG RESULT" : "");
}

int Main(int argc, char** argv) {
  int threads = 2;
  std::vector<int64_t> batches;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
      batches.push_back(std::atoll(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--batch N]...\n", argv[0]);
      return 2;
    }
  }
  if (threads < 1 || std::any_of(batches.begin(), batches.end(), [](int64_t b) { return b < 1; })) {
    std::fprintf(stderr, "--threads and --batch take a positive number\n");
    return 2;
  }
  if (batches.empty()) batches = {1, 2};
  omp_set_num_threads(threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  std::printf("%d threads, L2 %ld KiB a core: oneDNN fuses on the jit path above %.1f MiB\n",
              threads, l2 >> 10, 2.0 * static_cast<double>(l2) * threads / (1 << 20));
  bool avx512 = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
  for (int64_t n : batches) {
    for (const Pair& p : Pairs()) {
      Probe(eng, s, p, n, avx512 ? Tag::nChw16c : Tag::nChw8c, avx512 ? "nChw16c" : "nChw8c");
      Probe(eng, s, p, n, Tag::nhwc, "nhwc");
    }
  }
  return 0;
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) { return fusor::Main(argc, argv); }
