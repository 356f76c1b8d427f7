/* A server's shape in C over Fusor's C API (fusor/fusor_c_api.h): one model loaded once, worker
   threads that each own an IO binding over their own request and response buffers, and a shared
   queue of requests. A worker writes a request's input into its bound buffer, runs the binding
   (the engine reads and writes those buffers in place, copying nothing) and records a checksum of
   the response. Requests with the same input give the same checksum whichever thread served them.

     serve_engine MODEL.onnx [THREADS [REQUESTS]]

   The model's first input must be float32 and its first output float32. */
#include <fusor/fusor_c_api.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { kInputs = 4 }; /* Distinct request inputs: request r carries input r % kInputs. */

typedef struct Server {
  FusorEngine* engine;
  FusorTensorInfo in, out;
  pthread_mutex_t mu;
  int next_request, requests; /* Guarded by mu. */
  double* checksums;          /* One per request, each written by the thread serving it. */
} Server;

static int64_t Elements(const FusorTensorInfo* t) {
  int64_t n = 1;
  for (size_t d = 0; d < t->rank; ++d) n *= t->dims[d];
  return n;
}

/* Prints and releases a status; nonzero when it was an error. */
static int Failed(FusorStatus* status, const char* what) {
  if (!status) return 0;
  fprintf(stderr, "serve_engine: %s: %s\n", what, fusor_status_message(status));
  fusor_status_release(status);
  return 1;
}

static int TakeRequest(Server* s) {
  pthread_mutex_lock(&s->mu);
  int r = s->next_request < s->requests ? s->next_request++ : -1;
  pthread_mutex_unlock(&s->mu);
  return r;
}

static void* Worker(void* arg) {
  Server* s = (Server*)arg;
  int64_t n_in = Elements(&s->in), n_out = Elements(&s->out);
  float* x = malloc(sizeof(float) * n_in);
  float* y = malloc(sizeof(float) * n_out);
  FusorTensor input = {s->in.name, FUSOR_FLOAT32, s->in.dims, s->in.rank, x, sizeof(float) * n_in};
  FusorTensor output = {s->out.name, FUSOR_FLOAT32,        s->out.dims, s->out.rank,
                        y,           sizeof(float) * n_out};
  FusorBinding* binding = NULL;
  if (!Failed(fusor_engine_bind(s->engine, &input, 1, &output, 1, &binding), "bind")) {
    for (int r = TakeRequest(s); r >= 0; r = TakeRequest(s)) {
      for (int64_t e = 0; e < n_in; ++e) x[e] = (float)((e + r % kInputs) % 13) / 13.0f - 0.5f;
      if (Failed(fusor_binding_run(binding, NULL), "run")) break;
      double sum = 0;
      for (int64_t e = 0; e < n_out; ++e) sum += y[e];
      s->checksums[r] = sum;
    }
    fusor_binding_release(binding);
  }
  free(x);
  free(y);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: serve_engine MODEL.onnx [THREADS [REQUESTS]]\n");
    return 2;
  }
  int threads = argc > 2 ? atoi(argv[2]) : 4, requests = argc > 3 ? atoi(argv[3]) : 16;
  if (threads < 1 || threads > 64 || requests < 1) {
    fprintf(stderr, "serve_engine: THREADS must be 1 to 64 and REQUESTS at least 1\n");
    return 2;
  }
  Server s = {0};
  FusorEngineOptions* options = NULL;
  /* One OpenMP thread per run, the calling threads left where the OS puts them: the server's
     threads are its parallelism. */
  if (Failed(fusor_options_create(&options), "options") ||
      Failed(fusor_options_set_threads(options, 1), "options") ||
      Failed(fusor_options_set_thread_binding(options, 0), "options") ||
      Failed(fusor_engine_load(argv[1], options, &s.engine), "load")) {
    return 1;
  }
  fusor_options_release(options);
  if (Failed(fusor_engine_input_info(s.engine, 0, &s.in), "input") ||
      Failed(fusor_engine_output_info(s.engine, 0, &s.out), "output")) {
    return 1;
  }
  printf("plan: %s\n", fusor_engine_plan_source(s.engine));
  pthread_mutex_init(&s.mu, NULL);
  s.requests = requests;
  s.checksums = calloc((size_t)requests, sizeof(double));
  pthread_t* workers = malloc(sizeof(pthread_t) * (size_t)threads);
  for (int t = 0; t < threads; ++t) pthread_create(&workers[t], NULL, Worker, &s);
  for (int t = 0; t < threads; ++t) pthread_join(workers[t], NULL);
  int mismatches = 0;
  for (int r = kInputs; r < requests; ++r) mismatches += s.checksums[r] != s.checksums[r % kInputs];
  printf("served %d requests on %d threads; %d differ from the first request with their input\n",
         requests, threads, mismatches);
  free(workers);
  free(s.checksums);
  fusor_engine_release(s.engine);
  return mismatches == 0 ? 0 : 1;
}
