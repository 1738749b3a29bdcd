// Conv: pointwise convs are one GEMM per (batch, group) on the packed GEMM; depthwise convs run
// the direct kernel of conv_depthwise.cpp (3-D ones the plane kernels here); other 1-D and 2-D
// convs run the packed GEMM reading their windows in place from a padded copy of the input
// (ShiftedInput); 3-D ones im2col + packed GEMM. ConvInteger is in conv_integer.cpp.
// Spatial dims are padded in front to three (1-D and 2-D convs are 3-D convs with size-1 leading
// dims), so one code path serves every rank.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <type_traits>

#include "backends/cpu/activation.hpp"
#include "backends/cpu/avx512.hpp"
#include "backends/cpu/blas.hpp"
#include "backends/cpu/gemm_packed.hpp"
#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/conv_depthwise.hpp"
#include "backends/cpu/kernels/conv_direct.hpp"
#include "backends/cpu/kernels/conv_few_channels.hpp"
#include "backends/cpu/kernels/conv_geometry.hpp"
#include "backends/cpu/kernels/short_rows.hpp"

namespace quilt::cpu {

namespace {

// The row stride of a product buffer of `cols` columns: a whole number of cache lines, so the
// GEMM's threads, which split the columns in 48-float strips, never write the same line (rows
// of 210 floats had them share a line at every strip edge: ResNet-50's 14x14 3x3 product took
// 0.70 ms instead of 0.54).
int64_t wide_stride(int64_t cols) {
  return (cols + 15) / 16 * 16;
}

// dst[q] = src[2 q] for q in [lo, hi): a stride-2 conv's phase plane row. Eight at a time from
// two loads (the scalar gather was an eighth of a 3x3 stride-2 conv's time); a load never
// reaches past src[2 (hi - 1)].
void copy_even(const float* src, int64_t lo, int64_t hi, float* dst) {
  int64_t q = lo;
  for (; q + 8 < hi; q += 8) {
    const __m256 a = _mm256_loadu_ps(src + 2 * q), b = _mm256_loadu_ps(src + 2 * q + 8);
    const __m256 even = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));  // a0 a2 b0 b2 a4 ..
    _mm256_storeu_ps(dst + q, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even),
                                                                     _MM_SHUFFLE(3, 1, 2, 0))));
  }
  for (; q < hi; ++q) dst[q] = src[2 * q];
}

// The rows of two column phases of a stride-2 conv from one input row in one pass: a[q] =
// src[2 q] for q in [alo, ahi) and b[q] = src[2 q + 1] for q in [blo, bhi), 16 of each from two
// loads (vpermt2ps) over the columns both read; the rest of each row is zero. Copied phase by
// phase, each input row was read twice, 8 columns at a time (the fill was 15 % of YOLOv5s's
// 32x320x320 stride-2 conv).
__attribute__((target("avx512f"))) void copy_even_odd(const float* src, float* a, int64_t alo,
                                                      int64_t ahi, float* b, int64_t blo,
                                                      int64_t bhi, int64_t wq) {
  const int64_t lo = std::max(alo, blo), hi = std::max(lo, std::min(ahi, bhi));
  zero_row(a, alo);
  zero_row(b, blo);
  for (int64_t q = alo; q < std::min(lo, ahi); ++q) a[q] = src[2 * q];
  for (int64_t q = blo; q < std::min(lo, bhi); ++q) b[q] = src[2 * q + 1];
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  int64_t q = lo;
  for (; q + 16 <= hi; q += 16) {  // reads src[2 q, 2 q + 32): b's last is src[2 (hi - 1) + 1]
    const __m512 x0 = _mm512_loadu_ps(src + 2 * q), x1 = _mm512_loadu_ps(src + 2 * q + 16);
    _mm512_storeu_ps(a + q, _mm512_permutex2var_ps(x0, even, x1));
    _mm512_storeu_ps(b + q, _mm512_permutex2var_ps(x0, odd, x1));
  }
  for (int64_t r = q; r < ahi; ++r) a[r] = src[2 * r];
  for (int64_t r = q; r < bhi; ++r) b[r] = src[2 * r + 1];
  zero_row(a + ahi, wq - ahi);
  zero_row(b + bhi, wq - bhi);
}

// B's row offsets when B is `channels` input planes of `plane` floats read as they are.
std::vector<int64_t> plane_rows(int64_t channels, int64_t plane) {
  std::vector<int64_t> offsets(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) offsets[static_cast<size_t>(c)] = c * plane;
  return offsets;
}

// Upper bound of the unfolded-input buffer of the im2col path.
constexpr int64_t kColBytes = 16 << 20;

// One channel of a depthwise conv: y (already holding the bias) += window sums of x.
void depthwise_plane(const Geometry& g, const float* x, const float* w, float* y) {
  for (int64_t od = 0; od < g.out[0]; ++od)
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      float* yrow = y + (od * g.out[1] + oh) * g.out[2];
      for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
        const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
        if (id < 0 || id >= g.in[0]) continue;
        for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
          const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
          if (ih < 0 || ih >= g.in[1]) continue;
          const float* xrow = x + (id * g.in[1] + ih) * g.in[2];
          const float* wrow = w + (kd * g.kernel[1] + kh) * g.kernel[2];
          for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
            const int64_t off = kw * g.dilation[2] - g.pad[2];
            auto [lo, hi] = g.w_ranges[static_cast<size_t>(kw)];
            const float wv = wrow[kw];
            if (g.stride[2] == 1) {
              for (int64_t ow = lo; ow < hi; ++ow) yrow[ow] += wv * xrow[ow + off];
            } else {
              for (int64_t ow = lo; ow < hi; ++ow) yrow[ow] += wv * xrow[ow * g.stride[2] + off];
            }
          }
        }
      }
    }
}

// A depthwise channel on zero-padded, stride-phase-split copies of the plane. Splitting the
// padded plane by (position mod stride) per dim makes every kernel offset read one phase plane
// at a constant shift, so in the flattened phase plane each of the kvol passes is one long
// contiguous multiply-add, whatever the stride (late layers have short rows, where per-row
// loops were all overhead). z gets the sums on the phase grid; the valid part is added to y
// (which holds the bias).
struct PhasePlanes {
  Dims3 size;      // extent of one phase plane per dim
  int64_t volume;  // of one phase plane
  int64_t phases;  // stride[0] * stride[1] * stride[2]
  int64_t span;    // flattened length of z that covers every output
  int64_t buffer_size() const { return phases * volume + span; }
};

PhasePlanes phase_planes(const Geometry& g) {
  PhasePlanes p{};
  for (size_t d = 0; d < 3; ++d) {
    const int64_t padded = std::max(
        g.pad[d] + g.in[d], (g.out[d] - 1) * g.stride[d] + (g.kernel[d] - 1) * g.dilation[d] + 1);
    p.size[d] = ceil_div_positive(padded, g.stride[d]);
  }
  p.volume = p.size[0] * p.size[1] * p.size[2];
  p.phases = g.stride[0] * g.stride[1] * g.stride[2];
  p.span = ((g.out[0] - 1) * p.size[1] + g.out[1] - 1) * p.size[2] + g.out[2];
  return p;
}

void depthwise_plane_phased(const Geometry& g, const PhasePlanes& pp, const float* x,
                            const float* w, float* y, float* buffer) {
  float* planes = buffer;
  float* z = buffer + pp.phases * pp.volume;
  std::fill(planes, z + pp.span, 0.f);
  auto phase_index = [&](int64_t r0, int64_t r1, int64_t r2) {
    const int64_t phase =
        (r0 % g.stride[0] * g.stride[1] + r1 % g.stride[1]) * g.stride[2] + r2 % g.stride[2];
    return phase * pp.volume + ((r0 / g.stride[0]) * pp.size[1] + r1 / g.stride[1]) * pp.size[2] +
           r2 / g.stride[2];
  };
  for (int64_t id = 0; id < g.in[0]; ++id)
    for (int64_t ih = 0; ih < g.in[1]; ++ih) {
      const float* src = x + (id * g.in[1] + ih) * g.in[2];
      const int64_t r0 = id + g.pad[0], r1 = ih + g.pad[1];
      // Columns of one phase are every stride[2]-th input column, stored contiguously.
      for (int64_t pw = 0; pw < g.stride[2]; ++pw) {
        const int64_t first =
            g.pad[2] + ((pw - g.pad[2] % g.stride[2]) + g.stride[2]) % g.stride[2];
        if (first >= g.pad[2] + g.in[2]) continue;
        float* dst = planes + phase_index(r0, r1, first);
        const float* col = src + (first - g.pad[2]);
        const int64_t n = (g.pad[2] + g.in[2] - first + g.stride[2] - 1) / g.stride[2];
        for (int64_t j = 0; j < n; ++j) dst[j] = col[j * g.stride[2]];
      }
    }
  for (int64_t kd = 0; kd < g.kernel[0]; ++kd)
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh)
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
        const float wv = w[(kd * g.kernel[1] + kh) * g.kernel[2] + kw];
        const float* src =
            planes + phase_index(kd * g.dilation[0], kh * g.dilation[1], kw * g.dilation[2]);
        for (int64_t i = 0; i < pp.span; ++i) z[i] += wv * src[i];
      }
  for (int64_t od = 0; od < g.out[0]; ++od)
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      float* yrow = y + (od * g.out[1] + oh) * g.out[2];
      const float* zrow = z + (od * pp.size[1] + oh) * pp.size[2];
      for (int64_t ow = 0; ow < g.out[2]; ++ow) yrow[ow] += zrow[ow];
    }
}

