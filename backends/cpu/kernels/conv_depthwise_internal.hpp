// Internals of the depthwise conv shared by its AVX2 (conv_depthwise.cpp) and AVX-512
// (conv_depthwise_avx512.cpp) tiles, and the entry point that lets tests pick the AVX2 path.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "backends/cpu/kernels/conv_depthwise.hpp"

namespace quilt::cpu::depthwise_detail {

// Where the band buffer holds what. Buffer row i of a band starting at output row oh0 is padded
// input row oh0 * stride_h + i; within it, phase r (0 <= r < stride_w) is a run of row_len floats
// whose j-th entry is padded column j * stride_w + r (padded column c = input column c - pad_left).
struct Plan {
  DepthwiseGeometry g;
  int64_t row_len = 0;     // every output column rounded up to 8 lanes, plus the widest tap reach
  int64_t row_stride = 0;  // stride_w * row_len
  int64_t band_rows = 0;   // output rows per band
  int64_t bands = 0;       // bands per plane
  int64_t buffer_rows = 0;
  std::vector<int64_t> taps;  // per (kh, kw): offset from the output row's first buffer row
  std::vector<int64_t> cols;  // per kw: offset within a buffer row
  struct Run {
    int64_t dst, src, count;  // buffer row[dst + j] = input row[src + j * stride_w]
  };
  std::vector<Run> runs;  // one per column phase that holds input columns
  bool paired = false;    // stride 2, runs[0] the even input columns, runs[1] the odd ones
  bool split16 = false;   // paired rows split by the AVX-512 deinterleave_avx512
  // Applied by the AVX-512 tiles to their registers before the store (set only for them, and
  // only for kinds act16 has); the caller applies any other activation to the stored rows.
  Activation act;

