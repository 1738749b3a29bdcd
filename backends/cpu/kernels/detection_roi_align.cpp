// RoiAlign (opsets 10 and 16) on the CPU, computed in the input's float type in the order of
// onnxruntime (float16 in float32): per roi, the bilinear samples of every output bin are planned
// once and reused for every channel.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "backends/cpu/kernels/detection_common.hpp"

namespace quilt::cpu {
namespace {

// ---- RoiAlign ----

struct RoiAlignParams {
  bool max_mode = false;
  bool half_pixel = false;
  int64_t out_h = 1, out_w = 1, sampling_ratio = 0;
  float spatial_scale = 1;
};

// One bilinear sample: four input offsets (within a channel plane) and their weights.
template <class T>
struct Sample {
  int64_t pos[4];
  T w[4];
};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// One roi's sampling geometry in feature-map pixels: its start, bins and sampling grid.
template <class T>
struct RoiGeometry {
  T start_h, start_w, bin_h, bin_w;
  int64_t grid_h, grid_w;  // the grid the formula gives (<= 0 only for negative half_pixel rois)
  int64_t gh, gw;          // samples per bin along each axis: max(grid, 0)
  T count;                 // avg mode's divisor: max(grid_h * grid_w, 1)
};

// Beyond 2^53 the sample indices are no longer exact in the doubles that place them.
constexpr double kMaxGrid = 9007199254740992.0;

// The geometry of roi n, computed as onnxruntime does; a roi that is not finite, or whose
// scaled size or adaptive grid leaves the representable range, is an error naming it (the
// grid's float -> int64 conversion was undefined there).
template <class T>
RoiGeometry<T> roi_geometry(const RoiAlignParams& p, const T* roi, int64_t n, const Node& node) {
  const auto which = [&] {
    return "rois[" + std::to_string(n) + "] = (" + num(roi[0]) + ", " + num(roi[1]) + ", " +
           num(roi[2]) + ", " + num(roi[3]) + ")";
  };
  if (!(std::isfinite(roi[0]) && std::isfinite(roi[1]) && std::isfinite(roi[2]) &&
        std::isfinite(roi[3])))
    node.fail(which() + " is not finite", ErrorCode::InvalidArgument);
  RoiGeometry<T> g{};
  const T scale = static_cast<T>(p.spatial_scale);
  const T offset = p.half_pixel ? T(0.5) : T(0);
  g.start_w = roi[0] * scale - offset;
  g.start_h = roi[1] * scale - offset;
  const T end_w = roi[2] * scale - offset, end_h = roi[3] * scale - offset;
  T roi_w = end_w - g.start_w, roi_h = end_h - g.start_h;
  if (!p.half_pixel) {  // the legacy mode forces rois to be at least one pixel
    roi_w = std::max(roi_w, T(1));
    roi_h = std::max(roi_h, T(1));
  }
  g.bin_h = roi_h / static_cast<T>(p.out_h);
  g.bin_w = roi_w / static_cast<T>(p.out_w);
  if (!(std::isfinite(g.start_w) && std::isfinite(g.start_h) && std::isfinite(g.bin_h) &&
        std::isfinite(g.bin_w)))
    node.fail(which() + " times spatial_scale " + num(p.spatial_scale) + " overflows " +
                  (sizeof(T) == 8 ? "float64" : "float32"),
              ErrorCode::InvalidArgument);
  if (p.sampling_ratio > 0) {
    g.grid_h = g.grid_w = p.sampling_ratio;
  } else {
    const T grid_h = std::ceil(roi_h / static_cast<T>(p.out_h));
    const T grid_w = std::ceil(roi_w / static_cast<T>(p.out_w));
    if (!(std::abs(grid_h) <= kMaxGrid && std::abs(grid_w) <= kMaxGrid))
      node.fail(which() + " spans " + num(roi_h) + " x " + num(roi_w) +
                    " feature-map pixels: an adaptive sampling grid of " + num(grid_h) + " x " +
                    num(grid_w) + " per bin, expected at most 2^53 a side",
                ErrorCode::InvalidArgument);
    g.grid_h = static_cast<int64_t>(grid_h);  // exact: integers within +-2^53
    g.grid_w = static_cast<int64_t>(grid_w);
  }
  // A negative roi in half_pixel mode gives no samples (the output is 0), like the reference.
  g.gh = std::max<int64_t>(g.grid_h, 0);
  g.gw = std::max<int64_t>(g.grid_w, 0);
  int64_t cells = 0;
  if (__builtin_mul_overflow(g.grid_h, g.grid_w, &cells)) {
    const double c = static_cast<double>(g.grid_h) * static_cast<double>(g.grid_w);
    g.count = static_cast<T>(std::max(c, 1.0));  // may round to inf in float32: the bins are 0
  } else {
    g.count = static_cast<T>(std::max<int64_t>(cells, 1));
  }
  return g;
}

// The first i in [0, n) for which pred is false, pred being true on a prefix.
template <class Pred>
int64_t partition_point(int64_t n, Pred pred) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (pred(mid))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// [first, last): the samples i in [0, n) whose coordinate c(i) lies in [-1, limit], the only ones
// that read the image. c is monotonic in i (each rounding step is), so they are one run, found by
// bisection: a roi far larger than the image costs what its part inside the image costs.
template <class T, class Coord>
std::pair<int64_t, int64_t> inside(int64_t n, T limit, Coord c) {
  if (n == 0) return {0, 0};
  int64_t first, last;
  if (c(0) <= c(n - 1)) {
    first = partition_point(n, [&](int64_t i) { return c(i) < -1; });
    last = partition_point(n, [&](int64_t i) { return !(c(i) > limit); });
  } else {
    first = partition_point(n, [&](int64_t i) { return c(i) > limit; });
    last = partition_point(n, [&](int64_t i) { return !(c(i) < -1); });
  }
  return {first, std::max(first, last)};
}

template <class T>
void roi_align(const RoiAlignParams& p, const T* x, const std::vector<int64_t>& x_shape,
               const T* rois, const int64_t* batch_indices, int64_t num_rois, T* y,
               const ThreadPool& pool, const Node& node) {
  const int64_t channels = x_shape[1], height = x_shape[2], width = x_shape[3];
  const int64_t ph_n = p.out_h, pw_n = p.out_w, bins = ph_n * pw_n;
  // An adaptive grid spaces its samples half a pixel or more apart (one a bin when bins are under
  // a pixel): at most 2h + 3 rows of them inside the image, over all bins, or one a bin; so only a
  // fixed sampling_ratio can reach this bound on the samples planned for one roi.
  const double max_samples =
      std::max(double(1 << 24), (2.0 * double(height) + 8 + double(ph_n)) *
                                        (2.0 * double(width) + 8 + double(pw_n)) +
                                    double(bins));
  std::vector<RoiGeometry<T>> geometry(static_cast<size_t>(num_rois));
  for (int64_t n = 0; n < num_rois; ++n) geometry[n] = roi_geometry(p, rois + n * 4, n, node);

  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, channels * bins));
  pool.parallel_for(num_rois, grain, [&](int64_t begin, int64_t end) {
    std::vector<Sample<T>> samples;
    std::vector<int64_t> bin_start(static_cast<size_t>(bins) + 1);
    std::vector<std::pair<int64_t, int64_t>> rows(static_cast<size_t>(ph_n)),
        cols(static_cast<size_t>(pw_n));
    for (int64_t n = begin; n < end; ++n) {
      const RoiGeometry<T>& g = geometry[n];
      const auto y_at = [&](int64_t ph, int64_t iy) {
        return g.start_h + static_cast<T>(ph) * g.bin_h +
               static_cast<T>(iy + 0.5) * g.bin_h / static_cast<T>(g.grid_h);
      };
      const auto x_at = [&](int64_t pw, int64_t ix) {
        return g.start_w + static_cast<T>(pw) * g.bin_w +
               static_cast<T>(ix + 0.5) * g.bin_w / static_cast<T>(g.grid_w);
      };
      double planned = 0, rows_in = 0, cols_in = 0;
      for (int64_t ph = 0; ph < ph_n; ++ph) {
        rows[ph] = inside(g.gh, static_cast<T>(height), [&](int64_t iy) { return y_at(ph, iy); });
        rows_in += double(rows[ph].second - rows[ph].first);
      }
      for (int64_t pw = 0; pw < pw_n; ++pw) {
        cols[pw] = inside(g.gw, static_cast<T>(width), [&](int64_t ix) { return x_at(pw, ix); });
        cols_in += double(cols[pw].second - cols[pw].first);
      }
      planned = rows_in * cols_in + double(bins);
      if (planned > max_samples)
        node.fail("sampling_ratio " + std::to_string(p.sampling_ratio) + " puts " + num(planned) +
                      " bilinear samples of rois[" + std::to_string(n) +
                      "] inside the feature map, over the kernel's bound of " + num(max_samples) +
                      " a roi",
                  ErrorCode::InvalidArgument);

      // The samples that read the image, and one zero-weight sample for a bin whose grid also
      // has points outside it: onnxruntime adds 0 * plane[0] for each of those, which leaves a
      // sum or a maximum as one such term does (and carries a NaN or inf of plane[0] the same).
      samples.clear();
      for (int64_t ph = 0, bin = 0; ph < ph_n; ++ph)
        for (int64_t pw = 0; pw < pw_n; ++pw, ++bin) {
          bin_start[bin] = static_cast<int64_t>(samples.size());
          const auto [iy0, iy1] = rows[ph];
          const auto [ix0, ix1] = cols[pw];
          for (int64_t iy = iy0; iy < iy1; ++iy) {
            const T yy = y_at(ph, iy);
            for (int64_t ix = ix0; ix < ix1; ++ix) {
              const T xx = x_at(pw, ix);
              T yc = std::max(yy, T(0)), xc = std::max(xx, T(0));
              int64_t y_lo = static_cast<int64_t>(yc), x_lo = static_cast<int64_t>(xc), y_hi, x_hi;
              if (y_lo >= height - 1) {
                y_hi = y_lo = height - 1;
                yc = static_cast<T>(y_lo);
              } else {
                y_hi = y_lo + 1;
              }
              if (x_lo >= width - 1) {
                x_hi = x_lo = width - 1;
                xc = static_cast<T>(x_lo);
              } else {
                x_hi = x_lo + 1;
              }
              const T ly = yc - static_cast<T>(y_lo), lx = xc - static_cast<T>(x_lo);
              const T hy = 1 - ly, hx = 1 - lx;
              samples.push_back({{y_lo * width + x_lo, y_lo * width + x_hi, y_hi * width + x_lo,
                                  y_hi * width + x_hi},
                                 {hy * hx, hy * lx, ly * hx, ly * lx}});
            }
          }
          if (iy1 - iy0 < g.gh || ix1 - ix0 < g.gw)
            samples.push_back(Sample<T>{{0, 0, 0, 0}, {0, 0, 0, 0}});
        }
      bin_start[bins] = static_cast<int64_t>(samples.size());

      const int64_t b = batch_indices[n];
      for (int64_t c = 0; c < channels; ++c) {
        const T* plane = x + (b * channels + c) * height * width;
        T* out = y + (n * channels + c) * bins;
        for (int64_t bin = 0; bin < bins; ++bin) {
          const Sample<T>* s = samples.data() + bin_start[bin];
          const int64_t k_n = bin_start[bin + 1] - bin_start[bin];
          T v = 0;
          if (p.max_mode) {
            // As in onnxruntime and the ONNX reference: the max over samples of the largest
            // weighted corner, not of the interpolated value.
            for (int64_t k = 0; k < k_n; ++k, ++s) {
              const T m = std::max(
                  std::max(std::max(s->w[0] * plane[s->pos[0]], s->w[1] * plane[s->pos[1]]),
                           s->w[2] * plane[s->pos[2]]),
                  s->w[3] * plane[s->pos[3]]);
              v = k == 0 ? m : std::max(v, m);
            }
          } else {
            for (int64_t k = 0; k < k_n; ++k, ++s)
              v += s->w[0] * plane[s->pos[0]] + s->w[1] * plane[s->pos[1]] +
                   s->w[2] * plane[s->pos[2]] + s->w[3] * plane[s->pos[3]];
            v /= g.count;
          }
          out[bin] = v;
        }
      }
    }
  });
}

