#include "backends/cpu/kernels/conv_direct.hpp"

#include "core/checked.hpp"

namespace quilt::cpu {
namespace {

// The window taps k in [lo, hi) of output position o that read inside [0, in).
std::pair<int64_t, int64_t> live_taps(int64_t o, int64_t in, int64_t kernel, int64_t stride,
                                      int64_t dilation, int64_t pad) {
  const int64_t start = o * stride - pad;  // input position of tap 0
  const int64_t lo = ceil_div_positive(saturating_sub(0, start), dilation);
  const int64_t hi = ceil_div_positive(saturating_sub(in, start), dilation);
  return {std::min(lo, kernel), std::min(hi, kernel)};
}

}  // namespace

void conv_direct(const DirectConvGeometry& g, int64_t batch, int64_t c_in, int64_t c_out,
                 int64_t group, const float* x, const float* w, const float* bias, float* y,
                 const Activation& act, const ThreadPool& pool) {
  const int64_t cg = c_in / group, mg = c_out / group;
  const int64_t ivol = g.in[0] * g.in[1] * g.in[2], ovol = g.out[0] * g.out[1] * g.out[2];
  const int64_t kvol = g.kernel[0] * g.kernel[1] * g.kernel[2];
  pool.parallel_for(batch * c_out, 1, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t n = plane / c_out, m = plane % c_out, grp = m / mg;
      const float* xg = x + (n * c_in + grp * cg) * ivol;
      const float* wm = w + m * cg * kvol;
      float* yp = y + plane * ovol;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        const auto [d0, d1] =
            live_taps(od, g.in[0], g.kernel[0], g.stride[0], g.dilation[0], g.pad[0]);
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          const auto [h0, h1] =
              live_taps(oh, g.in[1], g.kernel[1], g.stride[1], g.dilation[1], g.pad[1]);
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            const auto [w0, w1] =
                live_taps(ow, g.in[2], g.kernel[2], g.stride[2], g.dilation[2], g.pad[2]);
            float sum = bias ? bias[m] : 0.f;
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t kd = d0; kd < d1; ++kd) {
                const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
                for (int64_t kh = h0; kh < h1; ++kh) {
                  const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
                  const float* xrow = xg + (c * g.in[0] + id) * g.in[1] * g.in[2] + ih * g.in[2];
                  const float* wrow =
                      wm + ((c * g.kernel[0] + kd) * g.kernel[1] + kh) * g.kernel[2];
                  for (int64_t kw = w0; kw < w1; ++kw)
                    sum += wrow[kw] * xrow[ow * g.stride[2] - g.pad[2] + kw * g.dilation[2]];
                }
              }
            yp[(od * g.out[1] + oh) * g.out[2] + ow] = sum;
          }
        }
      }
      act.apply(yp, ovol);
    }
  });
}

}  // namespace quilt::cpu
