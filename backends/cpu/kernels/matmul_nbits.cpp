// CPU kernel of com.microsoft MatMulNBits (core/ops/matmul_nbits.hpp): weight-only 4- and 8-bit
// quantized MatMul, as LLM quantization tools write it.
//
// B, scales and zero points are constants in every model those tools write; the kernel keeps the
// codes as they are. A product with a few rows of A (kGemvRows: decoding one token at a time)
// reads the 4-bit codes directly (gemv_4bit), bound by reading B at half a byte per weight. A
// product with more rows runs on Quilt's float32 GEMM (gemm_packed.hpp) over the weights
// dequantized and packed on the first such run, then kept: K * N * 4 more bytes of memory (8x
// the 4-bit weights), paid only by models that run such products. 8-bit codes always take the
// GEMM. Weights that are not constants are read on each run. float16 A, scales and bias run on
// float32 copies (backends/cpu/widen.cpp). The product is computed in float32, except that with
// accuracy_level 4 (the node allows A to be quantized to int8, onnxruntime's CompInt8) the
// few-rows product runs on AVX512-VNNI where the CPU has it (gemv_4bit_int8): each block of A's
// row quantized to int8, vpdpbusd against the codes. As in onnxruntime, float zero points keep
// the product in float32.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cpu/gcc12_avx512.hpp"
#include "backends/cpu/gemm_packed.hpp"
#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/quantization_common.hpp"
#include "backends/cpu/qgemm.hpp"
#include "core/ops/matmul_nbits.hpp"

