#include "runtime/thread_binding.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <cstdlib>
#include <vector>

#include <spdlog/spdlog.h>

namespace fusor {
namespace {

std::vector<int> UsableCpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  return cpus;
}

}  // namespace

void BindOpenMpTeamToCores() {
  thread_local bool bound = false;
  if (bound) return;
  bound = true;
  const char* off = std::getenv("FUSOR_NO_THREAD_BINDING");
  if (off != nullptr && off[0] != '\0' && off[0] != '0') return;
  std::vector<int> cpus = UsableCpus();
  if (cpus.size() < 2) return;
  int failures = 0;
#pragma omp parallel reduction(+ : failures)
  {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<size_t>(omp_get_thread_num()) % cpus.size()], &one);
    failures += pthread_setaffinity_np(pthread_self(), sizeof(one), &one) != 0;
  }
  if (failures > 0) spdlog::warn("runtime: could not bind {} OpenMP threads to cores", failures);
}

}  // namespace fusor
