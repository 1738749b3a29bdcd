// AVX-512 output tiles of the depthwise conv: the TapTile and RowReuseTile of conv_depthwise.cpp
// with 16-lane vectors, over the same band buffer. Rows narrower than 16 columns use one masked
// vector (masked stores). Every function here that uses AVX-512 is compiled for it (QUILT_AVX512)
// and is reached only through band_kernel_avx512, which the caller uses only when the CPU has it.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cpu/avx512.hpp"
#include "backends/cpu/gcc12_avx512.hpp"
#include "backends/cpu/kernels/conv_depthwise_internal.hpp"

#define QUILT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

QUILT_GCC12_AVX512_BEGIN  // the whole file

namespace quilt::cpu::depthwise_detail {
namespace {

constexpr int64_t kLanes = 16;

// One output tile: R rows x V vectors of 16 columns. Vector v sits at column 16 v except the last,
// shifted by `shift` (<= 0) so that a row's final vector ends exactly at out_w (it recomputes a
// few columns of its neighbour, bit for bit). With out_w < 16 the single vector stores `mask`.
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
  __mmask16 mask;  // lanes stored by a tile of one vector, or by the last one if mask_last
  bool mask_last;  // the tile's last vector stores `mask` (rows3x3: no shift there)
  Activation act;  // Plan::act: applied before the store
};

template <int R, int V>
QUILT_AVX512 inline void tile_init(__m512 (&acc)[R][V], float bias) {
#pragma GCC unroll 32
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 32
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_set1_ps(bias);
}

// Row r, vector v of a tile of V vectors at p.
template <int V, class T>
inline T* tile_at(T* p, int r, int v, int64_t row, int64_t shift) {
  return p + r * row + v * kLanes + (v == V - 1 ? shift : 0);
}

template <int R, int V>
QUILT_AVX512 inline void tile_store(__m512 (&acc)[R][V], const TileArgs& a) {
  if (!a.act.none()) {
    // In the registers: a separate pass over the stored rows took a fifth of MobileNetV3's
    // depthwise time (HardSwish on 14x14 planes: a call, a 196-float loop and its tail).
    const __m512 alpha = _mm512_set1_ps(a.act.alpha), beta = _mm512_set1_ps(a.act.beta);
#pragma GCC unroll 32
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 32
      for (int v = 0; v < V; ++v) acc[r][v] = act16(a.act.kind, acc[r][v], alpha, beta);
  }
#pragma GCC unroll 32
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 32
    for (int v = 0; v < V; ++v) {
      float* dst = tile_at<V>(a.y, r, v, a.y_row, a.shift);
      if (V == 1 || (v == V - 1 && a.mask_last))
        _mm512_mask_storeu_ps(dst, a.mask, acc[r][v]);
      else
        _mm512_storeu_ps(dst, acc[r][v]);
    }
}

// Any geometry: tap by tap, each broadcast weight feeds R * V FMAs.
struct TapTile {
  static constexpr int kMaxVectors = 4;
  static constexpr int rows(int v) { return v == 1 ? 8 : v == 2 ? 4 : v == 3 ? 3 : 2; }

  template <int R, int V>
  QUILT_AVX512 static void run(const TileArgs& a) {
    __m512 acc[R][V];
    tile_init(acc, a.bias);
    for (int64_t k = 0; k < a.ntaps; ++k) {
      const __m512 wv = _mm512_set1_ps(a.w[k]);
      const float* s = a.x + a.taps[k];
#pragma GCC unroll 32
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 32
        for (int v = 0; v < V; ++v)
          acc[r][v] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(tile_at<V>(s, r, v, a.x_row, a.shift)),
                                      acc[r][v]);
    }
    tile_store(acc, a);
  }
};

// Stride 1 and dilation 1 down the rows, KH kernel rows: each loaded input vector feeds up to KH
// output rows, with the KH weights of a kernel column in registers. With 32 registers a tile
// holds more rows than on AVX2 (fewer reloads of the KH - 1 rows that tiles share), and for 5x5 and
// 7x7 also rows of two vectors, where AVX2 uses TapTile (measured on 28x28 planes: 1.5x faster
// than TapTile for 5x5, 1.7x for 7x7; for 3x3 TapTile stays a few % faster). Rows per tile as
// measured (one vector: a whole 14-row plane at once for 3x3, 5x5 and 7x7, 1.1-1.25x faster
// than 8 rows; two vectors: up to 31 registers). The loops need unroll 32: with 16, a 5x5 tile of
// 16 rows (20 input rows) measured 2x slower.
template <int KH>
struct RowReuseTile {
  static constexpr int kMaxVectors = KH == 3 ? 1 : 2;
  static constexpr int rows(int v) { return v == 2 ? (KH == 5 ? 12 : 11) : KH == 7 ? 14 : 16; }

  template <int R, int V>
  QUILT_AVX512 static void run(const TileArgs& a) {
    __m512 acc[R][V];
    tile_init(acc, a.bias);
    for (int64_t kw = 0; kw < a.kernel_w; ++kw) {
      __m512 wv[KH];
#pragma GCC unroll 32
      for (int kh = 0; kh < KH; ++kh) wv[kh] = _mm512_set1_ps(a.w[kh * a.kernel_w + kw]);
      const float* s = a.x + a.cols[kw];
#pragma GCC unroll 32
      for (int i = 0; i < R + KH - 1; ++i) {
        __m512 xv[V];
#pragma GCC unroll 32
        for (int v = 0; v < V; ++v)
          xv[v] = _mm512_loadu_ps(tile_at<V>(s, i, v, a.buf_row, a.shift));
#pragma GCC unroll 32
        for (int r = 0; r < R; ++r) {
          const int kh = i - r;
          if (kh < 0 || kh >= KH) continue;
#pragma GCC unroll 32
          for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(wv[kh], xv[v], acc[r][v]);
        }
      }
    }
    tile_store(acc, a);
  }
};

