// fusor._fusor.Engine: fusor::Engine (engine/engine.h) for Python. Inputs are NumPy arrays read in
// place through the buffer protocol (a non-contiguous array is made contiguous first), of any dtype
// the engine takes (float32 and int64 are its storage types; others convert inside the engine).
// Outputs are NumPy arrays of the model's dtypes (bfloat16, which NumPy lacks, as float32)
// allocated here and written by the engine; only the outputs asked for are read out. An IO binding
// (BoundArrays) runs on arrays the caller holds, float32 and int64 ones read and written in place.
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
#include "graph/graph.h"

namespace fusor::python {
namespace {

namespace py = pybind11;

std::unique_ptr<Engine> Load(const py::object& model, const std::string& plan_json_path,
                             const std::string& db, int threads,
                             const std::map<std::string, int64_t>& dims, const std::string& target,
                             int concurrent_runs) {
  EngineOptions o;
  o.plan_json_path = plan_json_path;
  o.plan_database_path = db;
  o.threads = threads;
  o.dims = dims;
  o.target_id = target;
  o.max_concurrent_runs = concurrent_runs;
  // Several runs at once come from Python threads of their own: leave them where the OS puts them.
  o.bind_caller_thread = concurrent_runs == 1;
  if (py::isinstance<py::bytes>(model)) {
    std::string bytes = model.cast<std::string>();
    py::gil_scoped_release nogil;
    return ValueOrThrow(Engine::LoadFromBuffer(bytes, o));
  }
  std::string path = model.cast<std::string>();
  py::gil_scoped_release nogil;
  return ValueOrThrow(Engine::Load(path, o));
}

// (name, dtype, dims) per tensor: the Python side makes NodeArgs of them.
py::list Describe(const std::vector<EngineTensor>& tensors) {
  py::list out;
  for (const EngineTensor& t : tensors) out.append(py::make_tuple(t.name, t.dtype, t.dims));
  return out;
}

// The engine's dtype for a NumPy dtype, kUnspecified for one it has no counterpart for.
DType FromNumpy(const py::dtype& d) {
  const auto size = d.itemsize();
  switch (d.kind()) {
    case 'f':
      return size == 2 ? DType::kFloat16 : size == 4 ? DType::kFloat32 : DType::kFloat64;
    case 'i':
      return size == 1   ? DType::kInt8
             : size == 2 ? DType::kInt16
             : size == 4 ? DType::kInt32
                         : DType::kInt64;
    case 'u':
      return size == 1   ? DType::kUInt8
             : size == 2 ? DType::kUInt16
             : size == 4 ? DType::kUInt32
                         : DType::kUInt64;
    case 'b':
      return DType::kBool;
    default:
      return DType::kUnspecified;
  }
}

// NumPy's name for the array an output of `dtype` is returned in.
std::string NumpyName(DType dtype) {
  return dtype == DType::kBFloat16 ? "float32" : std::string(DTypeName(dtype));
}

// The feeds as views over their arrays, which it holds (a contiguous copy of a non-contiguous
// one) while the engine reads them.
struct FeedViews {
  std::vector<py::array> arrays;
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> dims;
  std::vector<TensorView> views;

  explicit FeedViews(const py::dict& feeds) {
    for (auto [name, value] : feeds) {
      py::array a = py::array::ensure(value, py::array::c_style);
      if (!a) throw py::error_already_set();
      names.push_back(py::str(name));
      if (FromNumpy(a.dtype()) == DType::kUnspecified) {
        ThrowStatus(Status::InvalidArgument("input '" + names.back() + "' has dtype " +
                                            std::string(py::str(a.dtype())) +
                                            ": the engine takes floating, integer or bool arrays"));
      }
      dims.emplace_back(a.shape(), a.shape() + a.ndim());
      arrays.push_back(a);
    }
    for (size_t i = 0; i < arrays.size(); ++i) {
      py::array& a = arrays[i];
      views.push_back({names[i], FromNumpy(a.dtype()), dims[i], const_cast<void*>(a.data()),
                       static_cast<size_t>(a.nbytes())});
    }
  }
};

std::string NameList(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& n : names) text += (text.empty() ? "'" : ", '") + n + "'";
  return text;
}

// The indexes of the outputs named in `wanted`, in its order; every output when it is None.
std::vector<size_t> Wanted(const std::vector<EngineTensor>& outputs,
                           const std::optional<std::vector<std::string>>& wanted) {
  std::vector<std::string> names;
  for (const EngineTensor& t : outputs) names.push_back(t.name);
  std::vector<size_t> picked;
  if (!wanted) {
    for (size_t o = 0; o < names.size(); ++o) picked.push_back(o);
    return picked;
  }
  for (const std::string& name : *wanted) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      ThrowStatus(Status::InvalidArgument("'" + name + "' is not an output of the model (its " +
                                          "outputs: " + NameList(names) + ")"));
    }
    picked.push_back(static_cast<size_t>(it - names.begin()));
  }
  return picked;
}

py::list Run(Engine& engine, const std::optional<std::vector<std::string>>& output_names,
             const py::dict& feeds) {
  FeedViews inputs(feeds);
  const std::vector<EngineTensor> outputs = engine.outputs();
  const std::vector<DType> dtypes = engine.output_dtypes();
  py::list arrays;
  std::vector<TensorView> views;
  for (size_t o : Wanted(outputs, output_names)) {
    py::array a(py::dtype(NumpyName(dtypes[o])), outputs[o].dims);
    arrays.append(a);
    views.push_back({outputs[o].name, FromNumpy(a.dtype()), outputs[o].dims, a.mutable_data(),
                     static_cast<size_t>(a.nbytes())});
  }
  Status s = [&] {
    py::gil_scoped_release nogil;
    return engine.Run(inputs.views, views);
  }();
  if (!s.ok()) ThrowStatus(s);
  return arrays;
}

