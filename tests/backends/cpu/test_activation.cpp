// The vectorised activations (backends/cpu/activation.hpp) against double-precision references,
// on values that cover every branch of their polynomial forms, special values and ragged tails.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/activation.hpp"

namespace quilt::cpu {
namespace {

using Kind = Activation::Kind;

double reference(const Activation& a, double x) {
  auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  switch (a.kind) {
    case Kind::None:
      return x;
    case Kind::Relu:
      return x < 0 ? 0 : x;
    case Kind::LeakyRelu:
      return x >= 0 ? x : a.alpha * x;
    case Kind::Clip:
      return std::isnan(x) ? x : std::min(std::max(x, double(a.alpha)), double(a.beta));
    case Kind::HardSigmoid:
      return std::isnan(x) ? x : std::clamp(a.alpha * x + a.beta, 0.0, 1.0);
    case Kind::HardSwish:
      return std::isnan(x) ? x : x * std::clamp(x / 6 + 0.5, 0.0, 1.0);
    case Kind::Sigmoid:
      return sigmoid(x);
    case Kind::Silu:
      return x * sigmoid(x);
    case Kind::Tanh:
      return std::tanh(x);
    case Kind::Gelu:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Kind::GeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return 0;
}

std::vector<float> test_values() {
  std::vector<float> v = {0.f,
                          -0.f,
                          1e-30f,
                          -1e-30f,
                          0.5f,
                          -0.5f,
                          0.625f,
                          -0.625f,
                          1.f,
                          -1.f,
                          3.99f,
                          4.f,
                          4.01f,
                          10.f,
                          -10.f,
                          20.f,
                          -20.f,
                          88.f,
                          -88.f,
                          89.f,
                          -104.f,
                          1e30f,
                          -1e30f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 3.f);
  for (int i = 0; i < 4000; ++i) v.push_back(normal(rng));
  for (float x = -12.f; x <= 12.f; x += 0.01f) v.push_back(x);
  v.push_back(1.f);  // an odd length: the tail goes through the vector code too
  return v;
}

// Sigmoid and SiLU where e^-x is finite but above 2^127 (x from -88.38 to -88.72): the result is
// a subnormal float, not 0 (an e^-x of 2^128 taken as +inf gave 0 on the AVX2 form), on every
// path.
TEST(Activation, SigmoidNearTheOverflowOfItsExponential) {
  const std::vector<float> x = {-88.4f, -88.5f, -88.7f};
  for (Kind k : {Kind::Sigmoid, Kind::Silu})
    for (bool eight_lanes : {false, true}) {
      const Activation a{k};
      std::vector<float> y(x.size());
      if (eight_lanes)
        apply_8_lanes(a, x.data(), y.data(), static_cast<int64_t>(x.size()));
      else
        a.apply(x.data(), y.data(), static_cast<int64_t>(x.size()));
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = reference(a, x[i]);
        EXPECT_NE(y[i], 0.f) << a.name() << " at " << x[i] << " 8 lanes " << eight_lanes;
        EXPECT_NEAR(y[i], want, 1e-3 * std::fabs(want))
            << a.name() << " at " << x[i] << " 8 lanes " << eight_lanes;
      }
    }
}

TEST(Activation, MatchesDoublePrecisionReferences) {
  const std::vector<Activation> acts = {{Kind::Relu},
                                        {Kind::LeakyRelu, 0.2f},
                                        {Kind::Clip, -1.5f, 6.f},
                                        {Kind::HardSigmoid, 0.2f, 0.5f},
                                        {Kind::HardSwish},
                                        {Kind::Sigmoid},
                                        {Kind::Silu},
                                        {Kind::Tanh},
                                        {Kind::Gelu},
                                        {Kind::GeluTanh},
                                        {Kind::None}};
  const std::vector<float> x = test_values();
  for (const Activation& a : acts)
    for (bool eight_lanes : {false, true}) {  // as the CPU has it, and the AVX2 forms
      std::vector<float> y(x.size());
      if (eight_lanes)
        apply_8_lanes(a, x.data(), y.data(), static_cast<int64_t>(x.size()));
      else
        a.apply(x.data(), y.data(), static_cast<int64_t>(x.size()));
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = reference(a, x[i]);
        if (std::isnan(want)) {  // e.g. Silu(-inf) = -inf * 0, in the scalar ops as here
          EXPECT_TRUE(std::isnan(y[i])) << a.name() << " at " << x[i] << " 8 lanes " << eight_lanes;
          continue;
        }
        if (std::isinf(want)) {
          EXPECT_EQ(y[i], static_cast<float>(want))
              << a.name() << " at " << x[i] << " 8 lanes " << eight_lanes;
          continue;
        }
        EXPECT_NEAR(y[i], want, 2e-6 * std::max(1.0, std::fabs(want)))
            << a.name() << " at " << x[i] << " 8 lanes " << eight_lanes;
      }
      // In place gives the same result.
      std::vector<float> z = x;
      if (eight_lanes)
        apply_8_lanes(a, z.data(), z.data(), static_cast<int64_t>(z.size()));
      else
        a.apply(z.data(), static_cast<int64_t>(z.size()));
      for (size_t i = 0; i < x.size(); ++i) {
        if (std::isnan(y[i])) continue;
        EXPECT_EQ(z[i], y[i]) << a.name();
      }
    }
}

TEST(Activation, PropagatesNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Kind k : {Kind::Relu, Kind::LeakyRelu, Kind::Clip, Kind::HardSigmoid, Kind::HardSwish,
                 Kind::Sigmoid, Kind::Silu, Kind::Tanh, Kind::Gelu, Kind::GeluTanh}) {
    Activation a{k, 0.1f, 0.9f};
    EXPECT_TRUE(std::isnan(a(nan))) << a.name();
  }
}

TEST(Activation, ZeroLengthAndShortBuffersAreFine) {
  Activation a{Kind::Sigmoid};
  a.apply(nullptr, nullptr, 0);
  float three[3] = {-1.f, 0.f, 1.f};
  a.apply(three, 3);
  EXPECT_NEAR(three[1], 0.5f, 1e-7);
  EXPECT_NEAR(three[0] + three[2], 1.f, 1e-6);
}

}  // namespace
}  // namespace quilt::cpu
