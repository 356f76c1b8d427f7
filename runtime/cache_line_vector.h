// Storage for constants a kernel streams with full-width vector loads (repacked weights): a
// std::vector whose first element starts on a 64-byte cache line. A plain std::vector<float>
// starts where malloc puts it, 16 bytes past a line or 32 or 48 depending on what was allocated
// before, and then every 64-byte AVX-512 load of it (every second 32-byte AVX2 load) reads two
// lines: the recurrence loop's panels (runtime/rnn_loop.cc) ran their GRU steps 5-7% slower so,
// by an amount that changed with each executor's allocations. Element order and
// sizes are std::vector's; only the first element's address is pinned. Thread safety as
// std::vector.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace fusor {

inline constexpr std::size_t kCacheLineBytes = 64;

template <typename T>
struct CacheLineAllocator {
  using value_type = T;

  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}

  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kCacheLineBytes}));
  }
  void deallocate(T* p, std::size_t) { ::operator delete (p, std::align_val_t{kCacheLineBytes}); }

  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};

template <typename T>
using CacheLineVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace fusor
