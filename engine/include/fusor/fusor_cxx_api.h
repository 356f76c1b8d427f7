// Fusor's engine for C++: a header-only wrapper over the C API (fusor_c_api.h), so nothing of the
// C++ standard library crosses the shared library's boundary and the application may use another
// compiler or standard library. Handles are move-only RAII objects; a failing call throws
// fusor::api::Error (its code and message from the C status). Ownership and threading are the C
// API's: an Engine may be used from many threads at once, a Binding from one at a time, and a
// Binding must be destroyed before its Engine.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fusor/fusor_c_api.h"

namespace fusor::api {

class Error : public std::runtime_error {
 public:
  Error(FusorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  FusorCode code() const { return code_; }

 private:
  FusorCode code_;
};

// Throws the error `status` carries (and releases it); nothing for NULL (success).
inline void Check(FusorStatus* status) {
  if (!status) return;
  Error error(fusor_status_code(status), fusor_status_message(status));
  fusor_status_release(status);
  throw error;
}

template <typename T>
constexpr FusorDType DTypeOf();
template <>
constexpr FusorDType DTypeOf<float>() {
  return FUSOR_FLOAT32;
}
template <>
constexpr FusorDType DTypeOf<double>() {
  return FUSOR_FLOAT64;
}
template <>
constexpr FusorDType DTypeOf<int64_t>() {
  return FUSOR_INT64;
}
template <>
constexpr FusorDType DTypeOf<int32_t>() {
  return FUSOR_INT32;
}
template <>
constexpr FusorDType DTypeOf<int16_t>() {
  return FUSOR_INT16;
}
template <>
constexpr FusorDType DTypeOf<int8_t>() {
  return FUSOR_INT8;
}
template <>
constexpr FusorDType DTypeOf<uint8_t>() {
  return FUSOR_UINT8;
}
template <>
constexpr FusorDType DTypeOf<uint16_t>() {
  return FUSOR_UINT16;
}
template <>
constexpr FusorDType DTypeOf<uint32_t>() {
  return FUSOR_UINT32;
}
template <>
constexpr FusorDType DTypeOf<bool>() {
  return FUSOR_BOOL;
}

// A tensor over the caller's memory (no copy): `values` and `dims` must outlive every use.
template <typename T>
FusorTensor TensorView(const char* name, std::span<T> values, std::span<const int64_t> dims) {
  return {name,
          DTypeOf<std::remove_const_t<T>>(),
          dims.data(),
          dims.size(),
          const_cast<std::remove_const_t<T>*>(values.data()),
          values.size_bytes()};
}

struct TensorInfo {
  std::string name;
  FusorDType dtype;
  std::vector<int64_t> dims;
  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

namespace detail {
template <typename T, void (*Release)(T*)>
struct Releaser {
  void operator()(T* p) const { Release(p); }
};
template <typename T, void (*Release)(T*)>
using Handle = std::unique_ptr<T, Releaser<T, Release>>;
}  // namespace detail

class Options {
 public:
  Options() {
    FusorEngineOptions* o = nullptr;
    Check(fusor_options_create(&o));
    handle_.reset(o);
  }
  Options& SetPlanJson(const std::string& path) {
    Check(fusor_options_set_plan_json(get(), path.c_str()));
    return *this;
  }
  Options& SetPlanDatabase(const std::string& path_or_url) {
    Check(fusor_options_set_plan_database(get(), path_or_url.c_str()));
    return *this;
  }
  Options& SetTarget(const std::string& target_id) {
    Check(fusor_options_set_target(get(), target_id.c_str()));
    return *this;
  }
  Options& SetDim(const std::string& name, int64_t value) {
    Check(fusor_options_set_dim(get(), name.c_str(), value));
    return *this;
  }
  Options& SetThreads(int threads) {
    Check(fusor_options_set_threads(get(), threads));
    return *this;
  }
  Options& SetMaxConcurrentRuns(int runs) {
    Check(fusor_options_set_max_concurrent_runs(get(), runs));
    return *this;
  }
  Options& SetThreadBinding(bool bind) {
    Check(fusor_options_set_thread_binding(get(), bind ? 1 : 0));
    return *this;
  }
  FusorEngineOptions* get() const { return handle_.get(); }