// A 1-D or 2-D conv's input laid out so that every window offset is a shift, read in place by
// the GEMM (BRows) instead of unfolded: per channel, one zero-padded plane per stride phase the
// offsets use ((kh * dilation) % stride, (kw * dilation) % stride), each `wq` wide. Output
// pixel (oh, ow) is column oh * wq + ow of the product, and row (c, offset) of B starts at
// offsets[c * taps + t]. Columns with ow >= out_w read the next row's padding and are
// dropped. The copy is the size of the input (plus padding), where the unfolded input was
// taps times that, written and read back panel by panel: ResNet-50's 3x3 convs spent a fifth
// of their time packing.
// Where ShiftedInput puts each channel's phase planes and where B's rows start in them: worked
// out from the shapes alone, so once per shape (ConvKernel::Layout) rather than on every run.
// The VAD's STFT conv (kernel 256, stride 128: 128 phase planes) spent a fifth of its 18 us
// building this per run.
struct ShiftPlan {
  struct Phase {
    int64_t row, col;  // the phase: (row, column) modulo the strides
    int64_t qlo, qhi;  // plane columns [qlo, qhi) read input columns (the rest is padding)
  };
  std::vector<Phase> phases;
  std::vector<int64_t> offsets;  // per (channel, tap): the start of B's row
  int64_t channels = 0, wq = 0, hq = 0, plane = 0;
  int64_t min_gap = INT64_MAX;  // the least distance between two rows' starts (BRows::min_gap)
};

// The least distance between two of B's row starts when each channel's `taps` offsets are
// those of the channel before moved by a constant: the first two channels' offsets hold every
// distinct gap. Once per shape (the plan's or a band's offsets), not per product.
int64_t min_row_gap(const std::vector<int64_t>& offsets, size_t taps) {
  std::vector<int64_t> first(
      offsets.begin(),
      offsets.begin() + static_cast<std::ptrdiff_t>(std::min(offsets.size(), 2 * taps)));
  std::sort(first.begin(), first.end());
  int64_t gap = INT64_MAX;
  for (size_t i = 1; i < first.size(); ++i) gap = std::min(gap, first[i] - first[i - 1]);
  return gap;
}

ShiftPlan shift_plan(const Geometry& g, const std::vector<int64_t>& taps, int64_t channels) {
  ShiftPlan p;
  p.channels = channels;
  const int64_t sh = g.stride[1], sw = g.stride[2];
  int64_t max_dh = 0;
  std::vector<int64_t> phase_index(static_cast<size_t>(sh * sw), -1);
  std::vector<std::array<int64_t, 3>> shift;  // per tap: phase, row shift, column shift
  std::vector<int64_t> reach;                 // per phase: the largest column shift of its taps
  for (int64_t t : taps) {
    const int64_t kh = t / g.kernel[2], kw = t % g.kernel[2];
    const int64_t oh = kh * g.dilation[1], ow = kw * g.dilation[2];
    int64_t& ph = phase_index[static_cast<size_t>(oh % sh * sw + ow % sw)];
    if (ph < 0) {
      ph = static_cast<int64_t>(p.phases.size());
      p.phases.push_back({oh % sh, ow % sw, 0, 0});
      reach.push_back(0);
    }
    shift.push_back({ph, oh / sh, ow / sw});
    max_dh = std::max(max_dh, oh / sh);
    reach[static_cast<size_t>(ph)] = std::max(reach[static_cast<size_t>(ph)], ow / sw);
  }
  // A row's right padding is the next row's left padding: columns read past the row's end
  // wrap onto zeros. So a row needs the columns that hold input and those read before the
  // wrap, not both paddings (3x3 on 14x14: 15 columns, not 16; an eighth fewer products).
  p.wq = g.out[2];  // at least: output (oh, ow) is column oh * wq + ow
  for (size_t i = 0; i < p.phases.size(); ++i) {
    const int64_t wide = g.out[2] + reach[i];
    const auto [qlo, qhi] = valid_range(wide, g.in[2], sw, p.phases[i].col - g.pad[2]);
    p.wq = std::max({p.wq, std::min(qhi, wide), wide - qlo});
  }
  // Plane column q reads input column q * sw + col - pad, inside for q in [qlo, qhi).
  for (ShiftPlan::Phase& ph : p.phases)
    std::tie(ph.qlo, ph.qhi) = valid_range(p.wq, g.in[2], sw, ph.col - g.pad[2]);
  p.hq = g.out[1] + max_dh + 1;  // + 1: the dropped columns of the last row read one row on
  p.plane = p.hq * p.wq;
  const int64_t nph = static_cast<int64_t>(p.phases.size()),
                ntaps = static_cast<int64_t>(taps.size());
  p.offsets.resize(static_cast<size_t>(channels * ntaps));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t t = 0; t < ntaps; ++t) {
      const auto [ph, dh, dw] = shift[static_cast<size_t>(t)];
      p.offsets[static_cast<size_t>(c * ntaps + t)] = (c * nph + ph) * p.plane + dh * p.wq + dw;
    }
  p.min_gap = min_row_gap(p.offsets, taps.size());
  return p;
}

// Rows [r0, r1) of planes [cp0, cp1) (plane cp: channel cp / phases, phase cp % phases) of a
// ShiftPlan's layout of x (one image, one group), into dst: plane cp0's row r0 first, the planes
// `stride` floats apart.
void fill_planes(const Geometry& g, const ShiftPlan& p, const float* x, int64_t cp0, int64_t cp1,
                 int64_t r0, int64_t r1, float* dst, int64_t stride) {
  const int64_t nph = static_cast<int64_t>(p.phases.size()), ivol = g.in_size();
  const int64_t sh = g.stride[1], sw = g.stride[2], wq = p.wq;
  // The channel and phase of plane cp, stepped instead of divided for every plane (the VAD's
  // 1-D conv has hundreds of one-row planes).
  int64_t c = cp0 / nph, phase = cp0 % nph;
  // Input row ih of a channel toward L1, two rows before it is copied: each row is a new stream
  // of a few lines, too short for the hardware's prefetchers to get ahead of (the fill of
  // YOLOv5s's 32x320x320 stride-2 conv alone: 15 -> 11 % of its time; a stride-1 32x160x160
  // conv measured within noise of it).
  const auto fetch_row = [&](const float* channel, int64_t ih) {
    if (ih < g.in[1])
      prefetch_lines(channel + ih * g.in[2], g.in[2] * int64_t{sizeof(float)}, true);
  };
  for (int64_t cp = cp0; cp < cp1; ++cp, phase = phase + 1 == nph ? (++c, 0) : phase + 1) {
    const ShiftPlan::Phase& ph = p.phases[static_cast<size_t>(phase)];
    const float* xc = x + c * ivol;
    const int64_t qlo = ph.qlo, qhi = ph.qhi;
    float* row = dst + (cp - cp0) * stride;
    // Stride 2 with this phase's column neighbour next (same row phase): both from one pass.
    if (sw == 2 && phase + 1 < nph && cp + 1 < cp1 && has_avx512f()) {
      const ShiftPlan::Phase& nb = p.phases[static_cast<size_t>(phase + 1)];
      if (nb.row == ph.row && nb.col == ph.col + 1) {
        float* row_b = row + stride;
        for (int64_t r = r0; r < r1; ++r, row += wq, row_b += wq) {
          const int64_t ih = r * sh + ph.row - g.pad[1];
          if (ih < 0 || ih >= g.in[1]) {
            zero_row(row, wq);
            zero_row(row_b, wq);
            continue;
          }
          fetch_row(xc, ih + 2 * sh);
          copy_even_odd(xc + ih * g.in[2] + ph.col - g.pad[2], row, qlo, qhi, row_b, nb.qlo, nb.qhi,
                        wq);
        }
        ++cp;  // the neighbour's plane is done too
        ++phase;
        continue;
      }
    }
    for (int64_t r = r0; r < r1; ++r, row += wq) {
      const int64_t ih = r * sh + ph.row - g.pad[1];
      if (ih < 0 || ih >= g.in[1]) {
        zero_row(row, wq);
        continue;
      }
      const float* src = xc + ih * g.in[2] + ph.col - g.pad[2];
      fetch_row(xc, ih + 2 * sh);
      zero_row(row, qlo);
      if (sw == 1)
        copy_row(src + qlo, row + qlo, qhi - qlo);
      else if (sw == 2)
        copy_even(src, qlo, qhi, row);
      else
        for (int64_t q = qlo; q < qhi; ++q) row[q] = src[q * sw];
      zero_row(row + qhi, wq - qhi);
    }
  }
}

