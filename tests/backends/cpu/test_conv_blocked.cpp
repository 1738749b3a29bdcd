// The blocked-layout convolutions (backends/cpu/kernels/conv_blocked.hpp) against a plain
// nested-loop reference in double: random geometries (kernel sizes, strides, dilations,
// asymmetric padding wider than the kernel, 1-pixel maps), ragged channel counts (1, 3, 17, 33,
// not multiples of 16), dense and depthwise, every combination of input, output and residual
// layout, bias, and the activations the kernels apply in registers. The padding lanes of blocked
// inputs are NaN, so a kernel that read them as channels would fail.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/avx512.hpp"
#include "backends/cpu/kernels/conv_blocked.hpp"
#include "tests/backends/cpu/activation_reference.hpp"
#include "tests/backends/cpu/blocked_testing.hpp"

namespace quilt::cpu {
namespace {

using testing::activate;
using testing::to_blocked;
using testing::window_out_size;

const int64_t kLanes = blocked_lanes();  // 16 with AVX-512, else 8

struct Case {
  int64_t n, c_in, c_out, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  bool depthwise, bias, in_blocked, out_blocked;
  int residual;  // 0 none, 1 NCHW, 2 blocked
  Activation::Kind act;
};

std::string describe(const Case& c) {
  std::ostringstream s;
  s << "x=[" << c.n << "," << c.c_in << "," << c.h << "," << c.w << "] c_out=" << c.c_out
    << " k=" << c.kh << "x" << c.kw << " s=" << c.sh << "," << c.sw << " d=" << c.dh << "," << c.dw
    << " pads=" << c.pt << "," << c.pl << "," << c.pb << "," << c.pr << " depthwise=" << c.depthwise
    << " bias=" << c.bias << " in_blocked=" << c.in_blocked << " out_blocked=" << c.out_blocked
    << " residual=" << c.residual << " act=" << Activation{c.act}.name();
  return s.str();
}

Attribute ints(const std::string& name, std::vector<int64_t> v) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::Ints;
  a.ints = std::move(v);
  return a;
}

void check(const Case& given, const ThreadPool& pool, unsigned seed) {
  // 8 lanes: fewer than 8 input channels are read as NCHW planes only.
  const bool nchw_only = !has_avx512f() && !given.depthwise && given.c_in < 8;
  Case c = given;
  if (nchw_only) c.in_blocked = false;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t oh = window_out_size(c.h, c.kh, c.sh, c.dh, c.pt, c.pb);
  const int64_t ow = window_out_size(c.w, c.kw, c.sw, c.dw, c.pl, c.pr);
  ASSERT_GT(oh, 0);
  ASSERT_GT(ow, 0);
  const int64_t depth = c.depthwise ? 1 : c.c_in;
  std::vector<float> x(static_cast<size_t>(c.n * c.c_in * c.h * c.w));
  std::vector<float> w(static_cast<size_t>(c.c_out * depth * c.kh * c.kw)),
      b(static_cast<size_t>(c.c_out)), r(static_cast<size_t>(c.n * c.c_out * oh * ow));
  for (auto* v : {&x, &w, &b, &r})
    for (float& f : *v) f = u(rng);

  Node node;
  node.op_type = "Conv";
  node.name = "conv";
  node.inputs = {"x", "w", c.bias ? "b" : ""};
  node.outputs = {"y"};
  node.attributes["pads"] = ints("pads", {c.pt, c.pl, c.pb, c.pr});
  node.attributes["strides"] = ints("strides", {c.sh, c.sw});
  node.attributes["dilations"] = ints("dilations", {c.dh, c.dw});
  if (c.depthwise) {
    Attribute g;
    g.name = "group";
    g.kind = Attribute::Kind::Int;
    g.i = c.c_in;
    node.attributes["group"] = g;
  }
  const Tensor wt = Tensor::from_vector({c.c_out, depth, c.kh, c.kw}, w);
  const Tensor bt = Tensor::from_vector({c.c_out}, b);
  const std::vector<int64_t> y_shape{c.n, c.c_out, oh, ow};
  NodeSignature sig{
      node,
      {TypeShape{DType::Float32, true, {c.n, c.c_in, c.h, c.w}},
       TypeShape{DType::Float32, true, wt.shape()}, TypeShape{DType::Float32, true, bt.shape()}},
      {TypeShape{DType::Float32, true, y_shape}},
      {nullptr, &wt, c.bias ? &bt : nullptr}};
  Activation act;
  act.kind = c.act;
  // 8 lanes (no AVX-512): dense convs (reading fewer than 8 input channels as NCHW), depthwise
  // ones on the small planes their kernel takes (rows of at most 28 outputs, 784 outputs, 3,600
  // padded input pixels), and the layout pass leaves maps under 16 pixels in NCHW (which the
  // dense kernel still computes: checked here).
  const int64_t padded_h = std::max((oh - 1) * c.sh + (c.kh - 1) * c.dh + 1, c.pt + c.h),
                padded_w = std::max((ow - 1) * c.sw + (c.kw - 1) * c.dw + 1, c.pl + c.w);
  const bool small_plane = ow <= 28 && oh * ow <= 784 && padded_h * padded_w <= 3600;
  EXPECT_EQ(blocked_conv_reads_blocked(sig), !nchw_only) << describe(c);
  if (!has_avx512f() && c.depthwise && (!small_plane || oh * ow < 16)) {
    EXPECT_FALSE(blocked_conv_capable(sig, act)) << describe(c);
    return;
  }
  // Dense convs whose (output pixel, tap) pairs mostly read padding are left to the NCHW path
  // (which the kernel still computes: checked here).
  double inside = 1;
  for (const auto& [in, out, k, s, d, pad] :
       {std::array<int64_t, 6>{c.h, oh, c.kh, c.sh, c.dh, c.pt},
        std::array<int64_t, 6>{c.w, ow, c.kw, c.sw, c.dw, c.pl}}) {
    int64_t reads = 0;
    for (int64_t o = 0; o < out; ++o)
      for (int64_t t = 0; t < k; ++t) reads += o * s - pad + t * d >= 0 && o * s - pad + t * d < in;
    inside *= static_cast<double>(reads) / static_cast<double>(out * k);
  }
  EXPECT_EQ(blocked_conv_capable(sig, act),
            (has_avx512f() || oh * ow >= 16) && (c.depthwise || inside >= 0.5))
      << describe(c) << " inside " << inside;
  const auto kernel = make_blocked_conv(sig, c.in_blocked, c.out_blocked, c.residual == 2);

  const int64_t cbi = (c.c_in + kLanes - 1) / kLanes, cbo = (c.c_out + kLanes - 1) / kLanes;
  const Tensor xt = c.in_blocked ? Tensor::from_vector({c.n, cbi, c.h, c.w, kLanes},
                                                       to_blocked(x, c.n, c.c_in, c.h * c.w))
                                 : Tensor::from_vector({c.n, c.c_in, c.h, c.w}, x);
  const Tensor rt = c.residual == 2 ? Tensor::from_vector({c.n, cbo, oh, ow, kLanes},
                                                          to_blocked(r, c.n, c.c_out, oh * ow))
                                    : Tensor::from_vector(y_shape, r);
  const Tensor* inputs[] = {&xt, &wt, c.bias ? &bt : nullptr};
  const TypeShape out_type{DType::Float32, true, y_shape};
  std::vector<Tensor> outs(1);
  KernelContext ctx(node, inputs, {&out_type, 1}, outs, pool);
  ctx.activation = act;
  if (c.residual) ctx.residual = &rt;
  kernel->run(ctx);

  // The output back in NCHW.
  std::vector<float> y(static_cast<size_t>(c.n * c.c_out * oh * ow));
  if (c.out_blocked) {
    ASSERT_EQ(outs[0].shape(), (std::vector<int64_t>{c.n, cbo, oh, ow, kLanes})) << describe(c);
    for (int64_t i = 0; i < c.n; ++i)
      reorder_from_blocked(outs[0].data<float>() + i * cbo * kLanes * oh * ow, c.c_out, oh * ow,
                           y.data() + i * c.c_out * oh * ow);
  } else {
    ASSERT_EQ(outs[0].shape(), y_shape) << describe(c);
    std::copy(outs[0].data<float>(), outs[0].data<float>() + y.size(), y.begin());
  }
  for (int64_t i = 0; i < c.n; ++i)
    for (int64_t m = 0; m < c.c_out; ++m)
      for (int64_t yy = 0; yy < oh; ++yy)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double sum = c.bias ? b[static_cast<size_t>(m)] : 0.0, magnitude = std::fabs(sum);
          const int64_t c0 = c.depthwise ? m : 0, c1 = c.depthwise ? m + 1 : c.c_in;
          for (int64_t ch = c0; ch < c1; ++ch)
            for (int64_t ky = 0; ky < c.kh; ++ky)
              for (int64_t kx = 0; kx < c.kw; ++kx) {
                const int64_t iy = yy * c.sh - c.pt + ky * c.dh, ix = xx * c.sw - c.pl + kx * c.dw;
                if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                const double term =
                    double(
                        w[static_cast<size_t>(((m * depth + ch - c0) * c.kh + ky) * c.kw + kx)]) *
                    x[static_cast<size_t>(((i * c.c_in + ch) * c.h + iy) * c.w + ix)];
                sum += term;
                magnitude += std::fabs(term);
              }
          const size_t at = static_cast<size_t>(((i * c.c_out + m) * oh + yy) * ow + xx);
          if (c.residual) sum += r[at];
          const double want = activate(c.act, sum);
          ASSERT_NEAR(y[at], want, 1e-5 * magnitude + 1e-5 + 2e-6 * std::fabs(want))
              << describe(c) << " at [" << i << ", " << m << ", " << yy << ", " << xx << "]";
        }
}