// Calls T::run<r, v>(args...) for runtime r <= R, v <= V (1-based).
template <class T, int V, int R, class... Args>
QUILT_AVX512 void run_rows(int64_t r, const Args&... args) {
  if constexpr (R > 1) {
    if (r < R) return run_rows<T, V, R - 1>(r, args...);
  }
  T::template run<R, V>(args...);
}

template <class T, int V = T::kMaxVectors, class... Args>
QUILT_AVX512 void run_tile(int64_t v, int64_t r, const Args&... args) {
  if constexpr (V > 1) {
    if (v < V) return run_tile<T, V - 1>(v, r, args...);
  }
  run_rows<T, V, T::rows(V)>(r, args...);
}

// Output rows [0, rows) of one band from its buffer, in tiles of T.
template <class T>
QUILT_AVX512 void conv_band(const Plan& p, const float* buf, const float* w, float bias, float* y,
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
  a.mask = g.out_w < kLanes ? static_cast<__mmask16>((1u << g.out_w) - 1) : __mmask16(0xffff);
  a.act = p.act;
  // Column groups of at most kMaxVectors vectors, the row's last vector ending at out_w.
  const int64_t nvec = (g.out_w + kLanes - 1) / kLanes;
  const int64_t groups = (nvec + T::kMaxVectors - 1) / T::kMaxVectors;
  // Tiles of balanced heights (28 rows, at most 12 a tile: 9 + 9 + 10).
  const int64_t tile_rows_max = T::rows(static_cast<int>((nvec + groups - 1) / groups));
  const int64_t ntiles = (rows + tile_rows_max - 1) / tile_rows_max;
  for (int64_t r0 = 0, ti = 0; r0 < rows; ++ti) {
    const int64_t tile_rows = (rows - r0) / (ntiles - ti);
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

}  // namespace

QUILT_AVX512 void deinterleave_rows_avx512(const float* src, int64_t src_row, float* dst,
                                           int64_t dst_row, int64_t rows, int64_t even,
                                           int64_t n_even, int64_t odd, int64_t n_odd) {
  const __m512i pick_even =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i pick_odd = _mm512_add_epi32(pick_even, _mm512_set1_epi32(1));
  const int64_t total = n_even + n_odd;
  for (int64_t i = 0; i < rows; ++i, src += src_row, dst += dst_row)
    for (int64_t m = 0; 2 * m < total; m += kLanes) {
      const int64_t left = total - 2 * m;  // floats of the row from 2 m on
      const __m512 a = _mm512_maskz_loadu_ps(lanes16(0, left), src + 2 * m);
      const __m512 b = left > kLanes
                           ? _mm512_maskz_loadu_ps(lanes16(kLanes, left), src + 2 * m + kLanes)
                           : _mm512_setzero_ps();
      _mm512_mask_storeu_ps(dst + even + m, lanes16(m, n_even),
                            _mm512_permutex2var_ps(a, pick_even, b));
      _mm512_mask_storeu_ps(dst + odd + m, lanes16(m, n_odd),
                            _mm512_permutex2var_ps(a, pick_odd, b));
    }
}

BandFn band_kernel_avx512(const DepthwiseGeometry& g) {
  // A row of at most 8 columns fills half a vector or less: the AVX2 tiles measured 20-30% faster.
  if (g.out_w <= 8) return nullptr;
  if (g.stride_h == 1 && g.dilation_h == 1) {
    if (g.kernel_h == 3 && g.out_w <= kLanes) return conv_band<RowReuseTile<3>>;
    if (g.kernel_h == 5 && g.out_w <= 2 * kLanes) return conv_band<RowReuseTile<5>>;
    if (g.kernel_h == 7 && g.out_w <= 2 * kLanes) return conv_band<RowReuseTile<7>>;
  }
  return conv_band<TapTile>;
}

// ---- narrow planes: the whole padded plane flattened ----
// Rows of at most 8 columns fill at most half a 16-lane vector. With stride and dilation 1 the
// plane is instead padded into one buffer of rows rs = out_w + kernel_w - 1 floats wide, and
// outputs are computed for every flat position q = oh * rs + ow, the kernel offsets being shifts
// of kh * rs + kw: the vectors run across rows, so a 25x5 plane's 125 outputs are 11 vectors of
// 16 lanes (175 positions, 71 % live) instead of 25 vectors of 8 (62 %), and the 9 taps of a 3x3
// kernel are 9 FMAs per vector.
//
// The padded plane is built a whole aligned vector at a time, each expanded in registers from
// the next input floats (vexpandps: the input's pixels are in the padded plane's order), and the
// outputs leave the same way, compressed in registers to their live columns and stored in
// order: no row-by-row copies in and out (a 5-float masked load and a 16-float store per row,
// then a masked load and store per output row), which were most of this kernel's samples. The
// keyword spotter's 64 planes of 25x5 with 3x3: 6.0 -> 5.2 us at one thread (kernel alone,
// best of 2000 calls).
namespace {

constexpr int64_t kNarrowBlock = 8;         // vectors per register block (each weight feeds 8)
constexpr int64_t kNarrowMaxFloats = 8192;  // padded plane + outputs, in L1 with room to spare
// A narrow-plane conv of fewer multiply-adds stays on the calling thread unless the pool is
// awake: split_planes (conv_depthwise_internal.hpp).

// Where a plane's floats go: one entry per 16-float vector of the padded plane (which lanes
// hold input, and the index of the first input float they take) or of the flat outputs (which
// lanes are live columns, the output index of the first, and the lanes its store may write:
// all 16 unless that would pass the plane's end).
struct Lanes {
  __mmask16 mask;
  int32_t first;
  __mmask16 store = 0xffff;
};

struct Narrow {
  int64_t rs, hp, plane, nvec;
  std::vector<Lanes> in, out;
  std::vector<int64_t> taps;  // per (kh, kw): kh * rs + kw
};

std::optional<Narrow> narrow_geometry(const DepthwiseGeometry& g) {
  if (g.stride_h != 1 || g.stride_w != 1 || g.dilation_h != 1 || g.dilation_w != 1) return {};
  // Kernels up to 3x3: with 5x5 on 7x7 planes (rows 11 wide, 61 % live) the 8-lane row tiles
  // measured faster (35-52 against 55 us for 480 planes); with 3x3 the flattened kernel measured
  // 15-40 % faster on 25x5, 7x7 and 4x4 planes (AMD EPYC, loaded machine, alternating runs).
  if (g.out_w > 8 || g.in_w > kLanes || g.kernel_w > 3 || g.kernel_h > 3) return {};
  const int64_t rs = g.out_w + g.kernel_w - 1, hp = g.out_h + g.kernel_h - 1;
  // Padding beyond the input on the bottom / right (>= 0 with stride 1: out = in + pads - k + 1).
  if (hp < g.pad_top + g.in_h || rs < g.pad_left + g.in_w) return {};
  const int64_t nvec = (g.out_h * rs + kLanes - 1) / kLanes;
  // Taps read up to (kernel_h - 1) * rs + kernel_w - 1 floats past the last output vector.
  const int64_t reach = nvec * kLanes + (g.kernel_h - 1) * rs + g.kernel_w - 1;
  const int64_t plane = (std::max(reach, hp * rs) + kLanes - 1) / kLanes * kLanes;
  if (plane + nvec * kLanes > kNarrowMaxFloats) return {};
  // Built per call (a few hundred steps, no divisions: with them, building this took longer
  // than the keyword spotter's whole conv).
  Narrow n{rs,
           hp,
           plane,
           nvec,
           std::vector<Lanes>(static_cast<size_t>(plane / kLanes)),
           std::vector<Lanes>(static_cast<size_t>(nvec)),
           {}};
  int32_t taken = 0, stored = 0;
  for (int64_t f = 0, r = 0, col = 0; f < plane; ++f) {  // (r, col): f's row and column
    Lanes& in = n.in[static_cast<size_t>(f / kLanes)];
    if (f % kLanes == 0) in = {0, taken};
    const int64_t ih = r - g.pad_top, iw = col - g.pad_left;
    if (r < hp && ih >= 0 && ih < g.in_h && iw >= 0 && iw < g.in_w) {
      in.mask = static_cast<__mmask16>(in.mask | (1u << (f % kLanes)));
      ++taken;
    }
    if (f < nvec * kLanes) {
      Lanes& out = n.out[static_cast<size_t>(f / kLanes)];
      if (f % kLanes == 0) out = {0, stored};
      if (r < g.out_h && col < g.out_w) {
        out.mask = static_cast<__mmask16>(out.mask | (1u << (f % kLanes)));
        ++stored;
      }
    }
    if (++col == rs) {
      col = 0;
      ++r;
    }
  }
  for (Lanes& l : n.out)
    l.store = static_cast<__mmask16>((1u << std::min<int64_t>(kLanes, stored - l.first)) - 1);
  for (int64_t kh = 0; kh < g.kernel_h; ++kh)
    for (int64_t kw = 0; kw < g.kernel_w; ++kw) n.taps.push_back(kh * rs + kw);
  return n;
}

// The first `count` lanes.
inline __mmask16 first_lanes(int count) {
  return static_cast<__mmask16>((1u << count) - 1);
}

// acc[p][v] = bias[p] + sum over the taps t of w[p][t] * tap(t)(p, v), for P planes of V vectors,
// then the activation (kinds act16 has): the narrow kernels' register block. tap(t) gives tap t's
// loads, a callable of the plane p and the block's vector v: unmasked from a padded copy
// (narrow_block) or masked from the planes themselves (flat_block).
template <int P, int V, class Tap>
QUILT_AVX512 inline void window_sums(__m512 (&acc)[P][V], int64_t ntaps,
                                     const std::array<const float*, P>& w,
                                     const std::array<float, P>& bias, const Activation& act,
                                     Tap tap) {
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[p][v] = _mm512_set1_ps(bias[p]);
  for (int64_t t = 0; t < ntaps; ++t) {
    __m512 wv[P];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) wv[p] = _mm512_set1_ps(w[p][t]);
    const auto load = tap(t);
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v)
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) acc[p][v] = _mm512_fmadd_ps(wv[p], load(p, v), acc[p][v]);
  }
  if (!act.none() && has_act16(act.kind)) {
    const __m512 alpha = _mm512_set1_ps(act.alpha), beta = _mm512_set1_ps(act.beta);
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) acc[p][v] = act16(act.kind, acc[p][v], alpha, beta);
  }
}

