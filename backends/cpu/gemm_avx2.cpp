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

enum class AFrom { kRows, kSliver };  // A row-major (4 row pointers), or a packed 8-row sliver

// n (> 0) depth steps of a full 4 x 24 sub-tile into acc, from a (A at the first step's depth:
// a packed 8-row sliver, or row-major with its four rows at arow) and a panel of B (b, rows
// b_stride floats apart). In assembly because GCC, given the intrinsics, either folds B's loads
// into every FMA that uses them (12 loads of B a step instead of 3: the loads, not the FMAs,
// then set the pace) or, with the loads pinned to registers, spilled B's vectors to the stack
// every step. 64 x 768 x 768 from cache on one Zen 3 core (peak 99.7 GFLOP/s): 59-66 GFLOP/s
// either way, 81-95 in assembly (best of 6 runs each).
// Rows read in place (a conv's B) stay with the intrinsics: written this way they ran 4-15 %
// slower (pointwise products of depth 24-1152 on 56x56 maps, the same measure).
template <AFrom kA>
__attribute__((target("avx2,fma"), always_inline)) inline void steps_4x24(int64_t n, const float* a,
                                                                          const float* const* arow,
                                                                          const float* b,
                                                                          int64_t b_stride,
                                                                          __m256 (&acc)[4][3]) {
  // Row i of A at pa + d_i bytes (row-major A: rows past the tile's repeat the last, as arow).
  const float* pa = kA == AFrom::kRows ? arow[0] : a;
  const int64_t d1 = kA == AFrom::kRows ? (arow[1] - arow[0]) * 4 : 4;
  const int64_t d2 = kA == AFrom::kRows ? (arow[2] - arow[0]) * 4 : 8;
  const int64_t d3 = kA == AFrom::kRows ? (arow[3] - arow[0]) * 4 : 12;
  const int64_t a_step = kA == AFrom::kRows ? 4 : 32;
  const int64_t b_step = b_stride * 4;
  float* pacc = reinterpret_cast<float*>(&acc[0][0]);
  // ymm0-2: B's row; ymm3: A's value broadcast; ymm4-15: the accumulators, row-major (row i in
  // ymm4 + 3 i .. ymm6 + 3 i), in from acc and back out. The registers the loop changes are
  // early clobbers: GCC otherwise may give an input of the same value the same register.
  // clang-format off
#define QUILT_AVX2_STEP(A0, A1, A2, A3)                                        \
  "vmovups (%[b]), %%ymm0\n\t"                                                 \
  "vmovups 32(%[b]), %%ymm1\n\t"                                               \
  "vmovups 64(%[b]), %%ymm2\n\t"                                               \
  "vbroadcastss " A0 ", %%ymm3\n\t"                                            \
  "vfmadd231ps %%ymm0, %%ymm3, %%ymm4\n\t"                                     \
  "vfmadd231ps %%ymm1, %%ymm3, %%ymm5\n\t"                                     \
  "vfmadd231ps %%ymm2, %%ymm3, %%ymm6\n\t"                                     \
  "vbroadcastss " A1 ", %%ymm3\n\t"                                            \
  "vfmadd231ps %%ymm0, %%ymm3, %%ymm7\n\t"                                     \
  "vfmadd231ps %%ymm1, %%ymm3, %%ymm8\n\t"                                     \
  "vfmadd231ps %%ymm2, %%ymm3, %%ymm9\n\t"                                     \
  "vbroadcastss " A2 ", %%ymm3\n\t"                                            \
  "vfmadd231ps %%ymm0, %%ymm3, %%ymm10\n\t"                                    \
  "vfmadd231ps %%ymm1, %%ymm3, %%ymm11\n\t"                                    \
  "vfmadd231ps %%ymm2, %%ymm3, %%ymm12\n\t"                                    \
  "vbroadcastss " A3 ", %%ymm3\n\t"                                            \
  "vfmadd231ps %%ymm0, %%ymm3, %%ymm13\n\t"                                    \
  "vfmadd231ps %%ymm1, %%ymm3, %%ymm14\n\t"                                    \
  "vfmadd231ps %%ymm2, %%ymm3, %%ymm15\n\t"
#define QUILT_AVX2_LOOP(STEP)                                                  \
  asm volatile(                                                                \
      "vmovups 0(%[acc]), %%ymm4\n\t"                                          \
      "vmovups 32(%[acc]), %%ymm5\n\t"                                         \
      "vmovups 64(%[acc]), %%ymm6\n\t"                                         \
      "vmovups 96(%[acc]), %%ymm7\n\t"                                         \
      "vmovups 128(%[acc]), %%ymm8\n\t"                                        \
      "vmovups 160(%[acc]), %%ymm9\n\t"                                        \
      "vmovups 192(%[acc]), %%ymm10\n\t"                                       \
      "vmovups 224(%[acc]), %%ymm11\n\t"                                       \
      "vmovups 256(%[acc]), %%ymm12\n\t"                                       \
      "vmovups 288(%[acc]), %%ymm13\n\t"                                       \
      "vmovups 320(%[acc]), %%ymm14\n\t"                                       \
      "vmovups 352(%[acc]), %%ymm15\n\t"                                       \
      "1:\n\t"                                                                 \
      STEP                                                                     \
      "add %[as], %[a]\n\t"                                                    \
      "add %[bs], %[b]\n\t"                                                    \
      "dec %[n]\n\t"                                                           \
      "jnz 1b\n\t"                                                             \
      "vmovups %%ymm4, 0(%[acc])\n\t"                                          \
      "vmovups %%ymm5, 32(%[acc])\n\t"                                         \
      "vmovups %%ymm6, 64(%[acc])\n\t"                                         \
      "vmovups %%ymm7, 96(%[acc])\n\t"                                         \
      "vmovups %%ymm8, 128(%[acc])\n\t"                                        \
      "vmovups %%ymm9, 160(%[acc])\n\t"                                        \
      "vmovups %%ymm10, 192(%[acc])\n\t"                                       \
      "vmovups %%ymm11, 224(%[acc])\n\t"                                       \
      "vmovups %%ymm12, 256(%[acc])\n\t"                                       \
      "vmovups %%ymm13, 288(%[acc])\n\t"                                       \
      "vmovups %%ymm14, 320(%[acc])\n\t"                                       \
      "vmovups %%ymm15, 352(%[acc])\n\t"                                       \
      : [a] "+&r"(pa), [b] "+&r"(b), [n] "+&r"(n)                              \
      : [acc] "r"(pacc), [d1] "r"(d1), [d2] "r"(d2), [d3] "r"(d3),             \
        [as] "r"(a_step), [bs] "r"(b_step)                                     \
      : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5",        \
        "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",    \
        "xmm14", "xmm15")
  if (n <= 0) return;
  if constexpr (kA == AFrom::kRows)
    QUILT_AVX2_LOOP(QUILT_AVX2_STEP("(%[a])", "(%[a],%[d1],1)", "(%[a],%[d2],1)", "(%[a],%[d3],1)"));
  else
    QUILT_AVX2_LOOP(QUILT_AVX2_STEP("(%[a])", "4(%[a])", "8(%[a])", "12(%[a])"));
#undef QUILT_AVX2_LOOP
#undef QUILT_AVX2_STEP
  // clang-format on
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
  const float* arow[kLive] = {};
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
  if constexpr (NV == 3 && kLive == 4 && !kRows) {  // a full sub-tile on a panel
    steps_4x24<kRawA ? AFrom::kRows : AFrom::kSliver>(kc, a, arow, b, b_stride, acc);
  } else {
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
           int64_t b_stride, int64_t half_step, const int64_t* offsets, float* c, int64_t ldc,
           int64_t rows, int64_t width, bool first, const float* bias, const float* col_bias) {
  for (int64_t p0 = 0; p0 < kc; p0 += kDepthChunk) {
    const int64_t chunk = std::min(kDepthChunk, kc - p0);
    const bool start = first && p0 == 0;
    for (int64_t j = 0; j < width; j += kSubCols) {
      const int64_t cols = std::min(kSubCols, width - j);
      const int nv = static_cast<int>((cols + kLanes - 1) / kLanes);
      const __m256i tail = lanes(cols - (nv - 1) * kLanes);
      const bool full = cols == nv * kLanes;
      const float* bj = b + j / kSubCols * half_step + (offsets ? 0 : p0 * b_stride);
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
                float* panel) {
  for (int64_t h = 0; h * kSubCols < width; ++h) {
    const int64_t cols = std::min(kSubCols, width - h * kSubCols);
    for (int64_t p = 0; p < kc; ++p) {
      float* dst = panel + h * kc * kSubCols + p * kSubCols;
      std::memcpy(dst, b + (p0 + p) * ldb + j0 + h * kSubCols,
                  static_cast<size_t>(cols) * sizeof(float));
      std::fill(dst + cols, dst + kSubCols, 0.f);
    }
  }
}

}  // namespace quilt::cpu::avx2
