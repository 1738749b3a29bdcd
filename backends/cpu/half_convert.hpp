// Bulk conversions between float32 and the half types (float16 with F16C where the CPU has it,
// bfloat16), rounding to nearest even, split across the pool. Defined in widen.cpp.
#pragma once

#include "backends/cpu/thread_pool.hpp"
#include "quilt/quilt.hpp"

namespace quilt::cpu {

// from (float16 or bfloat16) -> to (float32, same number of elements).
void widen_half(const Tensor& from, Tensor& to, const ThreadPool& pool);
// from (float32) -> to (float16 or bfloat16, same number of elements).
void narrow_half(const Tensor& from, Tensor& to, const ThreadPool& pool);

}  // namespace quilt::cpu
