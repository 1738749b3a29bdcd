// The depthwise conv kernel against a plain nested-loop reference in double, over random and
// hand-picked geometries (kernel, stride, dilation, asymmetric padding, tiny and wide planes), on
// the AVX2 tiles and, where the CPU has AVX-512, on the AVX-512 ones.
#include <gtest/gtest.h>
#include <array>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/kernels/conv_depthwise.hpp"
#include "backends/cpu/kernels/conv_depthwise_internal.hpp"
#include "tests/backends/cpu/activation_reference.hpp"

using namespace quilt::cpu;
using depthwise_detail::band_kernel_avx512;
using quilt::cpu::testing::activate;
using quilt::cpu::testing::window_out_size;

namespace {

struct Case {
  DepthwiseGeometry g;
  int64_t batch, channels;
  bool bias;
  Activation::Kind act;
  bool avx512 = false;     // allow the AVX-512 tiles
  bool transposed = true;  // allow the 16-channel transposed kernel (with avx512)
};

std::string describe(const Case& c) {
  const DepthwiseGeometry& g = c.g;
  std::ostringstream s;
  s << "x=[" << c.batch << "," << c.channels << "," << g.in_h << "," << g.in_w
    << "] k=" << g.kernel_h << "x" << g.kernel_w << " s=" << g.stride_h << "," << g.stride_w
    << " d=" << g.dilation_h << "," << g.dilation_w << " pad_top=" << g.pad_top
    << " pad_left=" << g.pad_left << " out=" << g.out_h << "x" << g.out_w << " bias=" << c.bias
    << " act=" << Activation{c.act}.name() << " avx512=" << c.avx512;
  return s.str();
}

// The activations checked: applied in the AVX-512 tiles' registers (Relu, HardSwish, SiLU) or
// to the stored rows (Tanh, and every kind on the AVX2 tiles).
constexpr Activation::Kind kActs[] = {Activation::Kind::None, Activation::Kind::Relu,
                                      Activation::Kind::HardSwish, Activation::Kind::Silu,
                                      Activation::Kind::Tanh};

Case make_case(int64_t batch, int64_t channels, int64_t in_h, int64_t in_w, int64_t kh, int64_t kw,
               int64_t s, int64_t d, int64_t pad, bool bias = true,
               Activation::Kind act = Activation::Kind::None) {
  DepthwiseGeometry g{in_h, in_w, 0, 0, kh, kw, s, s, d, d, pad, pad};
  g.out_h = window_out_size(in_h, kh, s, d, pad, pad);
  g.out_w = window_out_size(in_w, kw, s, d, pad, pad);
  return {g, batch, channels, bias, act};
}

void check(const Case& c, const ThreadPool& pool, unsigned seed) {
  const DepthwiseGeometry& g = c.g;
  const int64_t planes = c.batch * c.channels;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(static_cast<size_t>(planes * g.in_h * g.in_w));
  std::vector<float> w(static_cast<size_t>(c.channels * g.kernel_h * g.kernel_w));
  std::vector<float> b(static_cast<size_t>(c.channels));
  for (auto& v : x) v = u(rng);
  for (auto& v : w) v = u(rng);
  for (auto& v : b) v = u(rng);
  // The weights as the 16-channel transposed kernel reads them, laid out once (a conv with
  // constant weights) or per run: both are checked.
  const std::shared_ptr<float[]> w16 =
      depthwise_weights16(w.data(), c.channels, g.kernel_h * g.kernel_w);
  for (const float* laid_out : std::array<const float*, 2>{nullptr, w16.get()}) {
    // NaN everywhere first: every output must be written.
    std::vector<float> y(static_cast<size_t>(planes * g.out_h * g.out_w),
                         std::numeric_limits<float>::quiet_NaN());
    Activation act;
    act.kind = c.act;
    depthwise_detail::depthwise_conv2d(g, planes, c.channels, x.data(), w.data(),
                                       c.bias ? b.data() : nullptr, y.data(), act, pool, c.avx512,
                                       c.transposed, laid_out);

    for (int64_t p = 0; p < planes; ++p) {
      const int64_t ch = p % c.channels;
      const float* xp = x.data() + p * g.in_h * g.in_w;
      const float* wc = w.data() + ch * g.kernel_h * g.kernel_w;
      for (int64_t oh = 0; oh < g.out_h; ++oh)
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          double sum = c.bias ? b[static_cast<size_t>(ch)] : 0.0, magnitude = std::fabs(sum);
          for (int64_t kh = 0; kh < g.kernel_h; ++kh)
            for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
              const int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
              const int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
              if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) continue;
              const double term = double(wc[kh * g.kernel_w + kw]) * xp[ih * g.in_w + iw];
              sum += term;
              magnitude += std::fabs(term);
            }
          const double want = activate(c.act, sum);
          const float got = y[static_cast<size_t>((p * g.out_h + oh) * g.out_w + ow)];
          ASSERT_NEAR(got, want, 1e-5 * magnitude + 1e-6 + 2e-6 * std::fabs(want))
              << describe(c) << (laid_out ? " (weights laid out once)" : "") << " at plane " << p
              << " (" << oh << ", " << ow << ")";
        }
    }
  }
}

}  // namespace

