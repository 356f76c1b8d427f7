// fusor._fusor.Engine: fusor::Engine (engine/include/fusor/engine.h) for Python. Inputs are read
// through the buffer protocol in place when they are C-contiguous float32 (or int64) arrays and
// converted once otherwise; either way they are then copied once into the engine's EngineTensor
// (its API takes owned vectors, and the engine copies them again into its arena). Outputs are the
// engine's vectors handed to NumPy without a copy.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "engine/engine.h"

namespace fusor::python {
namespace {

namespace py = pybind11;

std::unique_ptr<Engine> Load(const std::string& model_path, const std::string& plan_json_path,
                             const std::string& db, int threads,
                             const std::map<std::string, int64_t>& dims,
                             const std::string& target) {
  EngineOptions o;
  o.plan_json_path = plan_json_path;
  o.plan_database_path = db;
  o.threads = threads;
  o.dims = dims;
  o.target_id = target;
  py::gil_scoped_release nogil;
  return ValueOrThrow(Engine::Load(model_path, o));
}

// (name, dtype, dims) per tensor: the Python side makes NodeArgs of them.
py::list Describe(const std::vector<EngineTensor>& tensors) {
  py::list out;
  for (const EngineTensor& t : tensors) out.append(py::make_tuple(t.name, t.dtype, t.dims));
  return out;
}

template <typename T>
void CopyInto(const py::array& a, std::vector<T>* to) {
  auto typed = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(a);
  if (!typed) throw py::error_already_set();
  to->assign(typed.data(), typed.data() + typed.size());
}

// The engine's tensor for one feed: floats for floating arrays, ints for integer and bool ones
// (the engine checks the kind and dims against the model and names the input when they differ).
EngineTensor ToEngineTensor(const std::string& name, const py::handle& value) {
  py::array a = py::array::ensure(value);
  if (!a) throw py::error_already_set();
  EngineTensor t;
  t.name = name;
  t.dims.assign(a.shape(), a.shape() + a.ndim());
  char kind = a.dtype().kind();
  if (kind == 'f') {
    CopyInto(a, &t.floats);
  } else if (kind == 'i' || kind == 'u' || kind == 'b') {
    CopyInto(a, &t.ints);
  } else {
    ThrowStatus(Status::InvalidArgument("input '" + name + "' has dtype " +
                                        std::string(py::str(a.dtype())) +
                                        ": the engine takes floating, integer or bool arrays"));
  }
  return t;
}

std::vector<EngineTensor> ToEngineTensors(const py::dict& feeds) {
  std::vector<EngineTensor> inputs;
  inputs.reserve(feeds.size());
  for (auto [name, value] : feeds) inputs.push_back(ToEngineTensor(py::str(name), value));
  return inputs;
}

// A NumPy array over v's data, owning v (moved to the heap) through a capsule.
template <typename T>
py::array Adopt(std::vector<T>&& values, const std::vector<int64_t>& dims) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(dims, owned->data(), owner);
}

// The output as a NumPy array of the model's dtype: the engine's own buffer for float32 and int64
// (most outputs), a converted copy for other dtypes (bfloat16, which NumPy lacks, stays float32).
py::array ToNumpy(EngineTensor&& t) {
  bool floating = t.dtype.rfind("float", 0) == 0 || t.dtype == "bfloat16";
  py::array a = floating ? Adopt(std::move(t.floats), t.dims) : Adopt(std::move(t.ints), t.dims);
  if (t.dtype == "float32" || t.dtype == "int64" || t.dtype == "bfloat16") return a;
  return a.attr("astype")(t.dtype);
}

std::string NameList(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& n : names) text += (text.empty() ? "'" : ", '") + n + "'";
  return text;
}

// The outputs named in `wanted`, in its order; every output when it is None.
py::list Select(std::vector<EngineTensor>&& out,
                const std::optional<std::vector<std::string>>& wanted) {
  std::vector<std::string> names;
  py::list arrays;
  for (EngineTensor& t : out) {
    names.push_back(t.name);
    arrays.append(ToNumpy(std::move(t)));
  }
  if (!wanted) return arrays;
  py::list picked;
  for (const std::string& name : *wanted) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      ThrowStatus(Status::InvalidArgument("'" + name + "' is not an output of the model (its " +
                                          "outputs: " + NameList(names) + ")"));
    }
    picked.append(arrays[it - names.begin()]);
  }
  return picked;
}

py::list Run(Engine& engine, const std::optional<std::vector<std::string>>& output_names,
             const py::dict& feeds) {
  std::vector<EngineTensor> inputs = ToEngineTensors(feeds);
  StatusOr<std::vector<EngineTensor>> out = [&] {
    py::gil_scoped_release nogil;
    return engine.Run(inputs);
  }();
  return Select(ValueOrThrow(std::move(out)), output_names);
}

// Seconds per Engine::Run over `iterations` runs on feeds converted once: the C++ side of
// bench/python_run_overhead.py's comparison.
double TimeEngineRun(Engine& engine, const py::dict& feeds, int iterations) {
  std::vector<EngineTensor> inputs = ToEngineTensors(feeds);
  py::gil_scoped_release nogil;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    auto out = engine.Run(inputs);
    if (!out.ok()) ThrowStatus(out.status());
  }
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return took.count() / iterations;
}

}  // namespace

void RegisterSession(py::module_& m) {
  py::class_<Engine>(m, "Engine")
      .def(py::init(&Load), py::arg("model_path"), py::arg("plan_json_path"), py::arg("db"),
           py::arg("threads"), py::arg("dims"), py::arg("target"))
      .def_property_readonly("plan_source", &Engine::plan_source)
      .def("inputs", [](const Engine& e) { return Describe(e.inputs()); })
      .def("outputs", [](const Engine& e) { return Describe(e.outputs()); })
      .def("run", &Run, py::arg("output_names"), py::arg("feeds"))
      .def("_time_engine_run", &TimeEngineRun, py::arg("feeds"), py::arg("iterations"));
}

}  // namespace fusor::python
