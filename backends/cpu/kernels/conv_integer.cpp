// ConvInteger and QLinearConv on the integer GEMM (backends/cpu/qgemm.hpp): the weights are the
// broadcast rows (int8; uint8 weights shifted by 128), packed once when the kernel is created if
// constant; the input is unfolded (im2col, padding reading x's zero point) and interleaved into
// uint8 panels of 16 output positions x 4 depths (int8 inputs shifted by 128) -- in one pass
// (unfold_panels) for stride 1 or 2 along the width on AVX-512 CPUs. Output rows are
// output channels and columns output positions, so C is the NCHW output itself. QLinearConv adds
// its int32 bias and requantizes in the store: y = saturate(round_half_even(acc * x_scale *
// w_scale[c] / y_scale) + y_zero_point), the multiplier in float32 and the product in double, as
// onnx's reference does.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/gcc12_avx512.hpp"
#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/conv_geometry.hpp"
#include "backends/cpu/kernels/quantization_common.hpp"
#include "backends/cpu/qgemm.hpp"

namespace quilt::cpu {
namespace {

struct Slots {
  size_t x, x_zp, w, w_zp;
};
constexpr Slots kConvInteger{0, 2, 1, 3};
constexpr Slots kQLinearConv{0, 2, 3, 5};

// Four rows of 16 bytes (r) transposed by two rounds of unpacks into a panel's 16 x 4 layout at
// dst, adding each column's sum of the four to colsums when `sums`.
inline void store_quad(const __m128i r[4], uint8_t* dst, int32_t* colsums, bool sums) {
  const __m128i ones8 = _mm_set1_epi8(1), ones16 = _mm_set1_epi16(1);
  const __m128i t0 = _mm_unpacklo_epi8(r[0], r[1]), t1 = _mm_unpackhi_epi8(r[0], r[1]);
  const __m128i t2 = _mm_unpacklo_epi8(r[2], r[3]), t3 = _mm_unpackhi_epi8(r[2], r[3]);
  const __m128i o[4] = {_mm_unpacklo_epi16(t0, t2), _mm_unpackhi_epi16(t0, t2),
                        _mm_unpacklo_epi16(t1, t3), _mm_unpackhi_epi16(t1, t3)};
  for (int v = 0; v < 4; ++v) {
    _mm_store_si128(reinterpret_cast<__m128i*>(dst + v * 16), o[v]);
    if (sums) {
      auto* sp = reinterpret_cast<__m128i*>(colsums + v * 4);
      _mm_store_si128(sp, _mm_add_epi32(_mm_load_si128(sp),
                                        _mm_madd_epi16(_mm_maddubs_epi16(o[v], ones8), ones16)));
    }
  }
}

// Writes k rows of n bytes (row stride ld) into p's panels, each byte xor flip, and p's column
// sums (zeros unless `sums`). Four rows and 16 columns at a time (store_quad). A panel is
// written whole before the next (rows first measured 40 % slower: the panel stores no longer
// stream).
void interleave(const uint8_t* src, int64_t ld, int64_t k, int64_t n, uint8_t flip, bool sums,
                QPanels& p, const ThreadPool& pool) {
  constexpr int64_t kCols = QPanels::kCols;
  const int64_t k4 = p.depth4(), np = (n + kCols - 1) / kCols;
  const __m128i fl = _mm_set1_epi8(static_cast<char>(flip));
  // p.sums() has room for whole panels (a multiple of 16 values).
  uint8_t* const data = p.data();
  int32_t* const colsums = p.sums();
  // Captured by value: the byte stores below may alias anything, so values reached through
  // references would be reloaded after every store.
  pool.parallel_for(
      np, std::max<int64_t>(1, 4096 / std::max<int64_t>(k, 1)), [=](int64_t lo, int64_t hi) {
        std::fill(colsums + lo * kCols, colsums + hi * kCols, 0);
        alignas(16) uint8_t tail[4][16];
        for (int64_t pb = lo; pb < hi; ++pb)
          for (int64_t q = 0; q < k4; ++q) {
            const int64_t j0 = pb * kCols, cols = std::min<int64_t>(kCols, n - j0);
            __m128i r[4];
            for (int b = 0; b < 4; ++b) {
              const int64_t row = q * 4 + b;
              if (row >= k) {
                r[b] = _mm_setzero_si128();  // depths past k: zero, whatever the flip
                continue;
              }
              const uint8_t* s = src + row * ld + j0;
              if (cols == kCols) {
                r[b] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)), fl);
              } else {
                std::memset(tail[b], 0, 16);
                for (int64_t c = 0; c < cols; ++c) tail[b][c] = s[c] ^ flip;
                r[b] = _mm_load_si128(reinterpret_cast<const __m128i*>(tail[b]));
              }
            }
            store_quad(r, data + (pb * k4 + q) * kCols * 4, colsums + j0, sums);
          }
      });
}