namespace quilt::cpu {
namespace {

std::string matmul_nbits_support(const NodeSignature& sig) {
  NBitsGeometry g;
  if (std::string err = nbits_geometry(sig.node, g); !err.empty()) return err;
  if (sig.node.has_input(4)) return "g_idx (input 4) is deprecated and not supported";
  for (size_t i : {0, 2, 3, 5}) {
    if (!sig.node.has_input(i) || i >= sig.inputs.size()) continue;
    const DType d = sig.inputs[i].dtype;
    if (d != DType::Float32 && d != DType::Undefined && !(i == 3 && d == DType::UInt8))
      return "input " + std::to_string(i) + " is " + dtype_name(d) +
             "; the CPU kernel supports float32 (float16 through float32)";
  }
  return "";
}

// B's codes, with each block's scale and zero point as floats (zero points unpacked).
struct NBitsWeights {
  const uint8_t* codes = nullptr;  // N x k_blocks x blob bytes (in `held`, or the input's)
  std::vector<uint8_t> held;
  std::vector<float> scales, zeros;  // N x k_blocks
  std::vector<float> zero_scales;    // N x k_blocks: zero point x scale (gemv_4bit_int8)
  bool float_zeros = false;          // zero points given as floats
};

// Reads B, scales and zero_points; fails naming the node when one's type or size does not match
// the attributes. copy: the codes are copied (a kernel keeps them past its creation).
NBitsWeights read_nbits(const Node& node, const NBitsGeometry& g, const Tensor& b,
                        const Tensor& scales, const Tensor* zp, bool copy) {
  const int64_t kb = g.k_blocks();
  auto expect = [&](const Tensor& t, const char* what, DType dtype, int64_t count) {
    if (t.dtype() != dtype || t.numel() != count)
      node.fail(std::string(what) + " is " + dtype_name(t.dtype()) + " " + to_string(t.shape()) +
                    ", expected " + std::to_string(count) + " " + dtype_name(dtype) + " values",
                ErrorCode::InvalidArgument);
  };
  expect(b, "B", DType::UInt8, g.n * kb * g.blob());
  expect(scales, "scales", DType::Float32, g.n * kb);
  const bool packed_zp = zp && zp->dtype() == DType::UInt8;
  if (packed_zp) expect(*zp, "zero_points", DType::UInt8, g.n * g.zp_row_bytes());
  if (zp && !packed_zp) expect(*zp, "zero_points", DType::Float32, g.n * kb);
  NBitsWeights w;
  w.codes = b.data<uint8_t>();
  if (copy) {
    w.held.assign(w.codes, w.codes + b.numel());
    w.codes = w.held.data();
  }
  w.scales.assign(scales.data<float>(), scales.data<float>() + scales.numel());
  w.zeros.assign(static_cast<size_t>(g.n * kb), static_cast<float>(1 << (g.bits - 1)));
  const int mask = (1 << g.bits) - 1;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t blk = 0; blk < kb; ++blk) {
      float& z = w.zeros[static_cast<size_t>(n * kb + blk)];
      if (packed_zp) {
        const int64_t bit = blk * g.bits;  // codes of 4 or 8 bits never straddle bytes
        z = static_cast<float>((zp->data<uint8_t>()[n * g.zp_row_bytes() + bit / 8] >> (bit % 8)) &
                               mask);
      } else if (zp) {
        z = zp->data<float>()[n * kb + blk];
      }
    }
  w.float_zeros = zp && !packed_zp;
  w.zero_scales.resize(w.zeros.size());
  for (size_t p = 0; p < w.zeros.size(); ++p) w.zero_scales[p] = w.zeros[p] * w.scales[p];
  return w;
}

// W^T as N x K float32 rows: W[n][k] = (code - zero point) * scale of k's block.
std::vector<float> dequantize_nbits(const NBitsGeometry& g, const NBitsWeights& w) {
  const int64_t kb = g.k_blocks(), blob = g.blob();
  const int mask = (1 << g.bits) - 1;
  std::vector<float> out(static_cast<size_t>(g.n * g.k));
  for (int64_t p = 0; p < g.n * kb; ++p) {
    const int64_t n = p / kb, k0 = p % kb * g.block, count = std::min(g.block, g.k - k0);
    const uint8_t* codes = w.codes + p * blob;
    const float z = w.zeros[static_cast<size_t>(p)], s = w.scales[static_cast<size_t>(p)];
    float* row = out.data() + n * g.k + k0;
    for (int64_t j = 0; j < count; ++j) {
      const int64_t bit = j * g.bits;
      row[j] = (static_cast<float>((codes[bit / 8] >> (bit % 8)) & mask) - z) * s;
    }
  }
  return out;
}

// y[r][n] = bias[n] + sum_k a[r][k] (code[n][k] - zero) * scale, straight from the 4-bit codes:
// for a few rows of A (a token at a time, as LLM decoding runs) the product is bound by reading
// B, which is 8x smaller than its float32 copy. 16 codes (8 bytes) a step: the bytes widened to
// 8 lanes, their low nibbles the even codes and high nibbles the odd ones, against A's row split
// once into its even and odd elements per 16 (a_split). Each block's sums are scaled in the
// vector; one horizontal sum per output.
void gemv_4bit(const NBitsGeometry& g, const NBitsWeights& w, const float* a, int64_t rows,
               const float* bias, float* y, const ThreadPool& pool) {
  const int64_t kb = g.k_blocks(), blob = g.blob(), k = g.k;
  // a_split[r]: per 16 elements of A's row r, the 8 even ones then the 8 odd ones.
  const int64_t k16 = k / 16 * 16;
  std::vector<float> a_split(static_cast<size_t>(rows * k16));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k16; ++j)
      a_split[static_cast<size_t>(r * k16 + j / 16 * 16 + j % 2 * 8 + j % 16 / 2)] = a[r * k + j];
  const __m256i low4 = _mm256_set1_epi32(0xF);
  pool.parallel_for(g.n, 8, [&](int64_t nb, int64_t ne) {
    for (int64_t n = nb; n < ne; ++n)
      for (int64_t r = 0; r < rows; ++r) {
        const float* ar = a + r * k;
        const float* as = a_split.data() + r * k16;
        __m256 total = _mm256_setzero_ps();
        float tail = 0.f;
        for (int64_t blk = 0; blk < kb; ++blk) {
          const int64_t p = n * kb + blk, k0 = blk * g.block;
          const int64_t count = std::min(g.block, k - k0), full = count / 16 * 16;
          const uint8_t* codes = w.codes + p * blob;
          const float z = w.zeros[static_cast<size_t>(p)], s = w.scales[static_cast<size_t>(p)];
          const __m256 zv = _mm256_set1_ps(z);
          __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
          for (int64_t j = 0; j < full; j += 16) {
            const __m256i bytes = _mm256_cvtepu8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + j / 2)));
            const __m256 qe = _mm256_cvtepi32_ps(_mm256_and_si256(bytes, low4));
            const __m256 qo = _mm256_cvtepi32_ps(_mm256_srli_epi32(bytes, 4));
            even = _mm256_fmadd_ps(_mm256_loadu_ps(as + k0 + j), _mm256_sub_ps(qe, zv), even);
            odd = _mm256_fmadd_ps(_mm256_loadu_ps(as + k0 + j + 8), _mm256_sub_ps(qo, zv), odd);
          }
          total = _mm256_fmadd_ps(_mm256_add_ps(even, odd), _mm256_set1_ps(s), total);
          float rest = 0.f;
          for (int64_t j = full; j < count; ++j)
            rest += ar[k0 + j] * (static_cast<float>((codes[j / 2] >> (j % 2 * 4)) & 0xF) - z);
          tail += rest * s;
        }
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, total);
        y[r * g.n + n] = (bias ? bias[n] : 0.f) + tail +
                         (((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                          ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])));
      }
  });
}

