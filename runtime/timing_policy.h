// The timing policies of Fusor's commands, named in one place: how calibration, the tuner's
// confirmations, `fusor costmodel validate`, `fusor run` and the plan-quality bench time what they
// measure. Each is a TimingOptions (runtime/measurer.h) chosen for what its figures are compared
// with:
//   calibrate  two retries and a quiet-host wait before each attempt: its times become the
//              profile's constants, so they should describe the host in its quiet state;
//   tune       one retry and no quiet wait: it compares alternatives of one graph with each other,
//              timed side by side, so a slow state falls on all of them alike;
//   validate   one warm-up, one retry, an 8% spread limit and the quiet wait: its times are
//              compared with the profile's predictions, as calibration's are;
//   run        the measurer's defaults (5% spread, two retries): a user's own timing of a plan;
//   bench      two retries at a 10% spread limit, no quiet wait (the benches settle the host
//              once before a series, SettleHost).
// `min_ms` is how long each measurement keeps repeating (the command's own option or default).
// Pure function; thread-safe.
#pragma once

#include <cstdint>

#include "runtime/measurer.h"

namespace fusor {

enum class TimingPolicy : uint8_t { kCalibrate, kTune, kValidate, kRun, kBench };

// How long calibration and validation wait, at most, for a quiet host before each attempt: at
// 50 ms the benchmarks that move data between cores got timed in a slow state (handoff_ns fitted
// 21 us instead of 3).
inline constexpr int kQuietWaitMs = 250;

// How long `fusor costmodel validate` times each alternative: long enough for a median over
// dozens of runs of a small group, short enough for ~250 regions of several alternatives.
inline constexpr double kValidateMinMs = 30;

inline TimingOptions TimingFor(TimingPolicy policy, double min_ms) {
  TimingOptions t;
  t.min_total_ns = static_cast<int64_t>(min_ms * 1e6);
  switch (policy) {
    case TimingPolicy::kCalibrate:
      t.retries = 2;
      t.max_cv = 0.10;
      t.quiet_wait_ms = kQuietWaitMs;
      break;
    case TimingPolicy::kTune:
      t.retries = 1;
      t.max_cv = 0.10;
      break;
    case TimingPolicy::kValidate:
      t.warmup = 1;
      t.retries = 1;
      t.max_cv = 0.08;
      t.quiet_wait_ms = kQuietWaitMs;
      break;
    case TimingPolicy::kRun:
      break;
    case TimingPolicy::kBench:
      t.retries = 2;
      t.max_cv = 0.10;
      break;
  }
  return t;
}

}  // namespace fusor
