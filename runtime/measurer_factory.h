// MeasurerFactory: how a component that measures (the tuning service, a measurement agent) gets a
// Measurer for one series of timings, so that tests or another measurement path can be handed in
// at that one seam. The factory is told which timing policy the series follows
// (runtime/timing_policy.h) together with the options that policy gives; OneDnnMeasurers() makes
// the real measurer, a OneDnnMeasurer with those options. A factory is called from any thread; the
// Measurer it returns belongs to the caller and is used by one thread at a time.
#pragma once

#include <functional>
#include <memory>

#include "runtime/measurer.h"
#include "runtime/timing_policy.h"

namespace fusor {

using MeasurerFactory = std::function<std::unique_ptr<Measurer>(
    TimingPolicy policy, const OneDnnMeasurerOptions& options)>;

// Real oneDNN runs with the options given.
inline MeasurerFactory OneDnnMeasurers() {
  return [](TimingPolicy, const OneDnnMeasurerOptions& options) -> std::unique_ptr<Measurer> {
    return std::make_unique<OneDnnMeasurer>(options);
  };
}

}  // namespace fusor
