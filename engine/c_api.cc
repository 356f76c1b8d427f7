// The C API (include/fusor/fusor_c_api.h) over the in-tree engine (engine.h): handles are the
// C++ objects, statuses are fusor::Status values on the heap, and every exception stops here.
#include "fusor/fusor_c_api.h"

#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

struct FusorStatus {
  fusor::Status status;
};

struct FusorEngineOptions {
  fusor::EngineOptions options;
};

struct FusorRunOptions {
  int threads = 0;
  std::atomic<bool> cancel{false};
};

struct FusorEngine {
  std::unique_ptr<fusor::Engine> engine;
  // What fusor_engine_input_info / output_info hand out, alive as long as the engine.
  std::vector<fusor::EngineTensor> inputs, outputs;
  std::vector<fusor::DType> input_dtypes, output_dtypes;
};

struct FusorBinding {
  std::unique_ptr<fusor::IoBinding> binding;
};

namespace {

using fusor::DType;
using fusor::Status;

FusorStatus* ToC(Status s) {
  if (s.ok()) return nullptr;
  return new FusorStatus{std::move(s)};
}

FusorStatus* NullArgument(const char* what) {
  return ToC(Status::InvalidArgument(std::string(what) + " is NULL; it must point to a value"));
}

// Runs `body`, turning an escaping exception (std::bad_alloc, mostly) into a status.
template <typename Body>
FusorStatus* Guarded(Body body) {
  try {
    return ToC(body());
  } catch (const std::exception& e) {
    return ToC(Status::Internal(std::string("unexpected error: ") + e.what()));
  } catch (...) {
    return ToC(Status::Internal("unexpected error"));
  }
}

// FusorDType values are ONNX's numbering, which fusor::DTypeFromOnnx maps.
FusorDType ToC(DType t) {
  for (int onnx = 1; onnx <= 16; ++onnx) {
    if (fusor::DTypeFromOnnx(onnx) == t) return static_cast<FusorDType>(onnx);
  }
  return FUSOR_FLOAT32;
}

Status ToViews(const FusorTensor* tensors, size_t count, const char* what,
               std::vector<fusor::TensorView>* views) {
  if (count > 0 && !tensors) return Status::InvalidArgument(std::string(what) + " is NULL");
  for (size_t i = 0; i < count; ++i) {
    const FusorTensor& t = tensors[i];
    DType dtype = fusor::DTypeFromOnnx(static_cast<int32_t>(t.dtype));
    if (!t.name || dtype == DType::kUnspecified || (t.rank > 0 && !t.dims)) {
      return Status::InvalidArgument(
          std::string(what) + "[" + std::to_string(i) + "] needs a name, a FusorDType (got " +
          std::to_string(static_cast<int>(t.dtype)) + ") and dims for its rank");
    }
    views->push_back({t.name, dtype, {t.dims, t.rank}, t.data, t.bytes});
  }
  return Status::Ok();
}

fusor::RunOptions ToRun(const FusorRunOptions* run) {
  fusor::RunOptions r;
  if (run) {
    r.threads = run->threads;
    r.cancel = &run->cancel;
  }
  return r;
}

FusorStatus* Info(const std::vector<fusor::EngineTensor>& tensors, const std::vector<DType>& dtypes,
                  size_t index, const char* what, FusorTensorInfo* out) {
  if (!out) return NullArgument("out");
  if (index >= tensors.size()) {
    return ToC(Status::InvalidArgument(std::string(what) + " index " + std::to_string(index) +
                                       " is out of range; the model has " +
                                       std::to_string(tensors.size())));
  }
  const fusor::EngineTensor& t = tensors[index];
  *out = {t.name.c_str(), ToC(dtypes[index]), t.dims.data(), t.dims.size()};
  return nullptr;
}

template <typename Load>
FusorStatus* LoadEngine(const FusorEngineOptions* options, FusorEngine** out, Load load) {
  if (!out) return NullArgument("out");
  *out = nullptr;
  return Guarded([&]() -> Status {
    auto engine = load(options ? options->options : fusor::EngineOptions{});
    if (!engine.ok()) return engine.status();
    auto c = std::make_unique<FusorEngine>();
    c->engine = std::move(*engine);
    c->inputs = c->engine->inputs();
    c->outputs = c->engine->outputs();
    c->input_dtypes = c->engine->input_dtypes();
    c->output_dtypes = c->engine->output_dtypes();
    *out = c.release();
    return Status::Ok();
  });
}

template <typename Set>
FusorStatus* SetOption(FusorEngineOptions* options, Set set) {
  if (!options) return NullArgument("options");
  return Guarded([&]() -> Status { return set(options->options); });
}

Status NonNegative(const char* what, int value) {
  if (value >= 0) return Status::Ok();
  return Status::InvalidArgument(std::string(what) + " is " + std::to_string(value) +
                                 "; it must be 0 or more");
}

}  // namespace