// A's rows quantized to int8 for gemv_4bit_int8, per block of K: scale = max|a| / 127, codes
// round(a / scale) (half to even), zero beyond K. Laid out as the codes are unpacked: per
// `step` (64, or 16 for blocks of 16) elements, the even ones then the odd ones.
struct Int8Rows {
  int64_t step = 64, padded = 0;  // padded: k_blocks * block codes per row, rounded up to step
  std::vector<int8_t> codes;
  std::vector<float> scales, sums;  // rows x k_blocks: the scale, and scale * sum of the codes
};

Int8Rows quantize_rows(const NBitsGeometry& g, const float* a, int64_t rows) {
  const int64_t kb = g.k_blocks();
  Int8Rows q;
  q.step = g.block >= 32 ? 64 : 16;
  q.padded = (kb * g.block + q.step - 1) / q.step * q.step;
  q.codes.assign(static_cast<size_t>(rows * q.padded), 0);
  q.scales.assign(static_cast<size_t>(rows * kb), 0.f);
  q.sums.assign(static_cast<size_t>(rows * kb), 0.f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t blk = 0; blk < kb; ++blk) {
      const int64_t k0 = blk * g.block, count = std::min(g.block, g.k - k0);
      const float* x = a + r * g.k + k0;
      float amax = 0.f;
      for (int64_t j = 0; j < count; ++j) amax = std::max(amax, std::fabs(x[j]));
      const float scale = amax / 127.f, inverse = amax > 0.f ? 127.f / amax : 0.f;
      int8_t* out = q.codes.data() + r * q.padded;
      int32_t sum = 0;
      for (int64_t j = 0; j < count; ++j) {
        const auto v =
            static_cast<int32_t>(std::clamp(std::nearbyint(x[j] * inverse), -127.f, 127.f));
        const int64_t at = k0 + j;  // its place in the layout: by step, the even ones first
        out[(at & ~(q.step - 1)) + (at & 1) * (q.step / 2) + ((at & (q.step - 1)) >> 1)] =
            static_cast<int8_t>(v);
        sum += v;
      }
      q.scales[static_cast<size_t>(r * kb + blk)] = scale;
      q.sums[static_cast<size_t>(r * kb + blk)] = scale * static_cast<float>(sum);
    }
  return q;
}

QUILT_GCC12_AVX512_BEGIN  // backends/cpu/gcc12_avx512.hpp
#define QUILT_NBITS_VNNI __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vnni")))

