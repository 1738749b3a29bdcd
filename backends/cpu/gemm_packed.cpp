#include "backends/cpu/gemm_packed.hpp"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "backends/cpu/aligned.hpp"
#include "backends/cpu/avx512.hpp"
#include "backends/cpu/gemm_avx2.hpp"
#include "backends/cpu/gemm_bf16.hpp"

namespace quilt::cpu {
namespace {

constexpr int64_t kMr = 8;           // rows of C per micro-tile
constexpr int64_t kLanes = 16;       // floats per AVX-512 vector
constexpr int64_t kNr = 3 * kLanes;  // columns of C per full micro-tile
constexpr int64_t kHalf = kNr / 2;   // columns of the AVX2 kernel's sub-tiles (gemm_avx2.hpp)
// Depth of one block: an A sliver of 8 rows is 24 KB, a packed B panel 144 KB. 256 (8 and
// 48 KB) measured 3-4 % slower on ResNet-50, FCN, Real-ESRGAN and BERT (C reloaded three times
// as often); 512 and 1024 were within noise of 768.
constexpr int64_t kKc = 768;

// The micro-kernel finishes a tile (Finish: the residual at the tile's own corner, the
// activation when act16 has it) in registers before it is stored. The other activations run in
// one pass over the finished task (run_tile_range): that pass, for HardSwish and SiLU, took 2-3 %
// of MobileNetV3 and YOLOv5s.

// The micro-kernel: a tile of `rows` (<= 8) x `nv` vectors of C from a packed A block
// (kc x 8) and a packed B panel (kc x nv*16). The last vector's columns are masked by `mask`.
// `first`: start from the bias (or 0) instead of C (the epilogue runs after the last block).
// B's rows are a packed panel (`b_stride` apart) or, with kRows, start at b + offsets[p]
// (unaligned; the last vector's load is masked too, so nothing past the columns is read).
//
// With kRawA, A is not packed: a is row-major with row stride a_ld (the tile's first row, depth
// p0), and rows past `rows` read the last row again (computed, never stored).
// kLive: the rows computed at all (>= rows). A one-row product (an MLP or a decoder at batch 1)
// computing all 8 did 8 times the multiply-adds it needed: 1 x 512 x 512 took 36 us, now ~5.
// kFull: B's rows read in place are whole vectors (mask is all ones): the masked load of the last
// one (and its mask, reloaded from the stack every step) cost YOLOv5s's 32x320x320 stride-2 conv
// 4 % (2.63-2.78 -> 2.52-2.65 ms alone, 2 threads, 6 alternating rounds).
//
// With narrow (NarrowCols), vector j of a row keeps the lanes narrow->keep[j] only, packed
// together (vcompressps) at c + narrow->at[j]; C and the residual are read back the same way
// (vexpandps).
struct NarrowTile {
  __mmask16 keep[3] = {};
  int64_t at[3] = {};  // where each vector's first kept lane goes, from the row's start
};

// A vector of C (or of the residual) as the tile holds it: its kept lanes, in place (narrow:
// expanded from their packed form).
__attribute__((target("avx512f"), always_inline)) inline __m512 load_kept(const float* p,
                                                                          __mmask16 packed,
                                                                          __mmask16 keep,
                                                                          bool narrow) {
  const __m512 v = _mm512_maskz_loadu_ps(packed, p);
  return narrow ? _mm512_maskz_expand_ps(keep, v) : v;
}

template <int NV, bool kRows, bool kRawA = false, int kLive = kMr, bool kFull = false>
__attribute__((target("avx512f,prfchw"))) void micro_kernel(
    int64_t kc, const float* a, const float* b, int64_t b_stride, const int64_t* offsets, float* c,
    int64_t ldc, int64_t rows, __mmask16 mask, bool first, const float* bias, const float* col_bias,
    const Finish& finish, int64_t a_ld = 0, const NarrowTile* narrow = nullptr) {
  const float* arow[kLive];
  if constexpr (kRawA)
    for (int i = 0; i < kLive; ++i) arow[i] = a + std::min<int64_t>(i, rows - 1) * a_ld;
  int64_t at[NV];  // C's (and the residual's) offset of each vector in a row
  __mmask16 keep[NV], packed[NV];
  for (int j = 0; j < NV; ++j) {
    at[j] = narrow ? narrow->at[j] : j * kLanes;
    keep[j] = narrow ? narrow->keep[j] : j == NV - 1 ? mask : __mmask16(0xffff);
    packed[j] = narrow ? static_cast<__mmask16>((1u << __builtin_popcount(keep[j])) - 1) : keep[j];
  }
  // The tile's residual and C lines are fetched while the products run: in a model both
  // are usually out of cache (8 rows a map apart), and the stores and residual loads at the end
  // otherwise wait on memory.
  if (finish.residual || first)
    for (int64_t i = 0; i < rows; ++i)
      for (int j = 0; j < NV; ++j) {
        if (finish.residual) _mm_prefetch(finish.residual + i * ldc + at[j], _MM_HINT_T0);
        if (first) __builtin_prefetch(c + i * ldc + at[j], 1, 3);  // prefetchw
        // A narrow vector is not aligned: its end is often on the next line. Fetching only
        // the first, ResNet-50's stem took 0.84 ms in the model, 0.76 through the wide copy and
        // 0.65 now (C had left the caches since the last run; half of each store waited).
        if (narrow && first) __builtin_prefetch(c + i * ldc + at[j] + kLanes - 1, 1, 3);
      }
  __m512 acc[kLive][NV];
#pragma GCC unroll 8
  for (int i = 0; i < kLive; ++i) {
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j) {
      if (first) {
        acc[i][j] = bias && i < rows ? _mm512_set1_ps(bias[i]) : _mm512_setzero_ps();
        if (col_bias) {
          const __mmask16 m = j == NV - 1 ? mask : __mmask16(0xffff);
          acc[i][j] = _mm512_add_ps(acc[i][j], _mm512_maskz_loadu_ps(m, col_bias + j * kLanes));
        }
      } else if (i < rows) {
        acc[i][j] = load_kept(c + i * ldc + at[j], packed[j], keep[j], narrow);
      } else {
        acc[i][j] = _mm512_setzero_ps();
      }
    }
  }
  for (int64_t p = 0; p < kc; ++p) {
    __m512 bv[NV];
    if constexpr (kRows) {
      const float* row = b + offsets[p];
#pragma GCC unroll 3
      for (int j = 0; j < NV; ++j)
        bv[j] = j == NV - 1 && !kFull ? _mm512_maskz_loadu_ps(mask, row + j * kLanes)
                                      : _mm512_loadu_ps(row + j * kLanes);
    } else {
#pragma GCC unroll 3
      for (int j = 0; j < NV; ++j) bv[j] = _mm512_load_ps(b + p * b_stride + j * kLanes);
    }
#pragma GCC unroll 8
    for (int i = 0; i < kLive; ++i) {
      const __m512 av = _mm512_set1_ps(kRawA ? arow[i][p] : a[p * kMr + i]);
#pragma GCC unroll 3
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kLive; ++i) {
    if (i >= rows) break;
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j) {
      __m512 v = acc[i][j];
      if (finish.residual)
        v = _mm512_add_ps(v,
                          load_kept(finish.residual + i * ldc + at[j], packed[j], keep[j], narrow));
      if (!finish.act.none())
        v = act16(finish.act.kind, v, _mm512_set1_ps(finish.act.alpha),
                  _mm512_set1_ps(finish.act.beta));
      if (narrow) v = _mm512_maskz_compress_ps(keep[j], v);
      _mm512_mask_storeu_ps(c + i * ldc + at[j], packed[j], v);
    }
  }
}

// The raw-A micro-kernel computing as few rows as cover `rows`: 1, 2, 4 or all 8.
template <int NV>
void raw_a_tile(int64_t rows, int64_t kc, const float* a, const float* b, int64_t b_stride,
                float* c, int64_t ldc, __mmask16 mask, bool first, const float* bias,
                const float* col_bias, const Finish& finish, int64_t a_ld) {
  if (rows == 1)
    micro_kernel<NV, false, true, 1>(kc, a, b, b_stride, nullptr, c, ldc, rows, mask, first, bias,
                                     col_bias, finish, a_ld);
  else if (rows == 2)
    micro_kernel<NV, false, true, 2>(kc, a, b, b_stride, nullptr, c, ldc, rows, mask, first, bias,
                                     col_bias, finish, a_ld);
  else if (rows <= 4)
    micro_kernel<NV, false, true, 4>(kc, a, b, b_stride, nullptr, c, ldc, rows, mask, first, bias,
                                     col_bias, finish, a_ld);
  else
    micro_kernel<NV, false, true>(kc, a, b, b_stride, nullptr, c, ldc, rows, mask, first, bias,
                                  col_bias, finish, a_ld);
}

// Copies rows [p0, p0 + kc) x columns [j0, j0 + width) of B into a panel of kc x (nv * 16),
// zero-padding columns past width. Row p of B is at b + p * ldb, or b + offsets[p].
__attribute__((target("avx512f"))) void pack_b(const float* b, int64_t ldb, const int64_t* offsets,
                                               int64_t p0, int64_t kc, int64_t j0, int64_t width,
                                               int nv, float* panel) {
  const int64_t stride = nv * kLanes;
  for (int64_t p = 0; p < kc; ++p) {
    const float* src = b + (offsets ? offsets[p0 + p] : (p0 + p) * ldb) + j0;
    float* dst = panel + p * stride;
    for (int v = 0; v < nv; ++v) {
      const int64_t left = width - v * kLanes;
      const __mmask16 m = left >= kLanes ? __mmask16(0xffff)
                          : left <= 0    ? __mmask16(0)
                                         : static_cast<__mmask16>((1u << left) - 1);
      _mm512_store_ps(dst + v * kLanes, _mm512_maskz_loadu_ps(m, src + v * kLanes));
    }
  }
}

// Where B comes from: a raw row-major matrix packed panel by panel as it is read, or panels
// packed ahead ([strip][k][48], zero-padded).
struct BSource {
  const float* raw = nullptr;
  int64_t ldb = 0;
  const int64_t* raw_offsets = nullptr;  // instead of ldb: row p of raw at raw + raw_offsets[p]
  const float* packed = nullptr;
  const BRows* rows = nullptr;
  bool packs() const { return !packed && !rows; }
  // > 0: A is not packed but row-major with this row stride (B packed ahead only).
  int64_t raw_a_ld = 0;
  const NarrowCols* narrow = nullptr;  // with rows only
  // With rows only: fetch the next strip's rows ahead (run_strip_group), worth it when B is too
  // large to be in cache already.
  bool fetch_next = false;
};

// Which lanes of each vector of the tile at product column j (width columns wide) a NarrowCols
// product keeps, and where they go (stride >= 16: a vector crosses one row end at most).
NarrowTile narrow_tile(const NarrowCols& nc, int64_t j, int64_t width) {
  NarrowTile t;
  const auto lanes = [](int64_t lo, int64_t hi) {  // the lanes [lo, hi) of [0, 16)
    lo = std::clamp<int64_t>(lo, 0, kLanes);
    hi = std::clamp<int64_t>(hi, 0, kLanes);
    return lo < hi ? static_cast<__mmask16>(((1u << (hi - lo)) - 1) << lo) : __mmask16(0);
  };
  for (int64_t v = 0; v * kLanes < width && v < 3; ++v) {
    const int64_t q = j + v * kLanes, row = q / nc.stride, col = q % nc.stride;
    const int64_t next = nc.stride - col;  // the lane where the next row starts
    t.keep[v] = static_cast<__mmask16>((lanes(0, nc.width - col) | lanes(next, next + nc.width)) &
                                       lanes(0, width - v * kLanes));
    t.at[v] = col < nc.width ? row * nc.width + col : (row + 1) * nc.width;
  }
  return t;
}

constexpr int64_t kGroup = 4;  // B panels packed ahead per depth block (4 x 144 KB)
constexpr int64_t kMc = 64;    // rows of A per block that stays in L2 while the panels pass

void run_strip_group(const float* packed_a, int64_t k, const BSource& b, int64_t j0, int64_t j1,
                     int64_t r0, int64_t r1, float* c, int64_t ldc, const float* bias,
                     const float* col_bias, const float* residual, const Activation& act,
                     float* panels, int64_t jend);  // jend: the task's last column

// One task: columns [j0, j1) of C (j0 a multiple of 48), rows [r0, r1) (r0 a multiple of 8).
// For each depth block, the task's B panels are packed first (`panels`: kKc x 48 each), then
// rows are taken kMc at a time across all the panels, so that block of A (kMc x kKc, 192 KB)
// stays in L2 while every panel passes it. Streaming a strip at a time instead re-read all of A
// per 48 columns: FCN's 2048 -> 512 3x3 head (A = 38 MB) ran at 263 GFLOP/s against ~390 for
// its other convs.
void run_tile_range(const float* packed_a, int64_t k, const BSource& b, int64_t j0, int64_t j1,
                    int64_t r0, int64_t r1, float* c, int64_t ldc, const float* bias,
                    const float* col_bias, const Activation& act, const float* residual,
                    float* panels) {
  // The activations of act16, with or without a residual, finish in the micro-kernel's
  // registers; on the AVX2 kernel every activation and the residual run over each strip's
  // block of rows just stored, while it is in L1 (run_strip_group). Otherwise (AVX-512, the
  // other kinds) a pass over the task's rows follows, which reads a task's C from L2 or L3
  // again when it is large (YOLOv5s's 64 -> 64 1x1 on 160x160: 819 KB a task at 2 threads).
  // Measured alone (one thread, AMD EPYC Zen 3) the strip pass was within noise of the task
  // pass: ResNet-50-shaped 3x3 and 1x1 convs with Relu, YOLOv5s-shaped ones with SiLU.
  const bool in_tile = k > 0 && (!has_avx512f() || has_act16(act.kind));
  for (int64_t g0 = j0; g0 < j1; g0 += kGroup * kNr)
    run_strip_group(packed_a, k, b, g0, std::min(j1, g0 + kGroup * kNr), r0, r1, c, ldc, bias,
                    col_bias, in_tile ? residual : nullptr, in_tile ? act : Activation{}, panels,
                    j1);
  if (in_tile) return;
  const int64_t width = j1 - j0;
  const float* cb = col_bias ? col_bias + j0 : nullptr;
  if (k == 0)  // no depth: C is the bias
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t q = 0; q < width; ++q)
        c[r * ldc + j0 + q] = (bias ? bias[r] : 0.f) + (cb ? cb[q] : 0.f);
  if (residual || !act.none())
    for (int64_t r = r0; r < r1; ++r)
      act.apply_added(c + r * ldc + j0, residual ? residual + r * ldc + j0 : nullptr, width);
}

