#include "backends/cpu/kernels/conv_few_channels.hpp"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <new>
#include <utility>

#include "backends/cpu/avx512.hpp"
#include "backends/cpu/gcc12_avx512.hpp"

namespace quilt::cpu {
namespace {

constexpr int64_t kLanes = 16;
constexpr int64_t kRows = 64;   // output channels per tile: four vectors
constexpr int64_t kPixels = 6;  // output pixels per tile: 24 accumulators at four vectors
constexpr int64_t kMaxDepth = 64;

// out[j][0, 16 NV) = bias + sum over the depth of w[t][:] * px[j][offsets[t]], for j < P, then
// the activation (act16's kinds; the others are applied by the caller).
template <int NV, int P>
__attribute__((target("avx512f"))) void few_tile(int64_t depth, const float* w,
                                                 const int32_t* offsets, const float* const* px,
                                                 const float* bias, const Activation& act,
                                                 float* out) {
  __m512 acc[P][NV];
#pragma GCC unroll 6
  for (int j = 0; j < P; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[j][v] = _mm512_loadu_ps(bias + v * kLanes);
  const float* p[P];
#pragma GCC unroll 6
  for (int j = 0; j < P; ++j) p[j] = px[j];
  for (int64_t t = 0; t < depth; ++t) {
    __m512 wv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) wv[v] = _mm512_load_ps(w + t * kRows + v * kLanes);
    const int32_t o = offsets[t];
#pragma GCC unroll 6
    for (int j = 0; j < P; ++j) {
      const __m512 b = _mm512_set1_ps(p[j][o]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[j][v] = _mm512_fmadd_ps(wv[v], b, acc[j][v]);
    }
  }
  const __m512 alpha = _mm512_set1_ps(act.alpha), beta = _mm512_set1_ps(act.beta);
  const bool in_tile = !act.none() && has_act16(act.kind);
#pragma GCC unroll 6
  for (int j = 0; j < P; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      _mm512_store_ps(out + j * kRows + v * kLanes,
                      in_tile ? act16(act.kind, acc[j][v], alpha, beta) : acc[j][v]);
}

using TileFn = void (*)(int64_t, const float*, const int32_t*, const float* const*, const float*,
                        const Activation&, float*);

template <int NV, int... P>
constexpr std::array<TileFn, kPixels> tiles_of(std::integer_sequence<int, P...>) {
  return {few_tile<NV, P + 1>...};
}
constexpr std::array<std::array<TileFn, kPixels>, 4> kTiles = {
    tiles_of<1>(std::make_integer_sequence<int, kPixels>{}),
    tiles_of<2>(std::make_integer_sequence<int, kPixels>{}),
    tiles_of<3>(std::make_integer_sequence<int, kPixels>{}),
    tiles_of<4>(std::make_integer_sequence<int, kPixels>{})};

// The zero-padded copy of one image's group: cg planes of rows x cols covering every window.
struct Padded {
  int64_t rows, cols;
  int64_t plane() const { return rows * cols; }
};

Padded padded_of(const Geometry& g) {
  return {(g.out[1] - 1) * g.stride[1] + (g.kernel[1] - 1) * g.dilation[1] + 1,
          (g.out[2] - 1) * g.stride[2] + (g.kernel[2] - 1) * g.dilation[2] + 1};
}

void fill_padded(const Geometry& g, const Padded& pd, const float* x, int64_t cg, float* dst) {
  const int64_t ivol = g.in[1] * g.in[2];
  // Columns [c0, c1) of a padded row hold input columns [c0 - pad, c1 - pad).
  const int64_t c0 = std::clamp<int64_t>(g.pad[2], 0, pd.cols);
  const int64_t c1 = std::clamp<int64_t>(g.pad[2] + g.in[2], c0, pd.cols);
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t r = 0; r < pd.rows; ++r) {
      float* row = dst + c * pd.plane() + r * pd.cols;
      const int64_t ih = r - g.pad[1];
      if (ih < 0 || ih >= g.in[1] || c0 == c1) {
        std::fill(row, row + pd.cols, 0.f);
        continue;
      }
      const float* src = x + c * ivol + ih * g.in[2] + (c0 - g.pad[2]);
      std::fill(row, row + c0, 0.f);
      std::copy(src, src + (c1 - c0), row + c0);
      std::fill(row + c1, row + pd.cols, 0.f);
    }
}

QUILT_GCC12_AVX512_BEGIN  // backends/cpu/gcc12_avx512.hpp
// y[i][j] (row stride ldy) = buf[j][i] for pixels j < nq (<= 16) and channels i < mr (<= 64):
// 16 x 16 blocks transposed in registers (a scalar copy took a third of the conv's time).
__attribute__((target("avx512f"))) void transpose_out(const float* buf, int64_t nq, int64_t mr,
                                                      float* y, int64_t ldy) {
  const __mmask16 store = static_cast<__mmask16>(nq >= kLanes ? 0xffff : (1u << nq) - 1);
  for (int64_t v = 0; v * kLanes < mr; ++v) {
    __m512 r[kLanes];
    for (int64_t j = 0; j < kLanes; ++j)
      r[j] = j < nq ? _mm512_load_ps(buf + j * kRows + v * kLanes) : _mm512_setzero_ps();
    transpose16x16(r);
    const int64_t rows = std::min(kLanes, mr - v * kLanes);
    for (int64_t i = 0; i < rows; ++i)
      _mm512_mask_storeu_ps(y + (v * kLanes + i) * ldy, store, r[i]);
  }
}
QUILT_GCC12_AVX512_END

}  // namespace

bool FewChannelConv::applies(int64_t cg, int64_t kvol, int64_t mg, int64_t pixels, bool strided) {
  // Pointwise and shallow-window convs keep the packed GEMM, which reads their input planes in
  // place with no transpose (kws's 64 -> 64 1x1 convs: 17.8 us here, 10.6 there); so do
  // stride-1 convs, whose shifted planes are barely wider than the output (a 3 -> 64 3x3 conv
  // on 64x64: 0.200 ms here, 0.181 there), and fewer than 32 output channels, which leave
  // lanes idle or give each broadcast too few multiply-adds (mnist's 1 -> 8 5x5: 7.5 us here,
  // 6.2 there). At 2 threads, under load.
  return has_avx512f() && strided && cg <= 4 && kvol >= 4 && cg * kvol <= kMaxDepth && mg >= 32 &&
         pixels > 0 && pixels <= 4096;
}

bool FewChannelConv::takes(const Geometry& g) const {
  // Offsets into the padded planes are 32-bit; 2-D and 1-D only.
  const Padded pd = padded_of(g);
  return g.in[0] == 1 && g.out[0] == 1 && g.kernel[0] == 1 && g.kernel[1] * g.kernel[2] == kvol_ &&
         g.out[1] * g.out[2] <= 4096 &&
         static_cast<double>(pd.plane()) * static_cast<double>(cg_) < double{1 << 30};
}

FewChannelConv::FewChannelConv(const float* w, int64_t c_out, int64_t group, int64_t cg,
                               int64_t kvol)
    : c_out_(c_out), group_(group), cg_(cg), kvol_(kvol), mg_(c_out / group) {
  blocks_ = (mg_ + kRows - 1) / kRows;
  const int64_t depth = cg * kvol;
  const auto count = static_cast<size_t>(std::max<int64_t>(group * blocks_ * depth * kRows, 1));
  float* p = static_cast<float*>(std::aligned_alloc(64, count * sizeof(float)));
  if (!p) throw std::bad_alloc();
  packed_ = std::shared_ptr<float[]>(p, [](float* q) { std::free(q); });
  for (int64_t grp = 0; grp < group; ++grp)
    for (int64_t blk = 0; blk < blocks_; ++blk)
      for (int64_t t = 0; t < depth; ++t)
        for (int64_t i = 0; i < kRows; ++i) {
          const int64_t m = blk * kRows + i;
          p[((grp * blocks_ + blk) * depth + t) * kRows + i] =
              m < mg_ ? w[(grp * mg_ + m) * depth + t] : 0.f;
        }
}

void FewChannelConv::run(const Geometry& g, int64_t batch, const float* x, const float* bias,
                         float* y, const Activation& act, const ThreadPool& pool) const {
  const int64_t depth = cg_ * kvol_, ovol = g.out[1] * g.out[2], ivol = g.in[1] * g.in[2];
  const Padded pd = padded_of(g);
  // Each tap's offset in the padded planes from a pixel's window corner.
  int32_t offsets[kMaxDepth];
  for (int64_t c = 0; c < cg_; ++c)
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh)
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw)
        offsets[(c * g.kernel[1] + kh) * g.kernel[2] + kw] = static_cast<int32_t>(
            c * pd.plane() + kh * g.dilation[1] * pd.cols + kw * g.dilation[2]);
  const bool act_after = !act.none() && !has_act16(act.kind);
  // Pixels [q0, q1) of image n, group grp, from its padded copy xpad: 16 at a time, each block
  // of channels computed into buf (pixel-major) and transposed into y's channel rows.
  auto pixels = [&](int64_t n, int64_t grp, const float* xpad, int64_t q0, int64_t q1) {
    float* buf = thread_scratch(1, kLanes * kRows + kRows * blocks_);
    float* block_bias = buf + kLanes * kRows;
    for (int64_t blk = 0; blk < blocks_; ++blk)
      for (int64_t i = 0; i < kRows; ++i) {
        const int64_t m = blk * kRows + i;
        block_bias[blk * kRows + i] = bias && m < mg_ ? bias[grp * mg_ + m] : 0.f;
      }
    float* yg = y + (n * c_out_ + grp * mg_) * ovol;
    int64_t oh = q0 / g.out[2], ow = q0 % g.out[2];
    for (int64_t q = q0; q < q1; q += kLanes) {
      const int64_t nq = std::min(kLanes, q1 - q);
      const float* px[kLanes];
      for (int64_t j = 0; j < nq; ++j) {
        px[j] = xpad + oh * g.stride[1] * pd.cols + ow * g.stride[2];
        if (++ow == g.out[2]) ow = 0, ++oh;
      }
      for (int64_t blk = 0; blk < blocks_; ++blk) {
        const int64_t m0 = blk * kRows, mr = std::min(kRows, mg_ - m0);
        const int nv = static_cast<int>((mr + kLanes - 1) / kLanes);
        const float* wb = packed_.get() + (grp * blocks_ + blk) * depth * kRows;
        for (int64_t j = 0; j < nq; j += kPixels) {
          const int64_t np = std::min(kPixels, nq - j);
          kTiles[static_cast<size_t>(nv - 1)][static_cast<size_t>(np - 1)](
              depth, wb, offsets, px + j, block_bias + m0, act, buf + j * kRows);
        }
        transpose_out(buf, nq, mr, yg + m0 * ovol + q, ovol);
      }
    }
    if (act_after)
      for (int64_t m = 0; m < mg_; ++m) act.apply(yg + m * ovol + q0, q1 - q0);
  };
  const int64_t units = batch * group_;
  const int64_t macs = c_out_ / group_ * ovol * depth;
  const int64_t pad_floats = cg_ * pd.plane();
  // Many images (a batch of small maps): each thread pads and computes whole images.
  if (units > 1 && pool.threads() > 1) {
    pool.parallel_for(units, std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(macs, 1)),
                      [&](int64_t u0, int64_t u1) {
                        float* xpad = thread_scratch(0, pad_floats);
                        for (int64_t u = u0; u < u1; ++u) {
                          fill_padded(g, pd, x + u * cg_ * ivol, cg_, xpad);
                          pixels(u / group_, u % group_, xpad, 0, ovol);
                        }
                      });
    return;
  }
  // One image at a time, its pixels split when the product is large enough to pay for handing
  // a share to another thread (gemm_packed's rule, ThreadPool::split_work).
  float* xpad = thread_scratch(0, pad_floats);
  const int64_t tile_macs = kPixels * mg_ * depth;
  const int64_t grain =
      std::max<int64_t>(kPixels, pool.split_work() / std::max<int64_t>(tile_macs, 1) * kPixels);
  for (int64_t u = 0; u < units; ++u) {
    const int64_t n = u / group_, grp = u % group_;
    fill_padded(g, pd, x + u * cg_ * ivol, cg_, xpad);
    pool.parallel_for(ovol, grain, [&](int64_t q0, int64_t q1) { pixels(n, grp, xpad, q0, q1); });
  }
}

}  // namespace quilt::cpu