// Columns n0 .. n0 + C - 1 of row r for gemv_4bit_int8: C columns at once, so that C chains of
// multiply-adds run side by side and A's codes are loaded once for all of them. A step takes
// 64 codes (32 bytes: two blocks of 32, or part of a larger block): their low nibbles (the even
// elements) in the low half of a vector, their high nibbles in the high half, against A's
// elements laid out the same way (Int8Rows); vpdpbusd's int32 lanes 0-3 and 8-11 then hold the
// first block's sums and 4-7 and 12-15 the second's, scaled by a vector of the two blocks'
// scales in that pattern. A last block of 32 that has no pair, and blocks of 16, take 128-bit
// steps.
template <int C>
QUILT_NBITS_VNNI inline void gemv_int8_columns(const NBitsGeometry& g, const NBitsWeights& w,
                                               const Int8Rows& q, int64_t r, int64_t n0,
                                               const float* bias, float* y) {
  const int64_t kb = g.k_blocks(), blob = g.blob();
  const int8_t* qa = q.codes.data() + r * q.padded;
  const float* sa = q.scales.data() + r * kb;
  const float* suma = q.sums.data() + r * kb;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m128i low4x = _mm_set1_epi8(0x0F);
  // Lane pattern of two blocks' scales in a step: block 0 in lanes 0-3 and 8-11.
  const __m512i pair = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);
  __m512 total[C];
  for (int c = 0; c < C; ++c) total[c] = _mm512_setzero_ps();
  const uint8_t* col[C];
  const float* sb[C];
  for (int c = 0; c < C; ++c)
    col[c] = w.codes + (n0 + c) * kb * blob, sb[c] = w.scales.data() + (n0 + c) * kb;
  auto step64 = [&](const uint8_t* const* codes, const __m512i av, __m512i* dot) QUILT_NBITS_VNNI {
    for (int c = 0; c < C; ++c) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes[c]));
      const __m256i lo = _mm256_and_si256(bytes, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
      dot[c] =
          _mm512_dpbusd_epi32(dot[c], _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1), av);
    }
  };
  int64_t blk = 0;
  if (g.block == 32) {
    for (; blk + 2 <= kb; blk += 2) {  // two blocks a step
      const __m512i av = _mm512_loadu_si512(qa + blk * 32);
      const __m512 sa2 = _mm512_permutexvar_ps(
          pair, _mm512_zextps128_ps512(
                    _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(sa + blk)))));
      __m512i dot[C];
      const uint8_t* codes[C];
      for (int c = 0; c < C; ++c) dot[c] = _mm512_setzero_si512(), codes[c] = col[c] + blk * blob;
      step64(codes, av, dot);
      for (int c = 0; c < C; ++c) {
        const __m512 sb2 = _mm512_permutexvar_ps(
            pair, _mm512_zextps128_ps512(
                      _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(sb[c] + blk)))));
        total[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[c]), _mm512_mul_ps(sa2, sb2), total[c]);
      }
    }
  } else if (g.block >= 64) {
    for (; blk < kb; ++blk) {
      __m512i dot[C];
      const uint8_t* codes[C];
      for (int c = 0; c < C; ++c) dot[c] = _mm512_setzero_si512();
      for (int64_t j = 0; j < g.block; j += 64) {
        for (int c = 0; c < C; ++c) codes[c] = col[c] + blk * blob + j / 2;
        step64(codes, _mm512_loadu_si512(qa + blk * g.block + j), dot);
      }
      for (int c = 0; c < C; ++c)
        total[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[c]), _mm512_set1_ps(sa[blk] * sb[c][blk]),
                                   total[c]);
    }
  }
  for (; blk < kb; ++blk) {  // blocks of 16, or the last block of 32 of an odd count
    // 16 codes (8 bytes) a step against A's 16-element layout; for a block of 32 (A laid out by
    // 64, the block in its first half) the codes' 16 bytes against A's bytes 0-15 and 32-47.
    __m128i dot[C];
    for (int c = 0; c < C; ++c) dot[c] = _mm_setzero_si128();
    const int8_t* qb = qa + blk * g.block;
    for (int64_t j = 0; j < g.block; j += 16) {
      const __m128i av =
          g.block == 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(qb))
                        : _mm_unpacklo_epi64(
                              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(qb + j / 2)),
                              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(qb + 32 + j / 2)));
      for (int c = 0; c < C; ++c) {
        const __m128i bytes =
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(col[c] + blk * blob + j / 2));
        const __m128i lo = _mm_and_si128(bytes, low4x);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), low4x);
        dot[c] = _mm_dpbusd_epi32(dot[c], _mm_unpacklo_epi64(lo, hi), av);
      }
    }
    for (int c = 0; c < C; ++c)
      total[c] = _mm512_fmadd_ps(_mm512_zextps128_ps512(_mm_cvtepi32_ps(dot[c])),
                                 _mm512_set1_ps(sa[blk] * sb[c][blk]), total[c]);
  }
  for (int c = 0; c < C; ++c) {
    // The zero points' term: sum over blocks of zero x scale x A's scaled sum, 16 blocks a step.
    const float* zs = w.zero_scales.data() + (n0 + c) * kb;
    __m512 zt = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 16 <= kb; b += 16)
      zt = _mm512_fmadd_ps(_mm512_loadu_ps(zs + b), _mm512_loadu_ps(suma + b), zt);
    const auto tail = static_cast<__mmask16>((1u << (kb - b)) - 1);
    zt = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, zs + b), _mm512_maskz_loadu_ps(tail, suma + b),
                         zt);
    y[r * g.n + n0 + c] =
        (bias ? bias[n0 + c] : 0.f) + _mm512_reduce_add_ps(total[c]) - _mm512_reduce_add_ps(zt);
  }
}

