// Depthwise 2-D conv. Each (plane, band of output rows) is first copied into a per-thread buffer
// that is zero-padded and split by column phase (input column mod stride_w, stored as separate
// contiguous rows). Then every kernel tap of every output row reads one contiguous, in-bounds
// run of that buffer at a fixed offset, so the inner loop is 8-wide FMAs with no border tests and
// no strided loads, whatever the stride, dilation and padding. The copy costs about one
// load/store per input value against kernel_h * kernel_w FMAs per output (measured 10-25% of the
// time; the FMA loops alone run at ~90% of the AVX2 peak). Outputs are computed in register
// tiles of rows x 8-lane vectors (TapTile, RowReuseTile). On CPUs with AVX-512 the 16-lane tiles
// of conv_depthwise_avx512.cpp replace them for rows wider than 8 columns (1.1-2.2x faster).
// Planes of rows up to 28 columns go eight channels at a time, transposed into 8-channel vectors
// (blocked8_planes; the AVX-512 kernels have the 16-channel form): 1.3-3.6x the band tiles there.
#include "backends/cpu/kernels/conv_depthwise.hpp"

#include "backends/cpu/kernels/channel_vectors.hpp"
#include "backends/cpu/kernels/conv_depthwise_internal.hpp"
#include "backends/cpu/kernels/short_rows.hpp"

#include "backends/cpu/avx2.hpp"
#include "backends/cpu/avx512.hpp"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

