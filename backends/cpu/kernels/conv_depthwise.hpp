// Float32 depthwise 2-D convolution (NCHW, one input channel per output channel): the direct
// kernel behind Conv when group == C_in == C_out (MobileNet, EfficientNet, DeepLab).
//
//   DepthwiseGeometry g{in_h, in_w, out_h, out_w, 3, 3, 1, 1, 1, 1, 1, 1};
//   depthwise_conv2d(g, batch * channels, channels, x, w, bias, y, act, pool);
//
// Any kernel size, stride and dilation (>= 1) and padding (>= 0, as in ONNX); y is fully
// written (bias, window sums, act). Each thread that runs it keeps a scratch buffer between calls
// (about 16 KB; kernel_h dilated rows of the padded input when one row is wider than that).
#pragma once

#include <cstdint>
#include <memory>

#include "backends/cpu/activation.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace quilt::cpu {

// A 2-D depthwise convolution geometry (NCHW, one input channel per output channel).
struct DepthwiseGeometry {
  int64_t in_h, in_w, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w,
      pad_top, pad_left;
};

// For each of `planes` planes p (= batch * channels, channel = p % channels):
//   y[p] = bias[channel] (0 when bias is null) + sum over the window of w[channel] * x[p]
// (zero padding), then act applied to the plane (act.apply(y_plane, out_h*out_w)). Planes are
// split across the pool. x: planes * in_h * in_w; w: channels * kernel_h * kernel_w; y: planes *
// out_h * out_w.
// w16, optional: the same weights as depthwise_weights16 lays them out, made once by a caller
// whose weights are constant (the transposed kernel otherwise lays them out per run).
// Returns which kernel ran (a static string, for profiles).
const char* depthwise_conv2d(const DepthwiseGeometry& g, int64_t planes, int64_t channels,
                             const float* x, const float* w, const float* bias, float* y,
                             const Activation& act, const ThreadPool& pool,
                             const float* w16 = nullptr);

// The weights (channels x taps) as the kernel that runs 16 channels at a time reads them:
// [ceil(channels / 16)][taps][16], lanes past the channels zero, 64-byte aligned.
std::shared_ptr<float[]> depthwise_weights16(const float* w, int64_t channels, int64_t taps);

// Where the depthwise kernel's tensors are held in the blocked layout of 8 lanes
// ([n, ceil(c / 8), h, w, 8], conv_blocked.hpp) rather than as NCHW planes; the residual, when
// given, is added before the activation.
struct DepthwiseLayouts {
  bool x_blocked = false, y_blocked = false;
  const float* residual = nullptr;
  bool residual_blocked = false;
};

// Whether the small-plane kernel (8 channels a vector) takes g: its output rows are at most 28
// wide, the output 784 pixels, the padded input 3,600 pixels.
bool depthwise_blocked8_fits(const DepthwiseGeometry& g);

// That kernel over `batch` images of `channels`, x, y and a residual in the layouts io says;
// false (and nothing written) when it does not take g.
bool depthwise_conv2d_blocked8(const DepthwiseGeometry& g, int64_t batch, int64_t channels,
                               const float* x, const float* w, const float* bias, float* y,
                               const Activation& act, const ThreadPool& pool, const float* w16,
                               const DepthwiseLayouts& io);

}  // namespace quilt::cpu