// gemv_4bit with A quantized to int8 (quantize_rows), for accuracy_level 4:
//   y[r][n] = bias[n] + sum_blocks sa sb (sum_k qa[k] code[k] - zero sum_k qa[k])
// The codes (0..15) are the unsigned operand of vpdpbusd, A's int8 codes the signed one: 32
// codes (16 bytes) a step, low nibbles against A's even elements and high nibbles against its
// odd ones; each block's int32 lanes are scaled into float lanes, the zero point's term is one
// multiply-add per block with A's scaled sum. Four columns at a time (gemv_int8_columns).
void gemv_4bit_int8(const NBitsGeometry& g, const NBitsWeights& w, const float* a, int64_t rows,
                    const float* bias, float* y, const ThreadPool& pool) {
  const Int8Rows q = quantize_rows(g, a, rows);
  pool.parallel_for(g.n, 16, [&](int64_t nb, int64_t ne) {
    for (int64_t r = 0; r < rows; ++r) {
      int64_t n = nb;
      for (; n + 4 <= ne; n += 4) gemv_int8_columns<4>(g, w, q, r, n, bias, y);
      for (; n < ne; ++n) gemv_int8_columns<1>(g, w, q, r, n, bias, y);
    }
  });
}

QUILT_GCC12_AVX512_END

// Up to this many rows of A, 4-bit weights are multiplied from their codes (gemv_4bit); more
// rows run on the float32 GEMM over weights dequantized once (the codes' unpacking would be
// repeated per row, and the GEMM's register tiles reuse each weight for 8 rows).
constexpr int64_t kGemvRows = 4;

// QUILT_NBITS_GEMV=1 sends every 4-bit product through gemv_4bit, =0 none (the tests run both
// paths over the same cases); unset: by kGemvRows.
int gemv_forced() {
  static const int forced = [] {
    const char* e = std::getenv("QUILT_NBITS_GEMV");
    return e && *e ? (*e == '1' ? 1 : 0) : -1;
  }();
  return forced;
}

