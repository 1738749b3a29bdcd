// The packed GEMM's micro-kernel for CPUs with AVX2 and FMA but no AVX-512 (an AMD EPYC Zen 3,
// for one): the tiles of gemm_packed.cpp (A in 8-row slivers [k][8] or row-major, B in 48-column
// panels, each stored as two 24-column halves here, or read in place at row offsets), each tile
// computed in sub-tiles of 4 rows x 24 columns (12 accumulators, 3 vectors of B and a
// broadcast: the 16 ymm registers). A 24-column half's rows are contiguous, 96 bytes: in a
// 48-column row they were 192 bytes apart and a half's lines were all partly unused.
// gemm_packed.cpp calls these where has_avx512f() is false; before them such CPUs ran the
// products on OpenBLAS (sgemm repacking the weights every call, then a pass for the bias and
// the activation) and its work buffer, whose allocation OpenBLAS 0.3.21 retries without end
// when the address space is capped (a hang instead of Quilt's OutOfMemory).
#pragma once

#include <cstdint>

namespace quilt::cpu::avx2 {

// Rows [0, rows) x columns [0, width) (<= 48: one strip) of C at c (row stride ldc), one depth
// block of the product:
//   a: A at the block's first row and depth: packed (a_ld == 0: 8-row slivers sliver_stride
//      floats apart, value (p, i) of a sliver at [p * 8 + i], rows past the matrix zero) or
//      row-major with row stride a_ld;
//   b: B at the strip's first column: a panel in halves of 24 columns (value (p, j) at
//      b[j / 24 * half_step + p * b_stride + j % 24], columns past the matrix zero) or, with
//      offsets, row p at b + offsets[p] (half_step 24; nothing past width is read);
//   first: C starts from bias[i] (+ col_bias[j]) (either may be null) instead of C's values.
// The caller applies the activation and any residual afterwards.
void tiles(int64_t kc, const float* a, int64_t a_ld, int64_t sliver_stride, const float* b,
           int64_t b_stride, int64_t half_step, const int64_t* offsets, float* c, int64_t ldc,
           int64_t rows, int64_t width, bool first, const float* bias, const float* col_bias);

// Rows [p0, p0 + kc) x columns [j0, j0 + width) (width <= 48) of B (row stride ldb, or row p
// at b + offsets[p]) as tiles() reads a panel: halves of kc rows x 24 columns (half_step
// kc * 24), zero past width.
void pack_panel(const float* b, int64_t ldb, const int64_t* offsets, int64_t p0, int64_t kc,
                int64_t j0, int64_t width, float* panel);

// Where PackedB's value (p, q) of a 48-column strip of depth k goes: halves of 24 columns, each
// k x 24 (tiles()' half_step k * 24), so a sub-tile's rows of B are contiguous.
inline int64_t packed_b_index(int64_t k, int64_t p, int64_t q) {
  return q / 24 * k * 24 + p * 24 + q % 24;
}

}  // namespace quilt::cpu::avx2

namespace quilt::cpu::avx2 {

// gemm_channels' tile (gemm_channels.cpp) on AVX2: np (1-7) pixels x 64 channels. acc (pixel
// i's 64 channels at acc + i * 64) = (first ? bias : acc) + sum over p < kc of a[p][:] * b[p][i],
// a[p] the 64 floats at a + p * a_stride, b[p][i] = b[offsets[p] + i]. next: the line at
// next + p * a_stride is fetched for each p too.
void channel_tile(int np, int64_t kc, const float* a, int64_t a_stride, const float* b,
                  const int64_t* offsets, float* acc, bool first, const float* bias,
                  const float* next);

// A task's accumulators (pixel q's 64 channels at acc + q * 64) out into C's rows of channels
// [0, mr): `rows` output rows of `width` pixels, row oh's pixel w of channel i going to
// c + i * ldc + oh * crs + w, added to it when `accumulate`.
void store_channels(const float* acc, int64_t width, int64_t rows, int64_t mr, float* c,
                    int64_t ldc, int64_t crs, bool accumulate);

}  // namespace quilt::cpu::avx2