void run_strip_group(const float* packed_a, int64_t k, const BSource& b, int64_t j0, int64_t j1,
                     int64_t r0, int64_t r1, float* c, int64_t ldc, const float* bias,
                     const float* col_bias, const float* residual, const Activation& act,
                     float* panels, int64_t jend) {
  const int64_t strips = (j1 - j0 + kNr - 1) / kNr;
  for (int64_t p0 = 0; p0 < k; p0 += kKc) {
    const int64_t kc = std::min(kKc, k - p0);
    for (int64_t s = 0; s < strips && b.packs(); ++s) {
      const int64_t j = j0 + s * kNr, width = std::min(kNr, j1 - j);
      const int nv = static_cast<int>((width + kLanes - 1) / kLanes);
      if (has_avx512f())
        pack_b(b.raw, b.ldb, b.raw_offsets, p0, kc, j, width, nv, panels + s * kKc * kNr);
      else
        avx2::pack_panel(b.raw, b.ldb, b.raw_offsets, p0, kc, j, width, panels + s * kKc * kNr);
    }
    for (int64_t rr = r0; rr < r1; rr += kMc)
      for (int64_t s = 0; s < strips; ++s) {
        const int64_t j = j0 + s * kNr, width = std::min(kNr, j1 - j);
        // B read in place with a shallow depth (pointwise convs on large maps): while the first
        // row tiles pass this strip, the next strip's rows are fetched into L1. Those are kc
        // rows a map apart, more streams than the hardware's prefetchers follow (with C's rows
        // as many again), and in a model they come from L3 or memory. Per node in the model, 2
        // threads, alternating: YOLOv5s's 32 -> 32 and 64 -> 32 on 160x160 0.35-0.61 ->
        // 0.27-0.44 ms, 64 -> 64 0.70-0.91 -> 0.67-0.74; MobileNetV3's 16 -> 16 on 112x112 75 ->
        // 55-62 us, 64 -> 24 on 56x56 48 -> 38. Deeper products (more than 32 KB of rows) were
        // 3-4 % slower with it (YOLOv5s's 3x3 convs on 80x80 and 40x40: L1 overrun).
        PrefetchRanges ahead;
        if (b.fetch_next && rr == r0 && j + kNr < jend &&
            kc * (kNr + kLanes) * int64_t{sizeof(float)} <= (int64_t{32} << 10)) {
          const int64_t tiles = (std::min(kMc, r1 - rr) + kMr - 1) / kMr;
          ahead.base = reinterpret_cast<const char*>(b.rows->base + j + kNr);
          ahead.offsets = b.rows->offsets + p0;
          ahead.count = kc;
          ahead.bytes = std::min(kNr, jend - j - kNr) * int64_t{sizeof(float)};
          ahead.l1 = true;
          ahead.per_tile = (kc * (ahead.bytes / 64 + 2) + tiles - 1) / tiles;
        }
        const int nv = static_cast<int>((width + kLanes - 1) / kLanes);
        const int64_t tail = width - (nv - 1) * kLanes;
        const __mmask16 mask = static_cast<__mmask16>(tail >= kLanes ? 0xffff : (1u << tail) - 1);
        const float* cb = col_bias ? col_bias + j : nullptr;
        const float* bp = b.rows     ? b.rows->base + j
                          : b.packed ? b.packed + (j / kNr) * k * kNr + p0 * kNr
                                     : panels + s * kKc * kNr;
        const int64_t b_stride = b.packed ? kNr : nv * kLanes;
        const int64_t* offsets = b.rows ? b.rows->offsets + p0 : nullptr;
        const NarrowTile narrow = b.narrow ? narrow_tile(*b.narrow, j, width) : NarrowTile{};
        if (!has_avx512f()) {  // the AVX2 kernel: the block's rows at once (gemm_avx2.hpp)
          for (int64_t r = rr; r < std::min(r1, rr + kMc); r += kMr) {
            if (b.rows && b.rows->prefetch) b.rows->prefetch->issue();
            ahead.issue();
          }
          const float* ab = b.raw_a_ld ? packed_a + rr * b.raw_a_ld + p0
                                       : packed_a + (rr / kMr) * k * kMr + p0 * kMr;
          // B in halves of 24 columns (avx2::packed_b_index, avx2::pack_panel).
          const float* bh = b.rows     ? bp
                            : b.packed ? b.packed + (j / kNr) * k * kNr + p0 * kHalf
                                       : panels + s * kKc * kNr;
          const int64_t half_step = b.rows ? kHalf : b.packed ? k * kHalf : kc * kHalf;
          const int64_t rows = std::min(r1, rr + kMc) - rr;
          avx2::tiles(kc, ab, b.raw_a_ld, k * kMr, bh, kHalf, half_step, offsets, c + rr * ldc + j,
                      ldc, rows, width, p0 == 0, bias ? bias + rr : nullptr, cb);
          if (p0 + kc == k && (residual || !act.none()))
            act.apply_added_rows(c + rr * ldc + j, ldc,
                                 residual ? residual + rr * ldc + j : nullptr, rows, width);
          continue;
        }
        for (int64_t r = rr; r < std::min(r1, rr + kMc); r += kMr) {
          const float* ab = b.raw_a_ld ? packed_a + r * b.raw_a_ld + p0
                                       : packed_a + (r / kMr) * k * kMr + p0 * kMr;
          // Narrow: C's and the residual's rows start at their map's start (narrow.at).
          const int64_t cj = b.narrow ? 0 : j;
          float* ct = c + r * ldc + cj;
          const int64_t rows = std::min(kMr, r1 - r);
          const float* bt = bias ? bias + r : nullptr;
          const bool first = p0 == 0;
          Finish finish;
          if (p0 + kc == k) finish = {residual ? residual + r * ldc + cj : nullptr, act};
          auto tile = [&]<int NV>() {
            if (b.rows && mask == 0xffff)  // a full strip: no masked load of B
              micro_kernel<NV, true, false, kMr, true>(kc, ab, bp, 0, offsets, ct, ldc, rows, mask,
                                                       first, bt, cb, finish, 0,
                                                       b.narrow ? &narrow : nullptr);
            else if (b.rows)
              micro_kernel<NV, true>(kc, ab, bp, 0, offsets, ct, ldc, rows, mask, first, bt, cb,
                                     finish, 0, b.narrow ? &narrow : nullptr);
            else if (b.raw_a_ld)
              raw_a_tile<NV>(rows, kc, ab, bp, b_stride, ct, ldc, mask, first, bt, cb, finish,
                             b.raw_a_ld);
            else
              micro_kernel<NV, false>(kc, ab, bp, b_stride, nullptr, ct, ldc, rows, mask, first, bt,
                                      cb, finish);
          };
          if (b.rows && b.rows->prefetch) b.rows->prefetch->issue();
          ahead.issue();
          if (nv == 1)
            tile.template operator()<1>();
          else if (nv == 2)
            tile.template operator()<2>();
          else
            tile.template operator()<3>();
        }
      }
  }
}

