// The `fusor` Python package's extension module, fusor._fusor: the engine (session.cc), tuning and
// inspection (tuning.cc) and the exceptions a fusor::Status becomes (module.cc). The Python files
// in python/fusor/ shape these into the onnxruntime-like API; this layer stays thin. Every call
// that runs the engine or the tuner releases the GIL for its duration.
#pragma once

#include <pybind11/pybind11.h>

#include <utility>

#include "base/status.h"

namespace fusor::python {

// Raises the FusorError subclass for s's code (the CLI's exit code decides which: module.cc), with
// s.message() as its text, the text the CLI prints after "fusor VERB: ". s must not be ok.
[[noreturn]] void ThrowStatus(const Status& s);

template <typename T>
T ValueOrThrow(StatusOr<T> v) {
  if (!v.ok()) ThrowStatus(v.status());
  return std::move(v).value();
}

void RegisterErrors(pybind11::module_& m);
void RegisterSession(pybind11::module_& m);
void RegisterTuning(pybind11::module_& m);

}  // namespace fusor::python
