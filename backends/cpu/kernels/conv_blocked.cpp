// The blocked-layout (NCHW16c) convolutions: conv_blocked.hpp says what they compute. Every
// function here that uses AVX-512 is compiled for it (QUILT_AVX512) and is reached only from a
// kernel that blocked_conv_capable accepted, which requires the CPU to have it.
#include "backends/cpu/kernels/conv_blocked.hpp"

#include <immintrin.h>

#include <array>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/aligned.hpp"
#include "backends/cpu/avx512.hpp"
#include "backends/cpu/gcc12_avx512.hpp"
#include "backends/cpu/kernels/conv_depthwise.hpp"
#include "backends/cpu/kernels/conv_geometry.hpp"

#define QUILT_AVX512 __attribute__((target("avx512f")))

QUILT_GCC12_AVX512_BEGIN  // the whole file

namespace quilt::cpu {
namespace {

constexpr int64_t kLanes = 16;
constexpr int kMaxPixels = 12;  // output pixels per register tile

int64_t blocks(int64_t channels) {
  return (channels + kLanes - 1) / kLanes;
}

// Where the 16 channels [16 cb, 16 cb + 16) of pixel (y, x) of image n are, in either layout.
// Blocked: one vector. NCHW: 16 floats a plane apart (lane l at l * h * w), gathered and
// scattered; lanes past the channel count are left alone.
struct Plane {
  float* data = nullptr;
  bool blocked = false;
  int64_t c = 0, h = 0, w = 0;

  int64_t image() const { return blocked ? blocks(c) * kLanes * h * w : c * h * w; }
  // The first float of channel block cb at (y, x): lane 0's.
  float* at(int64_t n, int64_t cb, int64_t y, int64_t x) const {
    return data + n * image() + cb * kLanes * h * w + (y * w + x) * (blocked ? kLanes : 1);
  }
  __mmask16 lanes(int64_t cb) const {
    const int64_t live = std::min<int64_t>(kLanes, c - cb * kLanes);
    return static_cast<__mmask16>((1u << live) - 1);
  }
};

// The lane offsets of an NCHW plane of hw pixels: l * hw.
QUILT_AVX512 __m512i lane_index(int64_t hw) {
  return _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                            _mm512_set1_epi32(static_cast<int>(hw)));
}

// The output side of a tile: residual, activation, store.
struct Epilogue {
  Plane y, residual;  // residual.data null: none
  Activation act;
};

QUILT_AVX512 __attribute__((always_inline)) inline void finish(const Epilogue& e, int64_t n,
                                                               int64_t cb, int64_t y, int64_t x,
                                                               __m512 v, __m512i index) {
  if (e.residual.data) {
    const float* r = e.residual.at(n, cb, y, x);
    v = _mm512_add_ps(
        v, e.residual.blocked
               ? _mm512_loadu_ps(r)
               : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), e.residual.lanes(cb), index, r, 4));
  }
  v = act16(e.act.kind, v, _mm512_set1_ps(e.act.alpha), _mm512_set1_ps(e.act.beta));
  float* out = e.y.at(n, cb, y, x);
  if (e.y.blocked)
    _mm512_storeu_ps(out, v);
  else
    _mm512_mask_i32scatter_ps(out, e.y.lanes(cb), index, v, 4);
}

// ---- direct (group 1) ----

// What a tile reads: the input (padding already applied: every window is whole), the packed
// weights and bias, and the window.
struct TileArgs {
  Plane x;
  // direct: per group of output blocks [kh][kw][c_in][blocks of the group][16] (the group of
  // block b at b * block_weights); depthwise: [blocks(c)][kh][kw][16]
  const float* w;
  const float* bias;  // [blocks(c_out) * 16]
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t block_weights;  // direct: one output block's weights, kh * kw * c_in * 16
};

