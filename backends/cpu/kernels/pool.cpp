// MaxPool, AveragePool, LpPool, MaxUnpool, GlobalAveragePool, GlobalMaxPool, parallel over (batch,
// channel) planes. Spatial dims are padded in front to three, as in conv.cpp.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/avx512.hpp"
#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/quantization_common.hpp"
#include "backends/cpu/kernels/short_rows.hpp"
#include "core/checked.hpp"

namespace quilt::cpu {

std::vector<int64_t> window_pad_begins(const Node& node, const std::vector<int64_t>& x_shape,
                                       const std::vector<int64_t>& kernel,
                                       const std::vector<int64_t>& y_shape);

namespace {

using Dims3 = std::array<int64_t, 3>;

// Outputs o in [lo, hi) read input o * stride + offset inside [0, in).
std::pair<int64_t, int64_t> valid_range(int64_t out, int64_t in, int64_t stride, int64_t offset) {
  int64_t lo = ceil_div_positive(saturating_sub(0, offset), stride);
  int64_t hi = ceil_div_positive(saturating_sub(in, offset), stride);
  lo = std::min(lo, out);
  return {lo, std::clamp(hi, lo, out)};
}

struct Geometry {
  Dims3 in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1},
      pad{0, 0, 0}, pad_end{0, 0, 0};
  // Per kernel column kw in [kw_first, kw_first + w_ranges.size()): the output columns
  // [first, second) whose input column is inside the input. Columns outside that span read only
  // padding for every output (a SAME-padded window far wider than the input) and are left out,
  // so the work follows the input, not kernel_shape. Computed once per run: the divisions are
  // too slow for inner loops.
  int64_t kw_first = 0;
  std::vector<std::pair<int64_t, int64_t>> w_ranges;
  int64_t kw_end() const { return kw_first + static_cast<int64_t>(w_ranges.size()); }
  std::pair<int64_t, int64_t> w_range(int64_t kw) const {
    return w_ranges[static_cast<size_t>(kw - kw_first)];
  }
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
};

Geometry pool_geometry(const Node& node, const std::vector<int64_t>& x_shape,
                       const std::vector<int64_t>& y_shape) {
  const size_t sp = x_shape.size() - 2;
  const auto kernel = node.attr_ints("kernel_shape");
  const auto strides = node.attr_ints("strides", std::vector<int64_t>(sp, 1));
  const auto dilations = node.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  const auto pads = node.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  const auto begins = window_pad_begins(node, x_shape, kernel, y_shape);
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  Geometry g;
  for (size_t i = 0; i < sp; ++i) {
    const size_t j = 3 - sp + i;
    g.in[j] = x_shape[i + 2];
    g.out[j] = y_shape[i + 2];
    g.kernel[j] = kernel[i];
    g.stride[j] = strides[i];
    g.dilation[j] = dilations[i];
    g.pad[j] = begins[i];
    if (auto_pad == "NOTSET") {
      g.pad_end[j] = pads[i + sp];
    } else if (auto_pad != "VALID") {
      const int64_t dk = (kernel[i] - 1) * dilations[i] + 1;
      g.pad_end[j] = (g.out[j] - 1) * strides[i] + dk - g.in[j] - begins[i];
    }
    // One output along a dim reads the same window whatever the stride (as conv_geometry): a
    // hostile stride (2^63 - 1, fuzz_run) then never enters the arithmetic.
    if (g.out[j] == 1) g.stride[j] = 1;
  }
  // Column kw reads input columns kw * dilation - pad + [0, out - 1] * stride: some lie inside
  // [0, in) only for kw in [first, end).
  const int64_t d = g.dilation[2];
  const auto ceil_div = [d](int64_t num) { return num <= 0 ? 0 : (num - 1) / d + 1; };
  const int64_t end = std::min(g.kernel[2], ceil_div(g.in[2] + g.pad[2]));
  g.kw_first = std::min(end, ceil_div(g.pad[2] - (g.out[2] - 1) * g.stride[2]));
  for (int64_t kw = g.kw_first; kw < end; ++kw)
    g.w_ranges.push_back(valid_range(g.out[2], g.in[2], g.stride[2], kw * d - g.pad[2]));
  return g;
}

// Calls fn(flat input index) for every window element of output (od, oh, ow) that lies inside
// the input.
// Kernel offsets k in [lo, hi) whose input o * stride - pad + k * dilation lies in [0, in).
std::pair<int64_t, int64_t> kernel_range(int64_t o, int64_t stride, int64_t pad, int64_t dilation,
                                         int64_t kernel, int64_t in) {
  const int64_t start = o * stride - pad;
  const int64_t lo = ceil_div_positive(saturating_sub(0, start), dilation);
  const int64_t hi = ceil_div_positive(saturating_sub(in, start), dilation);
  return {std::min(lo, kernel), std::clamp(hi, std::min(lo, kernel), kernel)};
}

// Calls fn(id, ih, iw) for every window element of output (od, oh, ow) inside the input.
template <class Fn>
void for_window(const Geometry& g, int64_t od, int64_t oh, int64_t ow, Fn&& fn) {
  const auto [d0, d1] =
      kernel_range(od, g.stride[0], g.pad[0], g.dilation[0], g.kernel[0], g.in[0]);
  const auto [h0, h1] =
      kernel_range(oh, g.stride[1], g.pad[1], g.dilation[1], g.kernel[1], g.in[1]);
  const auto [w0, w1] =
      kernel_range(ow, g.stride[2], g.pad[2], g.dilation[2], g.kernel[2], g.in[2]);
  const int64_t sd = od * g.stride[0] - g.pad[0], sh = oh * g.stride[1] - g.pad[1],
                sw = ow * g.stride[2] - g.pad[2];
  for (int64_t kd = d0; kd < d1; ++kd)
    for (int64_t kh = h0; kh < h1; ++kh)
      for (int64_t kw = w0; kw < w1; ++kw)
        fn(sd + kd * g.dilation[0], sh + kh * g.dilation[1], sw + kw * g.dilation[2]);
}

// One plane, a row of outputs at a time so the innermost loop runs along the output row
// (vectorisable for stride 1): y = fold of op over each window, starting from init.
template <class T, class Op>
void window_rows(const Geometry& g, const T* x, T* y, T init, Op op) {
  for (int64_t od = 0; od < g.out[0]; ++od)
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      T* yrow = y + (od * g.out[1] + oh) * g.out[2];
      std::fill(yrow, yrow + g.out[2], init);
      const auto [d0, d1] =
          kernel_range(od, g.stride[0], g.pad[0], g.dilation[0], g.kernel[0], g.in[0]);
      const auto [h0, h1] =
          kernel_range(oh, g.stride[1], g.pad[1], g.dilation[1], g.kernel[1], g.in[1]);
      for (int64_t kd = d0; kd < d1; ++kd)
        for (int64_t kh = h0; kh < h1; ++kh) {
          const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
          const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
          const T* xrow = x + (id * g.in[1] + ih) * g.in[2];
          for (int64_t kw = g.kw_first; kw < g.kw_end(); ++kw) {
            const int64_t off = kw * g.dilation[2] - g.pad[2];
            const auto [lo, hi] = g.w_range(kw);
            if (g.stride[2] == 1) {
              for (int64_t ow = lo; ow < hi; ++ow) yrow[ow] = op(yrow[ow], xrow[ow + off]);
            } else {
              for (int64_t ow = lo; ow < hi; ++ow)
                yrow[ow] = op(yrow[ow], xrow[ow * g.stride[2] + off]);
            }
          }
        }
    }
}

