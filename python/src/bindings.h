// The `fusor` Python package's extension module, fusor._fusor: the engine (session.cc), tuning and
// inspection (tuning.cc), a tuning database read-only (database.cc) and the exceptions a
// fusor::Status becomes (module.cc). The Python files
// in python/fusor/ shape these into the onnxruntime-like API; this layer stays thin. Every call
// that runs the engine or the tuner releases the GIL for its duration.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>

#include "base/status.h"
#include "graph/graph.h"
#include "proto/plan.pb.h"

namespace fusor::python {

// Raises the FusorError subclass for s's code (the CLI's exit code decides which: module.cc), with
// s.message() as its text, the text the CLI prints after "fusor VERB: ". s must not be ok.
[[noreturn]] void ThrowStatus(const Status& s);

template <typename T>
T ValueOrThrow(StatusOr<T> v) {
  if (!v.ok()) ThrowStatus(v.status());
  return std::move(v).value();
}

// A stored or tuned time in nanoseconds, or None for 0 (not measured).
pybind11::object MeasuredNs(double ns);
// The fields TuneResult and StoredPlan share: keys, times (measured ones None when 0), peak memory
// and "groups", one row of Plan.explain() per group (tuning.cc).
pybind11::dict PlanFields(const v1::Plan& plan);
// The plan as plan JSON text (graph/plan_json.h) naming its graph and target; raises when the plan
// does not fit g.
std::string PlanJsonText(const Graph& g, const v1::Plan& plan);

void RegisterErrors(pybind11::module_& m);
void RegisterSession(pybind11::module_& m);
void RegisterTuning(pybind11::module_& m);
void RegisterDatabase(pybind11::module_& m);

}  // namespace fusor::python
