// The sliding-window geometry shared by the float (conv.cpp) and integer (conv_integer.cpp)
// convolutions: three spatial dims (1-D and 2-D convs pad theirs in front with size-1 dims),
// the range of outputs each kernel offset reads inside the input, and im2col.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cpu/avx512.hpp"
#include "backends/cpu/kernels/conv_depthwise.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "core/checked.hpp"
#include "core/graph.hpp"

namespace quilt::cpu {

std::vector<int64_t> window_pad_begins(const Node& node, const std::vector<int64_t>& x_shape,
                                       const std::vector<int64_t>& kernel,
                                       const std::vector<int64_t>& y_shape);

using Dims3 = std::array<int64_t, 3>;

// A sliding window over three spatial dims.
struct Geometry {
  Dims3 in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1},
      pad{0, 0, 0};
  // Per kernel column kw: the output columns [first, second) whose input column is inside the
  // input. Computed once per run: the divisions are too slow for inner loops.
  std::vector<std::pair<int64_t, int64_t>> w_ranges;
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
};

// The last two spatial dims of g (a 1-D or 2-D conv's) as the depthwise kernel takes them.
inline DepthwiseGeometry depthwise_geometry(const Geometry& g) {
  return {g.in[1],     g.in[2],     g.out[1],      g.out[2],      g.kernel[1], g.kernel[2],
          g.stride[1], g.stride[2], g.dilation[1], g.dilation[2], g.pad[1],    g.pad[2]};
}

// Outputs o in [lo, hi) read input o * stride + offset inside [0, in).
inline std::pair<int64_t, int64_t> valid_range(int64_t out, int64_t in, int64_t stride,
                                               int64_t offset) {
  int64_t lo = ceil_div_positive(saturating_sub(0, offset), stride);
  int64_t hi = ceil_div_positive(saturating_sub(in, offset), stride);
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
  return {lo, hi};
}

inline Geometry conv_geometry(const Node& node, const std::vector<int64_t>& x_shape,
                              const std::vector<int64_t>& w_shape,
                              const std::vector<int64_t>& y_shape) {
  const size_t sp = x_shape.size() - 2;
  std::vector<int64_t> kernel(w_shape.begin() + 2, w_shape.end());
  const auto strides = node.attr_ints("strides", std::vector<int64_t>(sp, 1));
  const auto dilations = node.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  const auto pads = window_pad_begins(node, x_shape, kernel, y_shape);
  Geometry g;
  for (size_t i = 0; i < sp; ++i) {
    const size_t j = 3 - sp + i;
    g.in[j] = x_shape[i + 2];
    g.out[j] = y_shape[i + 2];
    g.kernel[j] = kernel[i];
    g.stride[j] = strides[i];
    g.dilation[j] = dilations[i];
    g.pad[j] = pads[i];
    // One output along a dim reads the same window whatever the stride: stride 1 keeps every
    // path's buffers (which grow with the stride) small for a hostile stride like 2^40.
    if (g.out[j] == 1) g.stride[j] = 1;
  }
  for (int64_t kw = 0; kw < g.kernel[2]; ++kw)
    g.w_ranges.push_back(
        valid_range(g.out[2], g.in[2], g.stride[2], kw * g.dilation[2] - g.pad[2]));
  return g;
}

// Unfolds channels [0, channels) of x (each g.in_size()) into col for the output rows
// [row_begin, row_end) (a row = one (od, oh) pair, g.out[2] positions): one col row per
// (channel, kernel offset), one col column per output position in those rows.
// `taps` lists the kernel offsets to unfold (all of them, or those that ever read inside the
// input).
// For a U other than T (a quantized input unfolded into int32), zero_point is subtracted from
// every value and padding reads 0; for U = T it is the value padding reads.
// col's rows are ld apart (0: as many as its columns).
template <class T, class U>
void im2col(const Geometry& g, const std::vector<int64_t>& taps, const T* x, int64_t channels,
            int64_t row_begin, int64_t row_end, U* col, const ThreadPool& pool, U zero_point = U(0),
            int64_t ld = 0) {
  const int64_t ntaps = static_cast<int64_t>(taps.size()), ivol = g.in_size();
  const int64_t width = (row_end - row_begin) * g.out[2];
  if (ld == 0) ld = width;
  // Rows of at most 16 at stride 1 (the digits' 8x8 and 4x4 maps) by masked vectors: the
  // fill-copy-fill of a few elements was 40 % of the demo's time.
  const bool narrow = g.out[2] <= 16 && g.stride[2] == 1 && has_avx512f();
  const U pad = std::is_same_v<T, U> ? zero_point : U(0);
  pool.parallel_for(channels * ntaps, std::max<int64_t>(1, 16384 / std::max<int64_t>(width, 1)),
                    [&](int64_t begin, int64_t end) {
                      for (int64_t r = begin; r < end; ++r) {
                        const int64_t c = r / ntaps;
                        const int64_t kidx = taps[static_cast<size_t>(r % ntaps)];
                        const int64_t kd = kidx / (g.kernel[1] * g.kernel[2]);
                        const int64_t kh = kidx / g.kernel[2] % g.kernel[1];
                        const int64_t kw = kidx % g.kernel[2];
                        const T* xc = x + c * ivol;
                        U* dst = col + r * ld;
                        const int64_t off_w = kw * g.dilation[2] - g.pad[2];
                        auto [wlo, whi] = g.w_ranges[static_cast<size_t>(kw)];
                        for (int64_t row = row_begin; row < row_end; ++row, dst += g.out[2]) {
                          const int64_t od = row / g.out[1], oh = row % g.out[1];
                          const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
                          const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
                          if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
                            std::fill(dst, dst + g.out[2], pad);
                            continue;
                          }
                          const T* src = xc + (id * g.in[1] + ih) * g.in[2];
                          if constexpr (std::is_same_v<T, float> && std::is_same_v<U, float>) {
                            if (narrow) {  // one masked load and store, not three calls
                              unfold_narrow_row(src + off_w, wlo, whi, g.out[2], pad, dst);
                              continue;
                            }
                          }
                          std::fill(dst, dst + wlo, pad);
                          if constexpr (!std::is_same_v<T, U>) {
                            // Quantized input: shift by the zero point so that padding reads 0.
                            for (int64_t ow = wlo; ow < whi; ++ow)
                              dst[ow] = static_cast<U>(src[ow * g.stride[2] + off_w]) - zero_point;
                          } else if (g.stride[2] == 1) {
                            std::copy(src + wlo + off_w, src + whi + off_w, dst + wlo);
                          } else {
                            for (int64_t ow = wlo; ow < whi; ++ow)
                              dst[ow] = src[ow * g.stride[2] + off_w];
                          }
                          std::fill(dst + whi, dst + g.out[2], pad);
                        }
                      }
                    });
}

inline std::vector<int64_t> all_taps(const Geometry& g) {
  std::vector<int64_t> taps(static_cast<size_t>(g.kernel_size()));
  for (size_t i = 0; i < taps.size(); ++i) taps[i] = static_cast<int64_t>(i);
  return taps;
}

}  // namespace quilt::cpu