// A 1-D or 2-D conv's input laid out so that every window offset is a shift, read in place by
// the GEMM (BRows) instead of unfolded: per channel, one zero-padded plane per stride phase the
// offsets use ((kh * dilation) % stride, (kw * dilation) % stride), each `wq` wide. Output
// pixel (oh, ow) is column oh * wq + ow of the product, and row (c, offset) of B starts at
// offsets[c * taps + t]. Columns with ow >= out_w read the next row's padding and are
// dropped. The copy is the size of the input (plus padding), where the unfolded input was
// taps times that, written and read back panel by panel: ResNet-50's 3x3 convs spent a fifth
// of their time packing. The planes are the calling thread's scratch (slot 0).
class ShiftedInput {
 public:
  ShiftedInput(const Geometry& g, const ShiftPlan& plan)
      : g_(g),
        p_(plan),
        data_(thread_scratch(
            0, plan.channels * static_cast<int64_t>(plan.phases.size()) * plan.plane)) {}

  int64_t width() const { return p_.wq; }
  int64_t columns() const { return g_.out[1] * p_.wq; }  // of the product
  BRows rows() const { return {data_, p_.offsets.data(), nullptr, p_.min_gap}; }

  // Copies channels [0, channels) of x (one image, one group) in.
  void fill(const float* x, const ThreadPool& pool) {
    const int64_t planes = p_.channels * static_cast<int64_t>(p_.phases.size());
    pool.parallel_for(planes, std::max<int64_t>(1, 16384 / p_.plane), [&](int64_t lo, int64_t hi) {
      fill_planes(g_, p_, x, lo, hi, 0, p_.hq, data_ + lo * p_.plane, p_.plane);
    });
  }

 private:
  const Geometry& g_;
  const ShiftPlan& p_;
  float* data_;
};

// The planar path (ShiftedInput) a band of output rows at a time, when the whole shifted input
// would not stay in the caches: each thread lays out the plane rows its band reads (its taps' row
// shifts below it, and the wrap row) in its own scratch and multiplies them there, so they are
// written and read back in L2. Laid out whole, the shifted input went to memory and back:
// YOLOv5s's 32x320x320 3x3 stride-2 conv (a 13 MB copy) took 8.6 ms at one thread, 6.2 in bands
// (onnxruntime: 4.3); its 64x160x160 one 6.2 -> 5.3. YOLOv5s at 2 threads, 3 alternating rounds:
// 47.9-48.6 -> 43.9-44.8 ms, peak memory 148 -> 131 MiB (AMD EPYC). Each band's product then
// fetches the next band's input rows (PrefetchRanges): the 32x320x320 conv alone at one thread
// 6.0-6.2 -> 5.7-5.9 ms (3 alternating rounds), YOLOv5s's stride-2 convs at 2 threads (profiled,
// 2 rounds) 15.6-15.8 -> 15.2-15.4 ms.

// A band's shifted rows, at most (unless one row is more).
constexpr int64_t kBandBytes = 512 << 10;

// The output rows of a band when the conv runs in bands (run_shifted_bands) on `threads`
// threads, else 0: worth it when the whole copy would leave the caches (more than 4 MB), and a
// band holds more output rows than halo rows. Real-ESRGAN's 64x64 convs (copies of 1.1-3.4 MB)
// take 5-10 % longer at 2 threads in bands (their whole copies stay in L3, and the bands add
// their halo rows): from 1 MB up, Real-ESRGAN took 356-360 ms against 333-339 and YOLOv5s
// 43.5-43.7 against 43.8-44.1 (3 alternating rounds, AMD EPYC). In the VM's slow mode (memory
// about twice as slow) 1 MB measured better on both (YOLOv5s's 32x160x160 conv 1.04 ms against
// 1.78); the normal mode decides.
int64_t band_rows(const Geometry& g, const ShiftPlan& p, int threads) {
  const int64_t planes = p.channels * static_cast<int64_t>(p.phases.size());
  const int64_t row_bytes = planes * p.wq * static_cast<int64_t>(sizeof(float));
  const int64_t whole = row_bytes * p.hq, out_h = g.out[1], halo = p.hq - out_h;
  if (whole <= 8 * kBandBytes || kBandBytes / row_bytes < 2 * halo) return 0;
  // Rows in L2, and at least four bands a thread, so that the threads' shares even out.
  const int64_t per_thread = 4 * static_cast<int64_t>(threads);
  return std::clamp<int64_t>(
      std::min(kBandBytes / row_bytes - halo, (out_h + per_thread - 1) / per_thread), 1, out_h);
}

// Whether a product over shifted rows (wider than the output's rows, `width`) stores its output
// columns straight into y (NarrowCols) rather than into a wide buffer copied to y after. The copy
// cost a pass over memory: 5.6 % of ResNet-50's 7x7 stem alone, 1.3 % of its 3x3 convs on 56x56
// (perf); in the model (2 threads, per node, slow mode) the stem 0.75-0.76 -> 0.65-0.67 ms, the
// 56x56 3x3 convs 0.62-0.65 -> 0.59-0.61, YOLOv5s's 6x6 stem 2.36-2.43 -> 2.17. Rows of 20
// (YOLOv5s's stride-2 convs onto 20x20) were 4-8 % slower so: nearly every vector ends a row.
bool wide_in_place(const PackedA& a, const Activation& act, int64_t width) {
  return a.narrow_ok(act) && width >= 32;
}

// The conv in bands of `rows` output rows (band_rows).
void run_shifted_bands(const Geometry& g, const ShiftPlan& p, int64_t rows, const PackedA& a,
                       int64_t mg, const float* x, float* y, const float* bias,
                       const float* residual, const Activation& act, const Activation& act_before,
                       const ThreadPool& pool) {
  const int64_t planes = p.channels * static_cast<int64_t>(p.phases.size());
  const int64_t wq = p.wq, out_h = g.out[1], out_w = g.out[2], ovol = g.out_size();
  const int64_t halo = p.hq - out_h;
  const int64_t band_plane = (rows + halo) * wq;
  // B's row offsets in a band: the plane's, re-based on the band's plane size.
  std::vector<int64_t> offsets(p.offsets.size());
  for (size_t i = 0; i < offsets.size(); ++i)
    offsets[i] = p.offsets[i] / p.plane * band_plane + p.offsets[i] % p.plane;
  const int64_t min_gap = min_row_gap(offsets, offsets.size() / std::max<int64_t>(p.channels, 1));
  static const ThreadPool serial(1);
  // The input rows plane rows [r0, r1) read: [first, last) of every channel.
  int64_t top_phase = 0;
  for (const ShiftPlan::Phase& ph : p.phases) top_phase = std::max(top_phase, ph.row);
  const auto input_rows = [&](int64_t r0, int64_t r1) {
    return std::pair{
        std::clamp<int64_t>(r0 * g.stride[1] - g.pad[1], 0, g.in[1]),
        std::clamp<int64_t>((r1 - 1) * g.stride[1] + top_phase + 1 - g.pad[1], 0, g.in[1])};
  };
  // Tasks of consecutive bands, so that each band's product can fetch the next band's new input
  // rows (PrefetchRanges): filled after the product instead, they came from memory while nothing
  // else ran.
  const int64_t bands = (out_h + rows - 1) / rows;
  const int64_t tasks = std::min<int64_t>(bands, 4 * pool.threads());
  const int64_t tiles_per_band =
      gemm_packed_tiles(mg, rows * wq, static_cast<int64_t>(p.offsets.size()));
  const auto run_band = [&](int64_t band, int64_t next_band) {
    const int64_t r0 = band * rows, n = std::min(rows, out_h - r0), cols = n * wq;
    float* planes_in = thread_scratch(0, planes * band_plane);
    fill_planes(g, p, x, 0, planes, r0, r0 + n + halo, planes_in, band_plane);
    PrefetchRanges ahead;
    BRows b{planes_in, offsets.data(), nullptr, min_gap};
    if (next_band >= 0) {
      const int64_t n0 = next_band * rows, n1 = std::min(out_h, n0 + rows) + halo;
      const int64_t done = input_rows(r0, r0 + n + halo).second;
      const auto [first, last] = input_rows(n0, n1);
      const int64_t from = std::max(first, done);
      if (from < last) {
        const int64_t row_bytes_in = g.in[2] * static_cast<int64_t>(sizeof(float));
        ahead.base = reinterpret_cast<const char*>(x) + from * row_bytes_in;
        ahead.stride = g.in_size() * static_cast<int64_t>(sizeof(float));
        ahead.bytes = (last - from) * row_bytes_in;
        ahead.count = p.channels;
        ahead.per_tile = ((ahead.bytes + 63) / 64 * ahead.count + tiles_per_band - 1) /
                         std::max<int64_t>(1, tiles_per_band);
        b.prefetch = &ahead;
      }
    }
    if (wq == out_w || wide_in_place(a, act, out_w)) {
      const NarrowCols narrow{out_w, wq};
      gemm_packed(a, b, cols, y + r0 * out_w, ovol, bias, act, serial,
                  residual ? residual + r0 * out_w : nullptr, wq == out_w ? nullptr : &narrow);
      return;
    }
    const int64_t ldw = wide_stride(cols);
    float* wide = thread_scratch(1, mg * ldw);
    gemm_packed(a, b, cols, wide, ldw, bias, act_before, serial);
    for (int64_t m = 0; m < mg; ++m)
      for (int64_t oh = 0; oh < n; ++oh) {
        float* dst = y + m * ovol + (r0 + oh) * out_w;
        copy_row(wide + m * ldw + oh * wq, dst, out_w);
        if (residual) act.apply_added(dst, residual + m * ovol + (r0 + oh) * out_w, out_w);
      }
  };
  pool.for_each_task(tasks, [&](int64_t t) {
    const int64_t b0 = t * bands / tasks, b1 = (t + 1) * bands / tasks;
    for (int64_t band = b0; band < b1; ++band) run_band(band, band + 1 < b1 ? band + 1 : -1);
  });
}