class MatMulNBitsKernel : public Kernel {
 public:
  explicit MatMulNBitsKernel(const NodeSignature& sig)
      : bf16_(sig.bf16), int8_a_(sig.node.attr_int("accuracy_level", 0) == 4) {
    if (std::string err = nbits_geometry(sig.node, g_); !err.empty()) sig.node.fail(err);
    auto constant = [&](size_t i) { return i < sig.constants.size() ? sig.constants[i] : nullptr; };
    const bool has_zp = sig.node.has_input(3);
    if (constant(1) && constant(2) && (!has_zp || constant(3)))
      weights_ = std::make_unique<NBitsWeights>(read_nbits(sig.node, g_, *constant(1), *constant(2),
                                                           has_zp ? constant(3) : nullptr, true));
  }
  bool reads_constant(size_t i) const override { return !(weights_ && i >= 1 && i <= 3); }

  void run(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    if (a.dtype() != DType::Float32 || a.rank() < 1 || a.shape().back() != g_.k)
      ctx.node.fail(std::string("A is ") + dtype_name(a.dtype()) + " " + to_string(a.shape()) +
                        ", expected float32 with last dim K = " + std::to_string(g_.k),
                    ErrorCode::InvalidArgument);
    const float* bias = nullptr;
    if (const Tensor* bt = ctx.optional_input(5)) {
      if (bt->dtype() != DType::Float32 || bt->numel() != g_.n)
        ctx.node.fail("bias is " + std::string(dtype_name(bt->dtype())) + " " +
                          to_string(bt->shape()) + ", expected " + std::to_string(g_.n) +
                          " float32 values",
                      ErrorCode::InvalidArgument);
      bias = bt->data<float>();
    }
    Tensor& y = ctx.output_uninitialized(0);
    if (y.numel() == 0) return;
    const int64_t rows = a.numel() / g_.k;
    std::unique_ptr<NBitsWeights> fed;
    const NBitsWeights* w = weights_.get();
    if (!w) {
      fed = std::make_unique<NBitsWeights>(
          read_nbits(ctx.node, g_, ctx.input(1), ctx.input(2), ctx.optional_input(3), false));
      w = fed.get();
    }
    if (g_.bits == 4 && (gemv_forced() == 1 || (gemv_forced() == -1 && rows <= kGemvRows))) {
      if (int8_a_ && !w->float_zeros && qgemm_isa() == QIsa::Avx512Vnni)
        return gemv_4bit_int8(g_, *w, a.data<float>(), rows, bias, y.data<float>(), ctx.pool);
      return gemv_4bit(g_, *w, a.data<float>(), rows, bias, y.data<float>(), ctx.pool);
    }
    std::unique_ptr<PackedB> per_run;
    const PackedB* packed = nullptr;
    if (weights_) {  // dequantized and packed on the first run that needs it, then kept
      std::call_once(packed_once_, [&] {
        const std::vector<float> wf = dequantize_nbits(g_, *weights_);
        packed_ = std::make_unique<PackedB>(wf.data(), g_.k, g_.n, g_.k, true, bf16_);
      });
      packed = packed_.get();
    } else {
      const std::vector<float> wf = dequantize_nbits(g_, *w);
      per_run = std::make_unique<PackedB>(wf.data(), g_.k, g_.n, g_.k, true);
      packed = per_run.get();
    }
    gemm_packed_b(a.data<float>(), g_.k, false, rows, *packed, y.data<float>(), g_.n, bias,
                  Activation(), ctx.pool);
  }

 private:
  NBitsGeometry g_;
  bool bf16_ = false;
  bool int8_a_ = false;  // accuracy_level 4: A may be quantized to int8 (gemv_4bit_int8)
  std::unique_ptr<NBitsWeights> weights_;  // when B, scales and zero points are constants
  mutable std::once_flag packed_once_;
  mutable std::unique_ptr<PackedB> packed_;
};

}  // namespace

void register_cpu_matmul_nbits(KernelRegistry& r) {
  r.add("MatMulNBits", matmul_nbits_support,
        KernelFactory([](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
          return std::make_unique<MatMulNBitsKernel>(sig);
        }),
        "com.microsoft");
}

}  // namespace quilt::cpu