TEST(CpuBlockedConv, RandomGeometriesInEveryLayout) {
  std::mt19937 rng(7);
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  const Activation::Kind acts[] = {Activation::Kind::None, Activation::Kind::Relu,
                                   Activation::Kind::HardSwish, Activation::Kind::Silu};
  ThreadPool one(1), two(2);
  for (int i = 0; i < 300; ++i) {
    Case c{};
    c.depthwise = i % 3 == 0;
    c.n = pick({1, 1, 2});
    // 300 and 600 channels: kernels of 3x3 and more run their depth in several chunks
    // (chunk_channels), the last one ragged, some starting inside a 16-channel block.
    c.c_in = c.depthwise ? pick({3, 16, 17, 33, 64}) : pick({1, 3, 16, 17, 33, 300, 600});
    c.c_out = c.depthwise ? c.c_in : pick({3, 8, 16, 17, 33, 64, 70});
    c.kh = pick({1, 1, 2, 3, 3, 5, 7, 10});
    c.kw = pick({1, 1, 2, 3, 3, 4, 5, 7});
    c.sh = pick({1, 1, 2, 3});
    c.sw = pick({1, 1, 2, 3});
    c.dh = pick({1, 1, 2});
    c.dw = pick({1, 1, 3});
    c.pt = pick({0, 0, 1, 3});
    c.pl = pick({0, 1, 2, 4});
    c.pb = pick({0, 1, 2});
    c.pr = pick({0, 0, 1, 5});
    c.h = std::uniform_int_distribution<int64_t>(1, 14)(rng);
    c.w = std::uniform_int_distribution<int64_t>(1, 30)(rng);
    if (window_out_size(c.h, c.kh, c.sh, c.dh, c.pt, c.pb) <= 0 ||
        window_out_size(c.w, c.kw, c.sw, c.dw, c.pl, c.pr) <= 0) {
      --i;
      continue;
    }
    // Drawn, not functions of i: depthwise (i % 3 == 0) never met a blocked residual with an
    // NCHW output when these were i % 2, i / 2 % 2 and i / 4 % 3.
    c.bias = rng() % 4 != 1;
    c.in_blocked = rng() % 2 == 0;
    c.out_blocked = rng() % 2 == 0;
    c.residual = static_cast<int>(rng() % 3);
    c.act = acts[rng() % 4];
    check(c, i % 2 ? two : one, static_cast<unsigned>(i));
    if (HasFatalFailure()) return;
  }
}