// Packs rows [0, m) of a (row stride lda, or column stride lda when transposed) into
// [ceil(m / h)][k][h] at out, blocks [blk0, blk1), rows past m zero: h = 8 for the micro-kernel,
// 64 for gemm_channels.
void pack_a_blocks(const float* a, int64_t m, int64_t k, int64_t lda, bool transposed, int64_t blk0,
                   int64_t blk1, float* out, int64_t h = kMr) {
  for (int64_t blk = blk0; blk < blk1; ++blk)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t i = 0; i < h; ++i) {
        const int64_t row = blk * h + i;
        out[(blk * k + p) * h + i] =
            row < m ? (transposed ? a[p * lda + row] : a[row * lda + p]) : 0.f;
      }
}

// Packs A (m x k, or k x m when transposed) for one call into a buffer of the calling thread,
// across the pool when it is large, and returns it (64-byte aligned).
float* pack_a_for_call(const float* a, int64_t m, int64_t k, int64_t lda, bool transposed,
                       const ThreadPool& pool) {
  const int64_t blocks = (m + kMr - 1) / kMr;
  float* pa = thread_scratch(3, blocks * k * kMr);  // 64-byte aligned
  if (blocks * k * kMr < (int64_t{1} << 16))
    pack_a_blocks(a, m, k, lda, transposed, 0, blocks, pa);
  else
    pool.parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      pack_a_blocks(a, m, k, lda, transposed, b0, b1, pa);
    });
  return pa;
}

