// What the blocked-layout tests share (test_conv_blocked.cpp, test_blocked_ops.cpp).
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/kernels/conv_blocked.hpp"

namespace quilt::cpu::testing {

// NCHW [n, c, hw] -> blocked [n, ceil(c / L), hw, L] (L = lanes), padding lanes NaN so that a
// kernel reading them as channels fails.
inline std::vector<float> to_blocked(const std::vector<float>& x, int64_t n, int64_t c, int64_t hw,
                                     int64_t lanes = blocked_lanes()) {
  const int64_t cb = (c + lanes - 1) / lanes;
  std::vector<float> y(static_cast<size_t>(n * cb * hw * lanes),
                       std::numeric_limits<float>::quiet_NaN());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p)
        y[static_cast<size_t>(((i * cb + ch / lanes) * hw + p) * lanes + ch % lanes)] =
            x[static_cast<size_t>((i * c + ch) * hw + p)];
  return y;
}

// count floats uniform in [lo, hi).
inline std::vector<float> random_floats(size_t count, std::mt19937& rng, float lo = -1.f,
                                        float hi = 1.f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(count);
  for (float& f : v) f = u(rng);
  return v;
}

}  // namespace quilt::cpu::testing
