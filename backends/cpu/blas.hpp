// OpenBLAS, loaded at run time so that Quilt can pick its kernels before it initialises.
//
// OpenBLAS 0.3.21 (Debian 12) identifies recent Xeons as "Prescott" and runs its generic
// kernels, ~6x slower than its AVX-512 ones; machines also come with OPENBLAS_CORETYPE=Haswell
// set for other programs, half the AVX-512 speed. OpenBLAS reads OPENBLAS_CORETYPE once, when
// the library initialises; linking it normally would initialise it before any of our code runs.
// So Quilt picks the core from the CPU's features (QUILT_OPENBLAS_CORETYPE forces one), sets
// OPENBLAS_CORETYPE just while it dlopens OpenBLAS, then restores the inherited value.
#pragma once

#include <cstdint>
#include <string>

namespace quilt::cpu {

// Row-major C = alpha * op(A) * op(B) + beta * C.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Loads OpenBLAS if needed and returns the kernel core it uses (e.g. "Cooperlake").
std::string blas_core_name();
// How the core was chosen.
struct BlasCoreChoice {
  std::string core;       // the OPENBLAS_CORETYPE OpenBLAS was loaded with ("": none, it detects)
  std::string source;     // "QUILT_OPENBLAS_CORETYPE", "picked by Quilt ...", "OPENBLAS_CORETYPE"
  std::string inherited;  // OPENBLAS_CORETYPE in the environment before Quilt ("" if unset)
};
const BlasCoreChoice& blas_core_choice();
// e.g. "OpenBLAS, core SkylakeX (picked by Quilt from the CPU's features; OPENBLAS_CORETYPE=
// Haswell from the environment not used)", for `quilt devices` and logs.
std::string blas_core_description();
// OpenBLAS's thread count: applied now if it is loaded, else when it loads (on first use).
void blas_set_threads(int threads);
// Whether OpenBLAS has been loaded in this process.
bool blas_loaded();

}  // namespace quilt::cpu