// P output pixels of output blocks ob0 .. ob0 + OB, over `count` steps of a chunk of the
// depth (an input channel at a kernel offset each, every one reading inside the input: padding
// is applied before), added to the accumulators at acc (block o's pixel p at acc + o *
// acc_block + p * 16), or to the bias when `first`. Step d reads the input at steps[d] floats
// past pixel p's window start off[p] in image n, and the OB x 16 weights at w + d * OB * 16.
// Any pixels: a tile may run across output rows, so a 7x7 map is 49 pixels in tiles of 6 and
// 5, not rows of a 6 and a 1. One flat loop per chunk: looping over kernel offsets, then the
// channels of each 16-channel block, set up a loop of 16 steps or fewer again and again
// (~15 % of a 3x3 conv's time).
//
// The last chunk (`last`) finishes the sums in registers through the epilogue into the output,
// pixel p at flat position pix[p] (y * width + x) of its output plane, instead of storing them.
template <int P, int OB>
QUILT_AVX512 void direct_tile(const TileArgs& a, const Epilogue& e, int64_t n, int64_t ob0,
                              const int64_t* off, const int64_t* pix, const int64_t* steps,
                              const float* w, int64_t count, float* acc_out, int64_t acc_block,
                              bool first, bool last) {
  __m512 acc[OB][P];
  for (int o = 0; o < OB; ++o) {
    const __m512 b = _mm512_loadu_ps(a.bias + (ob0 + o) * kLanes);
    for (int p = 0; p < P; ++p)
      acc[o][p] = first ? b : _mm512_load_ps(acc_out + o * acc_block + p * kLanes);
  }
  int64_t at[P];
  for (int p = 0; p < P; ++p) at[p] = off[p];
  const float* xn = a.x.data + n * a.x.image();
  for (int64_t d = 0; d < count; ++d, w += OB * kLanes) {
    const float* xs = xn + steps[d];
    __m512 wv[OB];
    for (int o = 0; o < OB; ++o) wv[o] = _mm512_loadu_ps(w + o * kLanes);
    for (int p = 0; p < P; ++p) {
      const __m512 v = _mm512_set1_ps(xs[at[p]]);
      for (int o = 0; o < OB; ++o) acc[o][p] = _mm512_fmadd_ps(wv[o], v, acc[o][p]);
    }
  }
  if (last) {
    const __m512i index = lane_index(e.y.h * e.y.w);
    for (int o = 0; o < OB; ++o)
      for (int p = 0; p < P; ++p) finish(e, n, ob0 + o, 0, pix[p], acc[o][p], index);
    return;
  }
  for (int o = 0; o < OB; ++o)
    for (int p = 0; p < P; ++p) _mm512_store_ps(acc_out + o * acc_block + p * kLanes, acc[o][p]);
}

using DirectTile = void (*)(const TileArgs&, const Epilogue&, int64_t, int64_t, const int64_t*,
                            const int64_t*, const int64_t*, const float*, int64_t, float*, int64_t,
                            bool, bool);

// Tiles of OB output blocks x P pixels keep OB * P <= kAccumulators vectors in registers: 4 x 6
// when there are 4 blocks (64 channels) or more, which broadcasts each input value into 4 FMAs
// (2 x 12 did so into 2, and ran the keyword spotter's 64 -> 64 pointwise convs at 2/3 of the
// FMA peak, the broadcasts competing for the vector ports).
constexpr int kAccumulators = 24;
constexpr int kMaxBlocks = 4;
constexpr int max_pixels(int ob) {
  return std::min(kMaxPixels, kAccumulators / ob);
}

template <int OB, size_t... I>
constexpr std::array<DirectTile, kMaxPixels> direct_tiles(std::index_sequence<I...>) {
  return {(static_cast<int>(I) + 1 <= max_pixels(OB) ? &direct_tile<static_cast<int>(I) + 1, OB>
                                                     : nullptr)...};
}
// [OB - 1][P - 1]
constexpr std::array<std::array<DirectTile, kMaxPixels>, kMaxBlocks> kDirectTiles = {
    direct_tiles<1>(std::make_index_sequence<kMaxPixels>{}),
    direct_tiles<2>(std::make_index_sequence<kMaxPixels>{}),
    direct_tiles<3>(std::make_index_sequence<kMaxPixels>{}),
    direct_tiles<4>(std::make_index_sequence<kMaxPixels>{})};

// ---- depthwise ----

template <int P>
QUILT_AVX512 void depthwise_tile(const TileArgs& a, const Epilogue& e, int64_t n, int64_t cb,
                                 int64_t y, int64_t x0, int64_t ky0, int64_t ky1, int64_t kx0,
                                 int64_t kx1) {
  __m512 acc[P];
  const __m512 b = _mm512_loadu_ps(a.bias + cb * kLanes);
  for (int p = 0; p < P; ++p) acc[p] = b;
  const int64_t row = a.x.w * kLanes, step = a.sw * kLanes;
  const float* xn = a.x.at(n, cb, 0, 0) + y * a.sh * row + x0 * a.sw * kLanes;
  const float* wc = a.w + cb * a.kh * a.kw * kLanes;
  for (int64_t ky = ky0; ky < ky1; ++ky) {
    const float* xr = xn + ky * a.dh * row;
    for (int64_t kx = kx0; kx < kx1; ++kx) {
      const __m512 w = _mm512_loadu_ps(wc + (ky * a.kw + kx) * kLanes);
      const float* xp = xr + kx * a.dw * kLanes;
      for (int p = 0; p < P; ++p)
        acc[p] = _mm512_fmadd_ps(w, _mm512_loadu_ps(xp + p * step), acc[p]);
    }
  }
  const __m512i index = lane_index(e.y.h * e.y.w);
  for (int p = 0; p < P; ++p) finish(e, n, cb, y, x0 + p, acc[p], index);
}