// Every register tile of whole input blocks at strides 1 and 2: 1, 2 and 3 output blocks (the
// groups' sizes) over rows of 1 to 13 outputs, whose tiles are every width up to the group's
// most (12, 6, 4 pixels) and several tiles a row; 3 input blocks (2 whole and 1 ragged on 8
// lanes), and 3 input channels (on 8 lanes, read as NCHW planes, a tap of one channel at a
// time). On 8 lanes these are the assembly tiles; on 16 the AVX-512 engine's.
TEST(CpuBlockedConv, EveryTileOfWholeBlocks) {
  ThreadPool two(2);
  for (const int64_t c_in : {2 * kLanes + 3, int64_t{3}})
    for (int64_t blocks_out = 1; blocks_out <= 3; ++blocks_out)
      for (int64_t stride = 1; stride <= 2; ++stride)
        for (int64_t ow = 1; ow <= 13; ++ow) {
          Case c{};
          c.n = 1;
          c.c_in = c_in;
          c.c_out = blocks_out * kLanes;
          c.h = 3;
          c.w = (ow - 1) * stride + 1;  // 3x3, pads of 1
          c.kh = c.kw = 3;
          c.sh = c.sw = stride;
          c.dh = c.dw = 1;
          c.pt = c.pl = c.pb = c.pr = 1;
          c.bias = c.out_blocked = true;
          c.in_blocked = c_in > 3;
          c.residual = 2;
          c.act = Activation::Kind::Relu;
          check(c, two, static_cast<unsigned>(ow + 16 * stride + 64 * blocks_out + c_in));
          if (HasFatalFailure()) return;
        }
}