namespace quilt::cpu {
namespace depthwise_detail {
namespace {

constexpr int64_t kLanes = 8;
// A band's buffer aims at this many floats (16 KB) so that it stays in L1 while the taps sweep
// it; bigger planes are split into bands of output rows (measured: 16 KB is ~10% faster than
// 64 KB on 112x112 stride-2 planes, the same elsewhere).
constexpr int64_t kBandFloats = 4096;
// Multiply-adds per parallel_for item: late layers (7x7 planes) are too small to be split one
// plane at a time.
constexpr int64_t kGrainMacs = 1 << 15;

Plan make_plan(const DepthwiseGeometry& g) {
  Plan p;
  p.g = g;
  const int64_t reach = (g.kernel_w - 1) * g.dilation_w / g.stride_w;
  p.row_len = (g.out_w + kLanes - 1) / kLanes * kLanes + reach;
  p.row_stride = g.stride_w * p.row_len;
  const int64_t per_row = g.stride_h * p.row_stride;
  const int64_t rows = std::clamp<int64_t>(
      (kBandFloats - p.band_buffer_rows(1) * p.row_stride) / std::max<int64_t>(per_row, 1) + 1, 1,
      g.out_h);
  p.bands = (g.out_h + rows - 1) / rows;
  p.band_rows = (g.out_h + p.bands - 1) / p.bands;  // even bands
  p.buffer_rows = p.band_buffer_rows(p.band_rows);
  for (int64_t kh = 0; kh < g.kernel_h; ++kh)
    for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
      const int64_t col = kw * g.dilation_w;
      p.taps.push_back(kh * g.dilation_h * p.row_stride + col % g.stride_w * p.row_len +
                       col / g.stride_w);
    }
  for (int64_t kw = 0; kw < g.kernel_w; ++kw) p.cols.push_back(p.taps[static_cast<size_t>(kw)]);
  // Padded columns that hold input: [lo, hi), cut to those the taps can reach.
  const int64_t lo = std::max<int64_t>(g.pad_left, 0);
  const int64_t hi = std::min(g.pad_left + g.in_w, p.row_stride);
  for (int64_t r = 0; r < g.stride_w; ++r) {
    const int64_t first = lo + ((r - lo % g.stride_w) % g.stride_w + g.stride_w) % g.stride_w;
    if (first >= hi) continue;
    p.runs.push_back({r * p.row_len + first / g.stride_w, first - g.pad_left,
                      (hi - first + g.stride_w - 1) / g.stride_w});
  }
  std::sort(p.runs.begin(), p.runs.end(),
            [](const Plan::Run& a, const Plan::Run& b) { return a.src < b.src; });
  p.paired = g.stride_w == 2 && p.runs.size() == 2 && p.runs[0].src == 0 && p.runs[1].src == 1;
  return p;
}

// [a0 a2 .. a6 b0 b2 .. b6] and [a1 a3 .. a7 b1 b3 .. b7].
inline void split_even_odd(__m256 a, __m256 b, __m256& even, __m256& odd) {
  // Each input to [evens | odds] first, then the halves swap: every load is used once, so GCC
  // keeps it a single load (with in-lane shuffles it read b twice, ~8% slower).
  const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256 pa = _mm256_permutevar8x32_ps(a, order), pb = _mm256_permutevar8x32_ps(b, order);
  even = _mm256_permute2f128_ps(pa, pb, 0x20);
  odd = _mm256_permute2f128_ps(pa, pb, 0x31);
}

// even[m] = src[2 m] for m < n_even and odd[m] = src[2 m + 1] for m < n_odd (n_even - n_odd is
// 0 or 1): the two column phases of a stride-2 row in one pass over it.
void deinterleave(const float* src, float* even, int64_t n_even, float* odd, int64_t n_odd) {
  int64_t m = 0;
  __m256 e, o;
  for (; m + kLanes <= n_odd; m += kLanes) {
    split_even_odd(_mm256_loadu_ps(src + 2 * m), _mm256_loadu_ps(src + 2 * m + kLanes), e, o);
    _mm256_storeu_ps(even + m, e);
    _mm256_storeu_ps(odd + m, o);
  }
  if (m + 4 <= n_odd) {
    const __m128 a = _mm_loadu_ps(src + 2 * m), b = _mm_loadu_ps(src + 2 * m + 4);
    _mm_storeu_ps(even + m, _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm_storeu_ps(odd + m, _mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    m += 4;
  }
  const int64_t left = n_even - m + n_odd - m;  // input floats left: fewer than 8
  if (left == 0) return;
  split_even_odd(_mm256_maskload_ps(src + 2 * m, lanes8(left)), _mm256_setzero_ps(), e, o);
  // Through a buffer rather than masked stores, which are microcoded on AMD (short_rows.hpp).
  alignas(32) float tail[2][kLanes];
  _mm256_store_ps(tail[0], e);
  _mm256_store_ps(tail[1], o);
  for (int64_t i = 0; i < n_even - m; ++i) even[m + i] = tail[0][i];
  for (int64_t i = 0; i < n_odd - m; ++i) odd[m + i] = tail[1][i];
}

// Copies the input rows of one band into buf; rows outside the input become zero. Columns outside
// the input are never written here, so they stay zero from the buffer's initial clear (done once
// per parallel_for chunk).
void fill_band(const Plan& p, const float* x, int64_t oh0, int64_t rows, float* buf) {
  const DepthwiseGeometry& g = p.g;
  const int64_t buffer_rows = p.band_buffer_rows(rows);
  // Buffer rows [lo, hi) hold input rows; the others are padding. Everything per row is decided
  // here, once: deciding it per row took as long as the copies of 14-wide rows (MobileNetV3's
  // 14x14 layers: 46 -> 34 us for 480 channels at one thread).
  const int64_t ih0 = oh0 * g.stride_h - g.pad_top;
  const int64_t lo = std::min(buffer_rows, std::max<int64_t>(0, -ih0));
  const int64_t hi = std::max(lo, std::min(buffer_rows, g.in_h - ih0));
  // With one band per plane the padding rows are the same buffer rows for every plane.
  if (p.bands > 1) {
    std::fill(buf, buf + lo * p.row_stride, 0.f);
    std::fill(buf + hi * p.row_stride, buf + buffer_rows * p.row_stride, 0.f);
  }
  const int64_t rows_in = hi - lo;
  if (rows_in == 0) return;
  const float* src = x + (ih0 + lo) * g.in_w;
  float* dst = buf + lo * p.row_stride;
  if (p.paired) {
    const Plan::Run &e = p.runs[0], &o = p.runs[1];
    // The AVX2 split of short rows went through a masked load (microcoded on AMD) and a scalar
    // tail: half the time of EfficientNet's stride-2 convs on 14x14 and 28x28 planes.
    if (p.split16)
      deinterleave_rows_avx512(src, g.in_w, dst, p.row_stride, rows_in, e.dst, e.count, o.dst,
                               o.count);
    else
      for (int64_t i = 0; i < rows_in; ++i, src += g.in_w, dst += p.row_stride)
        deinterleave(src, dst + e.dst, e.count, dst + o.dst, o.count);
  } else if (g.stride_w == 1) {  // one run
    const Plan::Run run = p.runs.empty() ? Plan::Run{} : p.runs[0];
    for (int64_t i = 0; i < rows_in; ++i, src += g.in_w, dst += p.row_stride)
      copy_row(src + run.src, dst + run.dst, run.count);
  } else {
    for (int64_t i = 0; i < rows_in; ++i, src += g.in_w, dst += p.row_stride)
      for (const Plan::Run& run : p.runs)
        for (int64_t j = 0; j < run.count; ++j) dst[run.dst + j] = src[run.src + j * g.stride_w];
  }
}

// One output tile: R rows x V vectors of 8 columns. Vector v sits at column 8 v except the last,
// shifted by `shift` (<= 0) so that a row's final vector ends exactly at out_w (it recomputes a
// few columns of its neighbour, bit for bit).
struct TileArgs {
  const float* x;  // buffer at the tile's first column, first output row, kernel row 0
  int64_t x_row;   // buffer floats from one output row to the next
  int64_t shift;
  const int64_t* taps;  // per (kh, kw): buffer offset
  const int64_t* cols;  // per kw: buffer offset within a row
  int64_t kernel_w, ntaps;
  int64_t buf_row;  // buffer floats from one buffer row to the next
  const float* w;
  float bias;
  float* y;  // output at the tile's first column and row
  int64_t y_row;
  // out_w < 8 only: rows [0, full_rows) store 8 lanes, spilling into the next rows (stored
  // later, in the same band); the other rows store the lanes of mask.
  const int32_t* mask;
  int64_t full_rows;
};

template <int R, int V>
inline void tile_init(__m256 (&acc)[R][V], float bias) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_set1_ps(bias);
}

// Row r, vector v of a tile of V vectors at p.
template <int V, class T>
inline T* tile_at(T* p, int r, int v, int64_t row, int64_t shift) {
  return p + r * row + v * kLanes + (v == V - 1 ? shift : 0);
}

template <int R, int V>
inline void tile_store(const __m256 (&acc)[R][V], const TileArgs& a) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) {
      float* dst = tile_at<V>(a.y, r, v, a.y_row, a.shift);
      if (a.mask && r >= a.full_rows) {
        _mm256_maskstore_ps(dst, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.mask)),
                            acc[r][v]);
      } else {
        _mm256_storeu_ps(dst, acc[r][v]);
      }
    }
}