using DepthwiseTile = void (*)(const TileArgs&, const Epilogue&, int64_t, int64_t, int64_t, int64_t,
                               int64_t, int64_t, int64_t, int64_t);

template <size_t... I>
constexpr std::array<DepthwiseTile, sizeof...(I)> depthwise_tiles(std::index_sequence<I...>) {
  return {&depthwise_tile<static_cast<int>(I) + 1>...};
}
constexpr std::array<DepthwiseTile, kMaxPixels> kDepthwiseTiles =
    depthwise_tiles(std::make_index_sequence<kMaxPixels>{});

// count pixels of an NCHW row (16 channel planes hw apart, `lanes` of them live) as blocked
// vectors at dst.
QUILT_AVX512 void gather_pixels(const float* src, __mmask16 lanes, int64_t hw, int64_t count,
                                float* dst) {
  const __m512i index = lane_index(hw);
  for (int64_t p = 0; p < count; ++p)
    _mm512_storeu_ps(dst + p * kLanes,
                     _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lanes, index, src + p, 4));
}

void reorder_in(const float* x, int64_t c, int64_t hw, float* y) {
  const Plane plane{const_cast<float*>(x), false, c, 1, hw};
  for (int64_t cb = 0; cb < blocks(c); ++cb)
    gather_pixels(x + cb * kLanes * hw, plane.lanes(cb), hw, hw, y + cb * kLanes * hw);
}

QUILT_AVX512 void reorder_out(const float* x, int64_t c, int64_t hw, float* y) {
  const __m512i index = lane_index(hw);
  for (int64_t cb = 0; cb < blocks(c); ++cb) {
    const int64_t live = std::min<int64_t>(kLanes, c - cb * kLanes);
    const __mmask16 m = static_cast<__mmask16>((1u << live) - 1);
    const float* src = x + cb * kLanes * hw;
    float* dst = y + cb * kLanes * hw;
    for (int64_t p = 0; p < hw; ++p)
      _mm512_mask_i32scatter_ps(dst + p, m, index, _mm512_loadu_ps(src + p * kLanes), 4);
  }
}

// Input channels per chunk of a direct conv's depth: all of them unless the group's weights
// for the whole depth (taps x channels x group x 16 floats) exceed 512 KB, half a core's L2;
// then chunks within it, in multiples of 8 channels. Fewer chunks measured faster even when a
// chunk's weights no longer fit L1 (each tile streams them from L2 instead): on chains of six
// convs at one thread, 3x3 of 256 channels on 14x14 took 5.6-5.8 ms in one chunk, 5.8-6.2 in
// chunks of 64 channels, 6.4-6.8 in chunks of 8 (18 KB, in L1); 1x1 512 -> 2048 on 7x7
// 2.9-3.0 ms in one chunk, 3.4-3.6 in chunks of 64 (NCHW: 2.8-2.9, 5.6-5.8).
int64_t chunk_channels(int64_t group, int64_t taps, int64_t depth) {
  constexpr int64_t kStep = 8, kBytes = int64_t{512} << 10;
  const int64_t per_channel = group * taps * kLanes * static_cast<int64_t>(sizeof(float));
  if (depth * per_channel <= kBytes) return std::max<int64_t>(depth, 1);
  return std::max<int64_t>(kStep, kBytes / per_channel / kStep * kStep);
}

