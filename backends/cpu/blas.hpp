// OpenBLAS, loaded at run time so that Quilt can pick its kernels before it initialises.
//
// OpenBLAS 0.3.21 (Debian 12) identifies recent Xeons as "Prescott" and runs its generic
// kernels, ~6x slower than its AVX-512 ones. OpenBLAS reads OPENBLAS_CORETYPE once, when the
// library initialises; linking it normally would initialise it before any of our code runs. So we
// set OPENBLAS_CORETYPE from the CPU's features (unless the user already set it) and dlopen it.
#pragma once

#include <cstdint>
#include <string>

namespace quilt::cpu {

// Row-major C = alpha * op(A) * op(B) + beta * C.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Loads OpenBLAS if needed and returns the kernel core it uses (e.g. "Cooperlake").
std::string blas_core_name();
// The OPENBLAS_CORETYPE Quilt chose ("" when the user's own setting was kept).
std::string blas_core_override();
void blas_set_threads(int threads);

}  // namespace quilt::cpu