// At most 3x3 taps: the narrow kernels' per-tap pointers.
using TapPointers = std::array<const float*, 9>;

// V output vectors of the flat plane from vector v0 (rows: per tap, the padded plane at the
// tap's offset): the taps, the activation, then the live lanes compressed and stored in order.
// A store writes up to 16 floats from the vector's first output; the next vectors' stores
// overwrite what lies past its live ones, and none writes past the plane (Lanes::store), whose
// neighbour may be another thread's.
template <int V>
QUILT_AVX512 inline void narrow_block(const TapPointers& rows, int64_t v0, int64_t ntaps,
                                      const float* w, float bias, const Activation& act,
                                      const Lanes* out, float* y) {
  __m512 acc[1][V];
  window_sums<1, V>(acc, ntaps, {w}, {bias}, act, [&](int64_t t) {
    const float* s = rows[static_cast<size_t>(t)] + v0 * kLanes;
    return [s](int, int v) QUILT_AVX512 { return _mm512_loadu_ps(s + v * kLanes); };
  });
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) {
    const __m512 live = _mm512_maskz_compress_ps(out[v].mask, acc[0][v]);
    if (out[v].store == 0xffff)
      _mm512_storeu_ps(y + out[v].first, live);
    else
      _mm512_mask_storeu_ps(y + out[v].first, out[v].store, live);
  }
}