class BlockedConvKernel : public Kernel {
 public:
  BlockedConvKernel(const NodeSignature& sig, bool in_blocked, bool out_blocked,
                    bool residual_blocked)
      : in_blocked_(in_blocked), out_blocked_(out_blocked), residual_blocked_(residual_blocked) {
    const Tensor& w = *sig.constants[1];
    w_shape_ = w.shape();
    const int64_t c_out = w.dim(0), depth = w.dim(1), taps = w.dim(2) * w.dim(3);
    depthwise_ = sig.node.attr_int("group", 1) != 1;
    c_in_ = depthwise_ ? c_out : depth;
    const int64_t cb = blocks(c_out);
    const float* wp = w.data<float>();
    if (depthwise_) {  // [cb][taps][16]
      weights_ = aligned_zeros<float>(cb * taps * kLanes);
      for (int64_t m = 0; m < c_out; ++m)
        for (int64_t t = 0; t < taps; ++t)
          weights_[((m / kLanes) * taps + t) * kLanes + m % kLanes] = wp[m * taps + t];
    } else {
      // Per group of up to kMaxBlocks output blocks (as run_direct deals them), the depth in
      // chunks of chunk_c_ input channels, each chunk [taps][its channels][blocks of the group]
      // [16]: in the order of the tile's flat loop over the depth, a step's weights one run of
      // OB x 16 floats right after the previous step's.
      weights_ = aligned_zeros<float>(cb * depth * taps * kLanes);
      const int64_t group = std::min<int64_t>(kMaxBlocks, cb);
      chunk_c_ = chunk_channels(group, taps, depth);
      for (int64_t m = 0; m < c_out; ++m) {
        const int64_t b = m / kLanes, ob0 = b / group * group, obg = std::min(group, cb - ob0);
        for (int64_t c = 0; c < depth; ++c) {
          const int64_t c0 = c / chunk_c_ * chunk_c_, len = std::min(chunk_c_, depth - c0);
          for (int64_t t = 0; t < taps; ++t)
            weights_[ob0 * taps * depth * kLanes +
                     ((c0 * taps + t * len + c - c0) * obg + b - ob0) * kLanes + m % kLanes] =
                wp[(m * depth + c) * taps + t];
        }
      }
    }
    memo_.keep({&sig.inputs[0], &sig.outputs[0]},
               [&](const auto& s) { return conv_geometry(sig.node, s[0], w_shape_, s[1]); });
    bias_ = aligned_zeros<float>(cb * kLanes);
    if (sig.constants.size() > 2 && sig.constants[2]) {
      const float* bp = sig.constants[2]->data<float>();
      for (int64_t m = 0; m < c_out; ++m) bias_[m] = bp[m];
    }
  }

