// Reduced-precision GEMM for float32 models (SessionOptions::precision = "bf16"): the operands
// are rounded to bfloat16 (nearest even) and multiplied with AVX512-BF16's vdpbf16ps, which
// adds the products of two bfloat16 pairs into each float32 lane: accumulation stays float32.
// The weights are converted once, when the kernel is created; the activations as they are read
// (per depth block of a task, or per call for a MatMul's left operand).
//
// Layouts, both "bf16 pairs": a 32-bit word holds two bfloat16 values of consecutive depth
// (low half depth 2p, high half 2p + 1; an odd depth's last high half is 0), as vdpbf16ps wants.
//   rows:   A (m x k) as [m][ceil(k / 2)] words (the left operand, broadcast one word a row)
//   panels: B (k x n) as [ceil(n / 48)][ceil(k / 2)][48] words (the right operand, 16 lanes a
//           vector, columns past n zero)
// gemm_packed.hpp's PackedA and PackedB hold these when made for bf16 and call here.
#pragma once

#include <cstdint>
#include <memory>

#include "backends/cpu/activation.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace quilt::cpu::bf16 {

// Whether this CPU has AVX512-BF16 (and the AVX-512 F/BW the kernels use alongside).
bool available();
// What `quilt devices` says of the precisions this CPU accelerates.
std::string precisions_description();

// A (m x k, row stride lda) as bf16 pair rows.
std::shared_ptr<uint32_t[]> pack_rows(const float* a, int64_t m, int64_t k, int64_t lda);
// B (k x n, row stride ldb; or n x k when transposed) as bf16 panels.
std::shared_ptr<uint32_t[]> pack_panels(const float* b, int64_t k, int64_t n, int64_t ldb,
                                        bool transposed);

// c[i][j] = act(bias[i] + sum_p a[i][p] * b[p][j] (+ residual[i][j])), a packed as rows; row p
// of B is the n floats at b + offsets[p], or b + p * ldb when offsets is null. bias, residual may
// be null; residual has C's layout.
void gemm_rows(const uint32_t* a, int64_t m, int64_t k, const float* b, const int64_t* offsets,
               int64_t ldb, int64_t n, float* c, int64_t ldc, const float* bias,
               const Activation& act, const ThreadPool& pool, const float* residual = nullptr);

// c[i][j] = act(col_bias[j] + sum_p a[i][p] * b[p][j]): a float32 (m x k, row stride lda; k x m
// when trans_a) converted for this call, b packed as panels. col_bias may be null.
void gemm_panels(const float* a, int64_t lda, bool trans_a, int64_t m, int64_t k, const uint32_t* b,
                 int64_t n, float* c, int64_t ldc, const float* col_bias, const Activation& act,
                 const ThreadPool& pool);

}  // namespace quilt::cpu::bf16
