// Bulk conversions between float32 and the half types (float16 with F16C where the CPU has it,
// bfloat16), rounding to nearest even, split across the pool. Defined in widen.cpp.
#pragma once

#include <cstdint>
#include <cstring>

#include "backends/cpu/thread_pool.hpp"
#include "quilt/quilt.hpp"

namespace quilt::cpu {

// float32 -> bfloat16 bits, rounded to nearest even; NaN stays NaN (quiet). The bit form of
// core/float8.hpp's float_to_bfloat16, for bulk conversions.
inline uint16_t round_to_bfloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return (bits & 0x7fffffffu) > 0x7f800000u
             ? static_cast<uint16_t>((bits >> 16) | 0x40)
             : static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1)) >> 16);
}

// from (float16 or bfloat16) -> to (float32, same number of elements).
void widen_half(const Tensor& from, Tensor& to, const ThreadPool& pool);
// from (float32) -> to (float16 or bfloat16, same number of elements).
void narrow_half(const Tensor& from, Tensor& to, const ThreadPool& pool);

}  // namespace quilt::cpu