// Which kernel depthwise_conv2d takes for one plane of g (zeros in; the path's name out).
const char* path_of(const DepthwiseGeometry& g, const ThreadPool& pool, bool allow_avx512,
                    bool allow_transposed = true, bool allow_rows3x3 = true) {
  std::vector<float> x(static_cast<size_t>(g.in_h * g.in_w)),
      w(static_cast<size_t>(g.kernel_h * g.kernel_w)), y(static_cast<size_t>(g.out_h * g.out_w));
  return depthwise_detail::depthwise_conv2d(g, 1, 1, x.data(), w.data(), nullptr, y.data(),
                                            Activation{}, pool, allow_avx512, allow_transposed,
                                            nullptr, allow_rows3x3);
}

TEST(CpuDepthwiseConv, MobileNetShapes) {
  ThreadPool pool(2);
  unsigned seed = 1;
  // The layers of MobileNetV3, EfficientNet and DeepLabV3, with fewer channels.
  for (const Case& c :
       {make_case(1, 4, 112, 112, 3, 3, 2, 1, 1), make_case(1, 5, 56, 56, 3, 3, 1, 1, 1),
        make_case(1, 3, 28, 28, 5, 5, 1, 1, 2), make_case(2, 7, 14, 14, 5, 5, 1, 1, 2),
        make_case(1, 9, 14, 14, 5, 5, 1, 2, 4), make_case(3, 11, 7, 7, 5, 5, 1, 1, 2),
        make_case(1, 3, 112, 112, 3, 3, 1, 1, 1), make_case(1, 4, 56, 56, 5, 5, 2, 1, 2),
        make_case(1, 4, 28, 28, 3, 3, 2, 1, 1), make_case(2, 5, 14, 14, 7, 7, 1, 1, 3)})
    for (bool avx512 : {false, true})
      for (auto act : {Activation::Kind::None, Activation::Kind::HardSwish}) {
        Case d = c;
        d.avx512 = avx512;
        d.act = act;
        check(d, pool, seed++);
      }
}

TEST(CpuDepthwiseConv, EdgeCases) {
  ThreadPool pool(2);
  std::vector<Case> cases = {
      make_case(1, 3, 1, 1, 1, 1, 1, 1, 0),      // 1x1 plane, 1x1 kernel
      make_case(2, 2, 1, 1, 3, 3, 1, 1, 1),      // 1x1 plane, all but the centre tap in padding
      make_case(1, 3, 2, 3, 3, 3, 1, 1, 1),      // 2x3 plane
      make_case(1, 3, 2, 3, 3, 3, 2, 1, 1),      // 2x3 plane, stride 2
      make_case(1, 2, 5, 5, 7, 7, 1, 1, 3),      // kernel larger than the plane
      make_case(1, 2, 3, 4, 1, 1, 1, 1, 2),      // 1x1 kernel, padding: output wider than input
      make_case(1, 2, 9, 9, 3, 3, 3, 1, 1),      // stride 3
      make_case(1, 2, 30, 31, 3, 3, 3, 2, 2),    // stride 3, dilation 2
      make_case(1, 2, 40, 40, 3, 3, 1, 4, 4),    // dilation 4
      make_case(1, 2, 20, 21, 5, 5, 2, 2, 4),    // stride 2, dilation 2
      make_case(1, 2, 9, 9, 3, 3, 1, 1, 6),      // padding wider than the kernel
      make_case(1, 2, 6, 7, 3, 3, 1, 1, 0),      // out_w < 8, no padding
      make_case(1, 2, 8, 9, 3, 3, 1, 1, 1),      // out_w = 9: one vector and a shifted one
      make_case(1, 2, 17, 17, 3, 3, 1, 1, 1),    // out_w = 17
      make_case(1, 2, 150, 90, 3, 3, 1, 1, 1),   // several bands per plane
      make_case(1, 2, 151, 95, 5, 5, 2, 1, 2),   // several bands, stride 2
      make_case(1, 2, 150, 91, 3, 3, 1, 2, 2),   // several bands, dilation 2
      make_case(1, 1, 9, 3000, 7, 7, 1, 1, 3),   // one output row larger than a band's budget
      make_case(1, 1, 11, 2001, 3, 3, 2, 1, 1),  // the same, stride 2
      make_case(1, 3, 1, 40, 1, 5, 1, 1, 0),     // 1-D along the width
      make_case(1, 3, 40, 1, 5, 1, 1, 1, 0),     // 1-D along the height
  };
  // Asymmetric effective padding: pad_top/pad_left differ, the end pads follow from the output.
  {
    DepthwiseGeometry g{10, 13, 0, 0, 3, 5, 1, 2, 1, 1, 0, 3};
    g.out_h = window_out_size(10, 3, 1, 1, 0, 2);
    g.out_w = window_out_size(13, 5, 2, 1, 3, 0);
    cases.push_back({g, 1, 3, true, Activation::Kind::None});
    DepthwiseGeometry h{12, 12, 0, 0, 4, 2, 2, 1, 1, 3, 2, 0};
    h.out_h = window_out_size(12, 4, 2, 1, 2, 1);
    h.out_w = window_out_size(12, 2, 1, 3, 0, 1);
    cases.push_back({h, 2, 2, false, Activation::Kind::Relu});
  }
  unsigned seed = 100;
  for (Case c : cases) {
    for (bool bias : {false, true})
      for (auto act : kActs) {
        c.bias = bias;
        c.act = act;
        for (bool avx512 : {false, true}) {
          c.avx512 = avx512;
          check(c, pool, seed++);
        }
      }
  }
}