// Splits C (m x n) into tasks of whole micro-tiles and runs them across the pool.
void run_tiles(const float* packed_a, int64_t m, int64_t k, const BSource& b, int64_t n, float* c,
               int64_t ldc, const float* bias, const float* col_bias, const Activation& act,
               const ThreadPool& pool, const float* residual = nullptr) {
  // About four tasks per thread, claimed dynamically, so uneven tiles even out (7x7 maps have
  // 49 columns: a 48-wide strip and a 1-wide one). Column strips first; rows too when there are
  // fewer strips than tasks. Products under ThreadPool::split_work() multiply-adds (64K when the
  // workers are awake, 1M when one must be woken) run on the calling thread.
  const int64_t strips = (n + kNr - 1) / kNr;
  const int64_t row_blocks = (m + kMr - 1) / kMr;
  const int64_t macs = m * n * std::max<int64_t>(k, 1);
  const int64_t want = macs < pool.split_work() ? 1 : pool.threads() * 4;
  int64_t col_tasks = std::min(strips, want);
  // When B is read in place, a task costs no packing and the split may go by rows instead:
  // - C's rows are not whole cache lines (ldc not a multiple of 16: 14x14 maps are 196
  //   floats): threads writing neighbouring strips share a line at every strip edge, and C is
  //   loaded and stored once per depth block;
  // - A is larger than L2 (1 MB): in a model the weights come from memory on every run, and
  //   every column task would read all of them again. FCN's 2048 -> 512 3x3 head (A = 38 MB)
  //   took 38 ms split by columns, 33 by rows; ResNet-50's 512-channel 3x3 convs on 7x7 maps
  //   (A = 9.4 MB, two column strips) 1.4 -> 1.0 ms in the model.
  // Otherwise columns: a task's strip of B stays in L1 across all its rows (a 3x3 stride-2
  // conv on 28x28, A in cache, measured 0.76 ms by columns, 0.83 by rows).
  const bool by_rows = b.rows && row_blocks >= 4 * pool.threads() &&
                       (ldc % kLanes != 0 || m * k > (int64_t{1} << 18));
  if (by_rows) col_tasks = 1;
  const int64_t row_tasks = std::min(row_blocks, (want + col_tasks - 1) / col_tasks);
  const int64_t tasks = col_tasks * row_tasks;
  const int64_t strips_per_task = (strips + col_tasks - 1) / col_tasks;
  auto work = [&](int64_t t0, int64_t t1) {
    const int64_t group = std::min(strips_per_task, kGroup);
    float* panel = thread_scratch(4, kKc * kNr * group);
    for (int64_t t = t0; t < t1; ++t) {
      // Strips and row blocks dealt evenly (task sizes differ by one at most): rounding every
      // task up to the same count left the last one short, and a thread idle at the end
      // (ResNet-50's 56x56 3x3 convs: 68 strips in tasks of 9 and one of 5).
      const int64_t ct = t % col_tasks, rt = t / col_tasks;
      const int64_t j0 = std::min(n, ct * strips / col_tasks * kNr);
      const int64_t j1 = std::min(n, (ct + 1) * strips / col_tasks * kNr);
      const int64_t r0 = std::min(m, rt * row_blocks / row_tasks * kMr);
      const int64_t r1 = std::min(m, (rt + 1) * row_blocks / row_tasks * kMr);
      if (j0 < j1 && r0 < r1)
        run_tile_range(packed_a, k, b, j0, j1, r0, r1, c, ldc, bias, col_bias, act, residual,
                       panel);
    }
  };
  if (tasks == 1) {
    work(0, 1);
    return;
  }
  // Each thread claims the next task as it finishes one, from its own range first. Handing
  // out fixed chunks instead (parallel_for's ranges) gave one thread 3 of 5 chunks on
  // ResNet-50's 14x14 3x3 convs (10 tasks in chunks of 2), and a late-waking worker's chunks
  // waited for it.
  pool.for_each_task(tasks, [&](int64_t t) { work(t, t + 1); });
}

}  // namespace

