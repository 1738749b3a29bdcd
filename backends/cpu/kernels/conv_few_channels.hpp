// The direct float32 convolution for few input channels and a large window (a keyword-spotting
// net's first conv: 1 -> 64 channels, a 10x4 window, stride 2, on a 49x10 map), 1-D and 2-D,
// NCHW, any stride, padding, dilation and group count.
//
// Such a conv has a shallow product (channels x window: 40) over few pixels, where the packed
// GEMM over shifted input rows spent a third of its time outside the multiply-adds: its phase
// planes are wider than the output (stride 2: 6 columns for 5 outputs, and 48-column strips
// round 150 columns up to 192), and the product is copied into place afterwards. Here a tile is
// up to 64 output channels (four vectors) x up to 6 output pixels, each tap's weights one vector
// load per 16 channels and each pixel's input value a broadcast from a zero-padded copy of the
// input: no lane is wasted when the channel count is a multiple of 16, whatever the stride. The
// tiles' channel-major results are transposed into y with the activation.
//
//   FewChannelConv conv(w, c_out, group, cg, kernel_volume);          // at kernel creation
//   conv.run(g, batch, x, bias, y, act, pool);                         // per run
#pragma once

#include <cstdint>
#include <memory>

#include "backends/cpu/activation.hpp"
#include "backends/cpu/kernels/conv_geometry.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace quilt::cpu {

class FewChannelConv {
 public:
  // Whether this path takes a conv of cg input channels per group, window volume kvol, mg
  // output channels per group and `pixels` output pixels (1-D or 2-D, constant float32 weights,
  // an AVX-512 CPU, a stride above 1 along some dim): at most 4 input channels, a window of
  // at least 4 taps, a product at most 64 deep, at least 32 output channels, on maps of at most
  // 4096 pixels. Measured on the
  // keyword-spotting net's 1 -> 64 10x4 stride-2 conv (1 thread, in the model, under load): 12.4
  // us on the packed GEMM over shifted rows, 14 us over im2col, 18 us on gemm_channels, 8.0 us
  // here; the first conv of a 48x192 OCR-style classifier (3 -> 32, 3x3, stride 2): 56 -> 49 us
  // at 2 threads. Larger maps (ResNet-50's and MobileNetV3's 3-channel first convs, 112x112
  // outputs) keep the packed GEMM.
  static bool applies(int64_t cg, int64_t kvol, int64_t mg, int64_t pixels, bool strided);

  FewChannelConv(const float* w, int64_t c_out, int64_t group, int64_t cg, int64_t kvol);

  // Whether run() takes this run's geometry (planar, the window of the weights, a map within
  // the bound of applies, a padded copy small enough for 32-bit offsets).
  bool takes(const Geometry& g) const;

  // y (batch x c_out x out) = act(bias + conv(x)); g is planar (g.kernel[0] == g.out[0] == 1).
  void run(const Geometry& g, int64_t batch, const float* x, const float* bias, float* y,
           const Activation& act, const ThreadPool& pool) const;

 private:
  int64_t c_out_, group_, cg_, kvol_, mg_, blocks_;
  // Per group, per block of 64 output channels: [depth][64] (depth = cg * kvol), zero past mg.
  std::shared_ptr<float[]> packed_;
};

}  // namespace quilt::cpu