// Any geometry: tap by tap, each broadcast weight feeds R * V FMAs.
struct TapTile {
  static constexpr int kMaxVectors = 4;
  // R * V <= 8 accumulators: enough FMAs in flight (two tiles overlap out of order); 12 or 14
  // measured the same or a few % slower.
  static constexpr int rows(int v) { return v == 1 ? 8 : v == 2 ? 4 : v == 3 ? 3 : 2; }

  template <int R, int V>
  static void run(const TileArgs& a) {
    __m256 acc[R][V];
    tile_init(acc, a.bias);
    for (int64_t k = 0; k < a.ntaps; ++k) {
      const __m256 wv = _mm256_broadcast_ss(a.w + k);
      const float* s = a.x + a.taps[k];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
        for (int v = 0; v < V; ++v)
          acc[r][v] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(tile_at<V>(s, r, v, a.x_row, a.shift)),
                                      acc[r][v]);
    }
    tile_store(acc, a);
  }
};

// Stride 1 and dilation 1 down the rows, KH kernel rows: output rows r and r + 1 share KH - 1
// buffer rows, so each loaded input vector feeds up to KH output rows, with the KH weights of a
// kernel column in registers. Used for rows of one vector (out_w <= 8), where TapTile does a
// load per FMA: ~20% faster on 7x7 planes with a 5x5 kernel. On wider rows TapTile's broadcast is
// shared by R * V FMAs and it measured a few % faster.
template <int KH>
struct RowReuseTile {
  static constexpr int kMaxVectors = 1;
  static constexpr int rows(int) { return 8; }

  template <int R, int V>
  static void run(const TileArgs& a) {
    __m256 acc[R][V];
    tile_init(acc, a.bias);
    for (int64_t kw = 0; kw < a.kernel_w; ++kw) {
      __m256 wv[KH];
#pragma GCC unroll 16
      for (int kh = 0; kh < KH; ++kh) wv[kh] = _mm256_broadcast_ss(a.w + kh * a.kernel_w + kw);
      const float* s = a.x + a.cols[kw];
#pragma GCC unroll 16
      for (int i = 0; i < R + KH - 1; ++i) {
        __m256 xv[V];
#pragma GCC unroll 16
        for (int v = 0; v < V; ++v)
          xv[v] = _mm256_loadu_ps(tile_at<V>(s, i, v, a.buf_row, a.shift));
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const int kh = i - r;
          if (kh < 0 || kh >= KH) continue;
#pragma GCC unroll 16
          for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(wv[kh], xv[v], acc[r][v]);
        }
      }
    }
    tile_store(acc, a);
  }
};

// Calls T::run<r, v> for runtime r <= R, v <= V (1-based).
template <class T, int V, int R>
void run_rows(int64_t r, const TileArgs& a) {
  if constexpr (R > 1) {
    if (r < R) return run_rows<T, V, R - 1>(r, a);
  }
  T::template run<R, V>(a);
}

template <class T, int V = T::kMaxVectors>
void run_tile(int64_t v, int64_t r, const TileArgs& a) {
  if constexpr (V > 1) {
    if (v < V) return run_tile<T, V - 1>(v, r, a);
  }
  run_rows<T, V, T::rows(V)>(r, a);
}