int64_t gemm_packed_tiles(int64_t m, int64_t n, int64_t k) {
  return (m + kMr - 1) / kMr * ((n + kNr - 1) / kNr) * std::max<int64_t>(1, (k + kKc - 1) / kKc);
}

// One line toward L1 (or L2).
static void prefetch_line(const char* line, bool l1) {
  if (l1)
    _mm_prefetch(line, _MM_HINT_T0);
  else
    _mm_prefetch(line, _MM_HINT_T1);
}

void PrefetchRanges::issue() {
  for (int64_t i = 0; i < per_tile && range < count; ++i) {
    const char* start = base + (offsets ? offsets[range] * int64_t{sizeof(float)} : range * stride);
    // Whole lines from the one holding the range's first byte to the one holding its last.
    const auto first = reinterpret_cast<uintptr_t>(start) & ~uintptr_t{63};
    const auto line = reinterpret_cast<const char*>(first + static_cast<uintptr_t>(offset));
    prefetch_line(line, l1);
    offset += 64;
    if (line + 64 >= start + bytes) {
      offset = 0;
      ++range;
    }
  }
}

void prefetch_lines(const void* p, int64_t bytes, bool l1) {
  const auto* c = static_cast<const char*>(p);
  const auto first = reinterpret_cast<uintptr_t>(c) & ~uintptr_t{63};
  for (auto line = reinterpret_cast<const char*>(first); line < c + bytes; line += 64)
    prefetch_line(line, l1);
}

