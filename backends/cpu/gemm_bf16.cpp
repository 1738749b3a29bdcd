// The bfloat16 GEMM of gemm_bf16.hpp: 8 x 48 tiles of C, 24 float32 accumulators in registers,
// one vdpbf16ps per (row, vector) and pair of depths. Tasks, depth blocks and the epilogue follow
// gemm_packed.cpp's float32 kernel; B's panels are converted (not copied) as they are packed.
#include "backends/cpu/gemm_bf16.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>

#include "backends/cpu/avx512.hpp"
#include "backends/cpu/half_convert.hpp"

namespace quilt::cpu::bf16 {
namespace {

constexpr int64_t kMr = 8;           // rows of C per micro-tile
constexpr int64_t kLanes = 16;       // float32 lanes (bf16 pairs) per vector
constexpr int64_t kNr = 3 * kLanes;  // columns of C per full micro-tile
constexpr int64_t kKc = 768;         // depth per block (even: blocks start on a pair)
constexpr int64_t kGroup = 4;        // panels packed per depth block of a task
constexpr int64_t kMc = 64;          // rows of A per pass over the panels

constexpr int kPanelSlot = 7, kRowsSlot = 8;  // thread_scratch slots (thread_pool.hpp)

std::shared_ptr<uint32_t[]> aligned_words(int64_t count) {
  const size_t bytes = (static_cast<size_t>(std::max<int64_t>(count, 1)) * 4 + 63) / 64 * 64;
  auto* p = static_cast<uint32_t*>(std::aligned_alloc(64, bytes));
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<uint32_t[]>(p, [](uint32_t* q) { std::free(q); });
}

uint32_t pair(float lo, float hi) {
  return uint32_t{round_to_bfloat16(lo)} | uint32_t{round_to_bfloat16(hi)} << 16;
}

// The lanes of a 16-lane vector `left` elements from a row's end (0 when left <= 0).
__mmask16 lanes(int64_t left) {
  return left >= kLanes ? __mmask16(0xffff)
         : left <= 0    ? __mmask16(0)
                        : static_cast<__mmask16>((1u << left) - 1);
}

// A tile of `rows` (<= 8) x NV vectors of C: a holds the tile's first row of bf16 pair rows
// (row stride a_ld words, already at the block's first pair); b the block's panel (b_stride
// words a pair). kLive rows are computed (rows past `rows` repeat the last one, never stored).
template <int NV, int kLive>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void micro_kernel(
    int64_t pairs, const uint32_t* a, int64_t a_ld, const uint32_t* b, int64_t b_stride, float* c,
    int64_t ldc, int64_t rows, __mmask16 mask, bool first, const float* bias, const float* col_bias,
    const Finish& finish) {
  const uint32_t* arow[kLive];
  for (int i = 0; i < kLive; ++i) arow[i] = a + std::min<int64_t>(i, rows - 1) * a_ld;
  __m512 acc[kLive][NV];
#pragma GCC unroll 8
  for (int i = 0; i < kLive; ++i) {
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j) {
      const __mmask16 m = j == NV - 1 ? mask : __mmask16(0xffff);
      if (first) {
        acc[i][j] = bias && i < rows ? _mm512_set1_ps(bias[i]) : _mm512_setzero_ps();
        if (col_bias)
          acc[i][j] = _mm512_add_ps(acc[i][j], _mm512_maskz_loadu_ps(m, col_bias + j * kLanes));
      } else {
        acc[i][j] =
            i < rows ? _mm512_maskz_loadu_ps(m, c + i * ldc + j * kLanes) : _mm512_setzero_ps();
      }
    }
  }
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh bv[NV];
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j) bv[j] = (__m512bh)_mm512_load_si512(b + p * b_stride + j * kLanes);
#pragma GCC unroll 8
    for (int i = 0; i < kLive; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(arow[i][p]));
#pragma GCC unroll 3
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], av, bv[j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kLive; ++i) {
    if (i >= rows) break;
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j) {
      const __mmask16 m = j == NV - 1 ? mask : __mmask16(0xffff);
      __m512 v = acc[i][j];
      if (finish.residual)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, finish.residual + i * ldc + j * kLanes));
      if (!finish.act.none())
        v = act16(finish.act.kind, v, _mm512_set1_ps(finish.act.alpha),
                  _mm512_set1_ps(finish.act.beta));
      _mm512_mask_storeu_ps(c + i * ldc + j * kLanes, m, v);
    }
  }
}