QUILT_GCC12_AVX512_BEGIN  // backends/cpu/gcc12_avx512.hpp

// im2col and interleave in one pass, for convolutions of stride 1 or 2 along the width on a CPU
// with AVX512-BW/VL: the panels of output positions [r0 * ow, r1 * ow) (output rows r0..r1 of
// one group's input x, cg channels) are read straight from x's planes. A panel's 16 positions
// are runs along output rows; each run of each depth row is one masked 16-byte load (stride 2:
// 32 bytes, the even ones kept; lanes outside the input keep the padding byte, x's zero point),
// so no unfolded copy is written and read back. Same panels and sums as im2col then interleave.
struct Unfold {
  const Geometry* g;
  const uint8_t* x;  // the group's first channel plane
  int64_t r0, n, k;
  uint8_t pad, flip;
  bool sums;
  uint8_t* data;
  int32_t* colsums;
};

// unfold_panels' panels [lo, hi). Per panel, the 16 positions are split into runs along output
// rows, and for each kernel tap and run the masked load's mask and its offset in a channel plane
// are computed once; the depth rows (channel, tap) then take one masked load per run from their
// channel's plane, with no branch.
template <int kStride>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void unfold_range(const Unfold& u, int64_t lo,
                                                                       int64_t hi) {
  constexpr int64_t kCols = QPanels::kCols;
  const Geometry& g = *u.g;
  const int64_t ow = g.out[2], k4 = (u.k + 3) / 4, kvol = g.kernel_size(), plane = g.in_size();
  std::fill(u.colsums + lo * kCols, u.colsums + hi * kCols, 0);
  const __m128i padv = _mm_set1_epi8(static_cast<char>(u.pad));
  const __m128i fl = _mm_set1_epi8(static_cast<char>(u.flip));
  const __m256i pad32 = _mm256_set1_epi8(static_cast<char>(u.pad));
  // Per tap t and run i: mask[t * kCols + i] and the plane offset of lane 0's (masked) byte.
  // Lane l's byte is byte kStride * l of the load (stride 2: the even bytes of 32).
  std::vector<uint32_t> mask(static_cast<size_t>(kvol * kCols));
  std::vector<int64_t> offset(static_cast<size_t>(kvol * kCols));
  for (int64_t pb = lo; pb < hi; ++pb) {
    const int64_t j0 = pb * kCols;
    const int cols = static_cast<int>(std::min<int64_t>(kCols, u.n - j0));
    int nr = 0;
    for (int lane = 0; lane < cols; ++nr) {
      const int64_t pos = u.r0 * ow + j0 + lane, row = pos / ow, col = pos % ow;
      const int len = static_cast<int>(std::min<int64_t>(cols - lane, ow - col));
      const int64_t id0 = row / g.out[1] * g.stride[0] - g.pad[0];
      const int64_t ih0 = row % g.out[1] * g.stride[1] - g.pad[1];
      for (int64_t t = 0; t < kvol; ++t) {
        const int64_t id = id0 + t / (g.kernel[1] * g.kernel[2]) * g.dilation[0];
        const int64_t ih = ih0 + t / g.kernel[2] % g.kernel[1] * g.dilation[1];
        const int64_t iw = col * kStride - g.pad[2] + t % g.kernel[2] * g.dilation[2];
        // Lanes lane + j, j in [a, e), read input columns iw + kStride * j inside the row.
        const int64_t a = iw >= 0 ? 0 : (-iw + kStride - 1) / kStride;
        const int64_t e = std::min<int64_t>(len, (g.in[2] - iw + kStride - 1) / kStride);
        const bool inside = id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1] && a < e;
        const size_t at = static_cast<size_t>(t * kCols + nr);
        // The lanes outside the row are masked (a masked load does not touch them). Only an
        // inside tap has a range: otherwise e may be negative (a tap right of the row), and so
        // would the shift be (fuzz_run: UBSan, "shift exponent -12 is negative").
        uint64_t range = 0;
        if (inside) {
          const int64_t b0 = kStride * (lane + a), b1 = kStride * (lane + e);
          range = ((uint64_t{1} << b1) - 1) & ~((uint64_t{1} << b0) - 1);
        }
        mask[at] = static_cast<uint32_t>(kStride == 1 ? range : range & 0x55555555u);
        offset[at] = inside ? (id * g.in[1] + ih) * g.in[2] + iw - kStride * lane : 0;
      }
      lane += len;
    }
    const auto colmask = static_cast<__mmask16>((1u << cols) - 1);
    int64_t c = 0, t = 0;  // the depth row's channel and tap
    for (int64_t q = 0; q < k4; ++q) {
      __m128i r[4];
      for (int b = 0; b < 4; ++b) {
        if (q * 4 + b >= u.k) {
          r[b] = _mm_setzero_si128();  // depths past k: zero, whatever the flip
          continue;
        }
        const uintptr_t base = reinterpret_cast<uintptr_t>(u.x + c * plane);
        __m128i v = padv;
        if constexpr (kStride == 1) {
          for (int i = 0; i < nr; ++i) {
            const size_t at = static_cast<size_t>(t * kCols + i);
            v = _mm_mask_loadu_epi8(
                v, static_cast<__mmask16>(mask[at]),
                reinterpret_cast<const void*>(base + static_cast<uintptr_t>(offset[at])));
          }
        } else {
          __m256i w = pad32;
          for (int i = 0; i < nr; ++i) {
            const size_t at = static_cast<size_t>(t * kCols + i);
            w = _mm256_mask_loadu_epi8(
                w, mask[at],
                reinterpret_cast<const void*>(base + static_cast<uintptr_t>(offset[at])));
          }
          v = _mm256_cvtepi16_epi8(w);  // the even bytes
        }
        r[b] = _mm_maskz_mov_epi8(colmask, _mm_xor_si128(v, fl));
        if (++t == kvol) t = 0, ++c;
      }
      store_quad(r, u.data + (pb * k4 + q) * kCols * 4, u.colsums + j0, u.sums);
    }
  }
}

