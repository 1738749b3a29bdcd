// Arrays aligned to a cache line, for packed operands whose vector loads should never straddle
// two lines.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace quilt::cpu {

// count values of T (uninitialised), 64-byte aligned, freed with the last owner. Throws
// std::bad_alloc when memory runs out.
template <class T>
std::shared_ptr<T[]> aligned_array(int64_t count) {
  const size_t bytes =
      (static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T) + 63) / 64 * 64;
  T* p = static_cast<T*>(std::aligned_alloc(64, bytes));
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<T[]>(p, [](T* q) { std::free(q); });
}

// The same, zero-filled.
template <class T>
std::shared_ptr<T[]> aligned_zeros(int64_t count) {
  std::shared_ptr<T[]> p = aligned_array<T>(count);
  std::fill_n(p.get(), std::max<int64_t>(count, 0), T{});
  return p;
}

}  // namespace quilt::cpu