 private:
  detail::Handle<FusorEngineOptions, fusor_options_release> handle_;
};

class RunOptions {
 public:
  RunOptions() {
    FusorRunOptions* o = nullptr;
    Check(fusor_run_options_create(&o));
    handle_.reset(o);
  }
  RunOptions& SetThreads(int threads) {
    Check(fusor_run_options_set_threads(get(), threads));
    return *this;
  }
  // Safe from any thread while a run uses these options: the run stops between groups and
  // throws an Error with FUSOR_CANCELLED.
  void Cancel(bool cancel = true) { fusor_run_options_set_cancel(get(), cancel ? 1 : 0); }
  FusorRunOptions* get() const { return handle_.get(); }

 private:
  detail::Handle<FusorRunOptions, fusor_run_options_release> handle_;
};

class Binding {
 public:
  explicit Binding(FusorBinding* b) : handle_(b) {}
  void Run(const RunOptions* run = nullptr) {
    Check(fusor_binding_run(handle_.get(), run ? run->get() : nullptr));
  }
  int64_t copied_bytes() const { return fusor_binding_copied_bytes(handle_.get()); }

 private:
  detail::Handle<FusorBinding, fusor_binding_release> handle_;
};

class Engine {
 public:
  static Engine Load(const std::string& model_path, const Options& options = {}) {
    FusorEngine* e = nullptr;
    Check(fusor_engine_load(model_path.c_str(), options.get(), &e));
    return Engine(e);
  }
  static Engine LoadFromBuffer(std::span<const std::byte> model, const Options& options = {}) {
    FusorEngine* e = nullptr;
    Check(fusor_engine_load_from_buffer(model.data(), model.size(), options.get(), &e));
    return Engine(e);
  }

  std::string plan_source() const { return fusor_engine_plan_source(get()); }
  std::vector<TensorInfo> inputs() const {
    return Describe(fusor_engine_input_count(get()), fusor_engine_input_info);
  }
  std::vector<TensorInfo> outputs() const {
    return Describe(fusor_engine_output_count(get()), fusor_engine_output_info);
  }

  // Every input by name; the outputs named (any subset), written into the caller's memory.
  void Run(std::span<const FusorTensor> inputs, std::span<const FusorTensor> outputs,
           const RunOptions* run = nullptr) {
    Check(fusor_engine_run(get(), run ? run->get() : nullptr, inputs.data(), inputs.size(),
                           outputs.data(), outputs.size()));
  }
  // A context bound to this memory: Binding::Run reads the inputs and writes the outputs in place.
  Binding Bind(std::span<const FusorTensor> inputs, std::span<const FusorTensor> outputs) {
    FusorBinding* b = nullptr;
    Check(
        fusor_engine_bind(get(), inputs.data(), inputs.size(), outputs.data(), outputs.size(), &b));
    return Binding(b);
  }
  FusorEngine* get() const { return handle_.get(); }

 private:
  explicit Engine(FusorEngine* e) : handle_(e) {}
  using InfoFn = FusorStatus* (*)(const FusorEngine*, size_t, FusorTensorInfo*);
  std::vector<TensorInfo> Describe(size_t count, InfoFn info) const {
    std::vector<TensorInfo> out;
    for (size_t i = 0; i < count; ++i) {
      FusorTensorInfo t;
      Check(info(get(), i, &t));
      out.push_back({t.name, t.dtype, std::vector<int64_t>(t.dims, t.dims + t.rank)});
    }
    return out;
  }
  detail::Handle<FusorEngine, fusor_engine_release> handle_;
};

}  // namespace fusor::api