extern "C" {

int fusor_c_api_version(void) { return FUSOR_C_API_VERSION; }

FusorCode fusor_status_code(const FusorStatus* status) {
  return status ? static_cast<FusorCode>(status->status.code()) : FUSOR_OK;
}

const char* fusor_status_message(const FusorStatus* status) {
  return status ? status->status.message().c_str() : "";
}

void fusor_status_release(FusorStatus* status) { delete status; }

FusorStatus* fusor_options_create(FusorEngineOptions** out) {
  if (!out) return NullArgument("out");
  *out = new FusorEngineOptions();
  return nullptr;
}

void fusor_options_release(FusorEngineOptions* options) { delete options; }

FusorStatus* fusor_options_set_plan_json(FusorEngineOptions* options, const char* path) {
  return SetOption(options, [&](fusor::EngineOptions& o) {
    o.plan_json_path = path ? path : "";
    return Status::Ok();
  });
}

FusorStatus* fusor_options_set_plan_database(FusorEngineOptions* options, const char* path) {
  return SetOption(options, [&](fusor::EngineOptions& o) {
    o.plan_database_path = path ? path : "";
    return Status::Ok();
  });
}

FusorStatus* fusor_options_set_target(FusorEngineOptions* options, const char* target_id) {
  return SetOption(options, [&](fusor::EngineOptions& o) {
    o.target_id = target_id ? target_id : "";
    return Status::Ok();
  });
}

FusorStatus* fusor_options_set_dim(FusorEngineOptions* options, const char* name, int64_t value) {
  return SetOption(options, [&](fusor::EngineOptions& o) {
    if (!name || value < 1) {
      return Status::InvalidArgument("a dim binding needs a name and a value of at least 1");
    }
    o.dims[name] = value;
    return Status::Ok();
  });
}

FusorStatus* fusor_options_set_threads(FusorEngineOptions* options, int threads) {
  return SetOption(options, [&](fusor::EngineOptions& o) {
    o.threads = threads;
    return NonNegative("threads", threads);
  });
}

FusorStatus* fusor_options_set_max_concurrent_runs(FusorEngineOptions* options, int runs) {
  return SetOption(options, [&](fusor::EngineOptions& o) {
    if (runs < 1) {
      return Status::InvalidArgument("max_concurrent_runs is " + std::to_string(runs) +
                                     "; it must be at least 1");
    }
    o.max_concurrent_runs = runs;
    return Status::Ok();
  });
}

FusorStatus* fusor_options_set_thread_binding(FusorEngineOptions* options, int bind) {
  return SetOption(options, [&](fusor::EngineOptions& o) {
    o.bind_caller_thread = bind != 0;
    return Status::Ok();
  });
}

FusorStatus* fusor_engine_load(const char* model_path, const FusorEngineOptions* options,
                               FusorEngine** out) {
  if (!model_path) return NullArgument("model_path");
  return LoadEngine(options, out, [&](const fusor::EngineOptions& o) {
    return fusor::Engine::Load(model_path, o);
  });
}

FusorStatus* fusor_engine_load_from_buffer(const void* model, size_t bytes,
                                           const FusorEngineOptions* options, FusorEngine** out) {
  if (!model) return NullArgument("model");
  return LoadEngine(options, out, [&](const fusor::EngineOptions& o) {
    return fusor::Engine::LoadFromBuffer({static_cast<const char*>(model), bytes}, o);
  });
}

void fusor_engine_release(FusorEngine* engine) { delete engine; }

const char* fusor_engine_plan_source(const FusorEngine* engine) {
  return engine ? engine->engine->plan_source().c_str() : "";
}

size_t fusor_engine_input_count(const FusorEngine* engine) {
  return engine ? engine->inputs.size() : 0;
}

size_t fusor_engine_output_count(const FusorEngine* engine) {
  return engine ? engine->outputs.size() : 0;
}

FusorStatus* fusor_engine_input_info(const FusorEngine* engine, size_t index,
                                     FusorTensorInfo* out) {
  if (!engine) return NullArgument("engine");
  return Info(engine->inputs, engine->input_dtypes, index, "input", out);
}

FusorStatus* fusor_engine_output_info(const FusorEngine* engine, size_t index,
                                      FusorTensorInfo* out) {
  if (!engine) return NullArgument("engine");
  return Info(engine->outputs, engine->output_dtypes, index, "output", out);
}

FusorStatus* fusor_run_options_create(FusorRunOptions** out) {
  if (!out) return NullArgument("out");
  *out = new FusorRunOptions();
  return nullptr;
}

void fusor_run_options_release(FusorRunOptions* run_options) { delete run_options; }

FusorStatus* fusor_run_options_set_threads(FusorRunOptions* run_options, int threads) {
  if (!run_options) return NullArgument("run_options");
  run_options->threads = threads;
  return ToC(NonNegative("threads", threads));
}

void fusor_run_options_set_cancel(FusorRunOptions* run_options, int cancel) {
  if (run_options) run_options->cancel.store(cancel != 0);
}

FusorStatus* fusor_engine_run(FusorEngine* engine, const FusorRunOptions* run_options,
                              const FusorTensor* inputs, size_t input_count,
                              const FusorTensor* outputs, size_t output_count) {
  if (!engine) return NullArgument("engine");
  return Guarded([&]() -> Status {
    std::vector<fusor::TensorView> in, out;
    FUSOR_RETURN_IF_ERROR(ToViews(inputs, input_count, "inputs", &in));
    FUSOR_RETURN_IF_ERROR(ToViews(outputs, output_count, "outputs", &out));
    return engine->engine->Run(in, out, ToRun(run_options));
  });
}

FusorStatus* fusor_engine_bind(FusorEngine* engine, const FusorTensor* inputs, size_t input_count,
                               const FusorTensor* outputs, size_t output_count,
                               FusorBinding** out) {
  if (!engine) return NullArgument("engine");
  if (!out) return NullArgument("out");
  *out = nullptr;
  return Guarded([&]() -> Status {
    std::vector<fusor::TensorView> in, outs;
    FUSOR_RETURN_IF_ERROR(ToViews(inputs, input_count, "inputs", &in));
    FUSOR_RETURN_IF_ERROR(ToViews(outputs, output_count, "outputs", &outs));
    FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<fusor::IoBinding> binding,
                           engine->engine->Bind(in, outs));
    *out = new FusorBinding{std::move(binding)};
    return Status::Ok();
  });
}

void fusor_binding_release(FusorBinding* binding) { delete binding; }

FusorStatus* fusor_binding_run(FusorBinding* binding, const FusorRunOptions* run_options) {
  if (!binding) return NullArgument("binding");
  return Guarded([&]() -> Status { return binding->binding->Run(ToRun(run_options)); });
}

int64_t fusor_binding_copied_bytes(const FusorBinding* binding) {
  return binding ? binding->binding->copied_bytes() : 0;
}

}  // extern "C"