  bool reads_constant(size_t i) const override { return i != 1 && i != 2; }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t>& y_shape = ctx.output_shape(0);
    const int64_t c_out = w_shape_[0];
    const std::vector<int64_t> x_shape =
        blocked_detail::checked_shapes(ctx, x, in_blocked_, c_in_, c_out, kLanes);
    const int64_t n = x_shape[0];
    ShapeMemo<Geometry>::Held layout;
    const Geometry& g = memo_.get({x_shape, y_shape}, layout, [&] {
      return conv_geometry(ctx.node, x_shape, w_shape_, y_shape);
    });
    const int64_t out_h = g.out[1], out_w = g.out[2];
    // Lane offsets are 32-bit: an NCHW plane must stay below 2^31 / 16 floats.
    if (std::max(g.in[1] * g.in[2], out_h * out_w) > std::numeric_limits<int32_t>::max() / kLanes)
      ctx.node.fail("a plane of " + std::to_string(std::max(g.in[1] * g.in[2], out_h * out_w)) +
                        " pixels is too large for the blocked layout",
                    ErrorCode::Runtime);
    Tensor& y = out_blocked_ ? ctx.output_private(0, {n, blocks(c_out), out_h, out_w, kLanes})
                             : ctx.output_uninitialized(0);
    if (y.numel() == 0) return;
    Epilogue e;
    e.y = {y.data<float>(), out_blocked_, c_out, out_h, out_w};
    e.residual = {nullptr, residual_blocked_, c_out, out_h, out_w};
    e.act = ctx.activation;
    e.residual.data =
        const_cast<float*>(blocked_detail::checked_residual(ctx, residual_blocked_, kLanes));
    Plane in{const_cast<float*>(x.data<float>()), in_blocked_, c_in_, g.in[1], g.in[2]};
    // Windows that read padding, or a depthwise input in NCHW: the input is copied once into a
    // zero-bordered plane (blocked for the depthwise kernel), so that every tile reads whole
    // windows: per-pixel edge tiles were most of the keyword spotter's 25x5 maps.
    Tensor padded;
    Geometry inner = g;
    if (blocked_detail::reads_padding(g) || (depthwise_ && !in.blocked)) {
      in = pad_input(ctx, in, g, depthwise_ || in.blocked, n, padded);
      inner.in[1] = in.h;
      inner.in[2] = in.w;
      inner.pad = {0, 0, 0};
    }
    // 1x1 windows at stride 1 over the whole plane: its rows are one row, so tiles run across
    // them (a 25x5 map: 11 tiles of up to 12 pixels, not 25 of 5).
    if (inner.kernel[1] == 1 && inner.kernel[2] == 1 && inner.stride[1] == 1 &&
        inner.stride[2] == 1 && inner.in[1] == inner.out[1] && inner.in[2] == inner.out[2]) {
      in.w *= in.h;
      in.h = 1;
      e.y.w *= e.y.h;
      e.y.h = 1;
      e.residual.w *= e.residual.h;
      e.residual.h = 1;
      inner.in = inner.out = {1, 1, in.w};
    }
    if (depthwise_) {
      ctx.detail = "blocked layout (16 channels a vector), depthwise";
      run_depthwise(ctx, inner, in, e, n);
    } else {
      ctx.detail = "blocked layout (16 channels a vector), direct tiles";
      run_direct(ctx, inner, in, e, n);
    }
  }

 private:
  // The input as every window reads it, padding included: rows and columns
  // [-pad, (out - 1) * stride + (kernel - 1) * dilation + 1 - pad) of each plane, zeros outside
  // the input; in the input's layout, or blocked when `blocked`.
  static Plane pad_input(KernelContext& ctx, const Plane& in, const Geometry& g, bool blocked,
                         int64_t n, Tensor& storage) {
    const int64_t hp = (g.out[1] - 1) * g.stride[1] + (g.kernel[1] - 1) * g.dilation[1] + 1;
    const int64_t wp = (g.out[2] - 1) * g.stride[2] + (g.kernel[2] - 1) * g.dilation[2] + 1;
    const int64_t cb = blocks(in.c), top = g.pad[1], left = g.pad[2];
    storage = Tensor::scratch(DType::Float32,
                              blocked ? std::vector<int64_t>{n, cb, hp, wp, kLanes}
                                      : std::vector<int64_t>{n, in.c, hp, wp},
                              false);
    Plane out{storage.data<float>(), blocked, in.c, hp, wp};
    // Input columns [c0, c1) land at padded columns [c0 + left, c1 + left).
    const int64_t c0 = std::max<int64_t>(0, -left), c1 = std::min(in.w, wp - left);
    const int64_t planes = blocked ? cb : in.c, lanes = blocked ? kLanes : 1;
    const int64_t hw = in.h * in.w;
    ctx.pool.parallel_for(n * planes, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t img = t / planes, pl = t % planes;
        float* dst = out.data + (img * planes + pl) * hp * wp * lanes;
        for (int64_t r = 0; r < hp; ++r, dst += wp * lanes) {
          const int64_t ih = r - top;
          if (ih < 0 || ih >= in.h || c1 <= c0) {
            std::fill(dst, dst + wp * lanes, 0.f);
            continue;
          }
          std::fill(dst, dst + (c0 + left) * lanes, 0.f);
          std::fill(dst + (c1 + left) * lanes, dst + wp * lanes, 0.f);
          float* row = dst + (c0 + left) * lanes;
          if (in.blocked || !blocked) {  // same layout: a copy
            const float* src = in.at(img, blocked ? pl : 0, ih, c0) + (blocked ? 0 : pl * hw);
            std::copy(src, src + (c1 - c0) * lanes, row);
          } else {  // NCHW into blocked: 16 channels gathered per pixel
            gather_pixels(in.data + (img * in.c + pl * kLanes) * hw + ih * in.w + c0, in.lanes(pl),
                          hw, c1 - c0, row);
          }
        }
      }
    });
    return out;
  }

  TileArgs tile_args(const Geometry& g, const Plane& in) const {
    return {in,
            weights_.get(),
            bias_.get(),
            g.kernel[1],
            g.kernel[2],
            g.stride[1],
            g.stride[2],
            g.dilation[1],
            g.dilation[2],
            c_in_ * g.kernel[1] * g.kernel[2] * kLanes};
  }

  // Tasks of (image, group of up to 4 output blocks, band of output pixels). A task runs its
  // tiles over the depth a chunk at a time (chunk_channels: the whole depth unless the group's
  // weights pass 512 KB), the sums kept in a scratch buffer between chunks. Before, a task was
  // one output row, a tile ran its kernel offsets then 16-channel blocks (loops of 16 steps or
  // fewer), and a 7x7 row was a 6- and a 1-pixel tile: ResNet-50 ran 23-25 ms blocked against
  // 20 in NCHW.
  void run_direct(KernelContext& ctx, const Geometry& g, const Plane& in, const Epilogue& e,
                  int64_t n) const {
    const TileArgs a = tile_args(g, in);
    const int64_t out_blocks = blocks(e.y.c), rows = e.y.h, cols = e.y.w;
    const int64_t group = std::min<int64_t>(kMaxBlocks, out_blocks);
    const int64_t groups = (out_blocks + group - 1) / group;
    const int64_t tile = max_pixels(static_cast<int>(group));
    const int64_t taps = a.kh * a.kw, c_in = in.c;
    // Each step's input offset from a window's start, in the weights' order: chunk by chunk,
    // kernel offset, then channel (the same for every task).
    auto* steps = static_cast<int64_t*>(
        thread_scratch_bytes(9, static_cast<size_t>(taps * c_in) * sizeof(int64_t)));
    {
      const int64_t col = in.blocked ? kLanes : 1, row = in.w * col;
      const int64_t lane = in.blocked ? 1 : in.h * in.w, block = kLanes * in.h * in.w;
      int64_t* s = steps;
      for (int64_t c0 = 0; c0 < c_in; c0 += chunk_c_)
        for (int64_t ky = 0; ky < a.kh; ++ky)
          for (int64_t kx = 0; kx < a.kw; ++kx)
            for (int64_t c = c0; c < std::min(c_in, c0 + chunk_c_); ++c)
              *s++ = ky * a.dh * row + kx * a.dw * col + c / kLanes * block + c % kLanes * lane;
    }
    // Bands of about kBandPixels: whole rows, or a run of columns of one row (a 1x1 conv over a
    // whole map is one row); split further while there are fewer than four tasks a thread.
    constexpr int64_t kBandPixels = 192;
    const int64_t want = 4 * ctx.pool.threads();
    int64_t band_rows = std::clamp<int64_t>(kBandPixels / cols, 1, rows);
    int64_t col_parts = cols > kBandPixels ? (cols + kBandPixels - 1) / kBandPixels : 1;
    auto tasks_of = [&] { return n * groups * ((rows + band_rows - 1) / band_rows) * col_parts; };
    while (tasks_of() < want && band_rows > 1) band_rows = (band_rows + 1) / 2;
    const int64_t col_tiles = (cols + tile - 1) / tile;
    if (tasks_of() < want)
      col_parts =
          std::min(col_tiles, (want + tasks_of() / col_parts - 1) / (tasks_of() / col_parts));
    const int64_t part_cols = (col_tiles + col_parts - 1) / col_parts * tile;
    col_parts = (cols + part_cols - 1) / part_cols;
    const int64_t bands = (rows + band_rows - 1) / band_rows;
    const int64_t col = in.blocked ? kLanes : 1;
    ctx.pool.for_each_task(n * groups * bands * col_parts, [&](int64_t t) {
      const int64_t part = t % col_parts, band = t / col_parts % bands,
                    grp = t / col_parts / bands % groups, img = t / col_parts / bands / groups;
      const int64_t ob0 = grp * group, ob = std::min(group, out_blocks - ob0);
      const int64_t most = max_pixels(static_cast<int>(ob));
      const int64_t y0 = band * band_rows, y1 = std::min(rows, y0 + band_rows);
      const int64_t x0 = part * part_cols, x1 = std::min(cols, x0 + part_cols);
      const int64_t width = x1 - x0, acc_block = (y1 - y0) * width * kLanes;
      const int64_t pixels = (y1 - y0) * width;
      const bool chunked = c_in > chunk_c_;
      float* acc = chunked ? thread_scratch(2, ob * acc_block) : nullptr;
      // Where each pixel's window starts in the input and where it goes in its output plane:
      // tiles run across the band's rows.
      auto* off = static_cast<int64_t*>(
          thread_scratch_bytes(5, 2 * static_cast<size_t>(pixels) * sizeof(int64_t)));
      int64_t* pix = off + pixels;
      for (int64_t q = 0; q < pixels; ++q) {
        const int64_t y = y0 + q / width, x = x0 + q % width;
        off[q] = y * g.stride[1] * in.w * col + x * g.stride[2] * col;
        pix[q] = y * cols + x;
      }
      // Tiles of nearly equal size (49 pixels: 4 of 6 and 5 of 5, not 8 of 6 and 1 of 1).
      const int64_t count = (pixels + most - 1) / most, small = pixels / count;
      const int64_t large = pixels % count;  // tiles of small + 1 pixels, first
      const DirectTile* table = kDirectTiles[static_cast<size_t>(ob - 1)].data();
      const float* wg = a.w + ob0 * a.block_weights;
      for (int64_t c0 = 0; c0 < c_in; c0 += chunk_c_) {
        const int64_t c1 = std::min(c_in, c0 + chunk_c_), depth = (c1 - c0) * taps;
        for (int64_t i = 0, q = 0; i < count; ++i) {
          const int64_t np = small + (i < large ? 1 : 0);
          table[np - 1](a, e, img, ob0, off + q, pix + q, steps + c0 * taps,
                        wg + c0 * taps * ob * kLanes, depth, acc ? acc + q * kLanes : nullptr,
                        acc_block, c0 == 0, c1 == c_in);
          q += np;
        }
      }
    });
  }

  void run_depthwise(KernelContext& ctx, const Geometry& g, const Plane& in, const Epilogue& e,
                     int64_t n) const {
    const TileArgs a = tile_args(g, in);
    const int64_t cb = blocks(in.c), rows = e.y.h, cols = e.y.w;
    ctx.pool.parallel_for(n * cb * rows, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t y = t % rows, b = t / rows % cb, img = t / rows / cb;
        for (int64_t x = 0; x < cols; x += kMaxPixels)
          kDepthwiseTiles[static_cast<size_t>(std::min<int64_t>(kMaxPixels, cols - x) - 1)](
              a, e, img, b, y, x, 0, g.kernel[1], 0, g.kernel[2]);
      }
    });
  }

  bool in_blocked_, out_blocked_, residual_blocked_;
  bool depthwise_ = false;
  int64_t c_in_ = 0;
  int64_t chunk_c_ = 0;  // direct: input channels per chunk of the depth (chunk_channels)
  std::vector<int64_t> w_shape_;
  // 64-byte aligned, so that a tile's weight vectors are whole cache lines.
  std::shared_ptr<float[]> weights_, bias_;
  ShapeMemo<Geometry> memo_;
};

}  // namespace

