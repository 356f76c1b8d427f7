// What `fusor calibrate` prints about a fit besides the profile: how many samples and runs it used,
// what it left out (slow runs, slow timings, unreadable samples), and the benchmarks that stayed
// too noisy to fit, counted per benchmark family ("stream", "matmul", "conv", ...) with the
// family's worst coefficient of variation, rather than every name on one line; `list_noisy` adds
// each name. Every line fits kTextColumns (client/text_format.h). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "proto/tuner.pb.h"

namespace fusor {

// A calibration benchmark's family: its name up to the first '_' or digit ("stream_relu_16KiB"
// and "stream_expand_4096KiB" are "stream", "conv3x3_c64_56" is "conv").
std::string BenchmarkFamily(std::string_view benchmark);

std::string CalibrationSummary(const v1::CalibrateResponse& r, bool list_noisy);

}  // namespace fusor