// Window sums for windows wider than the output row (a 25x5 average over a 25x5 map), with
// the additions reassociated: per output, 8 window columns at a time are summed down the
// window's rows in two registers (even and odd rows), then across. window_rows' one chain of
// kh * kw dependent adds, and a version keeping the column sums in memory (store-to-load
// forwarding on every row), took 11.7 and 7 us for 64 such planes.
bool wide_window_sums(const Geometry& g) {
  return g.dilation[2] == 1 && g.kernel[2] > g.out[2];
}

void window_sums_wide(const Geometry& g, const float* x, float* y) {
  for (int64_t od = 0; od < g.out[0]; ++od) {
    const auto [d0, d1] =
        kernel_range(od, g.stride[0], g.pad[0], g.dilation[0], g.kernel[0], g.in[0]);
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      const auto [h0, h1] =
          kernel_range(oh, g.stride[1], g.pad[1], g.dilation[1], g.kernel[1], g.in[1]);
      const int64_t row_step = g.dilation[1] * g.in[2];
      for (int64_t ow = 0; ow < g.out[2]; ++ow) {
        const int64_t start = ow * g.stride[2] - g.pad[2];
        const int64_t lo = std::max<int64_t>(start, 0), hi = std::min(start + g.kernel[2], g.in[2]);
        __m256 total = _mm256_setzero_ps();
        for (int64_t c = lo; c < hi; c += 8) {
          const __m256i mask = lanes8(std::min<int64_t>(8, hi - c));
          __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
          for (int64_t kd = d0; kd < d1; ++kd) {
            const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
            const int64_t ih = oh * g.stride[1] - g.pad[1] + h0 * g.dilation[1];
            const float* p = x + (id * g.in[1] + ih) * g.in[2] + c;
            int64_t kh = h0;
            for (; kh + 1 < h1; kh += 2, p += 2 * row_step) {
              even = _mm256_add_ps(even, _mm256_maskload_ps(p, mask));
              odd = _mm256_add_ps(odd, _mm256_maskload_ps(p + row_step, mask));
            }
            if (kh < h1) even = _mm256_add_ps(even, _mm256_maskload_ps(p, mask));
          }
          total = _mm256_add_ps(total, _mm256_add_ps(even, odd));
        }
        const __m128 half =
            _mm_add_ps(_mm256_castps256_ps128(total), _mm256_extractf128_ps(total, 1));
        const __m128 pair = _mm_add_ps(half, _mm_movehl_ps(half, half));
        y[(od * g.out[1] + oh) * g.out[2] + ow] =
            _mm_cvtss_f32(_mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1)));
      }
    }
  }
}