namespace blocked_detail {

std::vector<int64_t> checked_shapes(const KernelContext& ctx, const Tensor& x, bool in_blocked,
                                    int64_t c_in, int64_t c_out, int64_t lanes) {
  std::vector<int64_t> x_shape = x.shape();
  const int64_t cb = (c_in + lanes - 1) / lanes;
  if (in_blocked) {
    if (x.rank() != 5 || x.dim(1) != cb || x.dim(4) != lanes)
      ctx.node.fail("blocked input is " + to_string(x.shape()) + "; expected [N, " +
                        std::to_string(cb) + ", H, W, " + std::to_string(lanes) + "]",
                    ErrorCode::Runtime);
    x_shape = {x.dim(0), c_in, x.dim(2), x.dim(3)};
  } else if (x.rank() != 4 || x.dim(1) != c_in) {
    ctx.node.fail(
        "input is " + to_string(x.shape()) + "; expected [N, " + std::to_string(c_in) + ", H, W]",
        ErrorCode::Runtime);
  }
  const std::vector<int64_t>& y_shape = ctx.output_shape(0);
  if (y_shape.size() != 4 || y_shape[0] != x_shape[0] || y_shape[1] != c_out)
    ctx.node.fail(
        "output shape " + to_string(y_shape) + " does not fit the input " + to_string(x_shape),
        ErrorCode::Runtime);
  return x_shape;
}

const float* checked_residual(const KernelContext& ctx, bool blocked, int64_t lanes) {
  const Tensor* r = ctx.residual;
  if (!r) return nullptr;
  const std::vector<int64_t>& y = ctx.output_shape(0);
  const std::vector<int64_t> want =
      blocked ? std::vector<int64_t>{y[0], (y[1] + lanes - 1) / lanes, y[2], y[3], lanes} : y;
  if (r->dtype() != DType::Float32 || r->shape() != want)
    ctx.node.fail("fused residual is " + std::string(dtype_name(r->dtype())) + " " +
                      to_string(r->shape()) + "; expected float32 " + to_string(want),
                  ErrorCode::Runtime);
  return r->data<float>();
}

bool reads_padding(const Geometry& g) {
  for (int d = 1; d < 3; ++d)
    if (g.pad[d] > 0 ||
        (g.out[d] - 1) * g.stride[d] + (g.kernel[d] - 1) * g.dilation[d] - g.pad[d] >= g.in[d])
      return true;
  return false;
}

}  // namespace blocked_detail