// Output rows [0, rows) of one band from its buffer, in tiles of T.
template <class T>
void conv_band(const Plan& p, const float* buf, const float* w, float bias, float* y,
               int64_t rows) {
  const DepthwiseGeometry& g = p.g;
  TileArgs a{};
  a.x_row = g.stride_h * p.row_stride;
  a.taps = p.taps.data();
  a.cols = p.cols.data();
  a.kernel_w = g.kernel_w;
  a.ntaps = g.kernel_h * g.kernel_w;
  a.buf_row = p.row_stride;
  a.w = w;
  a.bias = bias;
  a.y_row = g.out_w;
  // Column groups of at most kMaxVectors vectors, the row's last vector ending at out_w.
  const int64_t nvec = (g.out_w + kLanes - 1) / kLanes;
  const int64_t groups = (nvec + T::kMaxVectors - 1) / T::kMaxVectors;
  a.mask = g.out_w < kLanes ? kTailMask8 + kLanes - g.out_w : nullptr;
  // With out_w < 8, band row t may store 8 lanes when they end inside the band.
  const int64_t full_limit = rows * g.out_w >= kLanes ? (rows * g.out_w - kLanes) / g.out_w + 1 : 0;
  const int64_t tile_rows_max = T::rows(static_cast<int>((nvec + groups - 1) / groups));
  for (int64_t r0 = 0; r0 < rows;) {
    const int64_t tile_rows = std::min(tile_rows_max, rows - r0);
    a.full_rows = full_limit - r0;
    for (int64_t gi = 0, v0 = 0; gi < groups; ++gi) {
      const int64_t nv = (nvec - v0) / (groups - gi);  // balanced: 7 -> 3 + 4
      const int64_t col = v0 * kLanes;
      a.shift = gi + 1 == groups && g.out_w >= kLanes ? g.out_w - col - nv * kLanes : 0;
      a.x = buf + r0 * a.x_row + col;
      a.y = y + r0 * g.out_w + col;
      run_tile<T>(nv, tile_rows, a);
      v0 += nv;
    }
    r0 += tile_rows;
  }
}

BandFn band_kernel(const DepthwiseGeometry& g) {
  if (g.out_w <= kLanes && g.stride_h == 1 && g.dilation_h == 1) {
    switch (g.kernel_h) {
      case 3:
        return conv_band<RowReuseTile<3>>;
      case 5:
        return conv_band<RowReuseTile<5>>;
      case 7:
        return conv_band<RowReuseTile<7>>;
    }
  }
  return conv_band<TapTile>;
}

// ---- small planes, 8 channels at a time ----
// BlockedPlan with 8-channel vectors: a row of OW <= 14 outputs keeps its accumulators in
// registers over the taps (14 + the weight of 16 ymm; the FMA takes the input from memory), wider
// rows go in two or more chunks. Two 8 x 8 transposes per 8 pixels (in, out) are the cost.
constexpr int64_t kBlockedMaxOutW = 28, kBlockedMaxOut = 784, kBlockedMaxPadded = 3600;
constexpr int kChunkMax = 14;

std::optional<BlockedPlan> blocked8_geometry(const DepthwiseGeometry& g) {
  return blocked_plan(g, kLanes, kBlockedMaxOutW, kBlockedMaxOut, kBlockedMaxPadded);
}

// Output columns [c0, c0 + OW) of every row of one block, from its padded transposed input xt
// and weights wt (tap t's 8 floats at wt + t * w_step) into yt (out_px vectors): bias8 (8
// floats, aligned), then the taps. S: the column stride when known at compile (immediate offsets),
// else 0 (stride_w).
template <int OW, int S>
void blocked8_chunk(const BlockedPlan& b, const float* xt, const float* wt, int64_t w_step,
                    const float* bias8, int64_t c0, float* yt) {
  const DepthwiseGeometry& g = b.g;
  const __m256 bias = _mm256_load_ps(bias8);
  const int64_t step = (S ? S : g.stride_w) * kLanes;
  const float* x0 = xt + c0 * g.stride_w * kLanes;
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    __m256 acc[OW];
#pragma GCC unroll 16
    for (int ow = 0; ow < OW; ++ow) acc[ow] = bias;
    const float* w = wt;
    for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
      const float* row = x0 + (oh * g.stride_h + kh * g.dilation_h) * b.padded_w * kLanes;
      for (int64_t kw = 0; kw < g.kernel_w; ++kw, w += w_step) {
        const __m256 wv = _mm256_load_ps(w);
        const float* px = row + kw * g.dilation_w * kLanes;
#pragma GCC unroll 16
        for (int ow = 0; ow < OW; ++ow)
          acc[ow] = _mm256_fmadd_ps(wv, _mm256_load_ps(px + ow * step), acc[ow]);
      }
    }
    float* out = yt + (oh * g.out_w + c0) * kLanes;
#pragma GCC unroll 16
    for (int ow = 0; ow < OW; ++ow) _mm256_store_ps(out + ow * kLanes, acc[ow]);
  }
}

using Blocked8Chunk = void (*)(const BlockedPlan&, const float*, const float*, int64_t,
                               const float*, int64_t, float*);

