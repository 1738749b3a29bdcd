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
// float32 copies (backends/cpu/widen.cpp). The product is computed in float32 whatever
// accuracy_level says.
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cpu/gemm_packed.hpp"
#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/quantization_common.hpp"
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
  explicit MatMulNBitsKernel(const NodeSignature& sig) : bf16_(sig.bf16) {
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
    if (g_.bits == 4 && (gemv_forced() == 1 || (gemv_forced() == -1 && rows <= kGemvRows)))
      return gemv_4bit(g_, *w, a.data<float>(), rows, bias, y.data<float>(), ctx.pool);
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