int64_t blocked_lanes() {
  return has_avx512f() ? kLanes : 8;
}

std::string layout_description() {
  return blocked_by_default()
             ? "auto: blocked, 8 channels a vector, between dense convs (layout=nchw turns it off)"
             : "auto: nchw (layout=blocked: 16 channels a vector, measured no faster here)";
}

namespace {
// The share of a conv's (output pixel, kernel tap) pairs that read the input, not padding.
double inside_fraction(const Geometry& g) {
  double f = 1;
  for (int d = 1; d < 3; ++d) {
    int64_t inside = 0;
    for (int64_t k = 0; k < g.kernel[d]; ++k) {
      const auto [lo, hi] =
          valid_range(g.out[d], g.in[d], g.stride[d], k * g.dilation[d] - g.pad[d]);
      inside += hi - lo;
    }
    f *= static_cast<double>(inside) /
         static_cast<double>(std::max<int64_t>(1, g.kernel[d] * g.out[d]));
  }
  return f;
}
}  // namespace

bool blocked_conv_capable(const NodeSignature& sig, const Activation& activation) {
  // The 16-lane kernels apply the activation in registers (act16's kinds); the 8-lane ones
  // (conv_blocked_avx2.cpp) in a pass over each finished row, any kind.
  if (sig.node.op_type != "Conv" || !sig.node.domain.empty() ||
      (has_avx512f() && !has_act16(activation.kind)))
    return false;
  if (sig.inputs.empty() || sig.inputs[0].dtype != DType::Float32 || !sig.inputs[0].has_shape ||
      sig.inputs[0].dims.size() != 4 || sig.inputs[0].dims[1] <= 0)
    return false;
  if (sig.constants.size() < 2 || !sig.constants[1]) return false;
  const Tensor& w = *sig.constants[1];
  if (w.dtype() != DType::Float32 || w.rank() != 4 || w.numel() == 0) return false;
  if (sig.inputs.size() > 2 && !sig.node.inputs[2].empty() &&
      (!sig.constants[2] || sig.constants[2]->dtype() != DType::Float32 ||
       sig.constants[2]->numel() != w.dim(0)))
    return false;
  const int64_t c_in = sig.inputs[0].dims[1], group = sig.node.attr_int("group", 1);
  // Dense convs whose windows mostly read padding keep the NCHW path, which runs each tap over
  // the outputs it reaches only: DeepLabV3's atrous 3x3 convs on a 14x14 map (dilations 12, 24
  // and 36) read the input in under a fifth of their taps and took 6.2-13.2 ms blocked against
  // 0.8-2.0 there.
  if (group == 1 && !sig.outputs.empty() && sig.inputs[0].is_static() &&
      sig.outputs[0].is_static() && sig.outputs[0].dims.size() == 4) {
    const Geometry g = conv_geometry(sig.node, sig.inputs[0].dims, w.shape(), sig.outputs[0].dims);
    if (inside_fraction(g) < 0.5) return false;
  }
  // 8 lanes: dense convs (of fewer than 8 input channels with the input read NCHW,
  // blocked_conv_reads_blocked), not on maps of a few pixels: the squeeze-excitation convs on
  // 1x1 maps that follow each other in EfficientNet took 36 us blocked against 19 in NCHW, the
  // edges' transposes and the threads' hand-offs for a product of a few microseconds.
  if (!has_avx512f()) {
    const bool tiny = !sig.outputs.empty() && sig.outputs[0].has_shape &&
                      sig.outputs[0].dims.size() == 4 && sig.outputs[0].dims[2] >= 0 &&
                      sig.outputs[0].dims[3] >= 0 &&
                      sig.outputs[0].dims[2] * sig.outputs[0].dims[3] < 16;
    if (group == 1) return w.dim(1) == c_in && !tiny;
    // Depthwise: the small-plane kernel of the NCHW path without its transposes, where it
    // takes the (static) geometry. (A first 8-lane depthwise kernel of its own, tiled like the
    // dense one, made MobileNetV3 1.23 -> 1.34x onnxruntime's latency.)
    if (group != c_in || w.dim(0) != c_in || w.dim(1) != 1 || tiny || sig.outputs.empty() ||
        !sig.inputs[0].is_static() || !sig.outputs[0].is_static() ||
        sig.outputs[0].dims.size() != 4)
      return false;
    const Geometry g = conv_geometry(sig.node, sig.inputs[0].dims, w.shape(), sig.outputs[0].dims);
    return depthwise_blocked8_fits(depthwise_geometry(g));
  }
  if (group == 1) return w.dim(1) == c_in;
  return group == c_in && w.dim(0) == c_in && w.dim(1) == 1;  // depthwise, multiplier 1
}

