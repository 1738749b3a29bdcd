// The product over few columns (convolutions on small maps), with A's rows along the vectors.
//
// gemm_packed's micro-kernel holds 48 columns of C in each row of its tile; a 7x7 map has 49,
// so every tile row is a 48-wide strip plus a 1-wide one that costs a third of a strip: three
// quarters of the multiply-adds do useful work, and ResNet-50's 7x7 1x1 convs ran at 130
// GFLOP/s on one thread against ONNX Runtime's 220. Here a tile is 64 output channels (four
// vectors) x up to 7 output pixels of one output row, each pixel's input value broadcast: no lane
// is wasted when the channel count is a multiple of 64, whatever the map's width, and the
// pixels are read in place at their positions in B, so a padded conv's product needs no wide
// buffer and no compaction.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/avx512.hpp"
#include "backends/cpu/gemm_avx2.hpp"
#include "backends/cpu/gemm_packed.hpp"

namespace quilt::cpu {
namespace {

constexpr int64_t kLanes = 16;
constexpr int64_t kRows = PackedAChannels::kRows;  // output channels per tile: 4 vectors
constexpr int64_t kPixels = 7;                     // output pixels per tile, at most
// Depth of one pass over the task's tiles. A chunk of A (64 rows of 64 channels, 16 KB) is
// fetched from memory once, and every tile of the task uses it while it is in L1; the tiles
// after the first fetch the next chunk meanwhile, a line of each of its rows apiece.
//
// Each tile multiplies 7 pixels per load of A, too few to hide memory. Before, each tile ran
// 1024 rows deep, and the first tile of each block waited on memory for all 256 KB of its A.
// In the model, ResNet-50's 7x7 convs reached 167-205 GFLOP/s on one thread, against 250 alone.
// Measured at 2 threads, alternating, against 1024-deep blocks:
//   - ResNet-50: 20.1 -> 19.4 ms;
//   - DeepLabV3: 6.73 -> 6.51 ms;
//   - FCN: within noise.
// Chunks of 128 or 256 were between the two. Without the prefetch, chunks of 64 were slower
// than blocks of 1024 (ResNet-50 20.9 ms). Chunks of 32 were slower than 64.
constexpr int64_t kChunk = 64;

// acc (NP x 64, pixel-major) = (first ? bias : acc) + sum over p < kc of a[p][:] * b[p][j],
// where a[p] is the 64 floats at a + p * a_stride and b[p][j] = b[offsets[p] + j]. When `next`
// is set, the line at next + p * a_stride is prefetched for each p as well.
template <int NP>
__attribute__((target("avx512f"))) void channel_tile(int64_t kc, const float* a, int64_t a_stride,
                                                     const float* b, const int64_t* offsets,
                                                     float* acc_out, bool first, const float* bias,
                                                     const float* next) {
  __m512 acc[NP][4];
#pragma GCC unroll 7
  for (int j = 0; j < NP; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v)
      acc[j][v] = first ? (bias ? _mm512_loadu_ps(bias + v * kLanes) : _mm512_setzero_ps())
                        : _mm512_load_ps(acc_out + j * kRows + v * kLanes);
  for (int64_t p = 0; p < kc; ++p) {
    if (next) _mm_prefetch(reinterpret_cast<const char*>(next + p * a_stride), _MM_HINT_T0);
    const float* row = b + offsets[p];
    __m512 av[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) av[v] = _mm512_load_ps(a + p * a_stride + v * kLanes);
#pragma GCC unroll 7
    for (int j = 0; j < NP; ++j) {
      const __m512 bj = _mm512_set1_ps(row[j]);
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) acc[j][v] = _mm512_fmadd_ps(av[v], bj, acc[j][v]);
    }
  }
#pragma GCC unroll 7
  for (int j = 0; j < NP; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) _mm512_store_ps(acc_out + j * kRows + v * kLanes, acc[j][v]);
}

// A task's accumulators (pixel q's 64 channels at acc + q * 64) out into C's rows of channels
// [0, mr): for `rows` output rows of `width` pixels, row oh's pixel w of channel i going to
// c + i * ldc + oh * crs + w, added to it when `accumulate`. 16 pixels x 16 channels at a time,
// transposed in registers: copied one float at a time (a stride-64 gather) this was 3.8 % of
// FCN's run at one thread (perf); ResNet-50 at one thread, 3 alternating rounds: 39.9-40.5 ->
// 39.2-40.5 ms (this VM's slow mode).
//
// With a Finish (never when accumulating), each vector also takes the residual at its place in
// C's layout and then the activation (act16) before its one store, so C is written once.
// Finished in a second pass over C (a channel row at a time), C's rows went out to L2 and came
// back: FCN's 256 -> 1024 pointwise convs with the residual took 1.05 ms in the model against
// 0.88 alone without it (onnxruntime: 0.86).
__attribute__((target("avx512f"))) void store_channels(const float* acc, int64_t width,
                                                       int64_t rows, int64_t mr, float* c,
                                                       int64_t ldc, int64_t crs, bool accumulate,
                                                       const Finish& finish) {
  const __m512 alpha = _mm512_set1_ps(finish.act.alpha), beta = _mm512_set1_ps(finish.act.beta);
  const bool act = !finish.act.none();
  for (int64_t oh = 0; oh < rows; ++oh)
    for (int64_t w0 = 0; w0 < width; w0 += kLanes) {
      const int64_t np = std::min(kLanes, width - w0);
      const auto pm = static_cast<__mmask16>(np == kLanes ? 0xffff : (1u << np) - 1);
      const float* src = acc + (oh * width + w0) * kRows;
      for (int64_t i0 = 0; i0 < mr; i0 += kLanes) {
        __m512 r[kLanes];
        for (int64_t p = 0; p < kLanes; ++p)
          r[p] = p < np ? _mm512_load_ps(src + p * kRows + i0) : _mm512_setzero_ps();
        transpose16x16(r);  // r[i]: channel i0 + i at the 16 pixels
        const int64_t nc = std::min(kLanes, mr - i0);
        for (int64_t i = 0; i < nc; ++i) {
          const int64_t at = (i0 + i) * ldc + oh * crs + w0;
          float* dst = c + at;
          __m512 v = accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(pm, dst), r[i]) : r[i];
          if (finish.residual)
            v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(pm, finish.residual + at));
          if (act) v = act16(finish.act.kind, v, alpha, beta);
          _mm512_mask_storeu_ps(dst, pm, v);
        }
      }
    }
}