TEST(CpuDepthwiseConv, RandomGeometries) {
  std::mt19937 rng(7);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  ThreadPool pool1(1), pool2(2);
  int checked = 0;
  while (checked < 400) {
    DepthwiseGeometry g{};
    // Every 8th plane is large, so that planes split into a varying number of row bands.
    const int64_t max_size = checked % 8 == 0 ? 160 : 40;
    g.in_h = pick(1, max_size);
    g.in_w = pick(1, max_size);
    g.kernel_h = pick(1, 7);
    g.kernel_w = pick(1, 7);
    g.stride_h = pick(1, 3);
    g.stride_w = pick(1, 3);
    g.dilation_h = pick(0, 3) == 0 ? pick(2, 4) : 1;
    g.dilation_w = pick(0, 3) == 0 ? pick(2, 4) : 1;
    const int64_t eff_h = (g.kernel_h - 1) * g.dilation_h + 1;
    const int64_t eff_w = (g.kernel_w - 1) * g.dilation_w + 1;
    g.pad_top = pick(0, eff_h);
    g.pad_left = pick(0, eff_w);
    g.out_h =
        window_out_size(g.in_h, g.kernel_h, g.stride_h, g.dilation_h, g.pad_top, pick(0, eff_h));
    g.out_w =
        window_out_size(g.in_w, g.kernel_w, g.stride_w, g.dilation_w, g.pad_left, pick(0, eff_w));
    if (g.out_h < 1 || g.out_w < 1) continue;
    Case c{g, pick(1, 2), pick(1, 6), pick(0, 1) == 1, kActs[pick(0, std::size(kActs) - 1)]};
    for (bool avx512 : {false, true}) {
      c.avx512 = avx512;
      check(c, checked % 2 ? pool2 : pool1, static_cast<unsigned>(1000 + checked));
      if (::testing::Test::HasFatalFailure()) return;
    }
    ++checked;
  }
}

TEST(CpuDepthwiseConv, NoPlanesWritesNothing) {
  ThreadPool pool(2);
  const DepthwiseGeometry g{4, 4, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1};
  std::vector<float> y(16, 42.f);
  const float x = 1.f, w = 1.f;
  depthwise_conv2d(g, 0, 1, &x, &w, nullptr, y.data(), Activation{}, pool);
  for (float v : y) EXPECT_EQ(v, 42.f);
  depthwise_conv2d(g, 0, 1, nullptr, nullptr, nullptr, nullptr, Activation{}, pool);
}

// On a CPU with AVX-512 the checks above must reach the AVX-512 tiles (rows wider than 8 columns)
// as well as the AVX2 ones.
TEST(CpuDepthwiseConv, Avx512TilesAreUsed) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq"))
    GTEST_SKIP() << "no AVX-512 on this CPU";
  EXPECT_NE(band_kernel_avx512(make_case(1, 1, 14, 14, 5, 5, 1, 1, 2).g), nullptr);
  EXPECT_NE(band_kernel_avx512(make_case(1, 1, 112, 112, 3, 3, 2, 1, 1).g), nullptr);
  EXPECT_EQ(band_kernel_avx512(make_case(1, 1, 7, 7, 5, 5, 1, 1, 2).g), nullptr);
}