// AVX2 and FMA are the build's baseline (-march=x86-64-v3): every CPU Quilt runs on has one of
// the two micro-kernels (has_avx512f() picks), so A and B are always packed.

PackedA::PackedA(const float* a, int64_t m, int64_t k, int64_t lda, bool bf16) : m_(m), k_(k) {
  if (bf16) {
    bf16_ = bf16::pack_rows(a, m, k, lda);
    return;
  }
  const int64_t blocks = (m + kMr - 1) / kMr;
  data_ = aligned_array<float>(blocks * k * kMr);
  pack_a_blocks(a, m, k, lda, false, 0, blocks, data_.get());
}

PackedAChannels::PackedAChannels(const float* a, int64_t m, int64_t k, int64_t lda) : m_(m), k_(k) {
  const int64_t blocks = (m + kRows - 1) / kRows;
  data_ = aligned_array<float>(blocks * k * kRows);
  pack_a_blocks(a, m, k, lda, false, 0, blocks, data_.get(), kRows);
}

PackedB::PackedB(const float* b, int64_t k, int64_t n, int64_t ldb, bool transposed, bool bf16)
    : k_(k), n_(n) {
  if (bf16) {
    bf16_ = bf16::pack_panels(b, k, n, ldb, transposed);
    return;
  }
  const int64_t strips = (n + kNr - 1) / kNr;
  data_ = aligned_array<float>(strips * k * kNr);
  float* out = data_.get();
  const bool halves = !has_avx512f();  // the AVX2 kernel's layout
  for (int64_t s = 0; s < strips; ++s)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t q = 0; q < kNr; ++q) {
        const int64_t j = s * kNr + q;
        const int64_t at = s * k * kNr + (halves ? avx2::packed_b_index(k, p, q) : p * kNr + q);
        out[at] = j < n ? (transposed ? b[j * ldb + p] : b[p * ldb + j]) : 0.f;
      }
}