// The kernel offsets that read inside the input for at least one output. With large dilations
// on small images (DeepLabV3's atrous convs: dilation 24 and 36 on 14x14) most offsets only
// ever read padding; leaving them out of the GEMM's K changes nothing but the work.
std::vector<int64_t> live_taps(const Geometry& g) {
  std::vector<int64_t> taps;
  for (int64_t kd = 0; kd < g.kernel[0]; ++kd)
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh)
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
        auto [dlo, dhi] =
            valid_range(g.out[0], g.in[0], g.stride[0], kd * g.dilation[0] - g.pad[0]);
        auto [hlo, hhi] =
            valid_range(g.out[1], g.in[1], g.stride[1], kh * g.dilation[1] - g.pad[1]);
        auto [wlo, whi] = g.w_ranges[static_cast<size_t>(kw)];
        if (dlo < dhi && hlo < hhi && wlo < whi)
          taps.push_back((kd * g.kernel[1] + kh) * g.kernel[2] + kw);
      }
  return taps;
}

// Whether the product of dims fits int64.
bool countable(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n)) return false;
  return true;
}

class ConvKernel : public Kernel {
 public:
  explicit ConvKernel(const NodeSignature& sig)
      : group_(sig.node.attr_int("group", 1)), bf16_(sig.bf16) {
    // Constant weights are packed for the GEMM once, here, instead of on every run.
    const Tensor* w = sig.constants.size() > 1 ? sig.constants[1] : nullptr;
    if (w && w->dtype() == DType::Float32 && w->rank() >= 3 && group_ > 0 &&
        w->dim(0) % group_ == 0 && !(w->dim(1) == 1 && w->dim(0) == group_))  // not depthwise
    {
      constant_weights_ = true;
      const int64_t mg = w->dim(0) / group_, depth = w->numel() / w->dim(0);
      const int64_t cg = w->dim(1), kvol = depth / std::max<int64_t>(cg, 1);
      const std::vector<int64_t>* out_dims =
          sig.outputs.empty() || !sig.outputs[0].has_shape ? nullptr : &sig.outputs[0].dims;
      // The output's pixels, saturating: only compared against small thresholds below, and
      // hostile pads ([1, 2^62, 2^31, 1]: fuzz_run) give dims whose product overflows int64.
      int64_t pixels = 0;
      if (out_dims && (out_dims->size() == 3 || out_dims->size() == 4) && w->rank() <= 4) {
        pixels = 1;
        for (size_t d = 2; d < out_dims->size(); ++d)
          if (__builtin_mul_overflow(pixels, (*out_dims)[d], &pixels))
            pixels = std::numeric_limits<int64_t>::max();
      }
      const std::vector<int64_t> strides = sig.node.attr_ints("strides", {});
      const bool strided =
          std::any_of(strides.begin(), strides.end(), [](int64_t v) { return v > 1; });
      if (!bf16_ && cg > 0 && FewChannelConv::applies(cg, kvol, mg, pixels, strided))
        few_.emplace(w->data<float>(), w->dim(0), group_, cg, kvol);
      else if (!bf16_ && small_map(sig, mg, depth, kvol))  // gemm_channels has no bfloat16 form
        for (int64_t grp = 0; grp < group_; ++grp)
          channel_packed_.emplace_back(w->data<float>() + grp * mg * depth, mg, depth, depth);
      else if (mg == 1 && cg == 1) {  // depthwise (run_depthwise): no GEMM, so no packed A,
        // whose 8-row slivers held one row each (8 times the weights); the transposed kernel's
        // layout of them instead
        weights16_ = depthwise_weights16(w->data<float>(), w->dim(0), kvol);
        weights16_of_ = w->data<float>();
      } else {
        packed_ = pack_groups(w->data<float>(), mg, depth);
      }
    }
    // The layout of the shapes inferred here, when static (ShapeMemo), and when the weights are
    // constant: their tables (a range per kernel column, the live taps) are then as large as
    // weights the model holds. W declared as a graph input of shape [1, 1, 1, 2^31] had the
    // session build 2^31 ranges (16 GB) before any run; a run computes them from the W it gets.
    // Nor for an output whose element count overflows int64 (hostile pads, fuzz_run): no run
    // can allocate it, and the layout's sizes would overflow.
    if (sig.constants.size() > 1 && sig.constants[1] && sig.inputs.size() > 1 &&
        !sig.outputs.empty() && sig.inputs[0].dims.size() >= 3 && sig.inputs[0].dims.size() <= 5 &&
        sig.inputs[1].dims.size() == sig.inputs[0].dims.size() && countable(sig.outputs[0].dims))
      layout_.keep({&sig.inputs[0], &sig.inputs[1], &sig.outputs[0]}, [&](const auto& s) {
        Layout l = layout_of(sig.node, s[0], s[1], s[2]);
        // Weights of the live taps only, packed once here rather than on every run (the
        // streaming VAD's stride-2 convs on 2- and 1-sample maps: a gather and a pack per run).
        const Tensor& w = *sig.constants[1];
        if (constant_weights_ && !l.direct && l.regions.empty() &&
            static_cast<int64_t>(l.taps.size()) < l.g.kernel_size() && !(few_ && few_->takes(l.g)))
          l.live_packed = pack_live(w.data<float>(), w.dim(0), w.dim(1), l.g.kernel_size(), l.taps);
        return l;
      });
  }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* b = ctx.optional_input(2);
    Tensor& y = ctx.output_uninitialized(0);
    if (y.numel() == 0) return;
    const Activation& act = ctx.activation;
    // A fused residual (fusion.hpp) is added before the activation: by the GEMM's epilogue on
    // the pointwise and planar paths, else in one pass at the end, the activation deferred.
    const float* rp = nullptr;
    if (const Tensor* r = ctx.residual) {
      if (r->dtype() != DType::Float32 || r->shape() != y.shape())
        ctx.node.fail("fused residual is " + std::string(dtype_name(r->dtype())) + " " +
                          to_string(r->shape()) + "; expected float32 " + to_string(y.shape()),
                      ErrorCode::Runtime);
      rp = r->data<float>();
    }
    const Activation none;
    const Activation& act_before = rp ? none : act;  // for paths that add the residual after
    auto add_residual = [&] {
      ctx.pool.parallel_for(y.numel(), 16384, [&](int64_t lo, int64_t hi) {
        act.apply_added(y.data<float>() + lo, rp + lo, hi - lo);
      });
    };
    ShapeMemo<Layout>::Held run_layout;
    const Layout& layout = layout_.get({x.shape(), w.shape(), y.shape()}, run_layout, [&] {
      return layout_of(ctx.node, x.shape(), w.shape(), y.shape());
    });
    const Geometry& g = layout.g;
    const int64_t batch = x.dim(0), c_in = x.dim(1), c_out = y.dim(1);
    const int64_t cg = c_in / group_, mg = c_out / group_;
    const int64_t ivol = g.in_size(), ovol = g.out_size(), kvol = g.kernel_size();
    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    const float* bp = b ? b->data<float>() : nullptr;
    float* yp = y.data<float>();
    if (layout.direct) {
      ctx.detail = "direct, a bounds check per tap (padding far wider than the window)";
      conv_direct({g.in, g.out, g.kernel, g.stride, g.dilation, g.pad}, batch, c_in, c_out, group_,
                  xp, wp, bp, yp, act_before, ctx.pool);
      if (rp) add_residual();
      return;
    }
    if (cg == 1 && mg == 1) {
      ctx.detail = run_depthwise(ctx, g, batch * c_out, c_out, xp, wp, bp, yp, act_before);
      if (rp) add_residual();
      return;
    }

