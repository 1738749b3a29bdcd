// RoiAlign (opsets 10 and 16) on the CPU, computed in the input's float type in the order of
// onnxruntime (float16 in float32): per roi, the bilinear samples of every output bin are planned
// once and reused for every channel.
#include <algorithm>
#include <cmath>

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

template <class T>
void roi_align(const RoiAlignParams& p, const T* x, const std::vector<int64_t>& x_shape,
               const T* rois, const int64_t* batch_indices, int64_t num_rois, T* y,
               const ThreadPool& pool) {
  const int64_t channels = x_shape[1], height = x_shape[2], width = x_shape[3];
  const int64_t ph_n = p.out_h, pw_n = p.out_w;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, channels * ph_n * pw_n));
  pool.parallel_for(num_rois, grain, [&](int64_t begin, int64_t end) {
    std::vector<Sample<T>> samples;
    for (int64_t n = begin; n < end; ++n) {
      const T* roi = rois + n * 4;
      const T scale = static_cast<T>(p.spatial_scale);
      const T offset = p.half_pixel ? T(0.5) : T(0);
      const T start_w = roi[0] * scale - offset, start_h = roi[1] * scale - offset;
      const T end_w = roi[2] * scale - offset, end_h = roi[3] * scale - offset;
      T roi_w = end_w - start_w, roi_h = end_h - start_h;
      if (!p.half_pixel) {  // the legacy mode forces rois to be at least one pixel
        roi_w = std::max(roi_w, T(1));
        roi_h = std::max(roi_h, T(1));
      }
      const T bin_h = roi_h / static_cast<T>(ph_n), bin_w = roi_w / static_cast<T>(pw_n);
      const int64_t grid_h = p.sampling_ratio > 0
                                 ? p.sampling_ratio
                                 : static_cast<int64_t>(std::ceil(roi_h / static_cast<T>(ph_n)));
      const int64_t grid_w = p.sampling_ratio > 0
                                 ? p.sampling_ratio
                                 : static_cast<int64_t>(std::ceil(roi_w / static_cast<T>(pw_n)));
      // A negative roi in half_pixel mode gives no samples (the output is 0), like the reference.
      const int64_t gh = std::max<int64_t>(grid_h, 0), gw = std::max<int64_t>(grid_w, 0);
      const T count = static_cast<T>(std::max<int64_t>(grid_h * grid_w, 1));

      samples.clear();
      for (int64_t ph = 0; ph < ph_n; ++ph)
        for (int64_t pw = 0; pw < pw_n; ++pw)
          for (int64_t iy = 0; iy < gh; ++iy) {
            const T yy = start_h + static_cast<T>(ph) * bin_h +
                         static_cast<T>(iy + 0.5) * bin_h / static_cast<T>(grid_h);
            for (int64_t ix = 0; ix < gw; ++ix) {
              const T xx = start_w + static_cast<T>(pw) * bin_w +
                           static_cast<T>(ix + 0.5) * bin_w / static_cast<T>(grid_w);
              Sample<T> s{{0, 0, 0, 0}, {0, 0, 0, 0}};
              if (!(yy < -1 || yy > static_cast<T>(height) || xx < -1 ||
                    xx > static_cast<T>(width))) {
                T yc = std::max(yy, T(0)), xc = std::max(xx, T(0));
                int64_t y_lo = static_cast<int64_t>(yc), x_lo = static_cast<int64_t>(xc), y_hi,
                        x_hi;
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
                s = {{y_lo * width + x_lo, y_lo * width + x_hi, y_hi * width + x_lo,
                      y_hi * width + x_hi},
                     {hy * hx, hy * lx, ly * hx, ly * lx}};
              }
              samples.push_back(s);
            }
          }

      const int64_t b = batch_indices[n];
      for (int64_t c = 0; c < channels; ++c) {
        const T* plane = x + (b * channels + c) * height * width;
        T* out = y + (n * channels + c) * ph_n * pw_n;
        const Sample<T>* s = samples.data();
        for (int64_t bin = 0; bin < ph_n * pw_n; ++bin) {
          T v = 0;
          if (p.max_mode) {
            // As in onnxruntime and the ONNX reference: the max over samples of the largest
            // weighted corner, not of the interpolated value.
            for (int64_t k = 0; k < gh * gw; ++k, ++s) {
              const T m = std::max(
                  std::max(std::max(s->w[0] * plane[s->pos[0]], s->w[1] * plane[s->pos[1]]),
                           s->w[2] * plane[s->pos[2]]),
                  s->w[3] * plane[s->pos[3]]);
              v = k == 0 ? m : std::max(v, m);
            }
          } else {
            for (int64_t k = 0; k < gh * gw; ++k, ++s)
              v += s->w[0] * plane[s->pos[0]] + s->w[1] * plane[s->pos[1]] +
                   s->w[2] * plane[s->pos[2]] + s->w[3] * plane[s->pos[3]];
            v /= count;
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
                         y.data<float>(), ctx.pool);
      case DType::Float64:
        return roi_align(p_, x.data<double>(), x.shape(), rois.data<double>(), batch, n,
                         y.data<double>(), ctx.pool);
      default: {
        std::vector<float> out(static_cast<size_t>(y.numel()));
        roi_align(p_, widened<float>(x).data(), x.shape(), widened<float>(rois).data(), batch, n,
                  out.data(), ctx.pool);
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
