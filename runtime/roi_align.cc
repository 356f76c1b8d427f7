#include "runtime/roi_align.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "graph/narrow_float.h"
#include "graph/node_attrs.h"

namespace fusor {
namespace {

// The four weighted taps of a bilinear sample of one [H, W] plane at (y, x), as ONNX Runtime's
// RoiAlign takes them: none outside [-1, H] x [-1, W], the position clamped to the last pixel.
struct Sample {
  int64_t at[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
};

Sample SampleAt(double y, double x, int64_t height, int64_t width) {
  Sample s;
  if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width)) {
    return s;
  }
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1 = y0 + 1, x1 = x0 + 1;
  if (y0 >= height - 1) y = static_cast<double>(y0 = y1 = height - 1);
  if (x0 >= width - 1) x = static_cast<double>(x0 = x1 = width - 1);
  const double ly = y - static_cast<double>(y0), lx = x - static_cast<double>(x0);
  const double hy = 1 - ly, hx = 1 - lx;
  s = {{y0 * width + x0, y0 * width + x1, y1 * width + x0, y1 * width + x1},
       {hy * hx, hy * lx, ly * hx, ly * lx}};
  return s;
}

}  // namespace

Status RunRoiAlign(const Node& n, const HostTensor& x, const HostTensor& rois,
                   const HostTensor& batch_indices, HostTensor* out) {
  const int64_t channels = x.dims[1], height = x.dims[2], width = x.dims[3];
  const int64_t out_h = out->dims[2], out_w = out->dims[3];
  const double scale = n.GetFloat("spatial_scale", 1.0);
  const int64_t ratio = n.GetInt("sampling_ratio", 0);
  const bool half_pixel =
      n.GetString("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  const bool is_max = n.GetString("mode", "avg") == "max";
  const double offset = half_pixel ? 0.5 : 0.0;
  for (int64_t r = 0; r < out->dims[0]; ++r) {
    const int64_t image = static_cast<int64_t>(batch_indices.at(r));
    if (image < 0 || image >= x.dims[0]) {
      return Status::InvalidArgument(NodeLabel(n) + ": batch index " + std::to_string(image) +
                                     " is outside X's " + std::to_string(x.dims[0]) + " images");
    }
    const double x1 = rois.at(r * 4) * scale - offset, y1 = rois.at(r * 4 + 1) * scale - offset;
    double roi_w = rois.at(r * 4 + 2) * scale - offset - x1;
    double roi_h = rois.at(r * 4 + 3) * scale - offset - y1;
    if (!half_pixel) {
      roi_w = std::max(roi_w, 1.0);
      roi_h = std::max(roi_h, 1.0);
    }
    const double bin_h = roi_h / static_cast<double>(out_h),
                 bin_w = roi_w / static_cast<double>(out_w);
    const int64_t grid_h = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(bin_h));
    const int64_t grid_w = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(bin_w));
    const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
    for (int64_t c = 0; c < channels; ++c) {
      const float* plane = x.f.data() + (image * channels + c) * height * width;
      for (int64_t ph = 0; ph < out_h; ++ph) {
        for (int64_t pw = 0; pw < out_w; ++pw) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < grid_h; ++iy) {
            const double y = y1 + ph * bin_h + (iy + 0.5) * bin_h / static_cast<double>(grid_h);
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              const double xx = x1 + pw * bin_w + (ix + 0.5) * bin_w / static_cast<double>(grid_w);
              const Sample s = SampleAt(y, xx, height, width);
              if (!is_max) {
                for (int k = 0; k < 4; ++k) acc += s.w[k] * plane[s.at[k]];
                continue;
              }
              double v = s.w[0] * plane[s.at[0]];
              for (int k = 1; k < 4; ++k) v = std::max(v, s.w[k] * plane[s.at[k]]);
              acc = first ? v : std::max(acc, v);
              first = false;
            }
          }
          out->f[((r * channels + c) * out_h + ph) * out_w + pw] =
              RoundToDType(static_cast<float>(is_max ? acc : acc / count), out->dtype);
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace fusor