// The chunk kernel for OW (1 to kChunkMax) columns and the column stride (1, 2 or any).
Blocked8Chunk blocked8_kernel(int64_t ow, int64_t stride_w) {
  static constexpr auto table = []<size_t... I>(std::index_sequence<I...>) {
    return std::array<std::array<Blocked8Chunk, 3>, sizeof...(I)>{std::array<Blocked8Chunk, 3>{
        &blocked8_chunk<static_cast<int>(I) + 1, 1>, &blocked8_chunk<static_cast<int>(I) + 1, 2>,
        &blocked8_chunk<static_cast<int>(I) + 1, 0>}...};
  }
  (std::make_index_sequence<kChunkMax>());
  return table[static_cast<size_t>(ow - 1)][stride_w == 1 ? 0 : stride_w == 2 ? 1 : 2];
}

// Blocks [begin, end) of 8 channels: block k is image k / blocks_per_image's channels from 8 *
// (k % blocks_per_image), the last block of an image holding the channels that remain.
// w16: the weights as depthwise_weights16 lays them out, else null (transposed here per block).
// io: where x, y and a residual are blocked tensors (the blocked layout's 8 lanes) rather than
// NCHW planes.
void blocked8_planes(const BlockedPlan& b, int64_t begin, int64_t end, int64_t channels,
                     const float* x, const float* w, const float* w16, const float* bias, float* y,
                     const Activation& act, const DepthwiseLayouts& io) {
  const DepthwiseGeometry& g = b.g;
  const int64_t per_image = (channels + kLanes - 1) / kLanes;
  const int64_t padded = b.padded_h * b.padded_w;
  float* xt = thread_scratch(5, (padded + b.out_px + b.ntaps) * kLanes);  // 64-byte aligned
  float* yt = xt + padded * kLanes;
  float* wt = yt + b.out_px * kLanes;
  zero_padding(b, kLanes, xt);  // the blocks write only the inside
  // The row's chunks: as few as fit the registers, of balanced widths (16 -> 8 + 8).
  const int64_t chunks = (g.out_w + kChunkMax - 1) / kChunkMax;
  const int64_t narrow = g.out_w / chunks, wide_chunks = g.out_w % chunks;
  const Blocked8Chunk narrow_fn = blocked8_kernel(narrow, g.stride_w);
  const Blocked8Chunk wide_fn = wide_chunks ? blocked8_kernel(narrow + 1, g.stride_w) : nullptr;
  for (int64_t k = begin; k < end; ++k) {
    const int64_t n = k / per_image, c0 = k % per_image * kLanes;
    const int64_t live = std::min(kLanes, channels - c0);
    const int64_t plane0 = n * channels + c0;  // the block's first plane
    if (io.x_blocked) {  // block k's pixel vectors, a row at a time into the padded plane
      const float* xb = x + k * b.in_px * kLanes;
      for (int64_t ih = 0; ih < g.in_h; ++ih)
        std::copy(xb + ih * g.in_w * kLanes, xb + (ih + 1) * g.in_w * kLanes,
                  xt + b.to_padded[static_cast<size_t>(ih * g.in_w)]);
    } else {
      rows_to_vectors8(x + plane0 * b.in_px, b.in_px, live, b.in_px, xt, b.to_padded.data());
    }
    const float* wb = wt;
    int64_t w_step = kLanes;
    if (w16) {  // 16-channel blocks: this block is the first or second half of one
      wb = w16 + (c0 / 16 * b.ntaps) * 16 + c0 % 16;
      w_step = 16;
    } else {
      rows_to_vectors8(w + c0 * b.ntaps, b.ntaps, live, b.ntaps, wt, nullptr);
    }
    alignas(32) float bias8[kLanes] = {};
    if (bias) std::copy(bias + c0, bias + c0 + live, bias8);
    float* out = io.y_blocked ? y + k * b.out_px * kLanes : yt;  // the block's vectors
    for (int64_t c = 0, col = 0; c < chunks; ++c) {
      const bool wide = c < wide_chunks;
      (wide ? wide_fn : narrow_fn)(b, xt, wb, w_step, bias8, col, out);
      col += wide ? narrow + 1 : narrow;
    }
    // The residual, then the activation, on the block's vectors (a blocked output) or planes.
    const float* blocked_residual =
        io.residual && io.residual_blocked ? io.residual + k * b.out_px * kLanes : nullptr;
    const float* nchw_residual =
        io.residual && !io.residual_blocked ? io.residual + plane0 * b.out_px : nullptr;
    if (io.y_blocked) {
      if (nchw_residual) {
        rows_to_vectors8(nchw_residual, b.out_px, live, b.out_px, yt, nullptr);
        blocked_residual = yt;
      }
      act.apply_added(out, blocked_residual, b.out_px * kLanes);
      continue;
    }
    if (blocked_residual)
      for (int64_t i = 0; i < b.out_px * kLanes; ++i) yt[i] += blocked_residual[i];
    float* yp = y + plane0 * b.out_px;
    vectors_to_rows8(yt, b.out_px, live, yp, b.out_px);
    if (nchw_residual || !act.none()) act.apply_added(yp, nchw_residual, live * b.out_px);
  }
}