using TileFn = void (*)(int64_t, const float*, int64_t, const float*, const int64_t*, float*, bool,
                        const float*, const float*);
constexpr TileFn kTiles[kPixels] = {channel_tile<1>, channel_tile<2>, channel_tile<3>,
                                    channel_tile<4>, channel_tile<5>, channel_tile<6>,
                                    channel_tile<7>};

}  // namespace

void gemm_channels(const PackedAChannels& a, const BRows& b, const PixelRows& cols, float* c,
                   int64_t ldc, const float* bias, const Activation& act, const ThreadPool& pool,
                   const float* residual, const ChannelSlice& slice) {
  const int64_t m = a.rows(), k = slice.depth_count < 0 ? a.depth() : slice.depth_count;
  const int64_t a_stride = slice.depth_step * kRows;  // floats between the depth rows used
  const int64_t out_rows = cols.count / cols.width;
  const int64_t crs = slice.c_row_stride ? slice.c_row_stride : cols.width;
  if (m == 0 || cols.count == 0) return;
  const int64_t blocks = (m + kRows - 1) / kRows;
  // Tasks: blocks of 64 channels, and bands of output rows when there are too few blocks to
  // give each thread about four. Every task reads all of B's rows for its pixels; A's block
  // is read by the bands of its channels only.
  // B's rows on lines of their own (a pointwise conv's input planes, not shifted copies of
  // one row) are kc streams per chunk, more than the hardware prefetchers follow: a tile then
  // fetches the rows' next line two tiles ahead, once per line. Only where the input is at
  // least twice as deep as the output, so that B is most of what the product reads and is
  // read by few tasks (from memory or L3 in a model): FCN's 28x28 pointwise convs per node in
  // the model, 2 threads, 4 alternating rounds: 1024 -> 256 6.6 -> 5.0 ms summed, 2048 -> 512
  // 10.7 -> 7.7, 512 -> 128 1.03 -> 0.78; deep outputs (256 -> 1024, 512 -> 2048) were no
  // faster with it (B read by 16-32 tasks stays in cache), 3x3 convs over shifted rows 5 %
  // slower (rows a column apart share lines: min_gap).
  const bool fetch_b = b.min_gap >= kLanes && k >= 2 * m;
  const bool avx512 = has_avx512f();  // else the AVX2 tiles (gemm_avx2.hpp)
  const int64_t want = 4 * pool.threads();
  const int64_t bands = std::clamp<int64_t>((want + blocks - 1) / blocks, 1, out_rows);
  const int64_t rows_per_band = (out_rows + bands - 1) / bands;
  pool.for_each_task(blocks * bands, [&](int64_t t) {
    const int64_t blk = t / bands, band = t % bands;
    const int64_t h0 = band * rows_per_band, h1 = std::min(out_rows, h0 + rows_per_band);
    if (h0 >= h1) return;
    const int64_t q0 = h0 * cols.width, nq = (h1 - h0) * cols.width;
    const int64_t m0 = blk * kRows, mr = std::min(kRows, m - m0);
    float* acc = thread_scratch(2, nq * kRows + kRows);
    float* block_bias = acc + nq * kRows;  // bias of the block, zero past m
    for (int64_t i = 0; i < kRows; ++i) block_bias[i] = bias && i < mr ? bias[m0 + i] : 0.f;
    // Depth a chunk at a time across all the task's tiles (kChunk).
    const int64_t width_tiles = (cols.width + kPixels - 1) / kPixels;
    const int64_t tiles = (h1 - h0) * width_tiles;
    for (int64_t p0 = 0; p0 < k; p0 += kChunk) {
      const int64_t kc = std::min(kChunk, k - p0);
      const float* ab =
          a.data_.get() + (blk * a.depth() + slice.depth_first + p0 * slice.depth_step) * kRows;
      const bool more = p0 + kc < k;
      // The last chunk's tiles fetch the task's lines of C and of the residual toward L2, a
      // share before each tile, for the store (Finish) that follows them. The residual was
      // written nodes earlier and C comes from the buffer cache: the store's 64 channel rows
      // of each are 128 streams, too many for the hardware's prefetchers, and it waited on
      // memory. FCN's residual pointwise convs, per node in the model (2 threads, 3 alternating
      // rounds): 512 -> 2048 13.1 -> 11.7-12.1 ms, 256 -> 1024 6.7-7.1 -> 6.1-6.3 ms summed.
      // Without a residual C alone was no faster (its buffer is one freed moments before).
      const bool fetch_out = residual && !more && crs == cols.width;
      const int64_t row_lines = (nq + kLanes - 1) / kLanes, out_lines = mr * row_lines;
      const int64_t per_tile = fetch_out ? (out_lines + tiles - 1) / tiles : 0;
      for (int64_t t = 0; t < tiles; ++t) {
        for (int64_t l = t * per_tile, end = std::min(out_lines, l + per_tile); l < end; ++l) {
          const int64_t at = (m0 + l / row_lines) * ldc + q0 + l % row_lines * kLanes;
          _mm_prefetch(reinterpret_cast<const char*>(c + at), _MM_HINT_T1);
          _mm_prefetch(reinterpret_cast<const char*>(residual + at), _MM_HINT_T1);
        }
        const int64_t oh = h0 + t / width_tiles, w0 = t % width_tiles * kPixels;
        const int64_t np = std::min(kPixels, cols.width - w0);
        if (fetch_b && t + 2 < tiles) {
          // The chunk's rows of B two tiles ahead, when that tile ends on a line the next one
          // does not start on (fetch_b).
          const float* next_first = b.base + (h0 + (t + 1) / width_tiles) * cols.row_stride +
                                    (t + 1) % width_tiles * kPixels;
          const float* after_last = b.base + (h0 + (t + 2) / width_tiles) * cols.row_stride +
                                    (t + 2) % width_tiles * kPixels + kPixels - 1;
          if (reinterpret_cast<uintptr_t>(after_last) / 64 !=
              reinterpret_cast<uintptr_t>(next_first) / 64)
            for (int64_t p = 0; p < kc; ++p)
              _mm_prefetch(reinterpret_cast<const char*>(after_last + b.offsets[p0 + p]),
                           _MM_HINT_T0);
        }
        const int64_t q = oh * cols.width + w0 - q0;
        const int64_t line = t - 1;
        const float* next = more && line >= 0 && line < kRows / kLanes
                                ? ab + kc * a_stride + line * kLanes
                                : nullptr;
        const float* bt = b.base + oh * cols.row_stride + w0;
        if (avx512)
          kTiles[np - 1](kc, ab, a_stride, bt, b.offsets + p0, acc + q * kRows, p0 == 0, block_bias,
                         next);
        else
          avx2::channel_tile(static_cast<int>(np), kc, ab, a_stride, bt, b.offsets + p0,
                             acc + q * kRows, p0 == 0, block_bias, next);
      }
    }
    if (k == 0)
      for (int64_t q = 0; q < nq; ++q) std::copy_n(block_bias, kRows, acc + q * kRows);
    // C's rows are channels: transpose the tile out, then the residual and activation per row.
    // Rows of C shorter than a few vectors (SE blocks' 1x1 maps: one float per row) take the
    // activation before the transpose instead, a pixel's mr channels per call: one call per
    // channel cost 30 ns a float (EfficientNet's 48 -> 1152 SE conv: 46 us, 8 without Sigmoid).
    const int64_t row_run = crs == cols.width ? nq : cols.width;
    const bool act_in_tile = !residual && !act.none() && !slice.accumulate && row_run < 4 * kLanes;
    if (act_in_tile)
      for (int64_t q = 0; q < nq; ++q) act.apply(acc + q * kRows, mr);
    // The residual and the activation in the store (Finish), unless accumulating or the
    // activation has no 16-lane form (Tanh): then a pass over C after.
    // (AVX-512 only: on AVX2 they take the pass after.)
    const bool in_store = avx512 && !act_in_tile && !slice.accumulate && has_act16(act.kind);
    Finish finish;
    if (in_store) finish = {residual ? residual + m0 * ldc + h0 * crs : nullptr, act};
    if (avx512)
      store_channels(acc, cols.width, h1 - h0, mr, c + m0 * ldc + h0 * crs, ldc, crs,
                     slice.accumulate, finish);
    else
      avx2::store_channels(acc, cols.width, h1 - h0, mr, c + m0 * ldc + h0 * crs, ldc, crs,
                           slice.accumulate);
    if ((!residual && act.none()) || act_in_tile || in_store) return;
    for (int64_t i = 0; i < mr; ++i) {
      // Whole rows of C at once when they are contiguous, else one output row at a time.
      for (int64_t q = 0; q < nq; q += row_run) {
        const int64_t at = (m0 + i) * ldc + h0 * crs + q / cols.width * crs;
        act.apply_added(c + at, residual ? residual + at : nullptr, row_run);
      }
    }
  });
}

}  // namespace quilt::cpu