void unfold_panels(const Geometry& g, const uint8_t* x, int64_t r0, int64_t r1, uint8_t pad,
                   uint8_t flip, bool sums, QPanels& p, const ThreadPool& pool) {
  const int64_t n = (r1 - r0) * g.out[2];
  const Unfold u{&g, x, r0, n, p.depth(), pad, flip, sums, p.data(), p.sums()};
  pool.parallel_for((n + QPanels::kCols - 1) / QPanels::kCols,
                    std::max<int64_t>(1, 4096 / std::max<int64_t>(u.k, 1)),
                    [&u](int64_t lo, int64_t hi) {
                      if (u.g->stride[2] == 1)
                        unfold_range<1>(u, lo, hi);
                      else
                        unfold_range<2>(u, lo, hi);
                    });
}

// Where the depthwise taps read along a row, the same for every row and plane: for each block of
// 16 outputs b and kernel column kw, the first input column (lane 0's) and the mask of the
// input bytes inside the row (16 bytes for stride 1; 32, of which the even ones, for stride 2).
struct DepthwiseCols {
  std::vector<int64_t> first;
  std::vector<uint32_t> mask;

  explicit DepthwiseCols(const Geometry& g) {
    const int64_t blocks = (g.out[2] + 15) / 16, sw = g.stride[2], span = 16 * sw;
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
        const int64_t iw = b * 16 * sw - g.pad[2] + kw * g.dilation[2];
        const int64_t lo = std::clamp<int64_t>(-iw, 0, span);
        const int64_t hi = std::clamp<int64_t>(g.in[2] - iw, lo, span);
        first.push_back(iw);
        mask.push_back(
            static_cast<uint32_t>(((uint64_t{1} << hi) - 1) & ~((uint64_t{1} << lo) - 1)));
      }
  }
};

