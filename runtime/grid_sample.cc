#include "runtime/grid_sample.h"

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "graph/narrow_float.h"
#include "graph/node_attrs.h"
#include "runtime/op_params.h"

namespace fusor {
namespace {

enum class Padding { kZeros, kBorder, kReflection };

struct GridSampleAttrs {
  int taps = 2;  // Per dim: 1 nearest, 2 linear, 4 cubic.
  Padding padding = Padding::kZeros;
  bool align_corners = false;
};

StatusOr<GridSampleAttrs> GridSampleAttrsOf(const Node& n) {
  GridSampleAttrs a;
  const std::string mode = n.GetString("mode", "linear");
  if (mode == "nearest") {
    a.taps = 1;
  } else if (mode == "bicubic" || mode == "cubic") {
    a.taps = 4;
  } else if (mode != "bilinear" && mode != "linear") {
    return Status::Unimplemented(NodeLabel(n) + ": mode '" + mode +
                                 "' is not one of nearest, linear (bilinear), cubic (bicubic)");
  }
  const std::string padding = n.GetString("padding_mode", "zeros");
  if (padding == "border") {
    a.padding = Padding::kBorder;
  } else if (padding == "reflection") {
    a.padding = Padding::kReflection;
  } else if (padding != "zeros") {
    return Status::Unimplemented(NodeLabel(n) + ": padding_mode '" + padding +
                                 "' is not one of zeros, border, reflection");
  }
  a.align_corners = n.GetInt("align_corners", 0) != 0;
  return a;
}

// One spatial dim of X: its length and the range a position may take before padding applies
// (sample centres with align_corners, sample edges without).
struct Axis {
  int64_t length = 1;
  double low = 0, high = 0;
};

Axis AxisOf(int64_t length, bool align_corners) {
  const double l = static_cast<double>(length);
  return align_corners ? Axis{length, 0.0, l - 1} : Axis{length, -0.5, l - 0.5};
}

// Reflects x into [low, high] as often as it takes.
double Reflect(double x, double low, double high) {
  const double range = high - low;
  if (range <= 0) return low;
  if (x >= low && x <= high) return x;
  const double dx = x < low ? low - x : x - high;
  const double folds = std::floor(dx / range), r = dx - folds * range;
  const bool even = std::fmod(folds, 2.0) == 0;
  if (x < low) return even ? low + r : high - r;
  return even ? high - r : low + r;
}

// Where sample index i of `axis` reads, or -1 for a zero (padding zeros, i outside).
int64_t PaddedIndex(int64_t i, const Axis& axis, Padding padding) {
  if (i >= 0 && i < axis.length) return i;
  if (padding == Padding::kZeros) return -1;
  if (padding == Padding::kBorder) return std::clamp<int64_t>(i, 0, axis.length - 1);
  const double r = Reflect(static_cast<double>(i), axis.low, axis.high);
  return std::clamp<int64_t>(static_cast<int64_t>(r), 0, axis.length - 1);
}

// The samples one grid coordinate `g` reads along `axis`: (index or -1, weight) pairs.
std::vector<std::pair<int64_t, double>> TapsOf(double g, const Axis& axis,
                                               const GridSampleAttrs& a) {
  const double l = static_cast<double>(axis.length);
  double x = a.align_corners ? (g + 1) / 2 * (l - 1) : ((g + 1) * l - 1) / 2;
  if (a.taps == 1) x = std::nearbyint(x);  // Half to even, as numpy's rint.
  if (x < axis.low || x > axis.high) {
    if (a.padding == Padding::kBorder) x = std::clamp(x, 0.0, l - 1);
    if (a.padding == Padding::kReflection) x = Reflect(x, axis.low, axis.high);
  }
  std::vector<std::pair<int64_t, double>> taps;
  if (a.taps == 1) {
    taps.push_back({PaddedIndex(static_cast<int64_t>(x), axis, a.padding), 1.0});
    return taps;
  }
  const double below = std::floor(x), t = x - below;
  const int64_t first = static_cast<int64_t>(below) - (a.taps == 4 ? 1 : 0);
  const std::array<double, 4> cubic = CubicWeights(t, -0.75);
  for (int k = 0; k < a.taps; ++k) {
    const double w = a.taps == 4 ? cubic[k] : (k == 0 ? 1 - t : t);
    taps.push_back({PaddedIndex(first + k, axis, a.padding), w});
  }
  return taps;
}

}  // namespace

Status RunGridSample(const Node& n, const HostTensor& x, const HostTensor& grid, HostTensor* out) {
  FUSOR_ASSIGN_OR_RETURN(GridSampleAttrs a, GridSampleAttrsOf(n));
  const size_t rank = x.dims.size() - 2;
  if (x.dims.size() < 3 || grid.dims.size() != rank + 2 || grid.dims[0] != x.dims[0] ||
      grid.dims.back() != static_cast<int64_t>(rank)) {
    return Status::InvalidArgument(NodeLabel(n) + ": grid " + ShapeString(grid.dims) +
                                   " does not fit X " + ShapeString(x.dims) +
                                   "; it must be [N, O1, ..., Or, r] for X [N, C, D1, ..., Dr]");
  }
  std::vector<Axis> axes;
  for (size_t d = 0; d < rank; ++d) axes.push_back(AxisOf(x.dims[2 + d], a.align_corners));
  const int64_t batch = x.dims[0], channels = x.dims[1];
  const int64_t in_plane = NumElements(Shape(x.dims.begin() + 2, x.dims.end()));
  const int64_t out_plane = NumElements(Shape(grid.dims.begin() + 1, grid.dims.end() - 1));
  const std::vector<int64_t> strides = RowMajorStrides(Shape(x.dims.begin() + 2, x.dims.end()));
  std::vector<std::vector<std::pair<int64_t, double>>> taps(rank);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t p = 0; p < out_plane; ++p) {
      const float* where = grid.f.data() + (b * out_plane + p) * static_cast<int64_t>(rank);
      Shape counts(rank);
      for (size_t d = 0; d < rank; ++d) {  // The grid lists the innermost dim first (x, y, ...).
        taps[d] = TapsOf(where[rank - 1 - d], axes[d], a);
        counts[d] = static_cast<int64_t>(taps[d].size());
      }
      for (int64_t c = 0; c < channels; ++c) {
        const float* plane = x.f.data() + (b * channels + c) * in_plane;
        double acc = 0;
        std::vector<int64_t> pick(rank, 0);
        for (bool more = true; more;) {
          double w = 1;
          int64_t off = 0;
          for (size_t d = 0; d < rank && w != 0; ++d) {
            const auto& [i, tw] = taps[d][pick[d]];
            w = i < 0 ? 0 : w * tw;
            off += i * strides[d];
          }
          if (w != 0) acc += w * plane[off];
          more = false;
          for (int d = static_cast<int>(rank) - 1; d >= 0 && !more; --d) {
            more = ++pick[d] < counts[d];
            if (!more) pick[d] = 0;
          }
        }
        out->f[(b * channels + c) * out_plane + p] =
            RoundToDType(static_cast<float>(acc), out->dtype);
      }
    }
  }
  return Status::Ok();
}

}  // namespace fusor
