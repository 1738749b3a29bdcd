// RoiAlign on rois that no detector emits but a caller (or a fuzzer) can pass: not finite, far
// larger than the image, overflowing float32 once scaled, or sampled on a huge fixed grid. Each is
// a result or an error naming the roi, never undefined behaviour (fuzz_run found the grid's
// float -> int64 conversion overflowing under UBSan) or a loop over ~1e45 samples.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "quilt/quilt.hpp"
#include "tests/expect_error.hpp"

using namespace quilt;
using quilt::testing::expect_error;

namespace {

const std::string kDir = QUILT_TEST_MODELS_DIR;

Tensor image() {
  std::vector<float> v(2 * 8 * 8);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 1.0f + 0.01f * static_cast<float>(i);
  return Tensor::from_vector<float>({1, 2, 8, 8}, v);
}

TensorMap run(Session& s, std::vector<float> rois) {
  const int64_t n = static_cast<int64_t>(rois.size() / 4);
  return s.run({{"x", image()},
                {"rois", Tensor::from_vector<float>({n, 4}, rois)},
                {"bi", Tensor::from_vector<int64_t>({n}, std::vector<int64_t>(n, 0))}});
}

}  // namespace

TEST(RoiAlign, RoisThatAreNotFiniteAreAnErrorNamingThem) {
  Session s(kDir + "/roialign_rois.onnx");
  const float inf = std::numeric_limits<float>::infinity();
  expect_error(
      [&] {
        run(s, {0, 0, 4, 4, 1, std::nanf(""), 3, 3});
      },
      ErrorCode::InvalidArgument,
      {"RoiAlign", "roi_align", "rois[1] = (1, nan, 3, 3) is not finite"});
  expect_error(
      [&] {
        run(s, {0, 0, inf, 4});
      },
      ErrorCode::InvalidArgument, {"rois[0] = (0, 0, inf, 4) is not finite"});
  // The session is still usable.
  EXPECT_EQ(run(s, {0, 0, 4, 4}).at("y").numel(), 2 * 2 * 2);
}

TEST(RoiAlign, RoiOverflowingFloat32OnceScaledIsAnError) {
  Session s(kDir + "/roialign_rois.onnx");
  expect_error(
      [&] {
        run(s, {-3e38f, 0, 3e38f, 4});
      },
      ErrorCode::InvalidArgument,
      {"rois[0] = (-3e+38, 0, 3e+38, 4) times spatial_scale 1 overflows float32"});
}

// What fuzz_run found: spatial_scale 7.5e22 makes a roi of a few pixels ~1e23 pixels wide, an
// adaptive grid of 7.5e22 samples a side, beyond int64 in the kernel's conversion.
TEST(RoiAlign, AdaptiveGridBeyond2To53IsAnError) {
  Session s(kDir + "/roialign_huge_scale.onnx");
  expect_error(
      [&] {
        run(s, {0, 1, 2, 3});
      },
      ErrorCode::InvalidArgument,
      {"rois[0] = (0, 1, 2, 3) spans", "adaptive sampling grid of 7.5e+22 x 7.5e+22",
       "expected at most 2^53 a side"});
}

// A roi of 1e15 pixels: a grid of 5e14 x 5e14 samples a bin, of which the 8 x 8 image holds a few
// dozen. They are found by bisection and the rest count only in the divisor (2.5e29), as in the
// reference; the bins wholly outside the image are 0.
TEST(RoiAlign, RoiFarLargerThanTheImageIsSampledOnlyInsideIt) {
  Session s(kDir + "/roialign_rois.onnx");
  const Tensor y = run(s, {0, 0, 1e15f, 1e15f}).at("y");
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{1, 2, 2, 2}));
  const float* v = y.data<float>();
  for (int c = 0; c < 2; ++c) {
    // Samples at 0.5, 1.5, ... 8.5 (9 a side, the last clamped to the edge) of values 1 to 2.3.
    EXPECT_GT(v[c * 4], 9 * 9 * 1.0 / 2.5e29) << c;
    EXPECT_LT(v[c * 4], 9 * 9 * 2.3 / 2.5e29) << c;
    EXPECT_EQ(v[c * 4 + 1], 0.0f);
    EXPECT_EQ(v[c * 4 + 2], 0.0f);
    EXPECT_EQ(v[c * 4 + 3], 0.0f);
  }
}

// A fixed sampling_ratio has no such bound: 100000^2 samples a bin inside the image is an error
// that names the attribute, not hours of work.
TEST(RoiAlign, FixedGridOfTooManySamplesIsAnError) {
  Session s(kDir + "/roialign_huge_sampling.onnx");
  expect_error(
      [&] {
        run(s, {0, 0, 4, 4});
      },
      ErrorCode::InvalidArgument,
      {"sampling_ratio 100000 puts 4e+10 bilinear samples of rois[0] inside the feature map",
       "over the kernel's bound of 1.67772e+07 a roi"});
}

TEST(RoiAlign, SpatialScaleThatIsNotFiniteIsRejectedAtLoad) {
  expect_error([&] { Session s(kDir + "/roialign_inf_scale.onnx"); }, ErrorCode::InvalidModel,
               {"roi_align", "spatial_scale is inf, expected a finite number"});
}