    const bool pointwise = layout.pointwise;
    if (few_ && layout.regions.empty() && few_->takes(g)) {
      ctx.detail = "direct, few input channels (output channels along the vectors)";
      few_->run(g, batch, xp, bp, yp, act_before, ctx.pool);
      if (rp) add_residual();
      return;
    }
    if (const std::vector<TapRegion>& regions = layout.regions; !regions.empty()) {
      if (!channel_packed_.empty() && g.stride[1] == 1 && g.stride[2] == 1) {
        ctx.detail = "channel tiles (gemm_channels), a product per kernel tap";
        run_by_tap_channels(ctx, g, regions, batch, c_in, xp, bp, yp, act_before);
      } else {
        ctx.detail = "packed GEMM, a product per kernel tap";
        run_by_tap(ctx, g, regions, batch, c_in, c_out, xp, wp, bp, yp, act_before);
      }
      if (rp) add_residual();
      return;
    }
    // Offsets that only ever read padding are left out of K (their weights too); such weights
    // are packed for this run only.
    const std::vector<int64_t>& taps = layout.taps;
    const int64_t kl = static_cast<int64_t>(taps.size());
    const bool planar = layout.shift.has_value();
    if (!channel_packed_.empty() && kl == kvol && (pointwise || planar)) {
      ctx.detail = pointwise ? "channel tiles (gemm_channels), input read in place"
                             : "channel tiles (gemm_channels) over shifted input rows";
      run_small_map(ctx, g, layout.shift ? &*layout.shift : nullptr, xp, bp, yp, rp);
      return;
    }
    std::vector<PackedA> run_packed;
    if (kl < kvol) {
      if (layout.live_packed.empty()) run_packed = pack_live(wp, c_out, cg, kvol, taps);
    } else if (packed_.empty()) {  // weights not constant, or packed for the small-map path
      run_packed = pack_groups(wp, mg, cg * kvol);
    }
    const std::vector<PackedA>& packed = !run_packed.empty()           ? run_packed
                                         : !layout.live_packed.empty() ? layout.live_packed
                                                                       : packed_;
    const int64_t depth = cg * kl;