void gemm_packed(const PackedA& a, const float* b, int64_t ldb, int64_t n, float* c, int64_t ldc,
                 const float* bias, const Activation& act, const ThreadPool& pool) {
  const int64_t m = a.rows(), k = a.depth();
  if (m == 0 || n == 0) return;
  if (a.bf16_)
    return bf16::gemm_rows(a.bf16_.get(), m, k, b, nullptr, ldb, n, c, ldc, bias, act, pool);
  BSource src;
  src.raw = b;
  src.ldb = ldb;
  run_tiles(a.data_.get(), m, k, src, n, c, ldc, bias, nullptr, act, pool);
}

// Whether the rows of B, read in place, would evict each other from L1 as a strip passes: the
// 48 columns of each of the first depth block's rows, counted by the L1 set (64 sets of 64-byte
// lines, 4 KiB a way) of each line. Planes a multiple of 4 KiB apart put every row on the same
// few sets: a pointwise conv reading YOLOv5s's 160x160 maps (100 KiB planes) in place, whose
// 64 rows share 3-4 sets of 8 ways, ran 64 -> 64 alone at 3.37 ms, against 1.89 on 160x161
// (AMD EPYC Zen 3, 2 threads). Packed first, a strip is contiguous. Colliding means a set
// holding more lines than a way's worth (8) and over twice the average: a product whose rows
// merely outgrow L1 (256 rows of 40x40) spreads evenly, and packing would not help it. Nor when
// the packed strip would not fit in L1 either (more than 128 rows: 24 KB): YOLOv5s's 256 -> 64
// on 80x80 (plane 25 KB, 4 KiB-aligned rows every 4th) took 3.97 ms packed against 3.38 in place
// (one thread, SiLU).
bool rows_collide(const float* base, const int64_t* offsets, int64_t k) {
  constexpr uintptr_t kSets = 64, kLine = 64;
  if (k * kNr * int64_t{sizeof(float)} > (int64_t{24} << 10)) return false;
  std::array<int64_t, kSets> per_set{};
  int64_t lines = 0;
  // Rows a column apart (a conv over shifted rows) share lines: a line the previous row already
  // counted is not counted again (rows come in increasing order).
  uintptr_t counted = 0;  // one past the last line counted
  for (int64_t p = 0; p < std::min(k, kKc); ++p) {
    const auto first = reinterpret_cast<uintptr_t>(base + offsets[p]);
    const uintptr_t end = (first + kNr * sizeof(float) - 1) / kLine + 1;
    for (uintptr_t l = std::max(first / kLine, counted); l < end; ++l, ++lines)
      ++per_set[l % kSets];
    counted = std::max(counted, end);
  }
  const int64_t most = *std::max_element(per_set.begin(), per_set.end());
  return most > 8 && most * static_cast<int64_t>(kSets) > 2 * lines;
}