// Calls block(std::integral_constant<int, V>{}, v) over a plane's nvec output vectors: blocks of
// kNarrowBlock from v = 0, the rest as one block of the remaining V (each weight feeds V vectors).
template <class Block>
QUILT_AVX512 inline void plane_blocks(int64_t nvec, Block block) {
  static_assert(kNarrowBlock == 8, "the tail switch below covers 1 to 7 vectors");
  int64_t v = 0;
  for (; v + kNarrowBlock <= nvec; v += kNarrowBlock) block(std::integral_constant<int, 8>{}, v);
  switch (nvec - v) {
    case 1:
      return block(std::integral_constant<int, 1>{}, v);
    case 2:
      return block(std::integral_constant<int, 2>{}, v);
    case 3:
      return block(std::integral_constant<int, 3>{}, v);
    case 4:
      return block(std::integral_constant<int, 4>{}, v);
    case 5:
      return block(std::integral_constant<int, 5>{}, v);
    case 6:
      return block(std::integral_constant<int, 6>{}, v);
    case 7:
      return block(std::integral_constant<int, 7>{}, v);
    default:
      return;
  }
}

// Plane p's padded copy into buf.
QUILT_AVX512 inline void narrow_fill(const Narrow& n, const float* xp, float* buf) {
  const int64_t chunks = n.plane / kLanes;
  for (int64_t u = 0; u < chunks; ++u) {
    const Lanes& l = n.in[static_cast<size_t>(u)];
    const __mmask16 take = first_lanes(__builtin_popcount(l.mask));
    _mm512_store_ps(buf + u * kLanes,
                    _mm512_maskz_expand_ps(l.mask, _mm512_maskz_loadu_ps(take, xp + l.first)));
  }
}

QUILT_AVX512 void narrow_planes(const DepthwiseGeometry& g, const Narrow& n, int64_t begin,
                                int64_t end, int64_t channels, const float* x, const float* w,
                                const float* bias, float* y, const Activation& act) {
  // The depthwise conv's band slot: this path replaces the band kernel, never runs beside it.
  float* buf = thread_scratch(5, n.plane);  // 64-byte aligned
  const int64_t ntaps = g.kernel_h * g.kernel_w, in_size = g.in_h * g.in_w;
  const int64_t out_size = g.out_h * g.out_w;
  TapPointers rows{};
  for (int64_t t = 0; t < ntaps; ++t)
    rows[static_cast<size_t>(t)] = buf + n.taps[static_cast<size_t>(t)];
  for (int64_t p = begin; p < end; ++p) {
    narrow_fill(n, x + p * in_size, buf);
    const int64_t c = p % channels;
    const float* wc = w + c * ntaps;
    const float b = bias ? bias[c] : 0.f;
    float* yp = y + p * out_size;
    plane_blocks(n.nvec, [&](auto vectors, int64_t v) QUILT_AVX512 {
      narrow_block<vectors>(rows, v, ntaps, wc, b, act, &n.out[v], yp);
    });
    if (!act.none() && !has_act16(act.kind)) act.apply(yp, out_size);
  }
}

