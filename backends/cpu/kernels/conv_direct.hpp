// The plain direct float32 convolution (NCHW, any group, 1-D to 3-D as 3-D with size-1 leading
// dims): each output element is its bias plus the sum over its window, with a bounds check per
// tap. It needs no buffers and does outputs x window x channels-per-group multiply-adds. Conv
// runs it where the fast paths' padded copies of the input would be far larger than the input
// and the output together (padding much wider than the window: hostile or synthetic models,
// e.g. stride 2^40 with padding 2^40), so that such a conv costs what its output does.
//
//   DirectConvGeometry g{.in = {1, 7, 5}, .out = {1, 3, 3}, .kernel = {1, 3, 3}, ...};
//   conv_direct(g, batch, c_in, c_out, group, x, w, bias, y, act, pool);
#pragma once

#include <array>
#include <cstdint>

#include "backends/cpu/activation.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace quilt::cpu {

struct DirectConvGeometry {
  using Dims3 = std::array<int64_t, 3>;
  Dims3 in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1},
      pad{0, 0, 0};  // pad: the leading padding of each dim
};

// y[n, m] = act(bias[m] + sum over c in m's group and the window of w[m, c] * x[n, grp + c]),
// zero padding. x: batch x c_in x in; w: c_out x (c_in / group) x kernel; y: batch x c_out x out.
void conv_direct(const DirectConvGeometry& g, int64_t batch, int64_t c_in, int64_t c_out,
                 int64_t group, const float* x, const float* w, const float* bias, float* y,
                 const Activation& act, const ThreadPool& pool);

}  // namespace quilt::cpu
