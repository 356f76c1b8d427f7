/* Fusor's engine as a stable C API: what an application links (libfusor_engine.so) to run an ONNX
   model with its own weights under a tuned fusion plan. Only C types cross it: opaque handles,
   enums, plain structs and NUL-terminated strings, so the library and the application may be
   built with different compilers and standard libraries. fusor_cxx_api.h wraps it for C++.

   Errors: a function that can fail returns a FusorStatus*, NULL on success; a non-NULL status
   carries a code and a message naming what is wrong, and the caller releases it
   (fusor_status_release).

   Ownership: every handle a fusor_*_create / fusor_engine_load* / fusor_engine_bind returns is
   the caller's, released by the matching fusor_*_release. Strings and dims an engine returns
   live as long as the engine. A model file or buffer may go away once loaded.

   Threads: an engine is safe to use from many threads at once. fusor_engine_run takes an idle
   context (a compiled executor with its own arena) for the call: up to max_concurrent_runs
   (fusor_options_set_max_concurrent_runs, default 1) run at once, further callers wait. A
   binding (fusor_engine_bind) is a context bound to the caller's memory: zero copies per run for
   float32 and int64 tensors, one run at a time per binding; give each serving thread its own.
   Each context holds its own copy of the prepacked weights. Every context computes the same
   values. Options and run options are not synchronised, except fusor_run_options_cancel, which
   any thread may call while a run uses them. */
#ifndef FUSOR_C_API_H_
#define FUSOR_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FUSOR_C_API_VERSION 1

/* Status codes (base/status.h's, in its order). */
typedef enum FusorCode {
  FUSOR_OK = 0,
  FUSOR_INVALID_ARGUMENT = 1,
  FUSOR_NOT_FOUND = 2,
  FUSOR_ALREADY_EXISTS = 3,
  FUSOR_CORRUPTION = 4,
  FUSOR_RESOURCE_EXHAUSTED = 5,
  FUSOR_FAILED_PRECONDITION = 6,
  FUSOR_UNIMPLEMENTED = 7,
  FUSOR_UNAVAILABLE = 8,
  FUSOR_DEADLINE_EXCEEDED = 9,
  FUSOR_CANCELLED = 10,
  FUSOR_PERMISSION_DENIED = 11,
  FUSOR_UNAUTHENTICATED = 12,
  FUSOR_INTERNAL = 13,
  FUSOR_IO_ERROR = 14
} FusorCode;

/* Element types, numbered as ONNX's TensorProto.DataType. The engine computes floating-point
   tensors as float32 and integer and bool tensors as int64; a tensor of another type of the same
   kind is converted on the way in and out (FUSOR_UINT64 is not supported). */
typedef enum FusorDType {
  FUSOR_FLOAT32 = 1,
  FUSOR_UINT8 = 2,
  FUSOR_INT8 = 3,
  FUSOR_UINT16 = 4,
  FUSOR_INT16 = 5,
  FUSOR_INT32 = 6,
  FUSOR_INT64 = 7,
  FUSOR_BOOL = 9,
  FUSOR_FLOAT16 = 10,
  FUSOR_FLOAT64 = 11,
  FUSOR_UINT32 = 12,
  FUSOR_UINT64 = 13,
  FUSOR_BFLOAT16 = 16
} FusorDType;

typedef struct FusorStatus FusorStatus;
typedef struct FusorEngineOptions FusorEngineOptions;
typedef struct FusorEngine FusorEngine;
typedef struct FusorRunOptions FusorRunOptions;
typedef struct FusorBinding FusorBinding;

/* A tensor in the caller's memory: `bytes` bytes at `data`, dense row-major. For an input the
   engine only reads it; for an output it writes it. */
typedef struct FusorTensor {
  const char* name;
  FusorDType dtype;
  const int64_t* dims;
  size_t rank;
  void* data;
  size_t bytes;
} FusorTensor;

/* A model input or output: its name, dtype and dims (valid while the engine lives). */
typedef struct FusorTensorInfo {
  const char* name;
  FusorDType dtype;
  const int64_t* dims;
  size_t rank;
} FusorTensorInfo;

int fusor_c_api_version(void);