// The micro-kernel computing as few rows as cover `rows`: 1, 2, 4 or 8 (a MatMul at batch 1
// computing all 8 would do 8 times the work it needs).
template <int NV>
void tile(int64_t rows, int64_t pairs, const uint32_t* a, int64_t a_ld, const uint32_t* b,
          int64_t b_stride, float* c, int64_t ldc, __mmask16 mask, bool first, const float* bias,
          const float* col_bias, const Finish& finish) {
  if (rows == 1)
    micro_kernel<NV, 1>(pairs, a, a_ld, b, b_stride, c, ldc, rows, mask, first, bias, col_bias,
                        finish);
  else if (rows == 2)
    micro_kernel<NV, 2>(pairs, a, a_ld, b, b_stride, c, ldc, rows, mask, first, bias, col_bias,
                        finish);
  else if (rows <= 4)
    micro_kernel<NV, 4>(pairs, a, a_ld, b, b_stride, c, ldc, rows, mask, first, bias, col_bias,
                        finish);
  else
    micro_kernel<NV, 8>(pairs, a, a_ld, b, b_stride, c, ldc, rows, mask, first, bias, col_bias,
                        finish);
}

// Where B comes from: panels packed ahead, or float32 rows converted block by block.
struct BSource {
  const uint32_t* panels = nullptr;  // [strip][pairs][48]
  const float* base = nullptr;       // row p at base + offsets[p], or base + p * ldb
  const int64_t* offsets = nullptr;
  int64_t ldb = 0;
  const float* row(int64_t p) const { return base + (offsets ? offsets[p] : p * ldb); }
};

// Depth rows [p0, p0 + kc) x columns [j0, j0 + width) of B as a panel of bf16 pairs,
// nv * 16 words a pair, zero past width and past the depth.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void pack_panel(const BSource& b, int64_t p0,
                                                                       int64_t kc, int64_t j0,
                                                                       int64_t width, int nv,
                                                                       uint32_t* panel) {
  // cvtne2ps_pbh(hi, lo) gives lo's 16 values then hi's; interleaved, lane q holds (lo[q], hi[q]).
  alignas(64) static constexpr int16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i idx = _mm512_load_si512(kInterleave);
  const int64_t stride = nv * kLanes;
  for (int64_t p = 0; p < kc; p += 2) {
    const float* lo = b.row(p0 + p) + j0;
    const float* hi = p + 1 < kc ? b.row(p0 + p + 1) + j0 : nullptr;
    uint32_t* dst = panel + (p / 2) * stride;
    for (int v = 0; v < nv; ++v) {
      const __mmask16 m = lanes(width - v * kLanes);
      const __m512 l = _mm512_maskz_loadu_ps(m, lo + v * kLanes);
      const __m512 h = hi ? _mm512_maskz_loadu_ps(m, hi + v * kLanes) : _mm512_setzero_ps();
      const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(h, l);
      _mm512_store_si512(dst + v * kLanes, _mm512_permutexvar_epi16(idx, both));
    }
  }
}

// Rows [r0, r1) of a (m x k, row stride lda) as bf16 pair rows of `words` words at out.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void convert_rows(
    const float* a, int64_t lda, int64_t k, int64_t r0, int64_t r1, int64_t words, uint32_t* out) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* src = a + r * lda;
    uint32_t* dst = out + r * words;
    for (int64_t p = 0; p < k; p += 2 * kLanes) {
      const __m512 l = _mm512_maskz_loadu_ps(lanes(k - p), src + p);
      const __m512 h = _mm512_maskz_loadu_ps(lanes(k - p - kLanes), src + p + kLanes);
      // In depth order already: word q = (value 2q, value 2q + 1).
      const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(h, l);
      _mm512_mask_storeu_epi32(dst + p / 2, lanes(words - p / 2), both);
    }
  }
}