// ---- narrow planes whose output rows are as wide as the input's: flat shifts ----
// With stride and dilation 1 and out_w == in_w (padding that keeps the width: 3x3 with pads 1,
// 5x5 with pads 2; kernels up to 5x5),
// output p = oh * w + ow reads input p + (kh - pad_top) * w + (kw - pad_left): each tap is a
// shift of the flat plane, with no padded columns between the rows. A tap's vector for 16
// outputs is a masked load of the plane at that shift, the mask keeping the lanes whose input
// pixel lies inside the plane (not in the row before or after, nor above or below the plane);
// the masked-off lanes read nothing. A 25x5 plane's 125 outputs are 8 vectors (in the
// padded-row layout above: 11, 71 % live), stored as they are.
// Per call (CpuDepthwiseConv.DISABLED_Throughput, 1 thread, AMD EPYC Zen 5, 3 alternating
// rounds): the keyword spotter's 64x25x5 3x3 2.87-3.49 -> 2.46-2.88 us, EfficientNet's
// 1152x7x7 3x3 35.7-37.2 -> 34.4-34.8 us, against copying each plane, shifted once per kernel
// column with the wrapped pixels zeroed, and reading the copies unmasked. Rows wider than 8 keep
// the row tiles (480x14x14: the same 41 us; 144x56x56: 180 against 135). Sharing window_sums
// with the padded-row kernel, each tap's pointer and mask row worked out once per tap (tap(t)),
// took it to 2.24-2.25 and 28.0-29.0 us (from 2.44-2.46 and 31.8-32.5); a per-vector load
// callable that recomputed them made it slower (2.51-2.53, 33.2-33.9). Two planes at a time,
// sharing each mask load: 1.94-1.96 and 25.4-25.7 us. Three: 2.08-2.11 and 25.9-26.3; four (on
// planes of at most 4 vectors) spilled and took twice as long. 5x5 windows (MobileNetV3's and
// EfficientNet's 7x7 maps) had the row bands: 1152x7x7 5x5 79-90 -> 51.6-52.7 us here.
struct Flat {
  int64_t nvec;                       // output vectors per plane
  std::array<int64_t, 25> offsets{};  // per tap: (kh - pad_top) * w + kw - pad_left
  std::vector<__mmask16> masks;       // per (output vector, tap): the lanes whose input is inside
};

std::optional<Flat> flat_geometry(const DepthwiseGeometry& g) {
  if (g.stride_h != 1 || g.stride_w != 1 || g.dilation_h != 1 || g.dilation_w != 1) return {};
  if (g.out_w != g.in_w || g.in_w > 8 || g.kernel_w > 5 || g.kernel_h > 5) return {};
  if (g.pad_left < 0 || g.pad_top < 0 || g.pad_left >= g.kernel_w || g.pad_top >= g.kernel_h)
    return {};
  Flat f;
  const int64_t w = g.in_w, outs = g.out_h * g.out_w, ntaps = g.kernel_h * g.kernel_w;
  f.nvec = (outs + kLanes - 1) / kLanes;
  f.masks.resize(static_cast<size_t>(f.nvec * ntaps));
  for (int64_t kh = 0; kh < g.kernel_h; ++kh)
    for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
      const int64_t t = kh * g.kernel_w + kw;
      f.offsets[static_cast<size_t>(t)] = (kh - g.pad_top) * w + kw - g.pad_left;
      for (int64_t v = 0; v < f.nvec; ++v) {
        unsigned mask = 0;
        for (int64_t l = 0; l < kLanes && v * kLanes + l < outs; ++l) {
          const int64_t o = v * kLanes + l;
          const int64_t ih = o / w + kh - g.pad_top, iw = o % w + kw - g.pad_left;
          if (ih >= 0 && ih < g.in_h && iw >= 0 && iw < w) mask |= 1u << l;
        }
        f.masks[static_cast<size_t>(v * ntaps + t)] = static_cast<__mmask16>(mask);
      }
    }
  return f;
}

// V output vectors from vector v0 of P consecutive planes from xp (ins floats apart, weights
// w[p], bias[p]): the taps, the activation, and the stores, each plane's last vector masked to
// its end. The planes share the masks: each is loaded once for P loads of the input.
template <int P, int V>
QUILT_AVX512 inline void flat_block(const Flat& f, const float* xp, int64_t ins, int64_t ntaps,
                                    const std::array<const float*, P>& w,
                                    const std::array<float, P>& bias, const Activation& act,
                                    int64_t v0, int64_t outs, float* y) {
  __m512 acc[P][V];
  const __mmask16* m = f.masks.data() + v0 * ntaps;
  // The shift may point before the plane (or the tensor): only the masked lanes are read.
  window_sums<P, V>(acc, ntaps, w, bias, act, [&](int64_t t) {
    const float* s = xp + f.offsets[static_cast<size_t>(t)] + v0 * kLanes;
    const __mmask16* mt = m + t;
    return [s, mt, ntaps, ins](int p, int v) QUILT_AVX512 {
      return _mm512_maskz_loadu_ps(mt[v * ntaps], s + p * ins + v * kLanes);
    };
  });
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      const int64_t first = (v0 + v) * kLanes;
      float* yp = y + p * outs + first;
      if (first + kLanes <= outs)
        _mm512_storeu_ps(yp, acc[p][v]);
      else
        _mm512_mask_storeu_ps(yp, first_lanes(static_cast<int>(outs - first)), acc[p][v]);
    }
}

QUILT_AVX512 void flat_planes(const DepthwiseGeometry& g, const Flat& f, int64_t begin, int64_t end,
                              int64_t channels, const float* x, const float* w, const float* bias,
                              float* y, const Activation& act) {
  const int64_t ins = g.in_h * g.in_w, outs = g.out_h * g.out_w, ntaps = g.kernel_h * g.kernel_w;
  auto planes = [&]<int P>(std::integral_constant<int, P>, int64_t p) QUILT_AVX512 {
    std::array<const float*, P> wp;
    std::array<float, P> bp;
#pragma GCC unroll 8
    for (int i = 0; i < P; ++i) {
      const int64_t c = (p + i) % channels;
      wp[i] = w + c * ntaps;
      bp[i] = bias ? bias[c] : 0.f;
    }
    const float* xp = x + p * ins;
    float* yp = y + p * outs;
    plane_blocks(f.nvec, [&](auto vectors, int64_t v) QUILT_AVX512 {
      flat_block<P, vectors>(f, xp, ins, ntaps, wp, bp, act, v, outs, yp);
    });
    if (!act.none() && !has_act16(act.kind)) act.apply(yp, P * outs);
  };
  int64_t p = begin;
  for (; p + 2 <= end; p += 2) planes(std::integral_constant<int, 2>{}, p);
  if (p < end) planes(std::integral_constant<int, 1>{}, p);
}

