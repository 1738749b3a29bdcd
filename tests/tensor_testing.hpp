// Test helpers for tensors: seeded random inputs and closeness checks against a reference run.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "quilt/quilt.hpp"

namespace quilt::testing {

// float32 tensor of N(0, 1) values from a fixed seed.
inline Tensor random_input(std::vector<int64_t> shape, unsigned seed) {
  Tensor t(DType::Float32, std::move(shape));
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(gen);
  return t;
}

// Same shape and dtype; int64 exactly equal; float32 within atol + 1e-4 * |want| (NaN matches
// NaN, infinities match themselves).
inline void expect_close(const Tensor& got, const Tensor& want, float atol = 1e-5f) {
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), want.dtype());
  if (want.dtype() == DType::Int64) {
    for (int64_t i = 0; i < got.numel(); ++i)
      ASSERT_EQ(got.data<int64_t>()[i], want.data<int64_t>()[i]) << "element " << i;
    return;
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float x = got.data<float>()[i], y = want.data<float>()[i];
    if ((std::isnan(x) && std::isnan(y)) || x == y) continue;
    ASSERT_NEAR(x, y, atol + 1e-4f * std::fabs(y)) << "element " << i;
  }
}

}  // namespace quilt::testing