FusorCode fusor_status_code(const FusorStatus* status);
const char* fusor_status_message(const FusorStatus* status);
void fusor_status_release(FusorStatus* status);

/* Load options. Plan: a plan JSON (`fusor tune --save-plan`), else the best current plan in a
   tuning database or `fusor db export` snapshot for this model and target, else the rules plan
   (fusor_engine_plan_source says which, and why). */
FusorStatus* fusor_options_create(FusorEngineOptions** out);
void fusor_options_release(FusorEngineOptions* options);
FusorStatus* fusor_options_set_plan_json(FusorEngineOptions* options, const char* path);
FusorStatus* fusor_options_set_plan_database(FusorEngineOptions* options, const char* path_or_url);
FusorStatus* fusor_options_set_target(FusorEngineOptions* options, const char* target_id);
/* The value of a symbolic dim ("batch" -> 8), as `fusor tune --dim`. */
FusorStatus* fusor_options_set_dim(FusorEngineOptions* options, const char* name, int64_t value);
/* OpenMP threads every kernel runs with; 0 keeps the process default. */
FusorStatus* fusor_options_set_threads(FusorEngineOptions* options, int threads);
FusorStatus* fusor_options_set_max_concurrent_runs(FusorEngineOptions* options, int runs);
/* 0: never bind the calling thread to a core while it runs (for servers running many at once). */
FusorStatus* fusor_options_set_thread_binding(FusorEngineOptions* options, int bind);

/* `options` may be NULL (defaults). */
FusorStatus* fusor_engine_load(const char* model_path, const FusorEngineOptions* options,
                               FusorEngine** out);
/* The serialized model (weights inside it: external data files cannot be found from memory). */
FusorStatus* fusor_engine_load_from_buffer(const void* model, size_t bytes,
                                           const FusorEngineOptions* options, FusorEngine** out);
void fusor_engine_release(FusorEngine* engine);

const char* fusor_engine_plan_source(const FusorEngine* engine);
size_t fusor_engine_input_count(const FusorEngine* engine);
size_t fusor_engine_output_count(const FusorEngine* engine);
FusorStatus* fusor_engine_input_info(const FusorEngine* engine, size_t index, FusorTensorInfo* out);
FusorStatus* fusor_engine_output_info(const FusorEngine* engine, size_t index,
                                      FusorTensorInfo* out);

/* Run options: fewer threads than the engine's for one run, and a cancel flag the run checks
   between fusion groups (the run then fails with FUSOR_CANCELLED). */
FusorStatus* fusor_run_options_create(FusorRunOptions** out);
void fusor_run_options_release(FusorRunOptions* run_options);
FusorStatus* fusor_run_options_set_threads(FusorRunOptions* run_options, int threads);
/* Sets (1) or clears (0) the cancel flag; safe from any thread while a run uses the options. */
void fusor_run_options_set_cancel(FusorRunOptions* run_options, int cancel);

/* Runs on every input (by name) and writes the outputs named (any subset of the model's) into
   the caller's memory, copying through a context's arena. `run_options` may be NULL. */
FusorStatus* fusor_engine_run(FusorEngine* engine, const FusorRunOptions* run_options,
                              const FusorTensor* inputs, size_t input_count,
                              const FusorTensor* outputs, size_t output_count);

/* IO binding: a context of its own whose kernels read every input from, and write the outputs
   named into, the caller's memory; that memory must stay valid until the binding is released,
   and the binding must be released before the engine. fusor_binding_run reads the inputs'
   current values: float32 and int64 tensors are used in place (zero copies), others convert. */
FusorStatus* fusor_engine_bind(FusorEngine* engine, const FusorTensor* inputs, size_t input_count,
                               const FusorTensor* outputs, size_t output_count, FusorBinding** out);
void fusor_binding_release(FusorBinding* binding);
FusorStatus* fusor_binding_run(FusorBinding* binding, const FusorRunOptions* run_options);
/* Bytes the binding's last run copied between the caller's memory and the engine's: 0 when every
   bound tensor is used in place. */
int64_t fusor_binding_copied_bytes(const FusorBinding* binding);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FUSOR_C_API_H_ */