// One depthwise plane on AVX-512, for stride 1 or 2 along the width: acc[o] = sum over the
// window of (x - x_zp) * w[tap] (w already less its zero point), 16 outputs of a row at a time
// in a register. A tap's 16 inputs are one masked load (cols), the lanes outside the input
// reading x_zp, so that they add 0.
template <bool kSigned, int kStride>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void depthwise_plane(
    const Geometry& g, const DepthwiseCols& cols, const uint8_t* xc, int32_t x_zp, const int32_t* w,
    int32_t* acc) {
  const __m512i zp = _mm512_set1_epi32(x_zp);
  const __m128i zp8 = _mm_set1_epi8(static_cast<char>(x_zp));
  const __m256i zp8x32 = _mm256_set1_epi8(static_cast<char>(x_zp));
  const int64_t kw_n = g.kernel[2], ow_n = g.out[2];
  const uint32_t* masks = cols.mask.data();
  const int64_t* firsts = cols.first.data();
  for (int64_t od = 0; od < g.out[0]; ++od)
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      int32_t* out = acc + (od * g.out[1] + oh) * ow_n;
      for (int64_t ow = 0, b = 0; ow < ow_n; ow += 16, ++b) {
        __m512i sum = _mm512_setzero_si512();
        for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
          const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
          if (id < 0 || id >= g.in[0]) continue;
          for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
            const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
            if (ih < 0 || ih >= g.in[1]) continue;
            const uintptr_t row = reinterpret_cast<uintptr_t>(xc + (id * g.in[1] + ih) * g.in[2]);
            const int32_t* wk = w + (kd * g.kernel[1] + kh) * kw_n;
            const uint32_t* mk = masks + b * kw_n;
            const int64_t* fk = firsts + b * kw_n;
            for (int64_t kw = 0; kw < kw_n; ++kw) {
              // Lanes outside the row are masked: the load does not touch them.
              const auto* at = reinterpret_cast<const void*>(row + static_cast<uintptr_t>(fk[kw]));
              __m512i xv;
              if constexpr (kStride == 1) {
                const __m128i v = _mm_mask_loadu_epi8(zp8, static_cast<__mmask16>(mk[kw]), at);
                xv = kSigned ? _mm512_cvtepi8_epi32(v) : _mm512_cvtepu8_epi32(v);
              } else {
                // The even bytes of 32, as 16 int32.
                const __m256i v = _mm256_mask_loadu_epi8(zp8x32, mk[kw], at);
                const __m512i h = kSigned ? _mm512_cvtepi8_epi16(v) : _mm512_cvtepu8_epi16(v);
                xv = kSigned ? _mm512_srai_epi32(_mm512_slli_epi32(h, 16), 16)
                             : _mm512_and_si512(h, _mm512_set1_epi32(0xFFFF));
              }
              sum = _mm512_add_epi32(
                  sum, _mm512_mullo_epi32(_mm512_sub_epi32(xv, zp), _mm512_set1_epi32(wk[kw])));
            }
          }
        }
        const int64_t n = std::min<int64_t>(16, ow_n - ow);
        _mm512_mask_storeu_epi32(out + ow, static_cast<__mmask16>((1u << n) - 1), sum);
      }
    }
}

QUILT_GCC12_AVX512_END

class QConvKernel : public Kernel {
 public:
  QConvKernel(const NodeSignature& sig, bool qlinear)
      : qlinear_(qlinear), s_(qlinear ? kQLinearConv : kConvInteger) {
    const int64_t group = sig.node.attr_int("group", 1);
    const Tensor* w = s_.w < sig.constants.size() ? sig.constants[s_.w] : nullptr;
    if (w && w->rank() >= 3 && group > 0 && w->dim(0) % group == 0 &&
        (w->dtype() == DType::Int8 || w->dtype() == DType::UInt8)) {
      const int64_t depth = w->numel() / w->dim(0);
      weights_ =
          QRows::pack(w->raw_data(), w->dtype() == DType::Int8, w->dim(0), depth, depth, false);
    }
  }