// ---- small planes, 16 channels at a time ----
// Sixteen channels' planes transposed into one zero-padded plane of 16-channel vectors (pixel
// p's vector: its 16 channels), as a channel-blocked layout holds them: every tap of every output
// pixel is then one aligned load and one FMA with all 16 lanes live, whatever the plane's width,
// stride or padding, with no masks and no branches. An output row's vectors stay in registers
// over the taps (rows of at most 16). The weights are transposed the same way, per block. Two
// 16 x 16 transposes per 16 pixels (in, out) are the cost; planes of at most kBlockedPixels
// pixels keep the block's input and output in L1.
using Blocked16 = BlockedPlan;

constexpr int64_t kBlockedPixels = 256;

std::optional<Blocked16> blocked16_geometry(const DepthwiseGeometry& g) {
  return blocked_plan(g, kLanes, kLanes, kBlockedPixels, 2 * kBlockedPixels);
}

// One block's output rows (OW columns each) from its padded transposed input xt and weights wt
// into yt: the bias (16 floats, aligned), the taps, the activation (kinds act16 has). S: the column
// stride when known at compile (immediate offsets), else 0 (g.stride_w).
template <int OW, int S>
QUILT_AVX512 void blocked16_rows(const Blocked16& b, const float* xt, const float* wt,
                                 const float* bias16, const Activation& act, bool act_here,
                                 float* yt) {
  const DepthwiseGeometry& g = b.g;
  const __m512 bv = _mm512_load_ps(bias16);
  const __m512 alpha = _mm512_set1_ps(act.alpha), beta = _mm512_set1_ps(act.beta);
  const int64_t step = (S ? S : g.stride_w) * kLanes;
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    __m512 acc[OW];
#pragma GCC unroll 16
    for (int ow = 0; ow < OW; ++ow) acc[ow] = bv;
    const float* w = wt;
    for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
      const float* row = xt + (oh * g.stride_h + kh * g.dilation_h) * b.padded_w * kLanes;
      for (int64_t kw = 0; kw < g.kernel_w; ++kw, w += kLanes) {
        const __m512 wv = _mm512_load_ps(w);
        const float* px = row + kw * g.dilation_w * kLanes;
#pragma GCC unroll 16
        for (int ow = 0; ow < OW; ++ow)
          acc[ow] = _mm512_fmadd_ps(wv, _mm512_load_ps(px + ow * step), acc[ow]);
      }
    }
#pragma GCC unroll 16
    for (int ow = 0; ow < OW; ++ow)
      _mm512_store_ps(yt + (oh * OW + ow) * kLanes,
                      act_here ? act16(act.kind, acc[ow], alpha, beta) : acc[ow]);
  }
}

using Blocked16Rows = void (*)(const Blocked16&, const float*, const float*, const float*,
                               const Activation&, bool, float*);

// The row kernel for OW = out_w (1 to 16) and the column stride (1, 2 or any).
Blocked16Rows blocked16_kernel(int64_t out_w, int64_t stride_w) {
  static constexpr auto table = []<size_t... I>(std::index_sequence<I...>) {
    return std::array<std::array<Blocked16Rows, 3>, sizeof...(I)>{std::array<Blocked16Rows, 3>{
        &blocked16_rows<static_cast<int>(I) + 1, 1>, &blocked16_rows<static_cast<int>(I) + 1, 2>,
        &blocked16_rows<static_cast<int>(I) + 1, 0>}...};
  }
  (std::make_index_sequence<kLanes>());
  return table[static_cast<size_t>(out_w - 1)][stride_w == 1 ? 0 : stride_w == 2 ? 1 : 2];
}

// dst[p] (16 floats each) = element p of the `live` rows src + i * stride (i < live; the other
// lanes 0), for p < n, stored at dst + at[p] (floats) when at is given, else at p * 16: rows of n
// floats turned into n vectors, 16 at a time.
QUILT_AVX512 void rows_to_vectors(const float* src, int64_t stride, int64_t live, int64_t n,
                                  float* dst, const int32_t* at) {
  for (int64_t p0 = 0; p0 < n; p0 += kLanes) {
    const int64_t count = std::min(kLanes, n - p0);
    const __mmask16 m = first_lanes(static_cast<int>(count));
    __m512 r[kLanes];
#pragma GCC unroll 16
    for (int64_t i = 0; i < kLanes; ++i)
      r[i] = i < live ? _mm512_maskz_loadu_ps(m, src + i * stride + p0) : _mm512_setzero_ps();
    transpose16x16(r);
    for (int64_t j = 0; j < count; ++j)
      _mm512_store_ps(dst + (at ? at[p0 + j] : (p0 + j) * kLanes), r[j]);
  }
}

// The inverse: element p of row i (dst + i * stride, i < live) = lane i of src[p], for p < n.
QUILT_AVX512 void vectors_to_rows(const float* src, int64_t n, int64_t live, float* dst,
                                  int64_t stride) {
  for (int64_t p0 = 0; p0 < n; p0 += kLanes) {
    const int64_t count = std::min(kLanes, n - p0);
    const __mmask16 m = first_lanes(static_cast<int>(count));
    __m512 r[kLanes];
#pragma GCC unroll 16
    for (int64_t j = 0; j < kLanes; ++j)
      r[j] = j < count ? _mm512_load_ps(src + (p0 + j) * kLanes) : _mm512_setzero_ps();
    transpose16x16(r);
    for (int64_t i = 0; i < live; ++i) _mm512_mask_storeu_ps(dst + i * stride + p0, m, r[i]);
  }
}

