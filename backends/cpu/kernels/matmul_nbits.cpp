// CPU kernel of com.microsoft MatMulNBits (core/ops/matmul_nbits.hpp): weight-only 4- and 8-bit
// quantized MatMul, as LLM quantization tools write it.
//
// The weights are dequantized once, when the kernel is created (B, scales and zero points are
// constants in every model those tools write), into float32 and packed for Quilt's GEMM
// (gemm_packed.hpp) like a float MatMul's constant B; a run is then a float32 product with the
// bias in its epilogue. That costs K * N * 4 bytes of memory (8x the 4-bit weights), for a
// product at the float GEMM's speed. Weights that are not constants are dequantized on each
// run. float16 A, scales and bias run on float32 copies (backends/cpu/widen.cpp). The product
// is computed in float32 whatever accuracy_level says.
#include <algorithm>
#include <memory>
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

// W^T as N x K float32 rows: W[n][k] = (q - zero_point) * scale of k's block. Fails naming the
// node when an input's size does not match the attributes.
std::vector<float> dequantize_nbits(const Node& node, const NBitsGeometry& g, const Tensor& b,
                                    const Tensor& scales, const Tensor* zp) {
  const int64_t kb = g.k_blocks(), blob = g.blob();
  auto expect = [&](const Tensor& t, const char* what, DType dtype, int64_t count) {
    if (t.dtype() != dtype || t.numel() != count)
      node.fail(std::string(what) + " is " + dtype_name(t.dtype()) + " " + to_string(t.shape()) +
                    ", expected " + std::to_string(count) + " " + dtype_name(dtype) + " values",
                ErrorCode::InvalidArgument);
  };
  expect(b, "B", DType::UInt8, g.n * kb * blob);
  expect(scales, "scales", DType::Float32, g.n * kb);
  const bool packed_zp = zp && zp->dtype() == DType::UInt8;
  if (zp) expect(*zp, "zero_points", zp->dtype(), packed_zp ? g.n * g.zp_row_bytes() : g.n * kb);
  if (zp && !packed_zp) expect(*zp, "zero_points", DType::Float32, g.n * kb);
  const uint8_t* q = b.data<uint8_t>();
  const float* s = scales.data<float>();
  const int mask = (1 << g.bits) - 1;
  // Code i of a row packed low bits first (bits is 4 or 8: a code never straddles bytes).
  auto code = [&](const uint8_t* row, int64_t i) {
    const int64_t bit = i * g.bits;
    return (row[bit / 8] >> (bit % 8)) & mask;
  };
  std::vector<float> w(static_cast<size_t>(g.n * g.k));
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t blk = 0; blk < kb; ++blk) {
      const int64_t p = n * kb + blk;
      float zero = static_cast<float>(1 << (g.bits - 1));
      if (packed_zp)
        zero = static_cast<float>(code(zp->data<uint8_t>() + n * g.zp_row_bytes(), blk));
      else if (zp)
        zero = zp->data<float>()[p];
      const uint8_t* codes = q + p * blob;
      const int64_t k0 = blk * g.block, count = std::min(g.block, g.k - k0);
      float* out = w.data() + n * g.k + k0;
      for (int64_t j = 0; j < count; ++j)
        out[j] = (static_cast<float>(code(codes, j)) - zero) * s[p];
    }
  }
  return w;
}

class MatMulNBitsKernel : public Kernel {
 public:
  explicit MatMulNBitsKernel(const NodeSignature& sig) {
    if (std::string err = nbits_geometry(sig.node, g_); !err.empty()) sig.node.fail(err);
    auto constant = [&](size_t i) { return i < sig.constants.size() ? sig.constants[i] : nullptr; };
    const bool has_zp = sig.node.has_input(3);
    if (constant(1) && constant(2) && (!has_zp || constant(3))) {
      const std::vector<float> w = dequantize_nbits(sig.node, g_, *constant(1), *constant(2),
                                                    has_zp ? constant(3) : nullptr);
      packed_ = std::make_unique<PackedB>(w.data(), g_.k, g_.n, g_.k, true, sig.bf16);
    }
  }
  bool reads_constant(size_t i) const override { return !(packed_ && i >= 1 && i <= 3); }

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
    std::unique_ptr<PackedB> per_run;
    const PackedB* packed = packed_.get();
    if (!packed) {
      const std::vector<float> w =
          dequantize_nbits(ctx.node, g_, ctx.input(1), ctx.input(2), ctx.optional_input(3));
      per_run = std::make_unique<PackedB>(w.data(), g_.k, g_.n, g_.k, true);
      packed = per_run.get();
    }
    gemm_packed_b(a.data<float>(), g_.k, false, a.numel() / g_.k, *packed, y.data<float>(), g_.n,
                  bias, Activation(), ctx.pool);
  }

 private:
  NBitsGeometry g_;
  std::unique_ptr<PackedB> packed_;
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