  void run(KernelContext& ctx) const override {
    const Node& node = ctx.node;
    const Tensor& x = ctx.input(s_.x);
    const Tensor& w = ctx.input(s_.w);
    Tensor& y = ctx.output_uninitialized(0);
    if (y.numel() == 0) return;
    if (x.rank() > 5) node.fail("only 1-D, 2-D and 3-D convolutions are supported");
    const int64_t group = node.attr_int("group", 1);
    const int64_t batch = x.dim(0), c_in = x.dim(1), c_out = w.dim(0);
    const int64_t cg = c_in / group, mg = c_out / group;
    const Geometry g = conv_geometry(node, x.shape(), w.shape(), y.shape());
    const int64_t kvol = g.kernel_size(), depth = cg * kvol, pixels = g.out_size();
    if (qlinear_)
      require_one_value(ctx,
                        {{1, "x_scale"}, {2, "x_zero_point"}, {6, "y_scale"}, {7, "y_zero_point"}});
    const std::vector<int32_t> x_zp =
        int8_zero_points(node, ctx.optional_input(s_.x_zp), 1, "x_zero_point", x.dtype());
    const std::vector<int32_t> w_zp =
        int8_zero_points(node, ctx.optional_input(s_.w_zp), c_out, "w_zero_point", w.dtype());
    const bool x_signed = x.dtype() == DType::Int8, w_signed = w.dtype() == DType::Int8;
    std::optional<QRows> own;
    if (!weights_ || weights_->rows() != c_out || weights_->depth() != depth)
      own = QRows::pack(w.raw_data(), w_signed, c_out, depth, depth, false, &ctx.pool);
    const QRows& wr = own ? *own : *weights_;
    std::vector<int32_t> row_off(static_cast<size_t>(c_out));
    for (int64_t m = 0; m < c_out; ++m)
      row_off[static_cast<size_t>(m)] =
          stored_offset(w_zp[w_zp.size() == 1 ? 0 : static_cast<size_t>(m)], w_signed, false);
    const std::vector<int32_t> col_off(static_cast<size_t>(pixels),
                                       stored_offset(x_zp[0], x_signed, true));

    QStore store;
    std::vector<float> mult;
    const size_t esize = qlinear_ ? 1 : 4;
    if (qlinear_) {
      if (ctx.input(4).numel() != 1 && ctx.input(4).numel() != c_out)
        node.fail("w_scale has " + std::to_string(ctx.input(4).numel()) +
                      " values, expected 1 or " + std::to_string(c_out) +
                      " (one per output channel)",
                  ErrorCode::InvalidArgument);
      mult = requant_multipliers(ctx.input(1), ctx.input(4), ctx.input(6), c_out);
      store.kind = y.dtype() == DType::Int8 ? QStore::Kind::Int8 : QStore::Kind::UInt8;
      store.per_row_scale = true;
      store.scale = mult.data();
      store.zero_point = int_values(&ctx.input(7), 1)[0];
      if (const Tensor* b = ctx.optional_input(8)) {
        if (b->dtype() != DType::Int32 || b->numel() != c_out)
          node.fail("B is " + std::string(dtype_name(b->dtype())) + " " + to_string(b->shape()) +
                        ", expected int32 with " + std::to_string(c_out) + " values",
                    ErrorCode::InvalidArgument);
        store.bias = b->data<int32_t>();
        store.per_row_bias = true;
      }
    }
    store.ldc = pixels;

    // Depthwise convs (one input and one output channel per group): a direct loop per
    // channel; the GEMM would see one-row products.
    if (cg == 1 && mg == 1) {
      const auto* wp = static_cast<const uint8_t*>(w.raw_data());
      return depthwise(ctx, g, batch * c_out, c_out, xp_of(x), x_signed, x_zp[0], wp, w_signed,
                       w_zp, store, y, esize);
    }
    // Pointwise convs read their input planes as they are; others unfold them first.
    const bool pointwise =
        kvol == 1 && g.in == g.out && g.stride == Dims3{1, 1, 1} && g.pad == Dims3{0, 0, 0};
    // The column sums only matter to rows with a nonzero offset (weights' zero point after the
    // shift): int8 weights with zero point 0, or uint8 ones with 128, need none.
    const bool sums = std::any_of(row_off.begin(), row_off.end(), [](int32_t o) { return o != 0; });
    // Stride 1 or 2 along the width on an AVX-512 CPU (the VNNI path): unfolded straight into the
    // panels; else im2col, then interleave.
    const bool direct = !pointwise && g.stride[2] <= 2 && qgemm_isa() == QIsa::Avx512Vnni;
    const std::vector<int64_t> taps = all_taps(g);
    const auto* xp = static_cast<const uint8_t*>(x.raw_data());
    const auto pad = static_cast<uint8_t>(x_zp[0]);  // x's zero point, as x's bytes
    const uint8_t flip = x_signed ? 0x80 : 0;
    // Output rows (one (od, oh) pair, g.out[2] positions) per chunk: the chunk's unfolded input
    // (~96 KiB) and panels stay in L2 from im2col through the product, and a chunk is a whole
    // number of 16-position panels where the rows allow.
    const int64_t out_rows = g.out[0] * g.out[1], ow = g.out[2];
    int64_t rows_per = std::max<int64_t>(1, (96 << 10) / std::max<int64_t>(depth * ow, 1));
    const int64_t align = QPanels::kCols / std::gcd(ow, QPanels::kCols);
    rows_per = std::min(out_rows, (rows_per + align - 1) / align * align);
    const int64_t chunks = (out_rows + rows_per - 1) / rows_per;
    static const ThreadPool serial(1);
    for (int64_t nb = 0; nb < batch; ++nb)
      for (int64_t grp = 0; grp < group; ++grp) {
        const uint8_t* xg = xp + (nb * c_in + grp * cg) * g.in_size();
        QStore s = store;
        s.c = static_cast<uint8_t*>(y.raw_data()) + (nb * c_out + grp * mg) * pixels * esize;
        if (qlinear_) s.scale = mult.data() + grp * mg;
        if (s.bias) s.bias += grp * mg;
        const int32_t* offs = row_off.data() + grp * mg;
        if (chunks >= 2 * ctx.pool.threads()) {
          // Chunks of output rows, each unfolded, interleaved and multiplied by one thread.
          ctx.pool.for_each_task(chunks, [&](int64_t t) {
            const int64_t r0 = t * rows_per, r1 = std::min(out_rows, r0 + rows_per);
            const int64_t n = (r1 - r0) * ow;
            QPanels panels(depth, n, true);
            if (pointwise) {
              interleave(xg + r0 * ow, pixels, depth, n, flip, sums, panels, serial);
            } else if (direct) {
              unfold_panels(g, xg, r0, r1, pad, flip, sums, panels, serial);
            } else {
              const std::unique_ptr<uint8_t[]> col(new uint8_t[static_cast<size_t>(depth * n)]);
              im2col(g, taps, xg, cg, r0, r1, col.get(), serial, pad);
              interleave(col.get(), n, depth, n, flip, sums, panels, serial);
            }
            QStore sc = s;
            sc.c = static_cast<uint8_t*>(s.c) + r0 * ow * static_cast<int64_t>(esize);
            qgemm(qgemm_isa(), wr, grp * mg, mg, offs, panels, col_off.data(), sc, serial);
          });
          continue;
        }
        // Few rows (small maps): the whole map unfolded, then one product across the pool.
        QPanels panels(depth, pixels, true);
        if (pointwise) {
          interleave(xg, pixels, depth, pixels, flip, sums, panels, ctx.pool);
        } else if (direct) {
          unfold_panels(g, xg, 0, out_rows, pad, flip, sums, panels, ctx.pool);
        } else {
          // Unset: im2col writes every byte.
          const std::unique_ptr<uint8_t[]> col(new uint8_t[static_cast<size_t>(depth * pixels)]);
          im2col(g, taps, xg, cg, 0, out_rows, col.get(), ctx.pool, pad);
          interleave(col.get(), pixels, depth, pixels, flip, sums, panels, ctx.pool);
        }
        qgemm(qgemm_isa(), wr, grp * mg, mg, offs, panels, col_off.data(), s, ctx.pool);
      }
  }