// Number of window elements along one dim whose position lies in [lo, hi): kernel_range with
// the origin at lo, in closed form (a loop over the taps ran for ever on a fuzzed 2^62 kernel).
int64_t count_in(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t dilation,
                 int64_t lo, int64_t hi) {
  const auto [k0, k1] = kernel_range(o, stride, pad + lo, dilation, kernel, hi - lo);
  return k1 - k0;
}

// a * b, or INT64_MAX when that overflows (a, b >= 0): a window's volume as a work estimate or
// a divisor, where the kernel dims may be as large as the input allows.
int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

int64_t window_volume(const Geometry& g) {
  return saturating_mul(saturating_mul(g.kernel[0], g.kernel[1]), g.kernel[2]);
}

// A 2-D 2x2 window with stride 2, no padding or dilation, every window inside the input.
bool pool_2x2_stride_2(const Geometry& g) {
  return g.in[0] == 1 && g.out[0] == 1 && g.kernel == Dims3{1, 2, 2} &&
         g.stride == Dims3{1, 2, 2} && g.dilation == Dims3{1, 1, 1} && g.pad == Dims3{0, 0, 0} &&
         2 * g.out[1] <= g.in[1] && 2 * g.out[2] <= g.in[2];
}

// A 2-D window without dilation whose windows overlap down the columns: the max is taken along
// each input row first (for every output column's window), then down the columns of those row
// maxima, which neighbouring windows share (kh + kw comparisons per output instead of kh * kw).
// YOLOv5s's SPPF 5x5 pools on 256 x 20 x 20 (stride 1) took 0.24 ms each, ONNX Runtime 0.06;
// ResNet-50's 3x3 stride-2 pool on 64 x 112 x 112 took 0.208 ms, now 0.156 (ORT 0.099). Where
// windows do not overlap (MNIST's 3x3 stride 3) nothing is shared and this was 1.5 % slower on the
// model. The fold keeps window_rows' order (row by row, left to right), so NaN and signed-zero
// results agree.
bool separable(const Geometry& g) {
  return g.in[0] == 1 && g.out[0] == 1 && g.kernel[0] == 1 && g.dilation == Dims3{1, 1, 1} &&
         g.stride[1] < g.kernel[1];
}

template <class T, class Op>
void window_separable(const Geometry& g, const T* x, T* y, T init, Op op) {
  // Per input row: the maxima of the output columns' windows (per-thread, grown, kept).
  T* const rows =
      static_cast<T*>(thread_scratch_bytes(6, static_cast<size_t>(g.in[1] * g.out[2]) * sizeof(T)));
  const int64_t sw = g.stride[2];
  for (int64_t ih = 0; ih < g.in[1]; ++ih) {
    T* h = rows + ih * g.out[2];
    const T* xrow = x + ih * g.in[2];
    std::fill(h, h + g.out[2], init);
    for (int64_t kw = g.kw_first; kw < g.kw_end(); ++kw) {
      const int64_t off = kw - g.pad[2];
      const auto [lo, hi] = g.w_range(kw);
      if (sw == 1)  // contiguous reads, which the compiler vectorises
        for (int64_t ow = lo; ow < hi; ++ow) h[ow] = op(h[ow], xrow[ow + off]);
      else
        for (int64_t ow = lo; ow < hi; ++ow) h[ow] = op(h[ow], xrow[ow * sw + off]);
    }
  }
  for (int64_t oh = 0; oh < g.out[1]; ++oh) {
    T* yrow = y + oh * g.out[2];
    std::fill(yrow, yrow + g.out[2], init);
    const int64_t top = oh * g.stride[1] - g.pad[1];
    const auto [h0, h1] = kernel_range(oh, g.stride[1], g.pad[1], 1, g.kernel[1], g.in[1]);
    for (int64_t kh = h0; kh < h1; ++kh) {
      const T* h = rows + (top + kh) * g.out[2];
      for (int64_t ow = 0; ow < g.out[2]; ++ow) yrow[ow] = op(yrow[ow], h[ow]);
    }
  }
}