// The shapes the zoo's networks have, each in every layout: the keyword spotter's first conv
// and its 64-channel pairs, ResNet's 7x7 stem, EfficientNet's 5x5 depthwise, 1x1 maps.
TEST(CpuBlockedConv, ZooShapes) {
  ThreadPool two(2);
  const Case shapes[] = {
      {1, 1,     64,   49,    10,   10, 4,
       2, 2,     1,    1,     4,    1,  5,
       2, false, true, false, true, 0,  Activation::Kind::Relu},
      {1, 64,   64,   25,   5,    3, 3,
       1, 1,    1,    1,    1,    1, 1,
       1, true, true, true, true, 0, Activation::Kind::Relu},
      {1, 64,    64,   25,   5,     1, 1,
       1, 1,     1,    1,    0,     0, 0,
       0, false, true, true, false, 0, Activation::Kind::Relu},
      {1, 3,     64,   32,    32,   7, 7,
       2, 2,     1,    1,     3,    3, 3,
       3, false, true, false, true, 0, Activation::Kind::Relu},
      {1, 40,   40,   14,   14,   5, 5,
       2, 2,    1,    1,    2,    2, 2,
       2, true, true, true, true, 0, Activation::Kind::Silu},
      {2, 96,    24,   1,    1,    1, 1,
       1, 1,     1,    1,    0,    0, 0,
       0, false, true, true, true, 2, Activation::Kind::HardSwish},
      {1, 64,    64,    14,   14,   3, 3,
       1, 1,     2,     2,    2,    2, 2,
       2, false, false, true, true, 2, Activation::Kind::Relu},
      // ResNet-50's 256 -> 1024 on 14x14 with its residual: enough output channels that the
      // 8-lane kernel runs a blocked input's plane as one row.
      {1, 256,   1024, 14,   14,   1, 1,
       1, 1,     1,    1,    0,    0, 0,
       0, false, true, true, true, 2, Activation::Kind::Relu},
  };
  unsigned seed = 100;
  for (Case c : shapes)
    for (int layouts = 0; layouts < 4; ++layouts) {
      c.in_blocked = layouts & 1;
      c.out_blocked = layouts & 2;
      check(c, two, seed++);
      if (HasFatalFailure()) return;
    }
}

TEST(CpuBlockedConv, OnlyFloat2dDenseOrDepthwiseWithRegisterActivations) {
  Node node;
  node.op_type = "Conv";
  node.inputs = {"x", "w"};
  node.outputs = {"y"};
  const Tensor w = Tensor::from_vector({4, 2, 3, 3}, std::vector<float>(72, 1.f));
  NodeSignature sig{
      node,
      {TypeShape{DType::Float32, true, {1, 4, 8, 8}}, TypeShape{DType::Float32, true, w.shape()}},
      {TypeShape{DType::Float32, true, {1, 4, 6, 6}}},
      {nullptr, &w}};
  Activation none, tanh;
  tanh.kind = Activation::Kind::Tanh;
  EXPECT_FALSE(blocked_conv_capable(sig, none));  // group 2 of 4 channels: neither kind
  Attribute g;
  g.name = "group";
  g.kind = Attribute::Kind::Int;
  g.i = 2;
  node.attributes["group"] = g;
  EXPECT_FALSE(blocked_conv_capable(sig, none));  // grouped, not depthwise
  sig.inputs[0].dims = {1, 2, 8, 8};
  node.attributes.erase("group");
  // 2 input channels: either kind; the 8-lane kernel reads them as NCHW planes only.
  EXPECT_TRUE(blocked_conv_capable(sig, none));
  EXPECT_EQ(blocked_conv_reads_blocked(sig), has_avx512f());
  const Tensor w16 = Tensor::from_vector({4, 16, 3, 3}, std::vector<float>(576, 1.f));
  sig.inputs[0].dims = {1, 16, 8, 8};
  sig.inputs[1].dims = w16.shape();
  sig.constants[1] = &w16;
  EXPECT_TRUE(blocked_conv_capable(sig, none));
  EXPECT_TRUE(blocked_conv_reads_blocked(sig));
  // 16 lanes: Tanh has no register form there; the 8-lane kernels apply any activation to
  // each finished row.
  EXPECT_EQ(blocked_conv_capable(sig, tanh), !has_avx512f());
  sig.constants[1] = nullptr;  // weights computed at run time
  EXPECT_FALSE(blocked_conv_capable(sig, none));
}

}  // namespace
}  // namespace quilt::cpu