 private:
  // out[ow] += (x[ow * step] - zp) * w for ow in [lo, hi); step 1 apart so that it vectorises.
  template <class T>
  static void depthwise_row(const T* __restrict x, int64_t step, int64_t lo, int64_t hi, int32_t zp,
                            int32_t w, int32_t* __restrict out) {
    if (step == 1)
      for (int64_t i = lo; i < hi; ++i) out[i] += (int32_t{x[i]} - zp) * w;
    else
      for (int64_t i = lo; i < hi; ++i) out[i] += (int32_t{x[i * step]} - zp) * w;
  }

  static const uint8_t* xp_of(const Tensor& x) { return static_cast<const uint8_t*>(x.raw_data()); }

  // planes = batch * channels planes of x, each convolved with its channel's kernel:
  // acc = sum (x - x_zp) (w - w_zp[c]) (+ bias[c]) over the window (padding contributes 0),
  // then stored as int32 or requantized per `store` (per-channel scale).
  static void depthwise(KernelContext& ctx, const Geometry& g, int64_t planes, int64_t channels,
                        const uint8_t* xp, bool x_signed, int32_t x_zp, const uint8_t* wp,
                        bool w_signed, const std::vector<int32_t>& w_zp, const QStore& store,
                        Tensor& y, size_t esize) {
    const int64_t in_plane = g.in_size(), out_plane = g.out_size(), kvol = g.kernel_size();
    // AVX-512 (the VNNI path) and stride 1 or 2 along the width: depthwise_plane.
    const bool vector = qgemm_isa() == QIsa::Avx512Vnni && (g.stride[2] == 1 || g.stride[2] == 2);
    std::optional<DepthwiseCols> cols;
    if (vector) cols.emplace(g);
    ctx.pool.parallel_for(planes, 1, [&](int64_t lo, int64_t hi) {
      std::vector<int32_t> acc(static_cast<size_t>(out_plane)), wk(static_cast<size_t>(kvol));
      for (int64_t pl = lo; pl < hi; ++pl) {
        const int64_t c = pl % channels;
        const int32_t wz = w_zp[w_zp.size() == 1 ? 0 : static_cast<size_t>(c)];
        const uint8_t* xc = xp + pl * in_plane;
        if (vector) {
          for (int64_t t = 0; t < kvol; ++t) {
            const uint8_t wb = wp[c * kvol + t];
            wk[static_cast<size_t>(t)] =
                (w_signed ? int32_t{static_cast<int8_t>(wb)} : int32_t{wb}) - wz;
          }
          auto plane =
              x_signed ? (g.stride[2] == 1 ? depthwise_plane<true, 1> : depthwise_plane<true, 2>)
                       : (g.stride[2] == 1 ? depthwise_plane<false, 1> : depthwise_plane<false, 2>);
          plane(g, *cols, xc, x_zp, wk.data(), acc.data());
        } else {
          std::fill(acc.begin(), acc.end(), 0);
          for (int64_t kd = 0; kd < g.kernel[0]; ++kd)
            for (int64_t kh = 0; kh < g.kernel[1]; ++kh)
              for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                const int64_t kidx = (kd * g.kernel[1] + kh) * g.kernel[2] + kw;
                const uint8_t wb = wp[c * kvol + kidx];
                const int32_t wv = (w_signed ? int32_t{static_cast<int8_t>(wb)} : int32_t{wb}) - wz;
                if (wv == 0) continue;
                const auto [wlo, whi] = g.w_ranges[static_cast<size_t>(kw)];
                const int64_t off_w = kw * g.dilation[2] - g.pad[2];
                for (int64_t od = 0; od < g.out[0]; ++od) {
                  const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
                  if (id < 0 || id >= g.in[0]) continue;
                  for (int64_t oh = 0; oh < g.out[1]; ++oh) {
                    const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
                    if (ih < 0 || ih >= g.in[1]) continue;
                    const uint8_t* row = xc + (id * g.in[1] + ih) * g.in[2];
                    int32_t* out = acc.data() + (od * g.out[1] + oh) * g.out[2];
                    const int64_t st = g.stride[2];
                    const uint8_t* r = row + off_w;
                    // Stride 1 apart (contiguous, vectorised) and x's signedness as a type.
                    if (x_signed)
                      depthwise_row(reinterpret_cast<const int8_t*>(r), st, wlo, whi, x_zp, wv,
                                    out);
                    else
                      depthwise_row(r, st, wlo, whi, x_zp, wv, out);
                  }
                }
              }
        }
        // Bias, scale and requantization in the store (vectorised), row c of a plane-sized C.
        QStore s = store;
        s.c = static_cast<uint8_t*>(y.raw_data()) + pl * out_plane * static_cast<int64_t>(esize);
        s.ldc = 0;
        qstore_row(qgemm_isa(), s, c, acc.data(), out_plane);
      }
    });
  }

  bool qlinear_;
  Slots s_;
  std::optional<QRows> weights_;
};

std::string conv_integer_support(const NodeSignature& sig) {
  if (std::string why = dtypes_of_input({DType::Int8, DType::UInt8})(sig); !why.empty()) return why;
  if (std::string why = dtypes_of_input({DType::Int8, DType::UInt8}, 1)(sig); !why.empty())
    return why;
  if (sig.inputs[0].has_shape && sig.inputs[0].dims.size() > 5)
    return "only 1-D, 2-D and 3-D convolutions are supported";
  return "";
}

}  // namespace

void register_cpu_conv_integer(KernelRegistry& r) {
  r.add("ConvInteger", conv_integer_support,
        KernelFactory([](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
          return std::make_unique<QConvKernel>(sig, false);
        }));
  r.add("QLinearConv", qlinear_conv_support,
        KernelFactory([](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
          return std::make_unique<QConvKernel>(sig, true);
        }));
}

}  // namespace quilt::cpu