// Blocks [begin, end) of 16 channels: block k is image k / blocks_per_image's channels from 16 *
// (k % blocks_per_image), the last block of an image holding the channels that remain.
// w16: the weights laid out already (depthwise_weights16), else null.
QUILT_AVX512 void blocked16_planes(const Blocked16& b, int64_t begin, int64_t end, int64_t channels,
                                   const float* x, const float* w, const float* w16,
                                   const float* bias, float* y, const Activation& act) {
  const int64_t per_image = (channels + kLanes - 1) / kLanes;
  const int64_t padded = b.padded_h * b.padded_w;
  float* xt = thread_scratch(5, (padded + b.out_px + b.ntaps + 1) * kLanes);  // 64-byte aligned
  float* yt = xt + padded * kLanes;
  float* wt = yt + b.out_px * kLanes;
  float* bt = wt + b.ntaps * kLanes;  // the block's bias
  zero_padding(b, kLanes, xt);        // the blocks write only the inside
  const bool act_here = !act.none() && has_act16(act.kind);
  const Blocked16Rows rows = blocked16_kernel(b.g.out_w, b.g.stride_w);
  for (int64_t k = begin; k < end; ++k) {
    const int64_t n = k / per_image, c0 = k % per_image * kLanes;
    const int64_t live = std::min(kLanes, channels - c0);
    const int64_t plane0 = n * channels + c0;  // the block's first plane
    rows_to_vectors(x + plane0 * b.in_px, b.in_px, live, b.in_px, xt, b.to_padded.data());
    const float* wb = w16 ? w16 + c0 * b.ntaps : wt;  // c0 is the block's first channel
    if (!w16) rows_to_vectors(w + c0 * b.ntaps, b.ntaps, live, b.ntaps, wt, nullptr);
    _mm512_store_ps(bt, bias ? _mm512_maskz_loadu_ps(first_lanes(static_cast<int>(live)), bias + c0)
                             : _mm512_setzero_ps());
    rows(b, xt, wb, bt, act, act_here, yt);
    float* yp = y + plane0 * b.out_px;
    vectors_to_rows(yt, b.out_px, live, yp, b.out_px);
    if (!act.none() && !act_here) act.apply(yp, live * b.out_px);
  }
}

}  // namespace

bool depthwise_flat_avx512(const DepthwiseGeometry& g, int64_t planes, int64_t channels,
                           const float* x, const float* w, const float* bias, float* y,
                           const Activation& act, const ThreadPool& pool) {
  const Flat* f = cached_plan<Flat>(g, flat_geometry);
  if (!f) return false;
  split_planes(planes, f->nvec * kLanes * g.kernel_h * g.kernel_w, pool,
               [&](int64_t begin, int64_t end) {
                 flat_planes(g, *f, begin, end, channels, x, w, bias, y, act);
               });
  return true;
}

bool depthwise_blocked16_avx512(const DepthwiseGeometry& g, int64_t planes, int64_t channels,
                                const float* x, const float* w, const float* bias, float* y,
                                const Activation& act, const ThreadPool& pool, const float* w16) {
  if (channels <= 0 || planes % channels != 0) return false;
  const Blocked16* b = cached_plan<Blocked16>(g, blocked16_geometry);
  if (!b) return false;
  const int64_t per_image = (channels + kLanes - 1) / kLanes;
  const int64_t blocks = planes / channels * per_image;
  split_planes(blocks, std::max<int64_t>(1, b->out_px * b->ntaps * kLanes), pool,
               [&](int64_t begin, int64_t end) {
                 blocked16_planes(*b, begin, end, channels, x, w, w16, bias, y, act);
               });
  return true;
}

bool depthwise_narrow_avx512(const DepthwiseGeometry& g, int64_t planes, int64_t channels,
                             const float* x, const float* w, const float* bias, float* y,
                             const Activation& act, const ThreadPool& pool) {
  const Narrow* n = cached_plan<Narrow>(g, narrow_geometry);
  if (!n) return false;
  split_planes(planes, g.out_h * n->rs * g.kernel_h * g.kernel_w, pool,
               [&](int64_t begin, int64_t end) {
                 narrow_planes(g, *n, begin, end, channels, x, w, bias, y, act);
               });
  return true;
}

// ---- 3x3, stride 1: rows read straight from the input ----
// The band kernels copy each plane into a padded buffer first and then load every kernel
// column's vector at its own offset: on wide rows (EfficientNet's 144x56x56 and 32x112x112) the
// copy took a third of the time and most of the tiles' loads crossed a cache line (on Zen 4 a
// crossing load costs two). Here a tile loads each input row once, one vector per 16 columns and
// one more, straight from the input (masked at the plane's edges, zeros above and below it), and
// makes the columns shifted by one and two by valignd from neighbouring vectors; each loaded row
// feeds the three output rows it reaches, with the nine weights in registers.
namespace {

struct Rows3x3 {
  const float* x;  // the plane
  int64_t in_h, in_w;
  int64_t ih0;                     // input row of the tile's first buffer row (may be < 0)
  int64_t col;                     // input column of lane 0 of the tile's first vector (may be < 0)
  std::array<__mmask16, 5> masks;  // per loaded vector: lanes inside the input row
};

// R rows x V vectors: R * V accumulators + 9 weights + V + 1 loads + 2 shifted columns within
// 32 registers.
struct Rows3x3Tile {
  static constexpr int kMaxVectors = 4;
  static constexpr int rows(int v) { return v == 4 ? 4 : v == 3 ? 5 : v == 2 ? 8 : 12; }