// A separable max window at stride 1 whose padded plane is not much larger than the plane
// (max_stride_1). YOLOv5s's SPPF (three 5x5 pools on 256 x 20 x 20) took 0.52 ms at one thread
// in window_separable, whose rows of 20 outputs are mostly loop overhead and stores reloaded by
// the next kernel column; 0.14 now, onnxruntime 0.125 (AMD EPYC, `quilt bench`). Float on
// AVX-512 only (max_stride_1).
bool padded_stride_1(const Geometry& g) {
  if (!separable(g) || g.stride[1] != 1 || g.stride[2] != 1) return false;
  const int64_t hp = g.out[1] + g.kernel[1] - 1, wp = g.out[2] + g.kernel[2] - 1;
  return saturating_mul(hp, wp) <= 4 * std::max(g.in_size(), g.out_size());
}

QUILT_GCC12_AVX512_BEGIN  // backends/cpu/gcc12_avx512.hpp

// A stride-1 max window on AVX-512, 16 output columns at a time, reading the input itself:
// lanes whose input column lies in the padding are masked to `lowest`. The masks depend on the
// kernel column and the columns' position only, so they are made once per 16 columns.
struct ColumnReads {
  std::array<__mmask16, 32> mask;  // per kernel column that reads inside the input
  std::array<int64_t, 32> first;   // the input column its lane 0 reads
  int count = 0;
};

ColumnReads column_reads(const Geometry& g, int64_t c0, int64_t lanes) {
  ColumnReads c;
  for (int64_t k = 0; k < g.kernel[2]; ++k) {
    const int64_t first = c0 + k - g.pad[2];  // lane l reads input column first + l
    const int64_t lo = std::clamp<int64_t>(-first, 0, lanes),
                  hi = std::clamp<int64_t>(g.in[2] - first, lo, lanes);
    if (lo == hi) continue;
    c.mask[static_cast<size_t>(c.count)] =
        static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
    c.first[static_cast<size_t>(c.count++)] = first;
  }
  return c;
}

// The maximum along padded row r (input row r - pad) for the columns of `c`. The fold is the
// portable form's: from `lowest`, x < v ? v : x, which is _mm512_max_ps(v, x) (the second
// operand when either is NaN or both are zeros).
__attribute__((target("avx512f"), always_inline)) inline __m512 row_max_avx512(
    const Geometry& g, const float* x, int64_t r, const ColumnReads& c) {
  const __m512 lowest = _mm512_set1_ps(std::numeric_limits<float>::lowest());
  const int64_t ih = r - g.pad[1];
  __m512 a = lowest;
  if (ih < 0 || ih >= g.in[1]) return a;
  const float* row = x + ih * g.in[2];
  for (int j = 0; j < c.count; ++j)
    a = _mm512_max_ps(_mm512_mask_loadu_ps(lowest, c.mask[static_cast<size_t>(j)],
                                           row + c.first[static_cast<size_t>(j)]),
                      a);
  return a;
}

// Down the columns, the last KH row maxima are kept in registers (the output rows unrolled by KH,
// so each has a fixed register): kept in memory, every load waited on the store before it (a
// store-forwarding stall; as slow as window_separable). KH = 0: any kernel height, each output
// row's kh row maxima computed again.
template <int KH>
__attribute__((target("avx512f"))) void max_stride_1_avx512(const Geometry& g, const float* x,
                                                            float* y) {
  const int64_t kh = KH ? KH : g.kernel[1], out_h = g.out[1], out_w = g.out[2];
  const __m512 lowest = _mm512_set1_ps(std::numeric_limits<float>::lowest());
  for (int64_t c0 = 0; c0 < out_w; c0 += 16) {
    const int64_t lanes = std::min<int64_t>(16, out_w - c0);
    const auto m = static_cast<__mmask16>((1u << lanes) - 1);
    const ColumnReads c = column_reads(g, c0, lanes);
    float* yc = y + c0;
    if constexpr (KH == 0) {
      for (int64_t oh = 0; oh < out_h; ++oh) {
        __m512 a = lowest;
        for (int64_t k = 0; k < kh; ++k) a = _mm512_max_ps(row_max_avx512(g, x, oh + k, c), a);
        _mm512_mask_storeu_ps(yc + oh * out_w, m, a);
      }
    } else {
      __m512 w[KH];
      for (int j = 0; j + 1 < KH; ++j) w[j + 1] = row_max_avx512(g, x, j, c);
      for (int64_t oh0 = 0; oh0 < out_h; oh0 += KH) {
#pragma GCC unroll 8
        for (int j = 0; j < KH; ++j) {  // output row oh0 + j: rows oh0 + j .. + KH - 1
          if (oh0 + j >= out_h) break;
          w[j] = row_max_avx512(g, x, oh0 + j + KH - 1, c);  // w[j] held row oh0 + j - 1
          __m512 a = lowest;
#pragma GCC unroll 8
          for (int i = 1; i <= KH; ++i) a = _mm512_max_ps(w[(j + i) % KH], a);
          _mm512_mask_storeu_ps(yc + (oh0 + j) * out_w, m, a);
        }
      }
    }
  }
}

