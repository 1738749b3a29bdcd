#include "backends/cpu/gemm_avx2.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace quilt::cpu::avx2 {
namespace {

constexpr int64_t kLanes = 8;       // floats per ymm vector
constexpr int64_t kSubRows = 4;     // rows of a sub-tile
constexpr int64_t kSubCols = 24;    // columns of a sub-tile (3 vectors)
constexpr int64_t kPackedRows = 8;  // rows of a packed A sliver (gemm_packed.cpp's kMr)
// Depth per pass over a block of rows: 24 columns of B that deep (18 KB) stay in L1 (32 KB
// here) while every row of the block passes them.
constexpr int64_t kDepthChunk = 192;
constexpr int64_t kAhead = 16;  // B rows read in place: fetched this many depths ahead

// The lanes [0, n) of a vector, as maskload/maskstore want them (n in [0, 8]).
__attribute__((target("avx2"))) inline __m256i lanes(int64_t n) {
  alignas(32) static constexpr int32_t kTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                     0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(
      reinterpret_cast<const __m256i*>(kTable + kLanes - std::clamp<int64_t>(n, 0, kLanes)));
}

// A sub-tile of `rows` (<= kLive) x NV vectors; the last vector keeps the lanes of `tail`
// (kFull: all of them). kRows: B's row p at b + offsets[p]; else a panel. kRawA: A row-major
// (row stride a_ld; rows past `rows` read the last again, never stored); else packed.
template <int NV, bool kRows, bool kRawA, int kLive, bool kFull>
__attribute__((target("avx2,fma"))) void sub_tile(int64_t kc, const float* a, int64_t a_ld,
                                                  const float* b, int64_t b_stride,
                                                  const int64_t* offsets, float* c, int64_t ldc,
                                                  int64_t rows, __m256i tail, bool first,
                                                  const float* bias, const float* col_bias) {
  const float* arow[kLive];
  if constexpr (kRawA)
    for (int i = 0; i < kLive; ++i) arow[i] = a + std::min<int64_t>(i, rows - 1) * a_ld;
  auto load = [&](const float* p, int j) {
    return j == NV - 1 && !kFull ? _mm256_maskload_ps(p, tail) : _mm256_loadu_ps(p);
  };
  __m256 acc[kLive][NV];
#pragma GCC unroll 4
  for (int i = 0; i < kLive; ++i) {
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j) {
      if (first) {
        acc[i][j] = bias && i < rows ? _mm256_set1_ps(bias[i]) : _mm256_setzero_ps();
        if (col_bias) acc[i][j] = _mm256_add_ps(acc[i][j], load(col_bias + j * kLanes, j));
      } else {
        acc[i][j] = i < rows ? load(c + i * ldc + j * kLanes, j) : _mm256_setzero_ps();
      }
    }
  }
  for (int64_t p = 0; p < kc; ++p) {
    __m256 bv[NV];
    const float* row = kRows ? b + offsets[p] : b + p * b_stride;
    if constexpr (kRows) {
      if (p + kAhead < kc) {
        const float* next = b + offsets[p + kAhead];
        _mm_prefetch(reinterpret_cast<const char*>(next), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(next + NV * kLanes - 1), _MM_HINT_T0);
      }
    }
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j)
      bv[j] = kRows ? load(row + j * kLanes, j) : _mm256_loadu_ps(row + j * kLanes);
#pragma GCC unroll 4
    for (int i = 0; i < kLive; ++i) {
      const __m256 av = _mm256_broadcast_ss(kRawA ? arow[i] + p : a + p * kPackedRows + i);
#pragma GCC unroll 3
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < kLive; ++i) {
    if (i >= rows) break;
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j) {
      float* dst = c + i * ldc + j * kLanes;
      if (j == NV - 1 && !kFull)
        _mm256_maskstore_ps(dst, tail, acc[i][j]);
      else
        _mm256_storeu_ps(dst, acc[i][j]);
    }
  }
}