// One task: rows [r0, r1) (r0 a multiple of 8) x columns [j0, j1) (j0 a multiple of 48).
void run_task(const uint32_t* a, int64_t a_ld, int64_t k, const BSource& b, int64_t j0, int64_t j1,
              int64_t r0, int64_t r1, float* c, int64_t ldc, const float* bias,
              const float* col_bias, const Activation& act, const float* residual,
              uint32_t* panels) {
  const bool in_tile = has_act16(act.kind);
  const int64_t words = (k + 1) / 2;
  for (int64_t g0 = j0; g0 < j1; g0 += kGroup * kNr) {
    const int64_t g1 = std::min(j1, g0 + kGroup * kNr);
    const int64_t strips = (g1 - g0 + kNr - 1) / kNr;
    for (int64_t p0 = 0; p0 < k; p0 += kKc) {
      const int64_t kc = std::min(kKc, k - p0), pairs = (kc + 1) / 2;
      for (int64_t s = 0; s < strips && !b.panels; ++s) {
        const int64_t j = g0 + s * kNr, width = std::min(kNr, g1 - j);
        pack_panel(b, p0, kc, j, width, static_cast<int>((width + kLanes - 1) / kLanes),
                   panels + s * (kKc / 2) * kNr);
      }
      for (int64_t rr = r0; rr < r1; rr += kMc)
        for (int64_t s = 0; s < strips; ++s) {
          const int64_t j = g0 + s * kNr, width = std::min(kNr, g1 - j);
          const int nv = static_cast<int>((width + kLanes - 1) / kLanes);
          const __mmask16 mask = lanes(width - (nv - 1) * kLanes);
          const uint32_t* bp = b.panels ? b.panels + ((j / kNr) * words + p0 / 2) * kNr
                                        : panels + s * (kKc / 2) * kNr;
          const int64_t b_stride = b.panels ? kNr : nv * kLanes;
          const float* cb = col_bias ? col_bias + j : nullptr;
          for (int64_t r = rr; r < std::min(r1, rr + kMc); r += kMr) {
            const int64_t rows = std::min(kMr, r1 - r);
            Finish finish;
            if (p0 + kc == k && in_tile)
              finish = {residual ? residual + r * ldc + j : nullptr, act};
            const uint32_t* ab = a + r * a_ld + p0 / 2;
            float* ct = c + r * ldc + j;
            const float* bt = bias ? bias + r : nullptr;
            if (nv == 1)
              tile<1>(rows, pairs, ab, a_ld, bp, b_stride, ct, ldc, mask, p0 == 0, bt, cb, finish);
            else if (nv == 2)
              tile<2>(rows, pairs, ab, a_ld, bp, b_stride, ct, ldc, mask, p0 == 0, bt, cb, finish);
            else
              tile<3>(rows, pairs, ab, a_ld, bp, b_stride, ct, ldc, mask, p0 == 0, bt, cb, finish);
          }
        }
    }
  }
  if (in_tile || (!residual && act.none())) return;
  for (int64_t r = r0; r < r1; ++r)
    act.apply_added(c + r * ldc + j0, residual ? residual + r * ldc + j0 : nullptr, j1 - j0);
}

// How C (m x n) is cut into tasks of whole tiles: column strips first, then row ranges while
// there are fewer than four tasks a thread.
struct Split {
  int64_t strips, row_blocks, col_tasks, row_tasks;
};
Split split(int64_t m, int64_t n, int64_t k, const ThreadPool& pool) {
  const int64_t strips = (n + kNr - 1) / kNr, row_blocks = (m + kMr - 1) / kMr;
  const int64_t want = m * n * k < pool.split_work() ? 1 : pool.threads() * 4;
  const int64_t col_tasks = std::min(strips, want);
  return {strips, row_blocks, col_tasks, std::min(row_blocks, (want + col_tasks - 1) / col_tasks)};
}

// C (m x n) split into tasks of whole tiles, claimed across the pool.

void run(const uint32_t* a, int64_t a_ld, int64_t m, int64_t k, const BSource& b, int64_t n,
         float* c, int64_t ldc, const float* bias, const float* col_bias, const Activation& act,
         const ThreadPool& pool, const float* residual) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C is the bias
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = (bias ? bias[i] : 0.f) + (col_bias ? col_bias[j] : 0.f);
      act.apply_added(c + i * ldc, residual ? residual + i * ldc : nullptr, n);
    }
    return;
  }
  // Plain variables, not a structured binding: clang 15 cannot capture one in the lambda.
  const Split cut = split(m, n, k, pool);
  const int64_t strips = cut.strips, row_blocks = cut.row_blocks;
  const int64_t col_tasks = cut.col_tasks, row_tasks = cut.row_tasks;
  auto work = [&](int64_t t) {
    uint32_t* panels = b.panels ? nullptr
                                : static_cast<uint32_t*>(thread_scratch_bytes(
                                      kPanelSlot, kGroup * (kKc / 2) * kNr * sizeof(uint32_t)));
    const int64_t ct = t % col_tasks, rt = t / col_tasks;
    const int64_t j0 = std::min(n, ct * strips / col_tasks * kNr);
    const int64_t j1 = std::min(n, (ct + 1) * strips / col_tasks * kNr);
    const int64_t r0 = std::min(m, rt * row_blocks / row_tasks * kMr);
    const int64_t r1 = std::min(m, (rt + 1) * row_blocks / row_tasks * kMr);
    if (j0 < j1 && r0 < r1)
      run_task(a, a_ld, k, b, j0, j1, r0, r1, c, ldc, bias, col_bias, act, residual, panels);
  };
  const int64_t tasks = col_tasks * row_tasks;
  if (tasks == 1)
    work(0);
  else
    pool.for_each_task(tasks, [&](int64_t t) { work(t); });
}

}  // namespace

bool available() {
  static const bool yes = [] {
    // QUILT_CPU_NO_BF16=1 makes a CPU that has it behave as one without (the refusal's tests).
    if (const char* hide = std::getenv("QUILT_CPU_NO_BF16"); hide && std::string(hide) == "1")
      return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
  }();
  return yes;
}