  int64_t band_buffer_rows(int64_t rows) const {
    return (rows - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1;
  }
};

// Floats the band buffer holds past its last row: a tile's vector may read that far beyond the
// last column (and a 16-lane vector over a row narrower than 16 reads past the row).
constexpr int64_t kBufferSlack = 16;

// Output rows [0, rows) of one band (buf filled by fill_band): y = bias + window sums.
using BandFn = void (*)(const Plan&, const float* buf, const float* w, float bias, float* y,
                        int64_t rows);

// Small planes, a block of channels at a time (the 8-lane AVX2 and 16-lane AVX-512 kernels):
// the block's planes transposed into one zero-padded plane of channel vectors (pixel p's vector:
// its `lanes` channels), as a channel-blocked layout holds them. Every tap of every output pixel
// is then one aligned load and one FMA with every lane live, whatever the plane's width, stride
// or padding, with no masks and no branches.
struct BlockedPlan {
  DepthwiseGeometry g{};
  int64_t in_px = 0, out_px = 0, ntaps = 0;
  int64_t padded_h = 0, padded_w = 0;  // the padded plane: input pixel (ih, iw) at (ih + pad_top,
                                       // iw + pad_left), zeros around it
  std::vector<int32_t> to_padded;      // per input pixel: its padded pixel, times the lanes
};

// Zeroes the padding of a block's transposed plane (`lanes` floats a pixel, laid out as `b`
// says): the rows above and below the input and the columns beside it. The input's pixels are
// left as they are: every block overwrites all of their lanes. Zeroing the whole plane per call
// wrote up to 115 KB (a 3,600-pixel plane of 8-channel vectors) where the border is a fraction.
inline void zero_padding(const BlockedPlan& b, int64_t lanes, float* xt) {
  const DepthwiseGeometry& g = b.g;
  const int64_t row = b.padded_w * lanes;
  const int64_t in_top = g.pad_top, in_end = g.pad_top + g.in_h;
  std::fill(xt, xt + in_top * row, 0.f);
  std::fill(xt + in_end * row, xt + b.padded_h * row, 0.f);
  const int64_t left = g.pad_left * lanes, right = (g.pad_left + g.in_w) * lanes;
  for (int64_t r = in_top; r < in_end; ++r) {
    std::fill(xt + r * row, xt + r * row + left, 0.f);
    std::fill(xt + r * row + right, xt + (r + 1) * row, 0.f);
  }
}

// The plan for blocks of `lanes` channels, or none when out_w passes max_out_w, the output
// max_out_px pixels, the padded plane max_padded_px pixels or the kernel max_out_px taps.
std::optional<BlockedPlan> blocked_plan(const DepthwiseGeometry& g, int64_t lanes,
                                        int64_t max_out_w, int64_t max_out_px,
                                        int64_t max_padded_px);

// The plan of the last geometry this thread ran through `make` (null when it gives none): a
// model's small convs mostly share a few, and building one cost a tenth of the conv.
template <class Plan>
const Plan* cached_plan(const DepthwiseGeometry& g,
                        std::optional<Plan> (*make)(const DepthwiseGeometry&)) {
  struct Cached {
    DepthwiseGeometry g{};
    std::optional<Plan> (*make)(const DepthwiseGeometry&) = nullptr;
    std::optional<Plan> plan;
  };
  thread_local Cached cache;
  if (!cache.plan || cache.make != make || std::memcmp(&cache.g, &g, sizeof g) != 0) {
    std::optional<Plan> plan = make(g);
    if (!plan) return nullptr;
    cache.g = g;
    cache.make = make;
    cache.plan = std::move(plan);
  }
  return &*cache.plan;
}

// A conv of fewer multiply-adds stays on the calling thread unless the pool is awake
// (ThreadPool::split_work). Split alone, its next node read half its output from the other
// core's cache: the keyword spotter's 64x25x5 3x3 convs (72K multiply-adds) at 2 threads, the
// whole model 0.081 ms against 0.087-0.138 split. Split together with the pointwise convs around
// them, each thread's half of the planes is the half of the channels its GEMM rows wrote, and
// the model took 0.069-0.070 ms against 0.0766 with neither split and 0.085-0.086 with only the
// pointwise ones (AMD EPYC, idle, five alternating rounds).
constexpr int64_t kSplitMacs = int64_t{1} << 18;

// fn(begin, end) over the items (planes or blocks of them): on the calling thread below
// kSplitMacs multiply-adds (or the pool's split_work), else in chunks of about 32K, as many for
// each thread (up to 4 each). Chunks of 32K regardless of the thread count cut the keyword
// spotter's 64 planes (74K multiply-adds) into 22 + 22 + 20: the caller took the first and then
// the third from the worker, which starts later, so it did two thirds; two chunks of 32 took its
// model, 2 threads, 3 alternating rounds, from 0.0271-0.0276 to 0.0257-0.0261 ms (AMD EPYC). Four
// chunks a thread whatever the size: 0.0260-0.0266.
template <class Fn>
void split_planes(int64_t items, int64_t item_macs, const ThreadPool& pool, Fn fn) {
  const int64_t macs = items * item_macs;
  if (macs < std::min(kSplitMacs, pool.split_work())) {
    fn(0, items);
    return;
  }
  const int64_t threads = pool.threads();
  const int64_t per_thread = std::clamp<int64_t>(macs / (threads << 15), 1, 4);
  pool.parallel_for(items, (items + threads * per_thread - 1) / (threads * per_thread), fn);
}

// Whether the rows-from-the-input 3x3 kernels (AVX2 and AVX-512) take g: 3x3, stride and
// dilation 1, rows wider than `lanes`.
inline bool rows3x3_takes(const DepthwiseGeometry& g, int64_t lanes) {
  return g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 && g.stride_w == 1 &&
         g.dilation_h == 1 && g.dilation_w == 1 && g.out_w > lanes;
}

// band(plane, channel, oh0, oh1) for bands of output rows of at least 2^15 multiply-adds of a
// 3x3 conv (whole 56x56 planes; 112x112 ones in four), across the pool.
template <class Band>
void rows3x3_bands(const DepthwiseGeometry& g, int64_t planes, int64_t channels,
                   const ThreadPool& pool, Band band) {
  const int64_t row_macs = g.out_w * 9;
  const int64_t band_rows = std::clamp<int64_t>((int64_t{1} << 15) / row_macs, 1, g.out_h);
  const int64_t bands = (g.out_h + band_rows - 1) / band_rows;
  pool.parallel_for(planes * bands, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t p = item / bands, b = item % bands;
      const int64_t oh0 = b * band_rows;
      band(p, p % channels, oh0, std::min(g.out_h, oh0 + band_rows));
    }
  });
}