TEST(CpuDepthwiseConv, Rows3x3ReadTheInputDirectly) {
  // 3x3, stride 1, rows wider than 8 columns: tiles that load the input rows themselves (masked
  // at the plane's edges) instead of a padded band buffer. Widths around every vector count and
  // group split (9-16: one vector, 17-64: up to four in one group, 65-80: two groups), heights
  // around the tile heights, padding of 0-3 on each side independently (pads wider than the
  // kernel give rows and columns that see only padding), batches whose planes map to channels.
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq"))
    GTEST_SKIP() << "no AVX-512 on this CPU";
  ThreadPool pool1(1), pool2(2);
  std::mt19937 rng(11);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t widths[] = {9,  14, 15, 16, 17, 30, 31, 32, 33, 47,
                            48, 49, 56, 63, 64, 65, 79, 80, 112};
  unsigned seed = 700;
  for (int64_t in_w : widths)
    for (int rep = 0; rep < 3; ++rep) {
      const int64_t in_h = rep == 0 ? pick(1, 4) : pick(5, 60);
      const int64_t top = pick(0, 3), bottom = pick(0, 3), left = pick(0, 3), right = pick(0, 3);
      DepthwiseGeometry g{in_h, in_w, 0, 0, 3, 3, 1, 1, 1, 1, top, left};
      g.out_h = window_out_size(in_h, 3, 1, 1, top, bottom);
      g.out_w = window_out_size(in_w, 3, 1, 1, left, right);
      if (g.out_h < 1 || g.out_w <= 8) continue;
      Case c{g, pick(1, 2), pick(1, 5), pick(0, 1) == 1, kActs[pick(0, std::size(kActs) - 1)]};
      c.avx512 = true;
      c.transposed = false;  // small planes take that one first (TransposedSixteenChannels...)
      check(c, rep % 2 ? pool2 : pool1, seed++);
      if (::testing::Test::HasFatalFailure()) return;
      EXPECT_STREQ(path_of(g, pool1, true, false), "depthwise 3x3, rows from the input (16 lanes)")
          << describe(c);
    }
}

TEST(CpuDepthwiseConv, NarrowPlanesOnTheFlattenedKernel) {
  // Rows of at most 8 columns, stride 1, kernels up to 3x3: the AVX-512 flattened-plane kernel (a
  // keyword spotter's 25x5 maps, widths 1 to 8, 3x1 and 1x1 kernels, padding on one side only,
  // planes whose padded size is just under and over its buffer budget); the 5x5 and 7x7 ones
  // take the row tiles.
  ThreadPool pool(2);
  std::vector<Case> cases = {
      make_case(1, 64, 25, 5, 3, 3, 1, 1, 1), make_case(2, 3, 7, 7, 5, 5, 1, 1, 2),
      make_case(1, 4, 9, 1, 3, 3, 1, 1, 1),   make_case(1, 3, 12, 8, 7, 7, 1, 1, 3),
      make_case(1, 2, 30, 6, 3, 1, 1, 1, 0),  make_case(1, 2, 5, 10, 3, 3, 1, 1, 0),
      make_case(1, 3, 6, 4, 1, 1, 1, 1, 0),   make_case(1, 2, 2, 2, 3, 3, 1, 1, 1),
      make_case(1, 2, 800, 5, 3, 3, 1, 1, 1), make_case(1, 2, 2000, 5, 3, 3, 1, 1, 1)};
  DepthwiseGeometry g{10, 6, 0, 0, 3, 3,
                      1,  1, 1, 1, 2, 0};  // pads top 2 / bottom 0, left 0 / right 2
  g.out_h = window_out_size(10, 3, 1, 1, 2, 0);
  g.out_w = window_out_size(6, 3, 1, 1, 0, 2);
  cases.push_back({g, 1, 3, true, Activation::Kind::None});
  unsigned seed = 500;
  for (const Case& c : cases)
    for (auto act : kActs) {
      Case d = c;
      d.avx512 = true;
      d.transposed = false;
      d.act = act;
      check(d, pool, seed++);
    }
}