bool depthwise_blocked8(const DepthwiseGeometry& g, int64_t planes, int64_t channels,
                        const float* x, const float* w, const float* bias, float* y,
                        const Activation& act, const ThreadPool& pool, const float* w16,
                        const DepthwiseLayouts& io = {}) {
  if (channels <= 0 || planes % channels != 0) return false;
  const BlockedPlan* b = cached_plan<BlockedPlan>(g, blocked8_geometry);
  if (!b) return false;
  const int64_t per_image = (channels + kLanes - 1) / kLanes;
  split_planes(planes / channels * per_image, std::max<int64_t>(1, b->out_px * b->ntaps * kLanes),
               pool, [&](int64_t begin, int64_t end) {
                 blocked8_planes(*b, begin, end, channels, x, w, w16, bias, y, act, io);
               });
  return true;
}

// ---- 3x3, stride 1, wide rows: read straight from the input ----
// The band tiles copy each plane into a padded buffer first and then load every kernel column's
// vector at its own offset. Here a tile of up to 4 output rows x 8 columns loads each input row
// it reaches at the three column shifts, straight from the input (masked loads only where a
// shift crosses the plane's left or right edge; rows above and below it are skipped), and each
// load feeds the up to three output rows it reaches, the nine weights in registers (4
// accumulators + 9 weights + the load: 14 of the 16 ymm). The AVX-512 form is
// depthwise_rows3x3_avx512.
constexpr int64_t kRows3x3Tile = 4;