// Float32 / int64 buffers for every output of `engine`, and views over them.
struct OutputBuffers {
  std::vector<EngineTensor> outputs;          // The names and dims the views point into.
  std::vector<std::vector<int64_t>> storage;  // 8 bytes an element hold float32 or int64.
  std::vector<TensorView> views;
  explicit OutputBuffers(const Engine& engine) : outputs(engine.outputs()) {
    const std::vector<DType> dtypes = engine.output_dtypes();
    storage.reserve(outputs.size());
    for (size_t o = 0; o < outputs.size(); ++o) {
      storage.emplace_back(static_cast<size_t>(NumElements(outputs[o].dims)));
      const bool floating = IsFloatingPoint(dtypes[o]);
      views.push_back({outputs[o].name, floating ? DType::kFloat32 : DType::kInt64, outputs[o].dims,
                       storage.back().data(), storage.back().size() * (floating ? 4 : 8)});
    }
  }
};

template <typename Fn>
double SecondsPerRun(int iterations, Fn run) {
  py::gil_scoped_release nogil;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    Status s = run();
    if (!s.ok()) ThrowStatus(s);
  }
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return took.count() / iterations;
}

// Seconds per Engine::Run over `iterations` runs on feeds viewed once, every output written into
// buffers allocated once: the C++ side of bench/python_run_overhead.py's comparison.
double TimeEngineRun(Engine& engine, const py::dict& feeds, int iterations) {
  FeedViews inputs(feeds);
  OutputBuffers out(engine);
  return SecondsPerRun(iterations, [&] { return engine.Run(inputs.views, out.views); });
}

// The same through an IO binding over the feeds and the output buffers: no copies per run
// (bench/engine_vs_onnxruntime.py).
double TimeBoundRun(Engine& engine, const py::dict& feeds, int iterations) {
  FeedViews inputs(feeds);
  OutputBuffers out(engine);
  std::unique_ptr<IoBinding> binding = ValueOrThrow(engine.Bind(inputs.views, out.views));
  return SecondsPerRun(iterations, [&] { return binding->Run(); });
}

// A context of the engine bound to NumPy arrays the caller holds (ONNX Runtime's IOBinding): each
// run reads the inputs' current values and writes the outputs into their arrays, float32 and int64
// ones in place. The arrays are held here, so they outlive the binding; the binding holds its
// session's engine alive (keep_alive below).
class BoundArrays {
 public:
  BoundArrays(Engine& engine, const py::dict& feeds, const py::dict& outputs) : inputs_(feeds) {
    for (auto [name, value] : outputs) {
      py::array a = py::reinterpret_borrow<py::array>(value);
      output_names_.push_back(py::str(name));
      output_dims_.emplace_back(a.shape(), a.shape() + a.ndim());
      output_arrays_.push_back(a);
    }
    for (size_t o = 0; o < output_arrays_.size(); ++o) {
      py::array& a = output_arrays_[o];
      output_views_.push_back({output_names_[o], FromNumpy(a.dtype()), output_dims_[o],
                               a.mutable_data(), static_cast<size_t>(a.nbytes())});
    }
    py::gil_scoped_release nogil;
    binding_ = ValueOrThrow(engine.Bind(inputs_.views, output_views_));
  }

  void Run() {
    Status s = [&] {
      py::gil_scoped_release nogil;
      return binding_->Run();
    }();
    if (!s.ok()) ThrowStatus(s);
  }
  int64_t copied_bytes() const { return binding_->copied_bytes(); }

 private:
  FeedViews inputs_;
  std::vector<std::string> output_names_;
  std::vector<std::vector<int64_t>> output_dims_;
  std::vector<py::array> output_arrays_;
  std::vector<TensorView> output_views_;
  std::unique_ptr<IoBinding> binding_;
};

}  // namespace

void RegisterSession(py::module_& m) {
  py::class_<BoundArrays>(m, "BoundArrays")
      .def("run", &BoundArrays::Run)
      .def_property_readonly("copied_bytes", &BoundArrays::copied_bytes);
  py::class_<Engine>(m, "Engine")
      .def(py::init(&Load), py::arg("model"), py::arg("plan_json_path"), py::arg("db"),
           py::arg("threads"), py::arg("dims"), py::arg("target"), py::arg("concurrent_runs"))
      .def_property_readonly("plan_source", &Engine::plan_source)
      .def("inputs", [](const Engine& e) { return Describe(e.inputs()); })
      .def("outputs", [](const Engine& e) { return Describe(e.outputs()); })
      .def("run", &Run, py::arg("output_names"), py::arg("feeds"))
      .def(
          "bind",
          [](Engine& e, const py::dict& feeds, const py::dict& outputs) {
            return std::make_unique<BoundArrays>(e, feeds, outputs);
          },
          py::arg("feeds"), py::arg("outputs"), py::keep_alive<0, 1>())
      .def("_time_engine_run", &TimeEngineRun, py::arg("feeds"), py::arg("iterations"))
      .def("_time_bound_run", &TimeBoundRun, py::arg("feeds"), py::arg("iterations"));
}

}  // namespace fusor::python