class RoiAlignKernel : public Kernel {
 public:
  explicit RoiAlignKernel(const Node& node) {
    p_.max_mode = node.attr_string("mode", "avg") == "max";
    p_.half_pixel = node.opset >= 16 && node.attr_string("coordinate_transformation_mode",
                                                         "half_pixel") == "half_pixel";
    p_.out_h = node.attr_int("output_height", 1);
    p_.out_w = node.attr_int("output_width", 1);
    p_.sampling_ratio = node.attr_int("sampling_ratio", 0);
    p_.spatial_scale = node.attr_float("spatial_scale", 1.0f);
  }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& rois = ctx.input(1);
    const Tensor& bi = ctx.input(2);
    const int64_t n = bi.dim(0);
    const int64_t* batch = bi.data<int64_t>();
    for (int64_t i = 0; i < n; ++i)
      if (batch[i] < 0 || batch[i] >= x.dim(0))
        ctx.node.fail("batch_indices[" + std::to_string(i) + "] is " + std::to_string(batch[i]) +
                          ", expected a value in [0, " + std::to_string(x.dim(0)) + ")",
                      ErrorCode::InvalidArgument);
    Tensor& y = ctx.output(0);
    if (y.numel() == 0) return;
    if (x.dim(2) == 0 || x.dim(3) == 0)
      ctx.node.fail("X has shape " + to_string(x.shape()) + "; rois need a non-empty image",
                    ErrorCode::InvalidArgument);
    switch (x.dtype()) {
      case DType::Float32:
        return roi_align(p_, x.data<float>(), x.shape(), rois.data<float>(), batch, n,
                         y.data<float>(), ctx.pool, ctx.node);
      case DType::Float64:
        return roi_align(p_, x.data<double>(), x.shape(), rois.data<double>(), batch, n,
                         y.data<double>(), ctx.pool, ctx.node);
      default: {
        std::vector<float> out(static_cast<size_t>(y.numel()));
        roi_align(p_, widened<float>(x).data(), x.shape(), widened<float>(rois).data(), batch, n,
                  out.data(), ctx.pool, ctx.node);
        store_half(out, y);
      }
    }
  }

 private:
  RoiAlignParams p_;
};

}  // namespace

void register_cpu_roi_align(KernelRegistry& r) {
  r.add(
      "RoiAlign", [](const NodeSignature& sig) { return float_types_support(sig, 0, "X"); },
      KernelFactory([](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
        return std::make_unique<RoiAlignKernel>(sig.node);
      }));
}

}  // namespace quilt::cpu