TEST(CpuDepthwiseConv, FlatPlanesWhenThePaddingKeepsTheWidth) {
  // Rows of at most 8 columns that the padding keeps as wide (out_w == in_w), stride 1, kernels
  // up to 5x5: the flat-shift kernel, each tap a masked load of the plane shifted. Widths 1 to 8
  // (8: half a vector; 3, 5, 7: rows that straddle the vectors), one row, padding on one side
  // only (pads top 2 / bottom 0, left 0 / right 2), more below than the kernel needs (top 1 /
  // bottom 2: an output row more than the input has), 1x3, 3x1 and 1x1 kernels, tall planes (no
  // buffer, so no size limit), batches of planes that map to channels (two planes at a time, one
  // pair across the batch, a plane left over), every activation; both pools (the planes split or
  // not). A mask that let a lane of the row before or after through
  // would add a neighbour's pixel; one past the plane, the next plane's.
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq"))
    GTEST_SKIP() << "no AVX-512 on this CPU";
  ThreadPool pool1(1), pool2(2);
  auto geometry = [](int64_t in_h, int64_t in_w, int64_t kh, int64_t kw, int64_t top,
                     int64_t bottom, int64_t left, int64_t right) {
    DepthwiseGeometry g{in_h, in_w, 0, 0, kh, kw, 1, 1, 1, 1, top, left};
    g.out_h = window_out_size(in_h, kh, 1, 1, top, bottom);
    g.out_w = window_out_size(in_w, kw, 1, 1, left, right);
    return g;
  };
  std::vector<DepthwiseGeometry> flat;
  for (int64_t in_w = 1; in_w <= 8; ++in_w) flat.push_back(geometry(11, in_w, 3, 3, 1, 1, 1, 1));
  flat.push_back(geometry(25, 5, 3, 3, 1, 1, 1, 1));  // the keyword spotter's
  flat.push_back(geometry(1, 6, 3, 3, 1, 1, 1, 1));
  flat.push_back(geometry(10, 6, 3, 3, 2, 0, 0, 2));
  flat.push_back(geometry(9, 5, 3, 3, 1, 2, 1, 1));  // an output row more than the input's
  flat.push_back(geometry(9, 7, 1, 3, 0, 0, 1, 1));
  flat.push_back(geometry(9, 7, 3, 1, 1, 1, 0, 0));
  flat.push_back(geometry(6, 4, 1, 1, 0, 0, 0, 0));
  flat.push_back(geometry(7, 7, 3, 3, 1, 1, 1, 1));
  flat.push_back(geometry(225, 5, 3, 3, 1, 1, 1, 1));
  flat.push_back(geometry(400, 7, 3, 3, 1, 1, 1, 1));
  // 5x5 (EfficientNet's and MobileNetV3's 7x7 maps): 25 taps, two columns of padding a side
  flat.push_back(geometry(7, 7, 5, 5, 2, 2, 2, 2));
  flat.push_back(geometry(9, 5, 5, 5, 2, 2, 2, 2));
  flat.push_back(geometry(6, 8, 5, 5, 2, 2, 2, 2));
  flat.push_back(geometry(5, 3, 5, 5, 2, 2, 2, 2));  // the window wider than the row
  flat.push_back(geometry(8, 6, 5, 3, 4, 0, 0, 2));  // padding on one side only
  flat.push_back(geometry(7, 7, 3, 5, 1, 1, 2, 2));
  unsigned seed = 900;
  for (const DepthwiseGeometry& g : flat) {
    std::vector<float> x(static_cast<size_t>(g.in_h * g.in_w)), w(25),
        y(static_cast<size_t>(g.out_h * g.out_w));
    for (auto act : kActs) {
      // 2 x 3 planes (pairs of planes, one pair across the batch) or 1 x 5 (a plane left alone)
      const bool odd = seed % 4 < 2;
      Case c{g, odd ? 1 : 2, odd ? 5 : 3, seed % 2 == 0, act, true, false};
      check(c, seed % 3 ? pool2 : pool1, seed);
      ++seed;
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_STREQ(depthwise_detail::depthwise_conv2d(g, 1, 1, x.data(), w.data(), nullptr, y.data(),
                                                    Activation{}, pool1, true, false),
                 "depthwise, flat planes shifted per tap (16 lanes)")
        << describe({g, 1, 1, false, Activation::Kind::None, true});
  }
  // Not flat: rows that the padding narrows (the padded-row kernel), wider than 8 columns.
  const std::pair<DepthwiseGeometry, const char*> others[] = {
      {geometry(5, 10, 3, 3, 0, 0, 0, 0), "depthwise, flattened narrow planes (16 lanes)"},
      {geometry(14, 14, 3, 3, 1, 1, 1, 1), "depthwise 3x3, rows from the input (16 lanes)"}};
  for (const auto& [g, detail] : others) {
    EXPECT_STREQ(path_of(g, pool1, true, false), detail)
        << describe({g, 1, 1, false, Activation::Kind::None, true});
  }
}

namespace {

// Time per call on the zoo's depthwise shapes (run by hand: quilt_unit_tests
// --gtest_also_run_disabled_tests --gtest_filter='*DepthwiseThroughput*'; QUILT_BENCH_THREADS).
TEST(CpuDepthwiseConv, DISABLED_Throughput) {
  const char* env = std::getenv("QUILT_BENCH_THREADS");
  ThreadPool pool(env ? std::atoi(env) : 1);
  struct Shape {
    const char* name;
    Case c;
  };
  const Shape shapes[] = {
      {"kws 64x25x5 3x3", make_case(1, 64, 25, 5, 3, 3, 1, 1, 1, true, Activation::Kind::Relu)},
      {"effnet 1152x7x7 5x5",
       make_case(1, 1152, 7, 7, 5, 5, 1, 1, 2, true, Activation::Kind::Silu)},
      {"effnet 1152x7x7 3x3",
       make_case(1, 1152, 7, 7, 3, 3, 1, 1, 1, true, Activation::Kind::Silu)},
      {"effnet 672x14x14 5x5 s2",
       make_case(1, 672, 14, 14, 5, 5, 2, 1, 2, true, Activation::Kind::Silu)},
      {"effnet 672x14x14 5x5",
       make_case(1, 672, 14, 14, 5, 5, 1, 1, 2, true, Activation::Kind::Silu)},
      {"mbv3 240x28x28 3x3 s2",
       make_case(1, 240, 28, 28, 3, 3, 2, 1, 1, true, Activation::Kind::HardSwish)},
      {"mbv3 120x28x28 5x5",
       make_case(1, 120, 28, 28, 5, 5, 1, 1, 2, true, Activation::Kind::Relu)},
      {"effnet 240x28x28 3x3",
       make_case(1, 240, 28, 28, 3, 3, 1, 1, 1, true, Activation::Kind::Silu)},
      {"effnet 480x14x14 3x3",
       make_case(1, 480, 14, 14, 3, 3, 1, 1, 1, true, Activation::Kind::Silu)},
      {"mbv3 72x56x56 5x5 s2",
       make_case(1, 72, 56, 56, 5, 5, 2, 1, 2, true, Activation::Kind::Relu)},
      {"effnet 144x56x56 3x3",
       make_case(1, 144, 56, 56, 3, 3, 1, 1, 1, true, Activation::Kind::Silu)},
      {"effnet 96x112x112 3x3 s2",
       make_case(1, 96, 112, 112, 3, 3, 2, 1, 1, true, Activation::Kind::Silu)},
      {"effnet 32x112x112 3x3",
       make_case(1, 32, 112, 112, 3, 3, 1, 1, 1, true, Activation::Kind::Silu)}};
  const char* only = std::getenv("QUILT_BENCH_ONLY");  // a substring of the shapes' names
  for (const Shape& s : shapes) {
    if (only && !std::strstr(s.name, only)) continue;
    const DepthwiseGeometry& g = s.c.g;
    const int64_t planes = s.c.channels;
    std::vector<float> x(static_cast<size_t>(planes * g.in_h * g.in_w), 0.5f);
    std::vector<float> w(static_cast<size_t>(planes * g.kernel_h * g.kernel_w), 0.1f);
    std::vector<float> b(static_cast<size_t>(planes), 0.f);
    std::vector<float> y(static_cast<size_t>(planes * g.out_h * g.out_w));
    Activation act;
    act.kind = std::getenv("QUILT_BENCH_NO_ACT") ? Activation::Kind::None : s.c.act;
    // The weights laid out once, as a conv with constant weights has them.
    const std::shared_ptr<float[]> w16 =
        depthwise_weights16(w.data(), planes, g.kernel_h * g.kernel_w);
    const bool transposed = !std::getenv("QUILT_BENCH_NO_TRANSPOSED");
    const bool rows3x3 = !std::getenv("QUILT_BENCH_NO_ROWS3X3");
    double best = 1e30;
    for (int r = 0; r < 2000; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      depthwise_detail::depthwise_conv2d(g, planes, planes, x.data(), w.data(), b.data(), y.data(),
                                         act, pool, true, transposed, w16.get(), rows3x3);
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("%-28s %8.2f us\n", s.name, best * 1e6);
  }
}

}  // namespace

TEST(CpuDepthwiseConv, TransposedSixteenChannelsAtATimeOnSmallPlanes) {
  // Output rows of 7 to 16 columns on planes of at most 512 padded pixels: sixteen channels'
  // planes transposed into 16-channel vectors, zero-padded. Channel counts that leave a partial
  // last block (1, 5, 17, 33) or none (16, 32), batches (a block never spans two images),
  // kernels 1x1 to 7x7 and 5x3, strides 1 to 3, dilation 2, padding of 0-3 on each side
  // independently, every activation, both pools; then the planes it does not take.
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq"))
    GTEST_SKIP() << "no AVX-512 on this CPU";
  ThreadPool pool1(1), pool2(2);
  std::mt19937 rng(21);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const std::pair<int64_t, int64_t> kernels[] = {{1, 1}, {3, 3}, {5, 5}, {7, 7}, {5, 3}};
  const int64_t channel_counts[] = {1, 5, 16, 17, 32, 33};
  unsigned seed = 1100;
  int taken = 0;
  for (int rep = 0; rep < 120; ++rep) {
    const auto [kh, kw] = kernels[rep % std::size(kernels)];
    const int64_t s = pick(1, 3), d = rep % 7 == 0 ? 2 : 1;
    const int64_t in_h = pick(1, 20), in_w = pick(7, 18);
    const int64_t top = pick(0, 3), bottom = pick(0, 3), left = pick(0, 3), right = pick(0, 3);
    DepthwiseGeometry g{in_h, in_w, 0, 0, kh, kw, s, s, d, d, top, left};
    g.out_h = window_out_size(in_h, kh, s, d, top, bottom);
    g.out_w = window_out_size(in_w, kw, s, d, left, right);
    if (g.out_h < 1 || g.out_w < 7 || g.out_w > 16) continue;
    const int64_t padded_h = std::max((g.out_h - 1) * s + (kh - 1) * d + 1, top + in_h);
    const int64_t padded_w = std::max((g.out_w - 1) * s + (kw - 1) * d + 1, left + in_w);
    if (padded_h * padded_w > 512 || g.out_h * g.out_w > 256) continue;
    Case c{g,
           pick(1, 2),
           channel_counts[rep % std::size(channel_counts)],
           pick(0, 1) == 1,
           kActs[rep % std::size(kActs)],
           true};
    check(c, rep % 2 ? pool2 : pool1, seed++);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_STREQ(path_of(g, pool1, true), "depthwise, 16 channels at a time, transposed (16 lanes)")
        << describe(c);
    ++taken;
  }
  EXPECT_GE(taken, 40);
  // Dilation 2 (the random ones above rarely keep 7 columns with it), stride 1 and 2.
  for (const Case& c :
       {make_case(1, 17, 12, 12, 3, 3, 1, 2, 2), make_case(2, 5, 14, 14, 3, 3, 2, 2, 2),
        make_case(1, 16, 11, 9, 5, 5, 1, 2, 4)}) {
    Case d = c;
    d.avx512 = true;
    d.act = Activation::Kind::Relu;
    check(d, pool2, seed++);
    EXPECT_STREQ(path_of(c.g, pool1, true),
                 "depthwise, 16 channels at a time, transposed (16 lanes)")
        << describe(d);
  }
  // Not taken: rows narrower than 7 (the flat kernel), wider than 16, planes whose padded size
  // passes 512 pixels (28x28 with 3x3: 900).
  const std::pair<Case, const char*> others[] = {
      {make_case(1, 16, 25, 5, 3, 3, 1, 1, 1), "depthwise, flat planes shifted per tap (16 lanes)"},
      {make_case(1, 16, 20, 20, 3, 3, 1, 1, 1), "depthwise 3x3, rows from the input (16 lanes)"},
      {make_case(1, 16, 28, 28, 3, 3, 1, 1, 1), "depthwise 3x3, rows from the input (16 lanes)"}};
  for (const auto& [c, name] : others) {
    Case d = c;
    d.avx512 = true;
    check(d, pool2, seed++);
    EXPECT_STREQ(path_of(c.g, pool1, true), name) << describe(d);
  }
}

// The AVX2 form of the above (every x86-64-v3 CPU runs it; on CPUs with AVX-512 the tests reach
// it by not allowing the AVX-512 kernels): output rows of up to 28 columns, 784 pixels, padded
// planes of up to 3600 pixels, eight channels at a time. Rows wider than 14 columns go in
// balanced chunks (15 -> 7 + 8), planes of fewer than 8 pixels load through masks, the last
// group of 8 pixels overlaps the one before; channel counts that leave a partial last block (1,
// 5, 9, 17) or none (8, 16), and the weights laid out in 16-channel blocks (each 8-channel block
// half of one) or per run (check() runs both).
TEST(CpuDepthwiseConv, TransposedEightChannelsAtATimeOnAvx2) {
  ThreadPool pool1(1), pool2(2);
  std::mt19937 rng(23);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const std::pair<int64_t, int64_t> kernels[] = {{1, 1}, {3, 3}, {5, 5}, {7, 7}, {3, 5}};
  const int64_t channel_counts[] = {1, 5, 8, 9, 16, 17};
  constexpr const char* kName = "depthwise, 8 channels at a time, transposed (8 lanes)";
  unsigned seed = 2100;
  int taken = 0, chunked = 0, tiny = 0;
  for (int rep = 0; rep < 200; ++rep) {
    const auto [kh, kw] = kernels[rep % std::size(kernels)];
    const int64_t s = pick(1, 3), d = rep % 7 == 0 ? 2 : 1;
    const int64_t in_h = pick(1, 30), in_w = rep % 5 == 0 ? pick(1, 4) : pick(1, 30);
    const int64_t top = pick(0, 3), bottom = pick(0, 3), left = pick(0, 3), right = pick(0, 3);
    DepthwiseGeometry g{in_h, in_w, 0, 0, kh, kw, s, s, d, d, top, left};
    g.out_h = window_out_size(in_h, kh, s, d, top, bottom);
    g.out_w = window_out_size(in_w, kw, s, d, left, right);
    if (g.out_h < 1 || g.out_w < 1 || g.out_w > 28 || g.out_h * g.out_w > 784) continue;
    Case c{g,
           pick(1, 2),
           channel_counts[rep % std::size(channel_counts)],
           pick(0, 1) == 1,
           kActs[rep % std::size(kActs)],
           false};
    check(c, rep % 2 ? pool2 : pool1, seed++);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_STREQ(path_of(g, pool1, false), kName) << describe(c);
    ++taken;
    chunked += g.out_w > 14;
    tiny += in_h * in_w < 8;
  }
  EXPECT_GE(taken, 80);
  EXPECT_GE(chunked, 10);
  EXPECT_GE(tiny, 5);
  // The zoo's shapes it takes (fewer channels): MobileNetV3's 5x5 stride 2 from 56x56 (a padded
  // plane of 3481 pixels), 28x28 rows in two chunks, 7x7 and 14x14 planes, dilation 2.
  for (const Case& c :
       {make_case(1, 9, 56, 56, 5, 5, 2, 1, 2), make_case(2, 5, 28, 28, 5, 5, 1, 1, 2),
        make_case(1, 11, 28, 28, 3, 3, 2, 1, 1), make_case(3, 17, 7, 7, 5, 5, 1, 1, 2),
        make_case(1, 8, 14, 14, 3, 3, 1, 2, 2)}) {
    Case d = c;
    d.act = Activation::Kind::HardSwish;
    check(d, pool2, seed++);
    EXPECT_STREQ(path_of(c.g, pool1, false), kName) << describe(d);
  }
  // Not taken: rows wider than 28 columns, padded planes over 3600 pixels, or not allowed.
  const std::pair<Case, bool> others[] = {{make_case(1, 8, 56, 56, 5, 5, 1, 1, 2), true},
                                          {make_case(1, 8, 112, 112, 3, 3, 2, 1, 1), true},
                                          {make_case(1, 8, 14, 14, 5, 5, 1, 1, 2), false}};
  for (const auto& [c, allowed] : others) {
    EXPECT_STREQ(path_of(c.g, pool1, false, allowed), "depthwise, row bands (8-lane tiles)")
        << describe(c);
  }
}

// The AVX2 3x3 stride-1 kernel on rows wider than 8 that the transposed kernel does not take
// (rows over 28 columns, or not allowed): rows read straight from the input, masked at the
// plane's edges (pads 0-3 on each side independently, so a shift may lie wholly outside the
// plane), the last vector shifted back to end at the row's end (widths not a multiple of 8),
// tiles of 1-4 rows (heights 1-40), bands of rows across threads (112x112), every activation.
TEST(CpuDepthwiseConv, Rows3x3ReadTheInputOnAvx2) {
  ThreadPool pool1(1), pool2(2);
  std::mt19937 rng(29);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  constexpr const char* kName = "depthwise 3x3, rows from the input (8 lanes)";
  unsigned seed = 3100;
  int taken = 0;
  for (int rep = 0; rep < 120; ++rep) {
    const int64_t in_h = rep % 10 == 0 ? pick(100, 120) : pick(1, 40), in_w = pick(7, 80);
    const int64_t top = pick(0, 3), bottom = pick(0, 3), left = pick(0, 3), right = pick(0, 3);
    DepthwiseGeometry g{in_h, in_w, 0, 0, 3, 3, 1, 1, 1, 1, top, left};
    g.out_h = window_out_size(in_h, 3, 1, 1, top, bottom);
    g.out_w = window_out_size(in_w, 3, 1, 1, left, right);
    if (g.out_h < 1 || g.out_w <= 8) continue;
    Case c{g, pick(1, 2), pick(1, 5), pick(0, 1) == 1, kActs[rep % std::size(kActs)], false, false};
    check(c, rep % 2 ? pool2 : pool1, seed++);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_STREQ(path_of(g, pool1, false, false), kName) << describe(c);
    ++taken;
  }
  EXPECT_GE(taken, 100);
  // With the transposed kernel allowed it takes rows up to 28 columns; wider ones come here.
  for (const Case& c :
       {make_case(1, 4, 56, 56, 3, 3, 1, 1, 1), make_case(1, 3, 112, 112, 3, 3, 1, 1, 1),
        make_case(2, 2, 30, 33, 3, 3, 1, 1, 0)}) {
    Case d = c;
    d.act = Activation::Kind::Silu;
    check(d, pool2, seed++);
    EXPECT_STREQ(path_of(c.g, pool1, false), kName) << describe(d);
  }
  // Not taken: stride 2, dilation 2, 5x5, rows of 8 or fewer, or not allowed.
  for (const auto& [c, allowed] : std::initializer_list<std::pair<Case, bool>>{
           {make_case(1, 2, 60, 60, 3, 3, 2, 1, 1), true},
           {make_case(1, 2, 60, 60, 3, 3, 1, 2, 2), true},
           {make_case(1, 2, 60, 60, 5, 5, 1, 1, 2), true},
           {make_case(1, 2, 60, 60, 3, 3, 1, 1, 1), false}}) {
    EXPECT_STREQ(path_of(c.g, pool1, false, true, allowed), "depthwise, row bands (8-lane tiles)")
        << describe(c);
  }
}
