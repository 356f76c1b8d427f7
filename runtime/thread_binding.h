// Binds the OpenMP threads that run Fusor's kernels to cores, one thread per core. Unbound, the
// scheduler sometimes puts two threads of a team on one core for a whole run: measured on this
// project's 2-core machines, the same group then timed 2-3x slower in one run than in the next
// (median run-to-run change 12%, p90 48% over the held-out validation groups); bound, 2% and 6%.
// Binding is what OMP_PROC_BIND=true does, but OpenMP reads its environment when the library loads,
// before main() could set it, so the runtime binds the team itself the first time a thread
// creates an Executor. A team is per calling thread (libgomp keeps one pool per master thread), so
// each calling thread binds its own team, itself included, once. Set FUSOR_NO_THREAD_BINDING=1 to
// leave thread placement to the OS (e.g. when several processes share the cores on purpose).
//
// Thread-safe: per calling thread, idempotent.
#pragma once

namespace fusor {

// Binds the calling thread's OpenMP team (at its current size) to distinct cores of the process's
// CPU set, once per calling thread. No-op with fewer than two usable cores.
void BindOpenMpTeamToCores();

}  // namespace fusor