template <int NV, bool kRows, bool kRawA, bool kFull>
void sub_tile_rows(int64_t kc, const float* a, int64_t a_ld, const float* b, int64_t b_stride,
                   const int64_t* offsets, float* c, int64_t ldc, int64_t rows, __m256i tail,
                   bool first, const float* bias, const float* col_bias) {
  // A packed sliver has zero rows past the matrix: all four are computed. Row-major A computes
  // as few as cover `rows` (a MatMul at batch 1 has one).
  if (kRawA && rows == 1)
    sub_tile<NV, kRows, kRawA, 1, kFull>(kc, a, a_ld, b, b_stride, offsets, c, ldc, rows, tail,
                                         first, bias, col_bias);
  else if (kRawA && rows == 2)
    sub_tile<NV, kRows, kRawA, 2, kFull>(kc, a, a_ld, b, b_stride, offsets, c, ldc, rows, tail,
                                         first, bias, col_bias);
  else
    sub_tile<NV, kRows, kRawA, kSubRows, kFull>(kc, a, a_ld, b, b_stride, offsets, c, ldc, rows,
                                                tail, first, bias, col_bias);
}

template <bool kRows, bool kRawA>
void sub_tile_cols(int nv, bool full, int64_t kc, const float* a, int64_t a_ld, const float* b,
                   int64_t b_stride, const int64_t* offsets, float* c, int64_t ldc, int64_t rows,
                   __m256i tail, bool first, const float* bias, const float* col_bias) {
  auto run = [&]<int NV, bool kFull>() {
    sub_tile_rows<NV, kRows, kRawA, kFull>(kc, a, a_ld, b, b_stride, offsets, c, ldc, rows, tail,
                                           first, bias, col_bias);
  };
  if (nv == 3)
    full ? run.template operator()<3, true>() : run.template operator()<3, false>();
  else if (nv == 2)
    full ? run.template operator()<2, true>() : run.template operator()<2, false>();
  else
    full ? run.template operator()<1, true>() : run.template operator()<1, false>();
}

}  // namespace

void tiles(int64_t kc, const float* a, int64_t a_ld, int64_t sliver_stride, const float* b,
           int64_t b_stride, const int64_t* offsets, float* c, int64_t ldc, int64_t rows,
           int64_t width, bool first, const float* bias, const float* col_bias) {
  for (int64_t p0 = 0; p0 < kc; p0 += kDepthChunk) {
    const int64_t chunk = std::min(kDepthChunk, kc - p0);
    const bool start = first && p0 == 0;
    for (int64_t j = 0; j < width; j += kSubCols) {
      const int64_t cols = std::min(kSubCols, width - j);
      const int nv = static_cast<int>((cols + kLanes - 1) / kLanes);
      const __m256i tail = lanes(cols - (nv - 1) * kLanes);
      const bool full = cols == nv * kLanes;
      const float* bj = offsets ? b + j : b + p0 * b_stride + j;
      const int64_t* oj = offsets ? offsets + p0 : nullptr;
      const float* cb = col_bias ? col_bias + j : nullptr;
      // Every row of the block against this chunk of B's columns, which stays in L1 meanwhile.
      for (int64_t r = 0; r < rows; r += kSubRows) {
        const int64_t n = std::min(kSubRows, rows - r);
        const float* ar =
            a_ld ? a + r * a_ld + p0
                 : a + r / kPackedRows * sliver_stride + p0 * kPackedRows + r % kPackedRows;
        float* cr = c + r * ldc + j;
        const float* br = bias ? bias + r : nullptr;
        if (offsets)
          sub_tile_cols<true, false>(nv, full, chunk, ar, 0, bj, 0, oj, cr, ldc, n, tail, start, br,
                                     cb);
        else if (a_ld)
          sub_tile_cols<false, true>(nv, full, chunk, ar, a_ld, bj, b_stride, nullptr, cr, ldc, n,
                                     tail, start, br, cb);
        else
          sub_tile_cols<false, false>(nv, full, chunk, ar, 0, bj, b_stride, nullptr, cr, ldc, n,
                                      tail, start, br, cb);
      }
    }
  }
}

void pack_panel(const float* b, int64_t ldb, int64_t p0, int64_t kc, int64_t j0, int64_t width,
                int64_t stride, float* panel) {
  for (int64_t p = 0; p < kc; ++p) {
    float* dst = panel + p * stride;
    std::memcpy(dst, b + (p0 + p) * ldb + j0, static_cast<size_t>(width) * sizeof(float));
    std::fill(dst + width, dst + stride, 0.f);
  }
}

}  // namespace quilt::cpu::avx2
