// Planes of channels (rows of n floats, `stride` apart) to and from vectors of 8 channels per
// pixel, 8 x 8 register transposes at a time: the depthwise conv's transposed small planes
// (conv_depthwise.cpp) and the 8-lane blocked layout's NCHW edges (conv_blocked_avx2.cpp).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backends/cpu/avx2.hpp"
#include "backends/cpu/kernels/short_rows.hpp"

namespace quilt::cpu {

// dst vector p (8 floats) = element p of the `live` rows src + i * stride (i < live; the other
// lanes 0), for p < n, stored at dst + at[p] (floats) when at is given, else at p * step. The last
// group of 8 overlaps the one before when n is not a multiple of 8 (it writes the same vectors
// again), so that every load is a whole row vector.
inline void rows_to_vectors8(const float* src, int64_t stride, int64_t live, int64_t n, float* dst,
                             const int32_t* at, int64_t step = 8) {
  for (int64_t q = 0; q < n; q += 8) {
    const int64_t p0 = n >= 8 ? std::min(q, n - 8) : 0;
    const int64_t count = std::min<int64_t>(8, n);
    __m256 r[8];
    if (count == 8) {
#pragma GCC unroll 8
      for (int64_t i = 0; i < 8; ++i)
        r[i] = i < live ? _mm256_loadu_ps(src + i * stride + p0) : _mm256_setzero_ps();
    } else {  // n < 8: whole planes narrower than a vector
      const __m256i m = lanes8(count);
#pragma GCC unroll 8
      for (int64_t i = 0; i < 8; ++i)
        r[i] = i < live ? _mm256_maskload_ps(src + i * stride, m) : _mm256_setzero_ps();
    }
    transpose8x8(r);
    for (int64_t j = 0; j < count; ++j)
      _mm256_store_ps(dst + (at ? at[p0 + j] : (p0 + j) * step), r[j]);
  }
}

// The inverse: element p of row i (dst + i * stride, i < live) = lane i of the vector at
// src + p * step, for p < n.
inline void vectors_to_rows8(const float* src, int64_t n, int64_t live, float* dst, int64_t stride,
                             int64_t step = 8) {
  for (int64_t q = 0; q < n; q += 8) {
    const int64_t p0 = n >= 8 ? std::min(q, n - 8) : 0;
    const int64_t count = std::min<int64_t>(8, n);
    __m256 r[8];
#pragma GCC unroll 8
    for (int64_t j = 0; j < 8; ++j)
      r[j] = j < count ? _mm256_load_ps(src + (p0 + j) * step) : _mm256_setzero_ps();
    transpose8x8(r);
    if (count == 8) {
      for (int64_t i = 0; i < live; ++i) _mm256_storeu_ps(dst + i * stride + p0, r[i]);
    } else {  // through a buffer: masked stores are microcoded on AMD (short_rows.hpp)
      alignas(32) float row[8];
      for (int64_t i = 0; i < live; ++i) {
        _mm256_store_ps(row, r[i]);
        std::copy(row, row + count, dst + i * stride);
      }
    }
  }
}

}  // namespace quilt::cpu