  template <int R, int V>
  QUILT_AVX512 static void run(const Rows3x3& in, const __m512 (&wv)[9], const TileArgs& a) {
    __m512 acc[R][V];
    tile_init(acc, a.bias);
#pragma GCC unroll 32
    for (int i = 0; i < R + 2; ++i) {
      const int64_t ih = in.ih0 + i;
      __m512i xv[V + 1];
      if (ih >= 0 && ih < in.in_h) {
        const float* s = in.x + ih * in.in_w + in.col;
#pragma GCC unroll 32
        for (int v = 0; v <= V; ++v)
          xv[v] = _mm512_castps_si512(_mm512_maskz_loadu_ps(in.masks[v], s + v * kLanes));
      } else {
#pragma GCC unroll 32
        for (int v = 0; v <= V; ++v) xv[v] = _mm512_setzero_si512();
      }
#pragma GCC unroll 32
      for (int v = 0; v < V; ++v) {
        const __m512 s0 = _mm512_castsi512_ps(xv[v]);
        const __m512 s1 = _mm512_castsi512_ps(_mm512_alignr_epi32(xv[v + 1], xv[v], 1));
        const __m512 s2 = _mm512_castsi512_ps(_mm512_alignr_epi32(xv[v + 1], xv[v], 2));
#pragma GCC unroll 32
        for (int r = 0; r < R; ++r) {
          const int kh = i - r;
          if (kh < 0 || kh >= 3) continue;
          acc[r][v] = _mm512_fmadd_ps(wv[3 * kh], s0, acc[r][v]);
          acc[r][v] = _mm512_fmadd_ps(wv[3 * kh + 1], s1, acc[r][v]);
          acc[r][v] = _mm512_fmadd_ps(wv[3 * kh + 2], s2, acc[r][v]);
        }
      }
    }
    tile_store(acc, a);
  }
};

// Output rows [oh0, oh1) of one plane.
QUILT_AVX512 void rows3x3_band(const DepthwiseGeometry& g, const float* x, const float* w,
                               float bias, const Activation& act, float* y, int64_t oh0,
                               int64_t oh1) {
  __m512 wv[9];
#pragma GCC unroll 9
  for (int k = 0; k < 9; ++k) wv[k] = _mm512_set1_ps(w[k]);
  TileArgs a{};
  a.bias = bias;
  a.y_row = g.out_w;
  a.mask_last = true;
  if (has_act16(act.kind)) a.act = act;
  Rows3x3 in{x, g.in_h, g.in_w, 0, 0, {}};
  const int64_t nvec = (g.out_w + kLanes - 1) / kLanes;
  const int64_t groups = (nvec + 3) / 4;
  const int64_t rows = oh1 - oh0;
  const int64_t tile_rows_max = Rows3x3Tile::rows(static_cast<int>((nvec + groups - 1) / groups));
  const int64_t ntiles = (rows + tile_rows_max - 1) / tile_rows_max;
  for (int64_t gi = 0, v0 = 0; gi < groups; ++gi) {
    const int64_t nv = (nvec - v0) / (groups - gi);  // balanced: 7 -> 3 + 4
    in.col = v0 * kLanes - g.pad_left;
    for (int64_t v = 0; v <= nv; ++v) {
      const int64_t lo = std::clamp<int64_t>(-(in.col + v * kLanes), 0, kLanes);
      const int64_t hi = std::clamp<int64_t>(g.in_w - (in.col + v * kLanes), 0, kLanes);
      in.masks[static_cast<size_t>(v)] =
          hi > lo ? static_cast<__mmask16>(lanes16(0, hi) & ~lanes16(0, lo)) : __mmask16(0);
    }
    a.mask = gi + 1 == groups ? lanes16((nvec - 1) * kLanes, g.out_w) : __mmask16(0xffff);
    for (int64_t r0 = oh0, ti = 0; r0 < oh1; ++ti) {
      const int64_t tile_rows = (oh1 - r0) / (ntiles - ti);  // balanced heights
      in.ih0 = r0 - g.pad_top;
      a.y = y + r0 * g.out_w + v0 * kLanes;
      run_tile<Rows3x3Tile>(nv, tile_rows, in, wv, a);
      r0 += tile_rows;
    }
    v0 += nv;
  }
  if (!act.none() && !has_act16(act.kind)) {
    for (int64_t r = oh0; r < oh1; ++r) act.apply(y + r * g.out_w, g.out_w);
  }
}

}  // namespace

bool depthwise_rows3x3_avx512(const DepthwiseGeometry& g, int64_t planes, int64_t channels,
                              const float* x, const float* w, const float* bias, float* y,
                              const Activation& act, const ThreadPool& pool) {
  if (!rows3x3_takes(g, 8)) return false;
  const int64_t in_size = g.in_h * g.in_w, out_size = g.out_h * g.out_w;
  rows3x3_bands(g, planes, channels, pool, [&](int64_t p, int64_t c, int64_t oh0, int64_t oh1) {
    rows3x3_band(g, x + p * in_size, w + c * 9, bias ? bias[c] : 0.f, act, y + p * out_size, oh0,
                 oh1);
  });
  return true;
}

}  // namespace quilt::cpu::depthwise_detail

#undef QUILT_AVX512