QUILT_GCC12_AVX512_END

// One plane of a padded_stride_1 max pool (float on AVX-512; other types and CPUs keep
// window_separable, whose loops the measured gain did not come from).
inline void max_stride_1(const Geometry& g, const float* x, float* y) {
  switch (g.kernel[1]) {
    case 2:
      return max_stride_1_avx512<2>(g, x, y);
    case 3:
      return max_stride_1_avx512<3>(g, x, y);
    case 4:
      return max_stride_1_avx512<4>(g, x, y);
    case 5:
      return max_stride_1_avx512<5>(g, x, y);
    case 7:
      return max_stride_1_avx512<7>(g, x, y);
    default:
      return max_stride_1_avx512<0>(g, x, y);
  }
}

template <class T>
void max_pool(KernelContext& ctx, const Geometry& g) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output_uninitialized(0);
  if (y.numel() == 0) return;
  const bool want_indices = ctx.wants_output(1);
  int64_t* ip = want_indices ? ctx.output(1).data<int64_t>() : nullptr;
  const bool column_major = ctx.node.attr_int("storage_order", 0) != 0;
  const int64_t ivol = g.in_size(), ovol = g.out_size();
  const int64_t kvol = window_volume(g);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  const int64_t planes = x.dim(0) * x.dim(1);
  const bool fast_2x2 = pool_2x2_stride_2(g), by_rows_then_columns = separable(g),
             padded = std::is_same_v<T, float> && g.kernel[2] <= 32 && has_avx512f() &&
                      padded_stride_1(g);
  ctx.pool.parallel_for(
      planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, saturating_mul(ovol, kvol))),
      [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          const T* xc = xp + p * ivol;
          T* yc = yp + p * ovol;
          if (!ip && fast_2x2) {  // the common CNN downsampling, branch-free
            for (int64_t oh = 0; oh < g.out[1]; ++oh) {
              const T* r0 = xc + 2 * oh * g.in[2];
              const T* r1 = r0 + g.in[2];
              T* yrow = yc + oh * g.out[2];
              // Same fold and NaN behaviour as window_rows below.
              const auto mx = [](T a, T v) { return a < v ? v : a; };
              for (int64_t ow = 0; ow < g.out[2]; ++ow)
                yrow[ow] =
                    mx(mx(mx(mx(std::numeric_limits<T>::lowest(), r0[2 * ow]), r0[2 * ow + 1]),
                          r1[2 * ow]),
                       r1[2 * ow + 1]);
            }
            continue;
          }
          if (!ip) {
            const auto mx = [](T a, T v) { return a < v ? v : a; };
            if constexpr (std::is_same_v<T, float>)
              if (padded) {
                max_stride_1(g, xc, yc);
                continue;
              }
            if (by_rows_then_columns)
              window_separable(g, xc, yc, std::numeric_limits<T>::lowest(), mx);
            else
              window_rows(g, xc, yc, std::numeric_limits<T>::lowest(), mx);
            continue;
          }
          int64_t o = 0;
          for (int64_t od = 0; od < g.out[0]; ++od)
            for (int64_t oh = 0; oh < g.out[1]; ++oh)
              for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
                T best = std::numeric_limits<T>::lowest();
                int64_t at = -1;
                for_window(g, od, oh, ow, [&](int64_t id, int64_t ih, int64_t iw) {
                  const int64_t i = (id * g.in[1] + ih) * g.in[2] + iw;
                  if (at < 0 || xc[i] > best) {
                    best = xc[i];
                    at = column_major ? id + (ih + iw * g.in[1]) * g.in[0] : i;
                  }
                });
                yc[o] = best;
                if (ip) ip[p * ovol + o] = p * ivol + at;
              }
        }
      });
}

// The divisor of each output position's average: with count_include_pad the window clipped to
// the padded input, else to the input itself, in every opset of AveragePool (the spec and its
// reference; onnxruntime before 1.32 divided by the whole kernel before opset 19, even for a
// ceil_mode window reaching past the end padding). com.microsoft's QLinearAveragePool, as
// onnxruntime defines it, divides by the whole kernel with count_include_pad.
std::vector<int64_t> window_counts(const Node& node, const Geometry& g) {
  const bool include_pad = node.attr_int("count_include_pad", 0) != 0;
  const bool whole_kernel = include_pad && node.domain == "com.microsoft";
  std::vector<int64_t> counts(static_cast<size_t>(g.out_size()));
  int64_t o = 0;
  for (int64_t od = 0; od < g.out[0]; ++od)
    for (int64_t oh = 0; oh < g.out[1]; ++oh)
      for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
        int64_t count = 1;
        const Dims3 pos{od, oh, ow};
        for (size_t d = 0; d < 3; ++d) {
          const int64_t lo = include_pad ? -g.pad[d] : 0;
          const int64_t hi = include_pad ? g.in[d] + g.pad_end[d] : g.in[d];
          count *= count_in(pos[d], g.stride[d], g.pad[d], g.kernel[d], g.dilation[d], lo, hi);
        }
        counts[static_cast<size_t>(o)] = whole_kernel ? window_volume(g) : count;
      }
  return counts;
}