template <int R, bool kEdge>
inline void rows3x3_tile(const float* x, int64_t in_h, int64_t in_w, int64_t ih0, int64_t col,
                         const __m256 (&wv)[9], const __m256i (&mask)[3], float bias, float* y,
                         int64_t y_row) {
  __m256 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_set1_ps(bias);
#pragma GCC unroll 6
  for (int i = 0; i < R + 2; ++i) {
    const int64_t ih = ih0 + i;
    if (ih < 0 || ih >= in_h) continue;  // padding rows add nothing
    const float* s = x + ih * in_w + col;
#pragma GCC unroll 3
    for (int k = 0; k < 3; ++k) {
      const __m256 xv = kEdge ? _mm256_maskload_ps(s + k, mask[k]) : _mm256_loadu_ps(s + k);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const int kh = i - r;
        if (kh >= 0 && kh < 3) acc[r] = _mm256_fmadd_ps(wv[3 * kh + k], xv, acc[r]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(y + r * y_row, acc[r]);
}

template <bool kEdge>
void rows3x3_tiles(int64_t rows, const float* x, int64_t in_h, int64_t in_w, int64_t ih0,
                   int64_t col, const __m256 (&wv)[9], const __m256i (&mask)[3], float bias,
                   float* y, int64_t y_row) {
  for (int64_t r0 = 0; r0 < rows; r0 += kRows3x3Tile) {
    const int64_t ih = ih0 + r0;
    float* yt = y + r0 * y_row;
    switch (std::min(kRows3x3Tile, rows - r0)) {
      case 4:
        rows3x3_tile<4, kEdge>(x, in_h, in_w, ih, col, wv, mask, bias, yt, y_row);
        break;
      case 3:
        rows3x3_tile<3, kEdge>(x, in_h, in_w, ih, col, wv, mask, bias, yt, y_row);
        break;
      case 2:
        rows3x3_tile<2, kEdge>(x, in_h, in_w, ih, col, wv, mask, bias, yt, y_row);
        break;
      default:
        rows3x3_tile<1, kEdge>(x, in_h, in_w, ih, col, wv, mask, bias, yt, y_row);
    }
  }
}

// Output rows [oh0, oh1) of one plane, a column vector at a time (the last one shifted to end at
// out_w: it recomputes a few columns of its neighbour, bit for bit).
void rows3x3_band(const DepthwiseGeometry& g, const float* x, const float* w, float bias,
                  const Activation& act, float* y, int64_t oh0, int64_t oh1) {
  __m256 wv[9];
  for (int k = 0; k < 9; ++k) wv[k] = _mm256_set1_ps(w[k]);
  const int64_t nvec = (g.out_w + kLanes - 1) / kLanes;
  for (int64_t v = 0; v < nvec; ++v) {
    const int64_t c0 = v + 1 == nvec ? g.out_w - kLanes : v * kLanes;
    const int64_t col = c0 - g.pad_left;  // input column of lane 0 at shift 0
    __m256i mask[3];
    bool edge = false;
    for (int64_t k = 0; k < 3; ++k) {
      // Lanes j with 0 <= col + k + j < in_w.
      const int64_t lo = std::clamp<int64_t>(-(col + k), 0, kLanes);
      const int64_t hi = std::clamp<int64_t>(g.in_w - (col + k), 0, kLanes);
      mask[k] = _mm256_andnot_si256(lanes8(lo), lanes8(std::max(lo, hi)));
      edge |= lo > 0 || hi < kLanes;
    }
    const int64_t ih0 = oh0 - g.pad_top;
    float* yv = y + oh0 * g.out_w + c0;
    if (edge)
      rows3x3_tiles<true>(oh1 - oh0, x, g.in_h, g.in_w, ih0, col, wv, mask, bias, yv, g.out_w);
    else
      rows3x3_tiles<false>(oh1 - oh0, x, g.in_h, g.in_w, ih0, col, wv, mask, bias, yv, g.out_w);
  }
  if (!act.none())
    for (int64_t r = oh0; r < oh1; ++r) act.apply(y + r * g.out_w, g.out_w);
}

bool depthwise_rows3x3(const DepthwiseGeometry& g, int64_t planes, int64_t channels, const float* x,
                       const float* w, const float* bias, float* y, const Activation& act,
                       const ThreadPool& pool) {
  if (!rows3x3_takes(g, kLanes)) return false;
  const int64_t in_size = g.in_h * g.in_w, out_size = g.out_h * g.out_w;
  rows3x3_bands(g, planes, channels, pool, [&](int64_t p, int64_t c, int64_t oh0, int64_t oh1) {
    rows3x3_band(g, x + p * in_size, w + c * 9, bias ? bias[c] : 0.f, act, y + p * out_size, oh0,
                 oh1);
  });
  return true;
}

bool has_avx512() {
  static const bool has = [] {
    // has_avx512f(): the CPU's AVX-512F, unless QUILT_CPU_ISA asks for less.
    __builtin_cpu_init();
    return has_avx512f() && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }();
  return has;
}

}  // namespace

std::optional<BlockedPlan> blocked_plan(const DepthwiseGeometry& g, int64_t lanes,
                                        int64_t max_out_w, int64_t max_out_px,
                                        int64_t max_padded_px) {
  if (g.out_w > max_out_w || g.pad_top < 0 || g.pad_left < 0) return {};
  // Every factor below is at most the padded limit, so no product overflows (hostile strides
  // and pads reach 2^62).
  for (int64_t v : {g.in_h, g.in_w, g.out_h, g.kernel_h, g.kernel_w, g.stride_h, g.stride_w,
                    g.dilation_h, g.dilation_w, g.pad_top, g.pad_left})
    if (v > max_padded_px) return {};
  BlockedPlan b;
  b.g = g;
  b.in_px = g.in_h * g.in_w;
  b.out_px = g.out_h * g.out_w;
  b.ntaps = g.kernel_h * g.kernel_w;
  b.padded_h = std::max((g.out_h - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1,
                        g.pad_top + g.in_h);
  b.padded_w = std::max((g.out_w - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w + 1,
                        g.pad_left + g.in_w);
  if (b.padded_h * b.padded_w > max_padded_px || b.out_px > max_out_px || b.ntaps > max_out_px)
    return {};
  for (int64_t ih = 0; ih < g.in_h; ++ih)
    for (int64_t iw = 0; iw < g.in_w; ++iw)
      b.to_padded.push_back(
          static_cast<int32_t>(((ih + g.pad_top) * b.padded_w + iw + g.pad_left) * lanes));
  return b;
}

const char* depthwise_conv2d(const DepthwiseGeometry& g, int64_t planes, int64_t channels,
                             const float* x, const float* w, const float* bias, float* y,
                             const Activation& act, const ThreadPool& pool, bool allow_avx512,
                             bool allow_transposed, const float* w16, bool allow_rows3x3) {
  if (planes <= 0 || g.out_h <= 0 || g.out_w <= 0) return "depthwise (empty)";
  const bool avx512 = allow_avx512 && has_avx512();
  // Small planes go 16 channels at a time, transposed, except rows narrower than 7 that the
  // flat kernel takes: a row of OW outputs gives each weight vector OW multiply-adds there (the
  // keyword spotter's 64x25x5 3x3: 1.95 us flat, 2.1-2.2 transposed; EfficientNet's 1152x7x7
  // 5x5 53-54 -> 34, MobileNetV3's 672x14x14 5x5 stride 2 64-66 -> 27, 480x14x14 3x3 41 -> 33.5;
  // CpuDepthwiseConv.DISABLED_Throughput, 1 thread, AMD EPYC Zen 5).
  if (avx512 && allow_transposed && g.out_w >= 7 &&
      depthwise_blocked16_avx512(g, planes, channels, x, w, bias, y, act, pool, w16))
    return "depthwise, 16 channels at a time, transposed (16 lanes)";
  if (avx512 && depthwise_flat_avx512(g, planes, channels, x, w, bias, y, act, pool))
    return "depthwise, flat planes shifted per tap (16 lanes)";
  if (avx512 && depthwise_narrow_avx512(g, planes, channels, x, w, bias, y, act, pool))
    return "depthwise, flattened narrow planes (16 lanes)";
  if (avx512 && depthwise_rows3x3_avx512(g, planes, channels, x, w, bias, y, act, pool))
    return "depthwise 3x3, rows from the input (16 lanes)";
  if (!avx512 && allow_transposed &&
      depthwise_blocked8(g, planes, channels, x, w, bias, y, act, pool, w16))
    return "depthwise, 8 channels at a time, transposed (8 lanes)";
  if (!avx512 && allow_rows3x3 && depthwise_rows3x3(g, planes, channels, x, w, bias, y, act, pool))
    return "depthwise 3x3, rows from the input (8 lanes)";
  Plan p = make_plan(g);
  BandFn band_fn = avx512 ? band_kernel_avx512(g) : nullptr;
  const bool wide_tiles = band_fn != nullptr;
  p.split16 = p.paired && avx512;
  const bool act_in_tiles = band_fn && has_act16(act.kind);
  if (act_in_tiles) p.act = act;
  if (!band_fn) band_fn = band_kernel(g);
  const int64_t in_size = g.in_h * g.in_w, out_size = g.out_h * g.out_w;
  const int64_t ntaps = g.kernel_h * g.kernel_w;
  const size_t buffer_size = static_cast<size_t>(p.buffer_rows * p.row_stride + kBufferSlack);
  // One item per (plane, band).
  auto run_items = [&](int64_t begin, int64_t end) {
    // Pool threads live as long as the pool, so this is allocated once per thread.
    float* buf = thread_scratch(5, static_cast<int64_t>(buffer_size));
    std::fill(buf, buf + buffer_size, 0.f);
    // (plane, band) of each item by counting, not dividing: three divisions per item were 3 %
    // of 480 14x14 planes' time (35.0 -> 33.8 us at one thread).
    int64_t plane = begin / p.bands, band = begin % p.bands, channel = plane % channels;
    for (int64_t item = begin; item < end; ++item) {
      if (band == p.bands) {
        band = 0;
        ++plane;
        if (++channel == channels) channel = 0;
      }
      const int64_t oh0 = band++ * p.band_rows, rows = std::min(p.band_rows, g.out_h - oh0);
      fill_band(p, x + plane * in_size, oh0, rows, buf);
      float* yb = y + plane * out_size + oh0 * g.out_w;
      band_fn(p, buf, w + channel * ntaps, bias ? bias[channel] : 0.f, yb, rows);
      if (!act.none() && !act_in_tiles) act.apply(yb, rows * g.out_w);
    }
  };
  const int64_t item_macs = p.band_rows * g.out_w * ntaps;
  pool.parallel_for(planes * p.bands, std::max<int64_t>(1, kGrainMacs / item_macs), run_items);
  return wide_tiles ? "depthwise, row bands (16-lane tiles)"
                    : "depthwise, row bands (8-lane tiles)";
}

}  // namespace depthwise_detail

const char* depthwise_conv2d(const DepthwiseGeometry& g, int64_t planes, int64_t channels,
                             const float* x, const float* w, const float* bias, float* y,
                             const Activation& act, const ThreadPool& pool, const float* w16) {
  return depthwise_detail::depthwise_conv2d(g, planes, channels, x, w, bias, y, act, pool, true,
                                            true, w16);
}

std::shared_ptr<float[]> depthwise_weights16(const float* w, int64_t channels, int64_t taps) {
  constexpr int64_t kLanes = 16;
  const int64_t blocks = (channels + kLanes - 1) / kLanes;
  const auto count = static_cast<size_t>(std::max<int64_t>(1, blocks * taps * kLanes));
  auto* p = static_cast<float*>(std::aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64));
  if (!p) throw std::bad_alloc();
  std::shared_ptr<float[]> out(p, [](float* q) { std::free(q); });
  std::fill(p, p + count, 0.f);
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t t = 0; t < taps; ++t)
      p[((c / kLanes) * taps + t) * kLanes + c % kLanes] = w[c * taps + t];
  return out;
}

bool depthwise_blocked8_fits(const DepthwiseGeometry& g) {
  return depthwise_detail::blocked8_geometry(g).has_value();
}

bool depthwise_conv2d_blocked8(const DepthwiseGeometry& g, int64_t batch, int64_t channels,
                               const float* x, const float* w, const float* bias, float* y,
                               const Activation& act, const ThreadPool& pool, const float* w16,
                               const DepthwiseLayouts& io) {
  return depthwise_detail::depthwise_blocked8(g, batch * channels, channels, x, w, bias, y, act,
                                              pool, w16, io);
}

}  // namespace quilt::cpu