// The AVX-512 band kernel for g, or null where the AVX2 one measured as fast. Call only when the
// CPU has AVX-512F/BW/VL/DQ.
BandFn band_kernel_avx512(const DepthwiseGeometry& g);

// Planes with rows of at most 8 columns kept as wide by the padding (out_w == in_w), stride and
// dilation 1, kernels up to 5x5: the flat-shift kernel (conv_depthwise_avx512.cpp). False, doing
// nothing, for other geometries. Call only when the CPU has AVX-512F/BW/VL/DQ.
bool depthwise_flat_avx512(const DepthwiseGeometry& g, int64_t planes, int64_t channels,
                           const float* x, const float* w, const float* bias, float* y,
                           const Activation& act, const ThreadPool& pool);

// Planes of at most 256 pixels (in and out), any window, stride, dilation and padding: sixteen
// channels at a time, transposed into 16-channel vectors (conv_depthwise_avx512.cpp). False,
// doing nothing, for other geometries. Call only when the CPU has AVX-512F/BW/VL/DQ.
bool depthwise_blocked16_avx512(const DepthwiseGeometry& g, int64_t planes, int64_t channels,
                                const float* x, const float* w, const float* bias, float* y,
                                const Activation& act, const ThreadPool& pool,
                                const float* w16 = nullptr);

// Planes with rows of at most 8 columns, stride and dilation 1, whole padded planes in L1: the
// flattened-plane kernel (conv_depthwise_avx512.cpp). False, doing nothing, for other geometries.
// Call only when the CPU has AVX-512F/BW/VL/DQ.
bool depthwise_narrow_avx512(const DepthwiseGeometry& g, int64_t planes, int64_t channels,
                             const float* x, const float* w, const float* bias, float* y,
                             const Activation& act, const ThreadPool& pool);

// 3x3 kernels, stride and dilation 1, rows wider than 16 columns: tiles that read the input
// directly (no band buffer). False, doing nothing, for other geometries. Call only when the CPU
// has AVX-512F/BW/VL/DQ.
bool depthwise_rows3x3_avx512(const DepthwiseGeometry& g, int64_t planes, int64_t channels,
                              const float* x, const float* w, const float* bias, float* y,
                              const Activation& act, const ThreadPool& pool);

// For `rows` rows (src_row and dst_row floats apart): even[m] = src[2 m] for m < n_even and
// odd[m] = src[2 m + 1] for m < n_odd (n_even - n_odd is 0 or 1), reading only src[0, n_even +
// n_odd): a stride-2 row's two column phases, 32 floats per two permutes (even and odd are
// offsets into dst). Call only when the CPU has AVX-512F/BW/VL/DQ.
void deinterleave_rows_avx512(const float* src, int64_t src_row, float* dst, int64_t dst_row,
                              int64_t rows, int64_t even, int64_t n_even, int64_t odd,
                              int64_t n_odd);

// depthwise_conv2d, using AVX-512 tiles only when allow_avx512 and the CPU has them (tests run
// both paths); allow_transposed and allow_rows3x3 (AVX2) let tests and benchmarks set those
// kernels aside for the band tiles.
const char* depthwise_conv2d(const DepthwiseGeometry& g, int64_t planes, int64_t channels,
                             const float* x, const float* w, const float* bias, float* y,
                             const Activation& act, const ThreadPool& pool, bool allow_avx512,
                             bool allow_transposed = true, const float* w16 = nullptr,
                             bool allow_rows3x3 = true);

}  // namespace quilt::cpu::depthwise_detail