// The window sums of `planes` planes of x (float32) into y, each multiplied by `inv_count` of
// its position when given.
void window_sum_planes(const ThreadPool& pool, const Geometry& g, const float* xp, float* yp,
                       int64_t planes, const std::vector<float>* inv_count) {
  const int64_t ivol = g.in_size(), ovol = g.out_size();
  const int64_t kvol = window_volume(g);
  const bool wide = wide_window_sums(g);
  pool.parallel_for(planes,
                    std::max<int64_t>(1, 16384 / std::max<int64_t>(1, saturating_mul(ovol, kvol))),
                    [&](int64_t b, int64_t e) {
                      for (int64_t p = b; p < e; ++p) {
                        const float* xc = xp + p * ivol;
                        float* yc = yp + p * ovol;
                        if (wide)
                          window_sums_wide(g, xc, yc);
                        else
                          window_rows(g, xc, yc, 0.f, [](float a, float v) { return a + v; });
                        if (inv_count)
                          for (int64_t o = 0; o < ovol; ++o)
                            yc[o] *= (*inv_count)[static_cast<size_t>(o)];
                      }
                    });
}

// The sum of n floats in double precision, over 8 independent lanes (one chain of dependent
// additions ran ~1 ns per value: EfficientNet-B0's 17 squeeze-excite pools took 0.56 ms).
double sum_in_double(const float* x, int64_t n) {
  double lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lane[l] += static_cast<double>(x[i + l]);
  double sum =
      ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
  for (; i < n; ++i) sum += x[i];
  return sum;
}

// The mean of each of `planes` planes of vol floats at xp into yp[plane], summed in double.
void plane_means(const ThreadPool& pool, const float* xp, float* yp, int64_t planes, int64_t vol) {
  pool.parallel_for(
      planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(vol, 1)), [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p)
          yp[p] = static_cast<float>(sum_in_double(xp + p * vol, vol) / static_cast<double>(vol));
      });
}

void run_average_pool(KernelContext& ctx, const Geometry& g) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output_uninitialized(0);
  if (y.numel() == 0) return;
  const std::vector<int64_t> counts = window_counts(ctx.node, g);
  // One window over each whole plane (a classifier head written as AveragePool, the keyword
  // spotter's 25x5): GlobalAveragePool's plane means, one pass, where the window sums went row
  // by row through output columns of one (2.2 us on 64 planes of 125, 0.6 this way).
  if (g.out_size() == 1 && counts[0] == g.in_size()) {
    ctx.detail = "whole planes (their means)";
    plane_means(ctx.pool, x.data<float>(), y.data<float>(), x.dim(0) * x.dim(1), g.in_size());
    return;
  }
  std::vector<float> inv_count(counts.size());
  for (size_t o = 0; o < counts.size(); ++o) inv_count[o] = 1.f / static_cast<float>(counts[o]);
  window_sum_planes(ctx.pool, g, x.data<float>(), y.data<float>(), x.dim(0) * x.dim(1), &inv_count);
}

