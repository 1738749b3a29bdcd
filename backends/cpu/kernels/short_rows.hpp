// Short float rows (a feature map's: 7 to a few hundred floats) copied and zeroed inline, 8 lanes
// at a time, and the 8-lane tail mask they use. Through memmove and memset, whose calls and size
// dispatch cost as much as such a row, the conv's shifted-input fill and wide-product compaction
// took 13 % of Real-ESRGAN, 3.6 % of it in memset calls for one-float paddings. Shared by
// conv.cpp and the depthwise conv.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace quilt::cpu {

// Lanes [0, n) set: loadu(kTailMask8 + 8 - n), n in [0, 8].
alignas(64) inline constexpr int32_t kTailMask8[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                       0,  0,  0,  0,  0,  0,  0,  0};

// Lanes [0, n) of an 8-lane mask, n in [0, 8].
inline __m256i lanes8(int64_t n) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kTailMask8 + 8 - n));
}

// dst[j] = src[j] for j in [0, n). The tail goes 4 then 1 at a time, not through a masked
// store: AMD's vmaskmovps store is microcoded (the compaction of a 25 x 5 stride-2 conv's
// product, 1600 five-float rows, spent most of the conv's time in it on an EPYC).
inline void copy_row(const float* src, float* dst, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(dst + j, _mm256_loadu_ps(src + j));
  if (j + 4 <= n) {
    _mm_storeu_ps(dst + j, _mm_loadu_ps(src + j));
    j += 4;
  }
  for (; j < n; ++j) dst[j] = src[j];
}

// dst[j] = 0 for j in [0, n); the tail (often a single padding float) by plain stores.
inline void zero_row(float* dst, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(dst + j, _mm256_setzero_ps());
  for (; j < n; ++j) dst[j] = 0.f;
}

}  // namespace quilt::cpu