    // Small images in a batch (the digits demo: 8x8 and 4x4): one image's GEMM is too small to
    // split, or to fill the GEMM's 48-column strips (4x4: 16 columns), so the batch is split
    // across the pool and each thread unfolds a run of its images side by side, one GEMM for
    // them all, then moves each image's rows into place. Image by image, the demo's second conv
    // took 581 us at 2 threads, 408 at 1.
    const int64_t image_macs = c_out * ovol * depth;
    if (batch > 1 && ctx.pool.threads() > 1 && image_macs < (int64_t{1} << 21) &&
        depth * ovol * static_cast<int64_t>(sizeof(float)) <= kColBytes) {
      ctx.detail = "packed GEMM, runs of images unfolded side by side";
      static const ThreadPool serial(1);
      // Images per GEMM: their unfolded input within 256 KiB (L2), at least one.
      const int64_t run = std::clamp<int64_t>(
          (int64_t{256} << 10) / (depth * ovol * static_cast<int64_t>(sizeof(float))), 1, batch);
      ctx.pool.parallel_for(batch, 1, [&](int64_t begin, int64_t end) {
        const int64_t most = std::min(run, end - begin), ld = most * ovol;
        std::vector<float> col(static_cast<size_t>(depth * ld)), prod(static_cast<size_t>(mg * ld));
        for (int64_t n0 = begin; n0 < end; n0 += most) {
          const int64_t count = std::min(most, end - n0), cols = count * ovol;
          for (int64_t grp = 0; grp < group_; ++grp) {
            for (int64_t i = 0; i < count; ++i)
              im2col(g, taps, xp + ((n0 + i) * c_in + grp * cg) * ivol, cg, 0, g.out[0] * g.out[1],
                     col.data() + i * ovol, serial, 0.0f, ld);
            gemm_packed(packed[static_cast<size_t>(grp)], col.data(), ld, cols, prod.data(), ld,
                        bp ? bp + grp * mg : nullptr, act_before, serial);
            for (int64_t i = 0; i < count; ++i)
              for (int64_t m = 0; m < mg; ++m)
                copy_row(prod.data() + m * ld + i * ovol,
                         yp + ((n0 + i) * c_out + grp * mg + m) * ovol, ovol);
          }
        }
      });
      if (rp) add_residual();
      return;
    }
    // The unfolded input is built a block of output rows at a time so that its size stays
    // bounded (a 7x7 conv on a large image would otherwise need hundreds of MB).
    const int64_t out_rows = g.out[0] * g.out[1];
    const int64_t row_bytes = depth * g.out[2] * static_cast<int64_t>(sizeof(float));
    const int64_t block =
        std::clamp<int64_t>(kColBytes / std::max<int64_t>(row_bytes, 1), 1, out_rows);
    std::optional<ShiftedInput> shifted;
    std::unique_ptr<float[]> col;
    float* wide = nullptr;  // the product, shifted->width() columns per output row
    const int64_t bands_of = planar ? band_rows(g, *layout.shift, ctx.pool.threads()) : 0;
    const bool banded = bands_of > 0;
    if (banded) {
    } else if (planar) {
      shifted.emplace(g, *layout.shift);
      if (shifted->width() != g.out[2] && !wide_in_place(packed[0], act, g.out[2]))
        wide = thread_scratch(1, mg * wide_stride(shifted->columns()));
    } else if (!pointwise) {
      col.reset(new float[depth * block * g.out[2] + 1]);
    }
    const std::vector<int64_t> plane_offsets =
        pointwise ? plane_rows(cg, ivol) : std::vector<int64_t>{};
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t grp = 0; grp < group_; ++grp) {
        const float* xg = xp + (n * c_in + grp * cg) * ivol;
        float* yg = yp + (n * c_out + grp * mg) * ovol;
        const float* bg = bp ? bp + grp * mg : nullptr;
        const PackedA& pk = packed[static_cast<size_t>(grp)];
        const float* rg = rp ? rp + (n * c_out + grp * mg) * ovol : nullptr;
        ctx.detail = pointwise ? "packed GEMM, input read in place"
                     : shifted ? "packed GEMM over shifted input rows"
                               : "packed GEMM over unfolded windows (im2col)";
        if (pointwise) {  // B is the input's channel planes, read in place
          gemm_packed(pk, BRows{xg, plane_offsets.data(), nullptr, ivol}, ovol, yg, ovol, bg, act,
                      ctx.pool, rg);
          continue;
        }
        if (banded) {
          ctx.detail = "packed GEMM over shifted input rows, a band of output rows per task";
          run_shifted_bands(g, *layout.shift, bands_of, pk, mg, xg, yg, bg, rg, act, act_before,
                            ctx.pool);
          continue;
        }
        if (shifted) {  // 1-D, 2-D: the GEMM reads the windows in place
          shifted->fill(xg, ctx.pool);
          const int64_t cols = shifted->columns();
          if (shifted->width() == g.out[2]) {
            gemm_packed(pk, shifted->rows(), cols, yg, ovol, bg, act, ctx.pool, rg);
            continue;
          }
          if (wide_in_place(pk, act, g.out[2])) {
            const NarrowCols narrow{g.out[2], shifted->width()};
            gemm_packed(pk, shifted->rows(), cols, yg, ovol, bg, act, ctx.pool, rg, &narrow);
            continue;
          }
          float* wp = wide;
          const int64_t ldw = wide_stride(cols);
          gemm_packed(pk, shifted->rows(), cols, wp, ldw, bg, act_before, ctx.pool);
          ctx.pool.parallel_for(
              mg, std::max<int64_t>(1, 16384 / ovol), [&](int64_t lo, int64_t hi) {
                if (!rg && g.out[2] <= 16 && has_avx512f()) {
                  for (int64_t m = lo; m < hi; ++m)
                    copy_narrow_rows(wp + m * ldw, shifted->width(), yg + m * ovol, g.out[2],
                                     g.out[1]);
                  return;
                }
                for (int64_t m = lo; m < hi; ++m)
                  for (int64_t oh = 0; oh < g.out[1]; ++oh) {
                    const float* src = wp + m * ldw + oh * shifted->width();
                    float* dst = yg + m * ovol + oh * g.out[2];
                    copy_row(src, dst, g.out[2]);
                    if (rg)  // the activation was left for after the sum
                      act.apply_added(dst, rg + m * ovol + oh * g.out[2], g.out[2]);
                  }
              });
          continue;
        }
        for (int64_t r0 = 0; r0 < out_rows; r0 += block) {
          const int64_t r1 = std::min(out_rows, r0 + block);
          const int64_t width = (r1 - r0) * g.out[2];
          if (depth > 0) im2col(g, taps, xg, cg, r0, r1, col.get(), ctx.pool);
          gemm_packed(pk, col.get(), width, width, yg + r0 * g.out[2], ovol, bg, act_before,
                      ctx.pool);
        }
      }
    if (rp && !pointwise && !shifted && !banded) add_residual();  // the 3-D path
  }

 private:
  // Whether gemm_channels computes this conv (its output map's size is known at session
  // creation): maps of up to 64 pixels always, where gemm_packed's 48-column strips leave lanes
  // idle (7x7: 49 columns) or nearly all of them (the 1x1 maps of squeeze-excitation blocks:
  // MobileNetV3's 960 -> 240 conv took 0.16 ms, 0.02 here); maps up to 28x28 when the depth
  // is 256 or more and at most an eighth of the 64-row blocks is padding. Measured at two
  // threads, alternating: ResNet-50 24.2 -> 22.7 ms, FCN 120.5 -> 110.7 ms (its dilated layers
  // run on 28x28); shallower 14x14 convs were slower here (MobileNetV3's 112 -> 672: 0.15 -> 0.22
  // ms; ResNet-50's 128 -> 512 on 28x28: 0.23 -> 0.25-0.29), and maps above 28x28 (YOLOv5s) 3 %
  // slower. From depth 256 rather than 512 (per node in the model, 2 threads): ResNet-50's six
  // 256 -> 1024 on 14x14 0.28-0.30 -> 0.24-0.27 ms (gemm_packed's 196 columns end in a strip of
  // 4, and its in-model time was 0.04 ms above its time alone), its 256 -> 512 stride-2 0.52 ->
  // 0.47, FCN's 256 -> 1024 on 28x28 0.98-1.00 -> 0.94-0.97, YOLOv5s's 256 -> 256 on 20x20
  // 0.137 -> 0.125.
  static bool small_map(const NodeSignature& sig, int64_t mg, int64_t depth, int64_t kvol) {
    if (sig.outputs.empty() || !sig.outputs[0].has_shape) return false;
    // 2-D convs, and 1-D ones (a 1 x W map: the VAD's STFT as a conv, 258 channels x 4 columns).
    const std::vector<int64_t>& d = sig.outputs[0].dims;
    if (d.size() != 4 && d.size() != 3) return false;
    if (std::any_of(d.begin() + 2, d.end(), [](int64_t v) { return v <= 0; })) return false;
    // Saturating, as in the constructor: hostile pads give dims whose product overflows.
    int64_t pixels = d[2];
    if (d.size() == 4 && __builtin_mul_overflow(pixels, d[3], &pixels))
      pixels = std::numeric_limits<int64_t>::max();
    const int64_t block = PackedAChannels::kRows;
    const int64_t padded = (mg + block - 1) / block * block;
    // Unless gemm_channels' 64-row tiles would waste more of their lanes than gemm_packed's
    // 48-column strips: the digits demo's 8 -> 8 and 8 -> 16 convs on 8x8 and 4x4 maps used
    // an eighth and a quarter of each tile (1.69 ms a batch of 360, 0.5 on gemm_packed).
    if (pixels <= 64) return mg * ((pixels + 47) / 48 * 48) >= pixels * padded;
    // Larger maps: with AVX-512 always; with AVX2's tiles (24 + 24 + 16 channels x 4 pixels)
    // only for convs with a window. They won on ResNet-50's 7x7 maps and lost on its pointwise
    // convs on 14x14 and 28x28 (Zen 3, 2 threads, best of 4 alternating profiles per node in
    // the model): 2048 -> 512 on 7x7 1.22-1.39 -> 0.83-0.90 ms, 512 3x3 on 7x7 1.9-2.4 -> 1.8;
    // 256 -> 1024 on 14x14 0.70 -> 1.15, 256 -> 512 on 28x28 1.38 -> 1.90. A 3x3 conv over
    // shifted rows on gemm_packed computes the padded width and drops it (28x28 with pads 1: 30
    // columns a row, 7 % more; FCN's dilation 4: 36, 29 % more), where the channel tiles
    // compute the map's pixels only. Alone (2 threads, min of 3 alternating rounds): 3x3 256 on
    // 14x14 2.16 -> 1.68 ms, 128 on 28x28 1.87 -> 1.56, 512 on 28x28 with dilation 4 30.2 ->
    // 23.4; FCN's 2048 -> 512 head 114.6 -> 112.2. The nodes that changed path, summed over
    // 6 alternating profiles, both orders: ResNet-50 18.2 -> 17.2 and 18.3 -> 16.4 ms, FCN
    // 250 -> 234 and 316 -> 243, YOLOv5s 17.4 -> 17.1 and 22.3 -> 22.2.
    return (has_avx512f() || kvol > 1) && pixels <= 28 * 28 && depth >= 256 && padded * 8 <= mg * 9;
  }

  // The 2-D and pointwise convs on small maps: gemm_channels straight into y, B read in place.
  // shift: the planes of a 1-D or 2-D conv; null for a pointwise one.
  void run_small_map(KernelContext& ctx, const Geometry& g, const ShiftPlan* shift, const float* xp,
                     const float* bp, float* yp, const float* rp) const {
    const bool pointwise = shift == nullptr;
    const int64_t batch = ctx.input(0).dim(0), c_in = ctx.input(0).dim(1);
    const int64_t cg = c_in / group_, mg = static_cast<int64_t>(channel_packed_[0].rows());
    const int64_t c_out = mg * group_, ivol = g.in_size(), ovol = g.out_size();
    const std::vector<int64_t> plane_offsets =
        pointwise ? plane_rows(cg, ivol) : std::vector<int64_t>{};
    // Images [begin, end), each one's products split across `pool`.
    auto images = [&](int64_t begin, int64_t end, const ThreadPool& pool) {
      std::optional<ShiftedInput> shifted;  // its planes are this thread's scratch
      if (shift) shifted.emplace(g, *shift);
      for (int64_t n = begin; n < end; ++n)
        for (int64_t grp = 0; grp < group_; ++grp) {
          const float* xg = xp + (n * c_in + grp * cg) * ivol;
          const int64_t yo = (n * c_out + grp * mg) * ovol;
          if (shifted) shifted->fill(xg, pool);
          const BRows rows =
              shifted ? shifted->rows() : BRows{xg, plane_offsets.data(), nullptr, ivol};
          const PixelRows cols{ovol, g.out[2], shifted ? shifted->width() : g.out[2]};
          gemm_channels(channel_packed_[static_cast<size_t>(grp)], rows, cols, yp + yo, ovol,
                        bp ? bp + grp * mg : nullptr, ctx.activation, pool, rp ? rp + yo : nullptr);
        }
    };
    // Small images in a batch (the digits demo: 360 8x8 images): one image's product is too
    // small to split (2 threads took 843 us on the demo's first conv where 1 took 500 us, two
    // pool dispatches per image), so the batch is split across the pool instead.
    const int64_t depth = channel_packed_[0].depth();
    if (batch > 1 && ctx.pool.threads() > 1 && c_out * ovol * depth < (int64_t{1} << 21)) {
      static const ThreadPool serial(1);
      ctx.pool.parallel_for(batch, 1,
                            [&](int64_t begin, int64_t end) { images(begin, end, serial); });
      return;
    }
    images(0, batch, ctx.pool);
  }

  // One PackedA per group: rows [grp * mg, (grp + 1) * mg) of the weights, `depth` wide.
  std::vector<PackedA> pack_groups(const float* w, int64_t mg, int64_t depth) const {
    std::vector<PackedA> out;
    for (int64_t grp = 0; grp < group_; ++grp)
      out.emplace_back(w + grp * mg * depth, mg, depth, depth, bf16_);
    return out;
  }
  // The weights of the taps in K only (c_out x cg x taps of the c_out x cg x kvol), packed.
  std::vector<PackedA> pack_live(const float* wp, int64_t c_out, int64_t cg, int64_t kvol,
                                 const std::vector<int64_t>& taps) const {
    const auto kl = static_cast<int64_t>(taps.size());
    std::vector<float> w_live(static_cast<size_t>(c_out * cg * kl));
    for (int64_t m = 0; m < c_out; ++m)
      for (int64_t c = 0; c < cg; ++c)
        for (int64_t t = 0; t < kl; ++t)
          w_live[static_cast<size_t>((m * cg + c) * kl + t)] =
              wp[(m * cg + c) * kvol + taps[static_cast<size_t>(t)]];
    return pack_groups(w_live.data(), c_out / group_, cg * kl);
  }

  // The output rectangle [h0, h1) x [w0, w1) whose window offset `tap` reads inside the input.
  struct TapRegion {
    int64_t tap, h0, h1, w0, w1;
    int64_t size() const { return (h1 - h0) * (w1 - w0); }
  };
  static std::vector<TapRegion> tap_regions(const Geometry& g) {
    std::vector<TapRegion> out;
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh)
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
        auto [h0, h1] = valid_range(g.out[1], g.in[1], g.stride[1], kh * g.dilation[1] - g.pad[1]);
        auto [w0, w1] = g.w_ranges[static_cast<size_t>(kw)];
        if (h0 < h1 && w0 < w1) out.push_back({kh * g.kernel[2] + kw, h0, h1, w0, w1});
      }
    return out;
  }
  // The offsets' regions when most of the unfolded input would be padding (large dilations on
  // small maps, as DeepLabV3's dilation-12 conv on 14x14: 5.4x fewer multiply-adds by offset
  // than unfolded), else none.
  static std::vector<TapRegion> sparse_tap_regions(const Geometry& g) {
    if (g.in[0] != 1 || g.out[0] != 1 || g.kernel[0] != 1 || g.kernel_size() == 1) return {};
    std::vector<TapRegion> regions = tap_regions(g);
    int64_t live = 0;
    for (const TapRegion& r : regions) live += r.size();
    if (regions.empty() || live * 2 >= g.kernel_size() * g.out_size()) return {};
    return regions;
  }

  // run_by_tap on the small-map path (stride 1): each offset's product reads that offset's
  // depth rows of the weights packed for all offsets (ChannelSlice) and the input planes in
  // place, shifted by the offset, and adds into its rectangle of y. No per-offset copy of the
  // weights or gather of the input: DeepLabV3's dilation-12 conv on 14x14 took 1.07 ms with
  // them.
  void run_by_tap_channels(KernelContext& ctx, const Geometry& g,
                           const std::vector<TapRegion>& regions, int64_t batch, int64_t c_in,
                           const float* xp, const float* bp, float* yp,
                           const Activation& act) const {
    const int64_t cg = c_in / group_, mg = channel_packed_[0].rows(), c_out = mg * group_;
    const int64_t ivol = g.in_size(), ovol = g.out_size(), kvol = g.kernel_size();
    const std::vector<int64_t> planes = plane_rows(cg, ivol);
    // The offset whose rectangle is the whole map stores y (with the bias, and the activation
    // when it is the only one); else y starts as the bias.
    const TapRegion* whole = nullptr;
    for (const TapRegion& r : regions)
      if (!whole && r.size() == ovol) whole = &r;
    const bool whole_only = whole && regions.size() == 1;
    if (!whole)
      ctx.pool.parallel_for(
          batch * c_out, std::max<int64_t>(1, 16384 / ovol), [&](int64_t lo, int64_t hi) {
            for (int64_t p = lo; p < hi; ++p)
              std::fill(yp + p * ovol, yp + (p + 1) * ovol, bp ? bp[p % c_out] : 0.f);
          });
    const Activation none;
    auto product = [&](const TapRegion& r, int64_t grp, const float* xg, float* yg, const float* bg,
                       bool store) {
      const int64_t kh = r.tap / g.kernel[2], kw = r.tap % g.kernel[2];
      const int64_t ih = r.h0 - g.pad[1] + kh * g.dilation[1];  // of output (h0, w0)
      const int64_t iw = r.w0 - g.pad[2] + kw * g.dilation[2];
      const ChannelSlice slice{.depth_first = r.tap,
                               .depth_step = kvol,
                               .depth_count = cg,
                               .c_row_stride = g.out[2],
                               .accumulate = !store};
      gemm_channels(
          channel_packed_[static_cast<size_t>(grp)], BRows{xg + ih * g.in[2] + iw, planes.data()},
          PixelRows{r.size(), r.w1 - r.w0, g.in[2]}, yg + r.h0 * g.out[2] + r.w0, ovol,
          store ? bg : nullptr, store && whole_only ? act : none, ctx.pool, nullptr, slice);
    };
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t grp = 0; grp < group_; ++grp) {
        const float* xg = xp + (n * c_in + grp * cg) * ivol;
        float* yg = yp + (n * c_out + grp * mg) * ovol;
        const float* bg = bp ? bp + grp * mg : nullptr;
        if (whole) product(*whole, grp, xg, yg, bg, true);
        for (const TapRegion& r : regions)
          if (&r != whole) product(r, grp, xg, yg, bg, false);
      }
    if (!act.none() && !whole_only)
      ctx.pool.parallel_for(
          batch * c_out, std::max<int64_t>(1, 16384 / ovol),
          [&](int64_t lo, int64_t hi) { act.apply(yp + lo * ovol, (hi - lo) * ovol); });
  }

  // y = bias + sum over window offsets of W[:, :, offset] x (the input shifted by the offset),
  // each product only over the outputs whose input is inside the image; then the activation.
  void run_by_tap(KernelContext& ctx, const Geometry& g, const std::vector<TapRegion>& regions,
                  int64_t batch, int64_t c_in, int64_t c_out, const float* xp, const float* wp,
                  const float* bp, float* yp, const Activation& act) const {
    const int64_t cg = c_in / group_, mg = c_out / group_, kvol = g.kernel_size();
    const int64_t ivol = g.in_size(), ovol = g.out_size();
    // Weights per (group, offset): packed once for constant weights, else for this run.
    std::shared_ptr<const std::vector<PackedA>> per_tap;
    {
      std::lock_guard lock(lazy_mutex_);
      per_tap = tap_packed_;
    }
    if (!per_tap) {
      auto packs = std::make_shared<std::vector<PackedA>>();
      std::vector<float> wt(static_cast<size_t>(mg * cg));
      for (int64_t grp = 0; grp < group_; ++grp)
        for (int64_t t = 0; t < kvol; ++t) {
          for (int64_t m = 0; m < mg; ++m)
            for (int64_t c = 0; c < cg; ++c)
              wt[static_cast<size_t>(m * cg + c)] = wp[((grp * mg + m) * cg + c) * kvol + t];
          packs->emplace_back(wt.data(), mg, cg, cg, bf16_);
        }
      per_tap = packs;
      if (constant_weights_) {  // keep them for the next runs
        std::lock_guard lock(lazy_mutex_);
        tap_packed_ = per_tap;
      }
    }
    // The offset that reads every output's own input position (the centre tap of a padded
    // stride-1 conv: DeepLabV3's dilation-24 and -36 convs on 14x14 have no other) is one
    // product over the input planes as they are, written straight into y with the bias, and
    // with the activation when it is the only one; the others then add to it.
    const TapRegion* whole = nullptr;
    for (const TapRegion& r : regions)
      if (!whole && g.stride[1] == 1 && g.stride[2] == 1 && g.in == g.out && r.size() == ovol &&
          r.tap / g.kernel[2] * g.dilation[1] == g.pad[1] &&
          r.tap % g.kernel[2] * g.dilation[2] == g.pad[2])
        whole = &r;
    const bool whole_only = whole && regions.size() == 1;
    const std::vector<int64_t> plane_offsets =
        whole ? plane_rows(cg, ivol) : std::vector<int64_t>{};
    if (!whole)
      ctx.pool.parallel_for(
          batch * c_out, std::max<int64_t>(1, 16384 / ovol), [&](int64_t lo, int64_t hi) {
            for (int64_t p = lo; p < hi; ++p)
              std::fill(yp + p * ovol, yp + (p + 1) * ovol, bp ? bp[p % c_out] : 0.f);
          });
    int64_t largest = 0;
    for (const TapRegion& r : regions) largest = std::max(largest, r.size());
    std::vector<float> col(static_cast<size_t>(cg * largest)),
        part(static_cast<size_t>(mg * largest));
    const Activation none;
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t grp = 0; grp < group_; ++grp) {
        if (whole)
          gemm_packed((*per_tap)[static_cast<size_t>(grp * kvol + whole->tap)],
                      BRows{xp + (n * c_in + grp * cg) * ivol, plane_offsets.data()}, ovol,
                      yp + (n * c_out + grp * mg) * ovol, ovol, bp ? bp + grp * mg : nullptr,
                      whole_only ? act : none, ctx.pool);
        for (const TapRegion& r : regions) {
          if (&r == whole) continue;
          const int64_t kh = r.tap / g.kernel[2], kw = r.tap % g.kernel[2];
          const int64_t rw = r.w1 - r.w0, size = r.size();
          const float* xg = xp + (n * c_in + grp * cg) * ivol;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t oh = r.h0; oh < r.h1; ++oh) {
              const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
              const float* src = xg + c * ivol + ih * g.in[2];
              float* dst = col.data() + c * size + (oh - r.h0) * rw;
              for (int64_t ow = r.w0; ow < r.w1; ++ow)
                dst[ow - r.w0] = src[ow * g.stride[2] - g.pad[2] + kw * g.dilation[2]];
            }
          gemm_packed((*per_tap)[static_cast<size_t>(grp * kvol + r.tap)], col.data(), size, size,
                      part.data(), size, nullptr, none, ctx.pool);
          float* yg = yp + (n * c_out + grp * mg) * ovol;
          for (int64_t m = 0; m < mg; ++m)
            for (int64_t oh = r.h0; oh < r.h1; ++oh) {
              float* yrow = yg + m * ovol + oh * g.out[2];
              const float* prow = part.data() + m * size + (oh - r.h0) * rw;
              for (int64_t ow = r.w0; ow < r.w1; ++ow) yrow[ow] += prow[ow - r.w0];
            }
        }
      }
    if (!act.none() && !whole_only)
      ctx.pool.parallel_for(
          batch * c_out, std::max<int64_t>(1, 16384 / ovol),
          [&](int64_t lo, int64_t hi) { act.apply(yp + lo * ovol, (hi - lo) * ovol); });
  }

  // Returns which kernel ran (KernelContext::detail).
  const char* run_depthwise(KernelContext& ctx, const Geometry& g, int64_t planes, int64_t c_out,
                            const float* xp, const float* wp, const float* bp, float* yp,
                            const Activation& act) const {
    if (g.in[0] == 1 && g.out[0] == 1 && g.kernel[0] == 1) {  // 1-D and 2-D: the direct kernel
      return depthwise_conv2d(depthwise_geometry(g), planes, c_out, xp, wp, bp, yp, act, ctx.pool,
                              wp == weights16_of_ ? weights16_.get() : nullptr);
    }
    // 3-D: the plane kernels below.
    const int64_t ivol = g.in_size(), ovol = g.out_size(), kvol = g.kernel_size();
    // The plane kernels accumulate into y: it starts as the bias (or zeros).
    ctx.pool.parallel_for(
        planes, std::max<int64_t>(1, 16384 / ovol), [&](int64_t begin, int64_t end) {
          for (int64_t p = begin; p < end; ++p)
            std::fill(yp + p * ovol, yp + (p + 1) * ovol, bp ? bp[p % c_out] : 0.f);
        });
    // Wide stride-1 rows vectorise well in place; everything else goes through phase planes.
    if (g.out[2] < 64 || g.stride != Dims3{1, 1, 1}) {
      const PhasePlanes pp = phase_planes(g);
      ctx.pool.parallel_for(
          planes, std::max<int64_t>(1, 8192 / (ovol * kvol)), [&](int64_t begin, int64_t end) {
            std::vector<float> buffer(static_cast<size_t>(pp.buffer_size()));
            for (int64_t p = begin; p < end; ++p) {
              depthwise_plane_phased(g, pp, xp + p * ivol, wp + (p % c_out) * kvol, yp + p * ovol,
                                     buffer.data());
              act.apply(yp + p * ovol, ovol);
            }
          });
      return "depthwise 3-D, phase planes";
    }
    ctx.pool.parallel_for(
        planes, std::max<int64_t>(1, 8192 / (ovol * kvol)), [&](int64_t begin, int64_t end) {
          for (int64_t p = begin; p < end; ++p) {
            depthwise_plane(g, xp + p * ivol, wp + (p % c_out) * kvol, yp + p * ovol);
            act.apply(yp + p * ovol, ovol);
          }
        });
    return "depthwise 3-D, planes in place";
  }

  int64_t group_;
  bool bf16_;                    // the products take bfloat16 operands (NodeSignature::bf16)
  std::vector<PackedA> packed_;  // per group, when the weights are constant
  std::vector<PackedAChannels> channel_packed_;  // instead, for small maps (small_map)
  std::optional<FewChannelConv> few_;  // instead, for few input channels (conv_few_channels)
  // Depthwise with constant weights: them as the 16-channel transposed kernel reads them, and
  // the weights they were made from (a run whose W is elsewhere lays its own out).
  std::shared_ptr<float[]> weights16_;
  const float* weights16_of_ = nullptr;
  bool constant_weights_ = false;  // one of the three is packed
  // What run() works out from the shapes before any arithmetic.
  struct Layout {
    Geometry g;
    bool direct = false;               // conv_direct: the padded input dwarfs the data
    bool pointwise = false;            // 1x1, stride 1, no padding: B is the input as it is
    std::vector<TapRegion> regions;    // sparse_tap_regions: non-empty to compute by offset
    std::vector<int64_t> taps;         // else the offsets in K: all_taps or live_taps
    std::optional<ShiftPlan> shift;    // and for 1-D and 2-D convs but pointwise ones, their planes
    std::vector<PackedA> live_packed;  // constant weights, fewer taps than the kernel's: theirs
  };
  static Layout layout_of(const Node& node, const std::vector<int64_t>& x_shape,
                          const std::vector<int64_t>& w_shape,
                          const std::vector<int64_t>& y_shape) {
    Layout l;
    l.g = conv_geometry(node, x_shape, w_shape, y_shape);
    const Geometry& g = l.g;
    // The fast paths copy or index the input padded to the span the windows cover. Padding far
    // wider than the window (only hostile or synthetic models have it) makes that span dwarf
    // the input and the output: the direct kernel then costs what the output does.
    double span = 1;
    for (int j = 0; j < 3; ++j)
      span *= static_cast<double>(g.out[j] - 1) * static_cast<double>(g.stride[j]) +
              static_cast<double>((g.kernel[j] - 1) * g.dilation[j] + 1);
    l.direct = span > 4.0 * static_cast<double>(g.in_size() + g.out_size()) + 65536.0;
    if (l.direct) return l;
    l.pointwise = g.kernel_size() == 1 && g.in == g.out && g.stride == Dims3{1, 1, 1} &&
                  g.pad == Dims3{0, 0, 0};
    if (!l.pointwise) l.regions = sparse_tap_regions(g);
    if (l.regions.empty()) l.taps = l.pointwise ? all_taps(g) : live_taps(g);
    if (l.regions.empty() && !l.pointwise && g.out[0] == 1 && g.kernel[0] == 1)
      l.shift = shift_plan(g, l.taps, w_shape[1]);
    return l;
  }
  ShapeMemo<Layout> layout_;  // of the shapes of x, w and y
  // Weights per (group, window offset) for run_by_tap, made on first use (constant weights
  // only; the image size picks the path), guarded by lazy_mutex_.
  mutable std::mutex lazy_mutex_;
  mutable std::shared_ptr<const std::vector<PackedA>> tap_packed_;
};

std::string conv_support(const NodeSignature& sig) {
  for (size_t i = 0; i < sig.inputs.size(); ++i)
    if (sig.inputs[i].dtype != DType::Float32 && sig.inputs[i].dtype != DType::Undefined)
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(sig.inputs[i].dtype) +
             "; the CPU kernel supports float32";
  if (sig.inputs[0].has_shape && sig.inputs[0].dims.size() > 5)
    return "only 1-D, 2-D and 3-D convolutions are supported";
  return "";
}

}  // namespace

void register_cpu_conv(KernelRegistry& r) {
  r.add("Conv", conv_support,
        KernelFactory([](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
          return std::make_unique<ConvKernel>(sig);
        }));
  r.accept_fused_activation("Conv");
  r.accept_fused_residual("Conv", 3);
}

}  // namespace quilt::cpu