// com.microsoft QLinearAveragePool (X, x_scale, x_zero_point, y_scale, y_zero_point), as
// onnxruntime's contrib-op documentation defines it: X dequantized, AveragePool, the result
// quantized (round half to even, saturate). The window sums of x - x_zero_point are exact (whole
// numbers below 2^24 in float32: windows of up to 65793 values), then y = sum * x_scale / count /
// y_scale in double, as QLinearGlobalAveragePool. With channels_last the planes are gathered from
// (N, spatial..., C) first and the result scattered back.
template <class T>
void qlinear_average_pool(KernelContext& ctx) {
  const QParam px = qparam(ctx, 1, 2, "x_scale", "x_zero_point");
  const QParam py = qparam(ctx, 3, 4, "y_scale", "y_zero_point");
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output_uninitialized(0);
  if (y.numel() == 0) return;
  const bool last = ctx.node.attr_int("channels_last", 0) != 0;
  std::vector<int64_t> xs = x.shape(), ys = y.shape();
  if (last) {
    std::rotate(xs.begin() + 1, xs.end() - 1, xs.end());
    std::rotate(ys.begin() + 1, ys.end() - 1, ys.end());
  }
  const Geometry g = pool_geometry(ctx.node, xs, ys);
  const int64_t n = xs[0], c = xs[1], ivol = g.in_size(), ovol = g.out_size();
  std::vector<float> xf(static_cast<size_t>(x.numel())), yf(static_cast<size_t>(y.numel()));
  const T* xp = x.data<T>();
  // Element i of plane p (plane-major) in the tensor's own layout.
  auto src = [&](int64_t p, int64_t i, int64_t vol) {
    return last ? ((p / c) * vol + i) * c + p % c : p * vol + i;
  };
  ctx.pool.parallel_for(n * c, std::max<int64_t>(1, 16384 / std::max<int64_t>(ivol, 1)),
                        [&](int64_t b, int64_t e) {
                          for (int64_t p = b; p < e; ++p)
                            for (int64_t i = 0; i < ivol; ++i)
                              xf[static_cast<size_t>(p * ivol + i)] =
                                  static_cast<float>(int32_t{xp[src(p, i, ivol)]} - px.zero_point);
                        });
  window_sum_planes(ctx.pool, g, xf.data(), yf.data(), n * c, nullptr);
  const std::vector<int64_t> counts = window_counts(ctx.node, g);
  T* yp = y.data<T>();
  const double sx = px.scale, sy = py.scale;
  ctx.pool.parallel_for(
      n * c, std::max<int64_t>(1, 16384 / std::max<int64_t>(ovol, 1)), [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p)
          for (int64_t i = 0; i < ovol; ++i)
            yp[src(p, i, ovol)] =
                saturate_round<T>(static_cast<double>(yf[static_cast<size_t>(p * ovol + i)]) * sx /
                                      static_cast<double>(counts[static_cast<size_t>(i)]) / sy,
                                  py.zero_point);
      });
}

void run_qlinear_average_pool(KernelContext& ctx) {
  if (ctx.input(0).dtype() == DType::Int8) return qlinear_average_pool<int8_t>(ctx);
  qlinear_average_pool<uint8_t>(ctx);
}

// y = (sum over the window of |x|^p)^(1/p); padding contributes nothing.
void run_lp_pool(KernelContext& ctx, const Geometry& g) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  const int64_t p_norm = ctx.node.attr_int("p", 2);
  const int64_t ivol = g.in_size(), ovol = g.out_size();
  const int64_t kvol = window_volume(g);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const float pf = static_cast<float>(p_norm), inv_p = 1.f / pf;
  ctx.pool.parallel_for(
      x.dim(0) * x.dim(1),
      std::max<int64_t>(1, 16384 / std::max<int64_t>(1, saturating_mul(ovol, kvol))),
      [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          const float* xc = xp + p * ivol;
          float* yc = yp + p * ovol;
          if (p_norm == 1) {
            window_rows(g, xc, yc, 0.f, [](float a, float v) { return a + std::fabs(v); });
          } else if (p_norm == 2) {
            window_rows(g, xc, yc, 0.f, [](float a, float v) { return a + v * v; });
            for (int64_t o = 0; o < ovol; ++o) yc[o] = std::sqrt(yc[o]);
          } else {
            window_rows(g, xc, yc, 0.f,
                        [pf](float a, float v) { return a + std::pow(std::fabs(v), pf); });
            for (int64_t o = 0; o < ovol; ++o) yc[o] = std::pow(yc[o], inv_p);
          }
        }
      });
}

void run_max_pool(KernelContext& ctx, const Geometry& g) {
  switch (ctx.input(0).dtype()) {
    case DType::Float64:
      return max_pool<double>(ctx, g);
    case DType::Int8:
      return max_pool<int8_t>(ctx, g);
    case DType::UInt8:
      return max_pool<uint8_t>(ctx, g);
    default:
      return max_pool<float>(ctx, g);
  }
}

// Scatters X into a zero tensor of the unpooled size, (in - 1) * stride + kernel - pads, at the
// flat positions I holds (as MaxPool's Indices give them). When output_shape asks for another
// size, that tensor goes in its leading corner, as in onnx's reference and conformance tests.
void run_max_unpool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  // One index per element of X (fuzz_run: an I smaller than X, whose dims were unknown at load,
  // was read past its end).
  if (indices.shape() != x.shape())
    ctx.node.fail("indices I have shape " + to_string(indices.shape()) +
                      ", expected the shape of X " + to_string(x.shape()),
                  ErrorCode::InvalidArgument);
  Tensor& y = ctx.output(0);
  const size_t sp = static_cast<size_t>(x.rank() - 2);
  const auto kernel = ctx.node.attr_ints("kernel_shape");
  const auto strides = ctx.node.attr_ints("strides", std::vector<int64_t>(sp, 1));
  const auto pads = ctx.node.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  std::vector<int64_t> unpooled = {x.dim(0), x.dim(1)};
  for (size_t i = 0; i < sp; ++i)
    unpooled.push_back((x.dim(static_cast<int64_t>(i) + 2) - 1) * strides[i] + kernel[i] - pads[i] -
                       pads[i + sp]);
  const bool direct = unpooled == y.shape();
  Tensor scratch = direct ? y : Tensor(DType::Float32, unpooled);
  const float* xp = x.data<float>();
  const int64_t* ip = indices.data<int64_t>();
  float* sp_data = scratch.data<float>();
  const int64_t size = scratch.numel();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (ip[i] < 0 || ip[i] >= size)
      ctx.node.fail("index " + std::to_string(ip[i]) + " at position " + std::to_string(i) +
                        " of I is outside the unpooled output " + to_string(unpooled),
                    ErrorCode::InvalidArgument);
    sp_data[ip[i]] = xp[i];
  }
  if (direct) return;
  // Copy the overlap of the unpooled tensor into the leading corner of y.
  const auto& out = y.shape();
  float* yp = y.data<float>();
  std::vector<int64_t> idx(unpooled.size(), 0);
  for (int64_t i = 0; i < size; ++i) {
    int64_t at = 0;
    bool inside = true;
    for (size_t d = 0; d < idx.size(); ++d) {
      inside = inside && idx[d] < out[d];
      at = at * out[d] + idx[d];
    }
    if (inside) yp[at] = sp_data[i];
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < unpooled[d]) break;
      idx[d] = 0;
    }
  }
}