bool PackedA::narrow_ok(const Activation& act) const {
  return data_ && k_ > 0 && has_act16(act.kind) && has_avx512f();
}

void gemm_packed(const PackedA& a, const BRows& b, int64_t n, float* c, int64_t ldc,
                 const float* bias, const Activation& act, const ThreadPool& pool,
                 const float* residual, const NarrowCols* narrow) {
  const int64_t m = a.rows(), k = a.depth();
  if (m == 0 || n == 0) return;
  if (narrow && (!a.narrow_ok(act) || narrow->stride < kLanes || narrow->width > narrow->stride))
    throw std::logic_error("gemm_packed: a narrow product on a path without one");
  if (a.bf16_)
    return bf16::gemm_rows(a.bf16_.get(), m, k, b.base, b.offsets, 0, n, c, ldc, bias, act, pool,
                           residual);
  BSource src;
  if (!narrow && !b.prefetch && !has_avx512f() && rows_collide(b.base, b.offsets, k)) {
    // Packed per strip, as a raw B is: read in place, the strip's rows would evict each other.
    // (The AVX2 kernel only, where it was measured; the AVX-512 one fetches a strip's rows
    // ahead instead, fetch_next below.)
    src.raw = b.base;
    src.raw_offsets = b.offsets;
    run_tiles(a.data_.get(), m, k, src, n, c, ldc, bias, nullptr, act, pool, residual);
    return;
  }
  src.rows = &b;
  src.narrow = narrow;
  // From 512 KB of B: the keyword spotter's 64 -> 64 on 25x5 (32 KB, in cache) was 4-6 % slower
  // at 2 threads with the fetch (0.0268-0.0276 -> 0.0283-0.0286 ms). And not when rows overlap
  // (a conv over shifted rows with few input channels: rows a column apart, the same lines
  // fetched again for each): issuing them took 11 % of YOLOv5s's 3 -> 32 6x6 stride-2 stem
  // alone (perf). Per node in the model (2 threads, 4 alternating rounds): that stem 2.31-2.59
  // -> 2.09-2.30 ms; EfficientNet-B0's 3 -> 32 3x3 stride-2 one 135-160 against 131-159 us.
  // Fetching each overlapping line once instead measured between the two (2.27-2.35 ms).
  src.fetch_next =
      !b.prefetch && b.min_gap >= kNr && k * n * int64_t{sizeof(float)} >= (int64_t{512} << 10);
  run_tiles(a.data_.get(), m, k, src, n, c, ldc, bias, nullptr, act, pool, residual);
}

void gemm_raw(const float* a, int64_t lda, int64_t m, int64_t k, const float* b, int64_t ldb,
              int64_t n, float* c, int64_t ldc, const Activation& act, const ThreadPool& pool) {
  if (m == 0 || n == 0) return;
  float* pa = pack_a_for_call(a, m, k, lda, false, pool);
  BSource src;
  src.raw = b;
  src.ldb = ldb;
  run_tiles(pa, m, k, src, n, c, ldc, nullptr, nullptr, act, pool);
}

void gemm_packed_b(const float* a, int64_t lda, bool trans_a, int64_t m, const PackedB& b, float* c,
                   int64_t ldc, const float* col_bias, const Activation& act,
                   const ThreadPool& pool) {
  const int64_t k = b.depth(), n = b.cols();
  if (m == 0 || n == 0) return;
  if (b.bf16_)
    return bf16::gemm_panels(a, lda, trans_a, m, k, b.bf16_.get(), n, c, ldc, col_bias, act, pool);
  BSource src;
  src.packed = b.data_.get();
  if (!trans_a) {
    // The micro-kernel broadcasts A's values from its rows where they are. Packing A (the
    // activations) on every call first cost a pass that wrote all of it: MatMul 197 x 768 x 768
    // 0.528 -> 0.461 ms, 197 x 3072 x 768 2.18 -> 1.84 ms at 2 threads.
    src.raw_a_ld = lda;
    return run_tiles(a, m, k, src, n, c, ldc, nullptr, col_bias, act, pool);
  }
  // A stored transposed: packed once per call and shared by every task.
  float* pa = pack_a_for_call(a, m, k, lda, trans_a, pool);
  run_tiles(pa, m, k, src, n, c, ldc, nullptr, col_bias, act, pool);
}

}  // namespace quilt::cpu
