// Binds the OpenMP threads that run Fusor's kernels to cores, one thread per core. Unbound, the
// scheduler sometimes puts two threads of a team on one core for a whole run: measured on this
// project's 2-core machines, the same group then timed 2-3x slower in one run than in the next
// (median run-to-run change 12%, p90 48% over the held-out validation groups); bound, 2% and 6%.
// Binding is what OMP_PROC_BIND=true does, but OpenMP reads its environment when the library loads,
// before main() could set it, so the runtime binds the team itself.
//
// The team's worker threads belong to OpenMP and are bound for good, the first time a thread
// creates an Executor (libgomp keeps one pool of workers per calling thread). The calling thread
// belongs to the application: it is bound to its core only while Fusor runs on it
// (ScopedCallerBinding, held by the Executor's entry points and across a timing series) and gets
// its own CPU set back afterwards, so an application that embeds the engine keeps its threads
// where it put them. Set FUSOR_NO_THREAD_BINDING=1 to leave thread placement to the OS (e.g. when
// several processes share the cores on purpose).
//
// Thread-safe: the state is per calling thread.
#pragma once

#include <sched.h>

namespace fusor {

// Binds the calling thread's OpenMP workers (its team at its current size, the calling thread
// excepted) to distinct cores of the process's CPU set, once per calling thread. No-op with fewer
// than two usable cores.
void BindOpenMpTeamToCores();

// While alive, the calling thread runs on the core its team leaves to it (the first of the
// process's CPU set); on destruction it gets back the CPU set it had. Nested scopes on one thread
// cost nothing: only the outermost binds and restores.
class ScopedCallerBinding {
 public:
  ScopedCallerBinding();
  ~ScopedCallerBinding();
  ScopedCallerBinding(const ScopedCallerBinding&) = delete;
  ScopedCallerBinding& operator=(const ScopedCallerBinding&) = delete;

 private:
  bool restore_ = false;
  cpu_set_t saved_;
};

}  // namespace fusor