template <bool kMax>
void run_global_pool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output_uninitialized(0);
  if (y.numel() == 0) return;
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t vol = planes ? x.numel() / planes : 0;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  if constexpr (!kMax) {
    plane_means(ctx.pool, xp, yp, planes, vol);
  } else {
    ctx.pool.parallel_for(planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(vol, 1)),
                          [&](int64_t b, int64_t e) {
                            for (int64_t p = b; p < e; ++p) {
                              const float* xc = xp + p * vol;
                              float best = vol ? xc[0] : std::numeric_limits<float>::lowest();
                              for (int64_t i = 1; i < vol; ++i)
                                if (xc[i] > best || xc[i] != xc[i]) best = xc[i];
                              yp[p] = best;
                            }
                          });
  }
}

std::string pool_support(const NodeSignature& sig) {
  const bool max_pool = sig.node.op_type == "MaxPool";
  const SupportFn dtypes =
      max_pool ? dtypes_of_input({DType::Float32, DType::Float64, DType::Int8, DType::UInt8})
               : float_only();
  if (std::string why = dtypes(sig); !why.empty()) return why;
  if (sig.inputs[0].has_shape && sig.inputs[0].dims.size() > 5)
    return "only 1-D, 2-D and 3-D pooling is supported";
  return "";
}

std::string qlinear_pool_support(const NodeSignature& sig) {
  if (std::string why = dtypes_of_input({DType::Int8, DType::UInt8})(sig); !why.empty()) return why;
  if (sig.inputs[0].has_shape && sig.inputs[0].dims.size() > 5)
    return "only 1-D, 2-D and 3-D pooling is supported";
  return "";
}

// A windowed pool with its geometry kept from creation when the shapes are static (ShapeMemo).
class PoolKernel : public Kernel {
 public:
  using Fn = void (*)(KernelContext&, const Geometry&);
  PoolKernel(const NodeSignature& sig, Fn fn) : fn_(fn) {
    if (!sig.inputs.empty() && !sig.outputs.empty() && sig.inputs[0].dims.size() >= 3)
      geometry_.keep({&sig.inputs[0], &sig.outputs[0]},
                     [&](const auto& s) { return pool_geometry(sig.node, s[0], s[1]); });
  }
  void run(KernelContext& ctx) const override {
    const std::vector<int64_t>& x_shape = ctx.input(0).shape();
    const std::vector<int64_t>& y_shape = ctx.output_shape(0);
    ShapeMemo<Geometry>::Held run_geometry;
    fn_(ctx, geometry_.get({x_shape, y_shape}, run_geometry,
                           [&] { return pool_geometry(ctx.node, x_shape, y_shape); }));
  }

 private:
  Fn fn_;
  ShapeMemo<Geometry> geometry_;
};

KernelFactory pool_kernel(PoolKernel::Fn fn) {
  return [fn](const NodeSignature& sig) { return std::make_unique<PoolKernel>(sig, fn); };
}

}  // namespace

void register_cpu_pool(KernelRegistry& r) {
  r.add("MaxPool", pool_support, pool_kernel(run_max_pool));
  r.add("AveragePool", pool_support, pool_kernel(run_average_pool));
  r.add("LpPool", pool_support, pool_kernel(run_lp_pool));
  r.add("MaxUnpool", float_only(), run_max_unpool);
  r.add("GlobalAveragePool", float_only(), run_global_pool<false>);
  r.add("GlobalMaxPool", float_only(), run_global_pool<true>);
  r.add("QLinearAveragePool", qlinear_pool_support, run_qlinear_average_pool, "com.microsoft");
}

}  // namespace quilt::cpu
