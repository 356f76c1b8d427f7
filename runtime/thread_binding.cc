#include "runtime/thread_binding.h"

#include <omp.h>
#include <pthread.h>

#include <cstdlib>
#include <vector>

#include <spdlog/spdlog.h>

namespace fusor {
namespace {

bool BindingEnabled() {
  const char* off = std::getenv("FUSOR_NO_THREAD_BINDING");
  return off == nullptr || off[0] == '\0' || off[0] == '0';
}

thread_local int scope_depth = 0;
// The CPU set the calling thread had before the outermost ScopedCallerBinding narrowed it.
thread_local const cpu_set_t* caller_set = nullptr;

// The cores the calling thread may use as the application set them (inside a scope: the set it
// had before the scope).
std::vector<int> UsableCpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (caller_set != nullptr) {
    mask = *caller_set;
  } else if (pthread_getaffinity_np(pthread_self(), sizeof(mask), &mask) != 0) {
    return {};
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  }
  return cpus;
}

}  // namespace

void BindOpenMpTeamToCores() {
  thread_local bool bound = false;
  if (bound) return;
  bound = true;
  if (!BindingEnabled()) return;
  std::vector<int> cpus = UsableCpus();
  if (cpus.size() < 2) return;
  int failures = 0;
#pragma omp parallel reduction(+ : failures)
  {
    int t = omp_get_thread_num();
    if (t != 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus[static_cast<size_t>(t) % cpus.size()], &one);
      failures += pthread_setaffinity_np(pthread_self(), sizeof(one), &one) != 0;
    }
  }
  if (failures > 0) spdlog::warn("runtime: could not bind {} OpenMP threads to cores", failures);
}

ScopedCallerBinding::ScopedCallerBinding() {
  if (scope_depth++ > 0 || !BindingEnabled()) return;
  CPU_ZERO(&saved_);
  if (pthread_getaffinity_np(pthread_self(), sizeof(saved_), &saved_) != 0) return;
  caller_set = &saved_;
  std::vector<int> cpus = UsableCpus();
  if (cpus.size() < 2) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[0], &one);
  restore_ = pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
}

ScopedCallerBinding::~ScopedCallerBinding() {
  if (--scope_depth == 0) caller_set = nullptr;
  if (restore_) pthread_setaffinity_np(pthread_self(), sizeof(saved_), &saved_);
}

}  // namespace fusor
