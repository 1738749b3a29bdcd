// The packed GEMM's micro-kernel for CPUs with AVX2 and FMA but no AVX-512 (an AMD EPYC Zen 3,
// for one): the tiles and packed layouts of gemm_packed.cpp (A in 8-row slivers [k][8], B in
// 48-column panels or read in place at row offsets), each tile computed in sub-tiles of 4 rows x
// 24 columns (12 accumulators, 3 vectors of B and a broadcast: the 16 ymm registers).
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
//   b: B at the strip's first column: a panel (value (p, j) at b[p * b_stride + j], columns past
//      the matrix zero) or, with offsets, row p at b + offsets[p] (nothing past width is read);
//   first: C starts from bias[i] (+ col_bias[j]) (either may be null) instead of C's values.
// The caller applies the activation and any residual afterwards.
void tiles(int64_t kc, const float* a, int64_t a_ld, int64_t sliver_stride, const float* b,
           int64_t b_stride, const int64_t* offsets, float* c, int64_t ldc, int64_t rows,
           int64_t width, bool first, const float* bias, const float* col_bias);

// Rows [p0, p0 + kc) x columns [j0, j0 + width) of B (row stride ldb) as a panel of kc rows of
// `stride` floats, zero past width.
void pack_panel(const float* b, int64_t ldb, int64_t p0, int64_t kc, int64_t j0, int64_t width,
                int64_t stride, float* panel);

}  // namespace quilt::cpu::avx2
