#include "backends/cpu/gemm_avx2.hpp"

#include "backends/cpu/avx2.hpp"

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
    QUILT_AVX2_LOOP(
        QUILT_AVX2_STEP("(%[a])", "(%[a],%[d1],1)", "(%[a],%[d2],1)", "(%[a],%[d3],1)"));
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

void pack_panel(const float* b, int64_t ldb, const int64_t* offsets, int64_t p0, int64_t kc,
                int64_t j0, int64_t width, float* panel) {
  // A row of B at a time, into both halves: each source row is read once.
  for (int64_t p = 0; p < kc; ++p)
    for (int64_t h = 0; h * kSubCols < width; ++h) {
      const int64_t cols = std::min(kSubCols, width - h * kSubCols);
      float* dst = panel + h * kc * kSubCols + p * kSubCols;
      std::memcpy(dst, b + (offsets ? offsets[p0 + p] : (p0 + p) * ldb) + j0 + h * kSubCols,
                  static_cast<size_t>(cols) * sizeof(float));
      std::fill(dst + cols, dst + kSubCols, 0.f);
    }
}

}  // namespace quilt::cpu::avx2

// gemm_channels' tiles (gemm_channels.cpp): output channels along the vectors, pixels broadcast.
namespace quilt::cpu::avx2 {
namespace {

constexpr int64_t kBlock = 64;  // channels of a tile (PackedAChannels::kRows)

// n (> 0) depth steps of NP (1-4) pixels x NV (2 or 3) vectors of channels: acc (pixel i's
// channels at acc + i * 64) += the weights' row (w, w_step bytes apart) times each pixel's value
// (b[offsets[p] + i]), broadcast. In assembly for the reason steps_4x24 is; the accumulators are
// ymm4 + NV i + v, the weights ymm0-2, the broadcast ymm3.
// clang-format off
#define QUILT_CH_LD(OFF, R) "vmovups " OFF "(%[acc]), %%" R "\n\t"
#define QUILT_CH_ST(OFF, R) "vmovups %%" R ", " OFF "(%[acc])\n\t"
#define QUILT_CH_ROW2(X, OFF, R0, R1) X(OFF "+0", R0) X(OFF "+32", R1)
#define QUILT_CH_ROW3(X, OFF, R0, R1, R2) X(OFF "+0", R0) X(OFF "+32", R1) X(OFF "+64", R2)
#define QUILT_CH_W2 "vmovups (%[w]), %%ymm0\n\t" "vmovups 32(%[w]), %%ymm1\n\t"
#define QUILT_CH_W3 QUILT_CH_W2 "vmovups 64(%[w]), %%ymm2\n\t"
#define QUILT_CH_P2(OFF, C0, C1)                \
  "vbroadcastss " OFF "(%[t]), %%ymm3\n\t"      \
  "vfmadd231ps %%ymm0, %%ymm3, %%" C0 "\n\t"    \
  "vfmadd231ps %%ymm1, %%ymm3, %%" C1 "\n\t"
#define QUILT_CH_P3(OFF, C0, C1, C2) \
  QUILT_CH_P2(OFF, C0, C1) "vfmadd231ps %%ymm2, %%ymm3, %%" C2 "\n\t"
// Pixel I's accumulators (row I of acc) for NV = 3 and NV = 2.
#define QUILT_CH3_0(X) QUILT_CH_ROW3(X, "0", "ymm4", "ymm5", "ymm6")
#define QUILT_CH3_1(X) QUILT_CH_ROW3(X, "256", "ymm7", "ymm8", "ymm9")
#define QUILT_CH3_2(X) QUILT_CH_ROW3(X, "512", "ymm10", "ymm11", "ymm12")
#define QUILT_CH3_3(X) QUILT_CH_ROW3(X, "768", "ymm13", "ymm14", "ymm15")
#define QUILT_CH2_0(X) QUILT_CH_ROW2(X, "0", "ymm4", "ymm5")
#define QUILT_CH2_1(X) QUILT_CH_ROW2(X, "256", "ymm6", "ymm7")
#define QUILT_CH2_2(X) QUILT_CH_ROW2(X, "512", "ymm8", "ymm9")
#define QUILT_CH2_3(X) QUILT_CH_ROW2(X, "768", "ymm10", "ymm11")
#define QUILT_CH3_P0 QUILT_CH_P3("0", "ymm4", "ymm5", "ymm6")
#define QUILT_CH3_P1 QUILT_CH_P3("4", "ymm7", "ymm8", "ymm9")
#define QUILT_CH3_P2 QUILT_CH_P3("8", "ymm10", "ymm11", "ymm12")
#define QUILT_CH3_P3 QUILT_CH_P3("12", "ymm13", "ymm14", "ymm15")
#define QUILT_CH2_P0 QUILT_CH_P2("0", "ymm4", "ymm5")
#define QUILT_CH2_P1 QUILT_CH_P2("4", "ymm6", "ymm7")
#define QUILT_CH2_P2 QUILT_CH_P2("8", "ymm8", "ymm9")
#define QUILT_CH2_P3 QUILT_CH_P2("12", "ymm10", "ymm11")
#define QUILT_CH_LOOP(ACC, STEP)                                                   \
  asm volatile(ACC(QUILT_CH_LD)                                                    \
               "1:\n\t"                                                            \
               "mov (%[o]), %[t]\n\t"                                              \
               "lea (%[b],%[t],4), %[t]\n\t"                                       \
               STEP                                                                \
               "add $8, %[o]\n\t"                                                  \
               "add %[ws], %[w]\n\t"                                               \
               "dec %[n]\n\t"                                                      \
               "jnz 1b\n\t"                                                        \
               ACC(QUILT_CH_ST)                                                    \
               : [w] "+&r"(w), [o] "+&r"(offsets), [n] "+&r"(n), [t] "=&r"(t)      \
               : [acc] "r"(acc), [b] "r"(b), [ws] "r"(w_step)                      \
               : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5",   \
                 "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",        \
                 "xmm13", "xmm14", "xmm15")
#define QUILT_CH3_ACC1(X) QUILT_CH3_0(X)
#define QUILT_CH3_ACC2(X) QUILT_CH3_0(X) QUILT_CH3_1(X)
#define QUILT_CH3_ACC3(X) QUILT_CH3_0(X) QUILT_CH3_1(X) QUILT_CH3_2(X)
#define QUILT_CH3_ACC4(X) QUILT_CH3_0(X) QUILT_CH3_1(X) QUILT_CH3_2(X) QUILT_CH3_3(X)
#define QUILT_CH2_ACC1(X) QUILT_CH2_0(X)
#define QUILT_CH2_ACC2(X) QUILT_CH2_0(X) QUILT_CH2_1(X)
#define QUILT_CH2_ACC3(X) QUILT_CH2_0(X) QUILT_CH2_1(X) QUILT_CH2_2(X)
#define QUILT_CH2_ACC4(X) QUILT_CH2_0(X) QUILT_CH2_1(X) QUILT_CH2_2(X) QUILT_CH2_3(X)
template <int NV, int NP>
__attribute__((target("avx2,fma"))) void channel_steps(int64_t n, const float* w, int64_t w_step,
                                                       const float* b, const int64_t* offsets,
                                                       float* acc) {
  static_assert((NV == 2 || NV == 3) && NP >= 1 && NP <= 4);
  int64_t t;
  if constexpr (NV == 3 && NP == 1)
    QUILT_CH_LOOP(QUILT_CH3_ACC1, QUILT_CH_W3 QUILT_CH3_P0);
  if constexpr (NV == 3 && NP == 2)
    QUILT_CH_LOOP(QUILT_CH3_ACC2, QUILT_CH_W3 QUILT_CH3_P0 QUILT_CH3_P1);
  if constexpr (NV == 3 && NP == 3)
    QUILT_CH_LOOP(QUILT_CH3_ACC3, QUILT_CH_W3 QUILT_CH3_P0 QUILT_CH3_P1 QUILT_CH3_P2);
  if constexpr (NV == 3 && NP == 4)
    QUILT_CH_LOOP(QUILT_CH3_ACC4,
                  QUILT_CH_W3 QUILT_CH3_P0 QUILT_CH3_P1 QUILT_CH3_P2 QUILT_CH3_P3);
  if constexpr (NV == 2 && NP == 1)
    QUILT_CH_LOOP(QUILT_CH2_ACC1, QUILT_CH_W2 QUILT_CH2_P0);
  if constexpr (NV == 2 && NP == 2)
    QUILT_CH_LOOP(QUILT_CH2_ACC2, QUILT_CH_W2 QUILT_CH2_P0 QUILT_CH2_P1);
  if constexpr (NV == 2 && NP == 3)
    QUILT_CH_LOOP(QUILT_CH2_ACC3, QUILT_CH_W2 QUILT_CH2_P0 QUILT_CH2_P1 QUILT_CH2_P2);
  if constexpr (NV == 2 && NP == 4)
    QUILT_CH_LOOP(QUILT_CH2_ACC4,
                  QUILT_CH_W2 QUILT_CH2_P0 QUILT_CH2_P1 QUILT_CH2_P2 QUILT_CH2_P3);
}
#undef QUILT_CH2_ACC4
#undef QUILT_CH2_ACC3
#undef QUILT_CH2_ACC2
#undef QUILT_CH2_ACC1
#undef QUILT_CH3_ACC4
#undef QUILT_CH3_ACC3
#undef QUILT_CH3_ACC2
#undef QUILT_CH3_ACC1
#undef QUILT_CH_LOOP
#undef QUILT_CH2_P3
#undef QUILT_CH2_P2
#undef QUILT_CH2_P1
#undef QUILT_CH2_P0
#undef QUILT_CH3_P3
#undef QUILT_CH3_P2
#undef QUILT_CH3_P1
#undef QUILT_CH3_P0
#undef QUILT_CH2_3
#undef QUILT_CH2_2
#undef QUILT_CH2_1
#undef QUILT_CH2_0
#undef QUILT_CH3_3
#undef QUILT_CH3_2
#undef QUILT_CH3_1
#undef QUILT_CH3_0
#undef QUILT_CH_P3
#undef QUILT_CH_P2
#undef QUILT_CH_W3
#undef QUILT_CH_W2
#undef QUILT_CH_ROW3
#undef QUILT_CH_ROW2
#undef QUILT_CH_ST
#undef QUILT_CH_LD
// clang-format on

// NP pixels x the 64 channels: 24 + 24 + 16.
template <int NP>
void channel_group(int64_t kc, const float* a, int64_t a_stride, const float* b,
                   const int64_t* offsets, float* acc) {
  const int64_t step = a_stride * int64_t{sizeof(float)};
  channel_steps<3, NP>(kc, a, step, b, offsets, acc);
  channel_steps<3, NP>(kc, a + 24, step, b, offsets, acc + 24);
  channel_steps<2, NP>(kc, a + 48, step, b, offsets, acc + 48);
}

void pixel_group(int np, int64_t kc, const float* a, int64_t a_stride, const float* b,
                 const int64_t* offsets, float* acc) {
  switch (np) {
    case 1:
      return channel_group<1>(kc, a, a_stride, b, offsets, acc);
    case 2:
      return channel_group<2>(kc, a, a_stride, b, offsets, acc);
    case 3:
      return channel_group<3>(kc, a, a_stride, b, offsets, acc);
    default:
      return channel_group<4>(kc, a, a_stride, b, offsets, acc);
  }
}

}  // namespace

void channel_tile(int np, int64_t kc, const float* a, int64_t a_stride, const float* b,
                  const int64_t* offsets, float* acc, bool first, const float* bias,
                  const float* next) {
  if (first)
    for (int i = 0; i < np; ++i) std::copy_n(bias, kBlock, acc + i * kBlock);
  if (next)
    for (int64_t p = 0; p < kc; ++p)
      _mm_prefetch(reinterpret_cast<const char*>(next + p * a_stride), _MM_HINT_T0);
  if (kc <= 0) return;
  // Groups of at most 4 pixels (the 12 accumulators of 3 vectors x 4), evened out: 7 = 4 + 3.
  const int first_group = np <= 4 ? np : np - np / 2;
  pixel_group(first_group, kc, a, a_stride, b, offsets, acc);
  if (np > first_group)
    pixel_group(np - first_group, kc, a, a_stride, b + first_group, offsets,
                acc + first_group * kBlock);
}

__attribute__((target("avx2"))) void store_channels(const float* acc, int64_t width, int64_t rows,
                                                    int64_t mr, float* c, int64_t ldc, int64_t crs,
                                                    bool accumulate) {
  for (int64_t oh = 0; oh < rows; ++oh)
    for (int64_t w0 = 0; w0 < width; w0 += kLanes) {
      const int64_t np = std::min(kLanes, width - w0);
      const __m256i pm = lanes(np);
      const float* src = acc + (oh * width + w0) * kBlock;
      for (int64_t i0 = 0; i0 < mr; i0 += kLanes) {
        __m256 r[kLanes];
        for (int64_t p = 0; p < kLanes; ++p)
          r[p] = p < np ? _mm256_loadu_ps(src + p * kBlock + i0) : _mm256_setzero_ps();
        transpose8x8(r);  // r[i]: channel i0 + i at the 8 pixels
        const int64_t nc = std::min(kLanes, mr - i0);
        for (int64_t i = 0; i < nc; ++i) {
          float* dst = c + (i0 + i) * ldc + oh * crs + w0;
          const __m256 v = accumulate ? _mm256_add_ps(_mm256_maskload_ps(dst, pm), r[i]) : r[i];
          _mm256_maskstore_ps(dst, pm, v);
        }
      }
    }
}

}  // namespace quilt::cpu::avx2