bool blocked_conv_reads_blocked(const NodeSignature& sig) {
  return has_avx512f() || sig.node.attr_int("group", 1) != 1 || sig.inputs.empty() ||
         !sig.inputs[0].has_shape || sig.inputs[0].dims.size() != 4 || sig.inputs[0].dims[1] >= 8;
}

std::unique_ptr<Kernel> make_blocked_conv(const NodeSignature& sig, bool in_blocked,
                                          bool out_blocked, bool residual_blocked) {
  if (!has_avx512f()) return make_blocked_conv8(sig, in_blocked, out_blocked, residual_blocked);
  return std::make_unique<BlockedConvKernel>(sig, in_blocked, out_blocked, residual_blocked);
}

void reorder_to_blocked(const float* x, int64_t c, int64_t hw, float* y) {
  if (has_avx512f()) return reorder_in(x, c, hw, y);
  const int64_t lanes = blocked_lanes();
  for (int64_t b = 0; b < (c + lanes - 1) / lanes; ++b)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t l = 0; l < lanes; ++l)
        y[(b * hw + p) * lanes + l] = b * lanes + l < c ? x[(b * lanes + l) * hw + p] : 0.f;
}

void reorder_from_blocked(const float* x, int64_t c, int64_t hw, float* y) {
  if (has_avx512f()) return reorder_out(x, c, hw, y);
  const int64_t lanes = blocked_lanes();
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t p = 0; p < hw; ++p)
      y[ch * hw + p] = x[((ch / lanes) * hw + p) * lanes + ch % lanes];
}

}  // namespace quilt::cpu