std::string precisions_description() {
  std::string s = "fp32";
  s += available() ? ", bf16 (AVX512-BF16 vdpbf16ps)"
                   : "; bf16 not accelerated (no AVX512-BF16: --precision bf16 is refused)";
  return s;
}

std::shared_ptr<uint32_t[]> pack_rows(const float* a, int64_t m, int64_t k, int64_t lda) {
  const int64_t words = (k + 1) / 2;
  auto out = aligned_words(m * words);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < words; ++p)
      out[i * words + p] = pair(a[i * lda + 2 * p], 2 * p + 1 < k ? a[i * lda + 2 * p + 1] : 0.f);
  return out;
}

std::shared_ptr<uint32_t[]> pack_panels(const float* b, int64_t k, int64_t n, int64_t ldb,
                                        bool transposed) {
  const int64_t words = (k + 1) / 2, strips = (n + kNr - 1) / kNr;
  auto out = aligned_words(strips * words * kNr);
  auto at = [&](int64_t p, int64_t j) -> float {
    if (p >= k || j >= n) return 0.f;
    return transposed ? b[j * ldb + p] : b[p * ldb + j];
  };
  for (int64_t s = 0; s < strips; ++s)
    for (int64_t p = 0; p < words; ++p)
      for (int64_t q = 0; q < kNr; ++q) {
        const int64_t j = s * kNr + q;
        out[(s * words + p) * kNr + q] = pair(at(2 * p, j), at(2 * p + 1, j));
      }
  return out;
}

void gemm_rows(const uint32_t* a, int64_t m, int64_t k, const float* b, const int64_t* offsets,
               int64_t ldb, int64_t n, float* c, int64_t ldc, const float* bias,
               const Activation& act, const ThreadPool& pool, const float* residual) {
  BSource src;
  src.base = b;
  src.offsets = offsets;
  src.ldb = ldb;
  // Few columns (a conv on a small map: 7x7 is 49) leave fewer strips than tasks, so tasks
  // split the rows too, and each of them converted the same strips of B: B is converted once
  // for the call instead, into panels that every task reads. ResNet-50's 2048 -> 512 1x1
  // conv on 7x7 took twice as long as in float32 (8 tasks converting 2048 x 49 each).
  if (const Split cut = split(m, n, k, pool); cut.row_tasks > 1 && k > 0 && n > 0) {
    const int64_t words = (k + 1) / 2, strips = cut.strips;
    constexpr int64_t kRowsPerPart = 256;  // depth rows per conversion task (even)
    const int64_t parts = (k + kRowsPerPart - 1) / kRowsPerPart;
    auto* panels = static_cast<uint32_t*>(
        thread_scratch_bytes(kRowsSlot, static_cast<size_t>(strips * words * kNr) * 4));
    pool.parallel_for(strips * parts, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t st = t / parts, p0 = t % parts * kRowsPerPart, j = st * kNr;
        pack_panel(src, p0, std::min(kRowsPerPart, k - p0), j, std::min(kNr, n - j),
                   static_cast<int>(kNr / kLanes), panels + (st * words + p0 / 2) * kNr);
      }
    });
    BSource packed;
    packed.panels = panels;
    return run(a, words, m, k, packed, n, c, ldc, bias, nullptr, act, pool, residual);
  }
  run(a, (k + 1) / 2, m, k, src, n, c, ldc, bias, nullptr, act, pool, residual);
}

void gemm_panels(const float* a, int64_t lda, bool trans_a, int64_t m, int64_t k, const uint32_t* b,
                 int64_t n, float* c, int64_t ldc, const float* col_bias, const Activation& act,
                 const ThreadPool& pool) {
  if (m == 0 || n == 0) return;
  const int64_t words = (k + 1) / 2;
  auto* rows = static_cast<uint32_t*>(
      thread_scratch_bytes(kRowsSlot, static_cast<size_t>(std::max<int64_t>(m * words, 1)) * 4));
  if (trans_a) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < words; ++p)
        rows[i * words + p] =
            pair(a[2 * p * lda + i], 2 * p + 1 < k ? a[(2 * p + 1) * lda + i] : 0.f);
  } else if (m * k < (int64_t{1} << 16)) {
    convert_rows(a, lda, k, 0, m, words, rows);
  } else {
    pool.parallel_for(
        m, 1, [&](int64_t r0, int64_t r1) { convert_rows(a, lda, k, r0, r1, words, rows); });
  }
  BSource src;
  src.panels = b;
  run(rows, words, m, k, src, n, c, ldc, nullptr, col_bias, act, pool, nullptr);
}

}  // namespace quilt::cpu::bf16
