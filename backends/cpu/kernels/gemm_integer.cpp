// MatMulInteger, QLinearMatMul and onnxruntime's com.microsoft QGemm, MatMulIntegerToFloat and
// DynamicQuantizeMatMul (A quantized to uint8 as DynamicQuantizeLinear does) on the integer GEMM
// (backends/cpu/qgemm.hpp): A's rows are broadcast as uint8 (int8 ones shifted by 128) against B
// in panels as int8 (uint8 ones shifted by 128); the zero points and the shifts are corrected
// exactly in the store. Constant 2-D weights B are packed once, when the kernel is created.
// QLinearMatMul requantizes in the store: y = saturate(round_half_even(acc * a_scale *
// b_scale[j] / y_scale) + y_zero_point), the multiplier computed in the scales' type and the
// product taken in double, as onnx's reference does. The float ops store float(acc) * a_scale *
// b_scale[j] + bias[j].
#include <array>
#include <optional>
#include <string>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/matmul_batch.hpp"
#include "backends/cpu/kernels/quantization_common.hpp"
#include "backends/cpu/qgemm.hpp"

namespace quilt::cpu {
namespace {

// The ops on this kernel and their input slots (absent: npos).
enum class Mode { Integer, QLinear, ToFloat, DynamicToFloat, QGemm };
constexpr size_t kNone = static_cast<size_t>(-1);
struct Slots {
  size_t a, a_zp, b, b_zp, a_scale, b_scale, bias;
};
constexpr Slots slots(Mode mode) {
  switch (mode) {
    case Mode::Integer:  // MatMulInteger(A, B, a_zero_point, b_zero_point)
      return {0, 2, 1, 3, kNone, kNone, kNone};
    case Mode::QLinear:  // QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp)
      return {0, 2, 3, 5, 1, 4, kNone};
    case Mode::ToFloat:  // MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zp, b_zp, bias)
      return {0, 4, 1, 5, 2, 3, 6};
    case Mode::DynamicToFloat:  // DynamicQuantizeMatMul(A, B, b_scale, b_zp, bias)
      return {0, kNone, 1, 3, kNone, 2, 4};
    case Mode::QGemm:  // QGemm(A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp)
      return {0, 2, 3, 5, 1, 4, 6};
  }
  return {};
}

class QMatMulKernel : public Kernel {
 public:
  QMatMulKernel(const NodeSignature& sig, Mode mode)
      : mode_(mode),
        s_(slots(mode)),
        trans_b_(mode == Mode::QGemm && sig.node.attr_int("transB", 0) != 0) {
    const Tensor* b = s_.b < sig.constants.size() ? sig.constants[s_.b] : nullptr;
    if (b && b->rank() == 2 && (b->dtype() == DType::Int8 || b->dtype() == DType::UInt8))
      packed_ =
          QPanels::pack(b->raw_data(), b->dtype() == DType::Int8, trans_b_ ? b->dim(1) : b->dim(0),
                        trans_b_ ? b->dim(0) : b->dim(1), b->dim(1), trans_b_, false);
  }

  void run(KernelContext& ctx) const override {
    const Node& node = ctx.node;
    const Tensor& a = ctx.input(s_.a);
    const Tensor& b = ctx.input(s_.b);
    Tensor& y = ctx.output_uninitialized(0);
    if (y.numel() == 0) return;
    const bool qgemm_op = mode_ == Mode::QGemm;
    if (qgemm_op && node.attr_int("transA", 0) != 0)
      node.fail("transA is not supported", ErrorCode::NotImplemented);
    // Plain variables, not a structured binding: the lambdas below capture them (clang 15, the
    // fuzz build's compiler, cannot capture structured bindings).
    const std::array<int64_t, 3> mkn =
        qgemm_op ? std::array<int64_t, 3>{a.dim(0), a.dim(1), trans_b_ ? b.dim(0) : b.dim(1)}
                 : matmul_dims(a.shape(), b.shape());
    const int64_t m = mkn[0], k = mkn[1], n = mkn[2];
    // QGemm with y_scale requantizes like QLinearMatMul; without, it gives float like
    // MatMulIntegerToFloat.
    const bool qgemm_quantized = qgemm_op && ctx.has_input(7);
    const bool qlinear = mode_ == Mode::QLinear || qgemm_quantized;
    const bool to_float =
        mode_ == Mode::ToFloat || mode_ == Mode::DynamicToFloat || (qgemm_op && !qgemm_quantized);
    if (mode_ == Mode::QLinear)
      require_one_value(ctx,
                        {{1, "a_scale"}, {2, "a_zero_point"}, {6, "y_scale"}, {7, "y_zero_point"}});
    if (mode_ == Mode::ToFloat || qgemm_op) require_one_value(ctx, {{s_.a_scale, "a_scale"}});
    if (qgemm_quantized) require_one_value(ctx, {{7, "y_scale"}});
    // A as int8/uint8: as given, or quantized here (DynamicQuantizeMatMul, uint8).
    const void* a_data = a.raw_data();
    DType a_type = a.dtype();
    std::vector<int32_t> a_zp;
    float a_scale = 1.f;
    std::vector<uint8_t> a_quantized;
    if (mode_ == Mode::DynamicToFloat) {
      if (a.dtype() != DType::Float32)
        node.fail("A is " + std::string(dtype_name(a.dtype())) + ", expected float32");
      a_quantized.resize(static_cast<size_t>(a.numel()));
      const auto [scale, zp] =
          dynamic_quantize_u8(a.data<float>(), a.numel(), a_quantized.data(), ctx.pool);
      a_data = a_quantized.data();
      a_type = DType::UInt8;
      a_zp = {zp};
      a_scale = scale;
    } else {
      a_zp = zero_points(node, ctx.optional_input(s_.a_zp), qlinear || to_float ? 1 : m,
                         "a_zero_point", a.dtype());
      if (mode_ == Mode::ToFloat || qgemm_op) a_scale = load_float(ctx.input(s_.a_scale), 0);
    }
    const std::vector<int32_t> b_zp =
        zero_points(node, ctx.optional_input(s_.b_zp), n, "b_zero_point", b.dtype());
    const bool a_signed = a_type == DType::Int8, b_signed = b.dtype() == DType::Int8;
    // A's rows (all but its last dim; one for a vector), also when k is 0: every product is
    // then empty and y holds what the zero points, scales and bias make of 0 (fuzz_run: a.numel()
    // / k divided by zero for MatMulInteger of two empty vectors). y is not empty here and holds
    // every row of A, so the product cannot overflow.
    int64_t total_rows = 1;
    for (int64_t d = 0; d + 1 < a.rank(); ++d) total_rows *= a.dim(d);
    const QRows rows = QRows::pack(a_data, a_signed, total_rows, k, k, true, &ctx.pool);
    std::vector<int32_t> row_off(static_cast<size_t>(total_rows));
    for (int64_t r = 0; r < total_rows; ++r)
      row_off[static_cast<size_t>(r)] =
          stored_offset(a_zp[a_zp.size() == 1 ? 0 : static_cast<size_t>(r % m)], a_signed, true);
    std::vector<int32_t> col_off(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j)
      col_off[static_cast<size_t>(j)] =
          stored_offset(b_zp[b_zp.size() == 1 ? 0 : static_cast<size_t>(j)], b_signed, false);
    QStore store;
    std::vector<float> mult;
    if (qlinear || to_float) {
      const Tensor& bs = ctx.input(s_.b_scale);
      if (bs.numel() != 1 && bs.numel() != n)
        node.fail("b_scale has " + std::to_string(bs.numel()) + " values, expected 1 or " +
                      std::to_string(n) + " (one per column of B)",
                  ErrorCode::InvalidArgument);
    }
    std::vector<int32_t> int_bias;
    if (qgemm_op) {
      // alpha * a_scale * b_scale[j] (/ y_scale), in float as onnxruntime computes it; C is an
      // int32 bias of 1 or N values (the quantizer's) added to the accumulators.
      const float alpha = node.attr_float("alpha", 1.f);
      const Tensor& bs = ctx.input(s_.b_scale);
      const float ys = qgemm_quantized ? load_float(ctx.input(7), 0) : 1.f;
      mult.resize(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) {
        const float v = alpha * a_scale * load_float(bs, bs.numel() == 1 ? 0 : j);
        mult[static_cast<size_t>(j)] = qgemm_quantized ? v / ys : v;
      }
      store.scale = mult.data();
      if (qgemm_quantized) {
        store.kind = y.dtype() == DType::Int8 ? QStore::Kind::Int8 : QStore::Kind::UInt8;
        store.zero_point = ctx.has_input(8) ? int_values(&ctx.input(8), 1)[0] : 0;
        if (ctx.has_input(8) && ctx.input(8).numel() != 1)
          require_one_value(ctx, {{8, "y_zero_point"}});
      } else {
        store.kind = QStore::Kind::Float32;
      }
      if (const Tensor* c = ctx.optional_input(6)) {
        if (c->dtype() != DType::Int32 || (c->numel() != 1 && c->numel() != n) ||
            (c->rank() == 2 && c->dim(0) != 1))
          node.fail("C is " + std::string(dtype_name(c->dtype())) + " " + to_string(c->shape()) +
                        "; the CPU kernel supports int32 with 1 or " + std::to_string(n) +
                        " values (one per column)",
                    ErrorCode::NotImplemented);
        int_bias.assign(static_cast<size_t>(n), 0);
        for (int64_t j = 0; j < n; ++j)
          int_bias[static_cast<size_t>(j)] = c->data<int32_t>()[c->numel() == 1 ? 0 : j];
        store.bias = int_bias.data();
      }
    } else if (qlinear) {
      mult = requant_multipliers(ctx.input(1), ctx.input(4), ctx.input(6), n);
      store.kind = y.dtype() == DType::Int8 ? QStore::Kind::Int8 : QStore::Kind::UInt8;
      store.scale = mult.data();
      store.zero_point = int_values(&ctx.input(7), 1)[0];
    } else if (to_float) {
      // y = float(acc) * (a_scale * b_scale[j]) + bias[j], as onnxruntime's kernels.
      const Tensor& bs = ctx.input(s_.b_scale);
      mult.resize(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j)
        mult[static_cast<size_t>(j)] = a_scale * load_float(bs, bs.numel() == 1 ? 0 : j);
      store.kind = QStore::Kind::Float32;
      store.scale = mult.data();
      if (const Tensor* bias = ctx.optional_input(s_.bias)) {
        if (bias->dtype() != DType::Float32 || bias->numel() != n)
          node.fail("bias is " + std::string(dtype_name(bias->dtype())) + " " +
                        to_string(bias->shape()) + ", expected float32 with " + std::to_string(n) +
                        " values (one per column of B)",
                    ErrorCode::InvalidArgument);
        store.fbias = bias->data<float>();
      }
    }
    store.ldc = n;
    const size_t esize = y.dtype() == DType::Int8 || y.dtype() == DType::UInt8 ? 1 : 4;
    const bool packed = packed_ && b.rank() == 2 && packed_->depth() == k && packed_->cols() == n;
    if (qgemm_op) {
      std::optional<QPanels> own;
      if (!packed) own = QPanels::pack(b.raw_data(), b_signed, k, n, b.dim(1), trans_b_, false);
      store.c = y.raw_data();
      qgemm(qgemm_isa(), rows, 0, m, row_off.data(), packed ? *packed_ : *own, col_off.data(),
            store, ctx.pool);
      return;
    }
    for_each_product(a.shape(), b.shape(), b.numel(),
                     [&](int64_t ao, int64_t bo, int64_t yo, int64_t count) {
                       if (count < 0) count = total_rows;
                       std::optional<QPanels> own;
                       if (!packed)
                         own = QPanels::pack(static_cast<const uint8_t*>(b.raw_data()) + bo,
                                             b_signed, k, n, n, false, false);
                       QStore s = store;
                       s.c = static_cast<uint8_t*>(y.raw_data()) + yo * esize;
                       const int64_t row = k > 0 ? ao / k : 0;  // k = 0: no row is read
                       qgemm(qgemm_isa(), rows, row, count, row_off.data() + row,
                             packed ? *packed_ : *own, col_off.data(), s, ctx.pool);
                     });
  }

 private:
  // Zero points as int32: one value, or `count` (a 1-D tensor; per row of A, per column of B).
  static std::vector<int32_t> zero_points(const Node& node, const Tensor* t, int64_t count,
                                          const char* what, DType operand) {
    if (t && t->rank() > 1)
      node.fail(std::string(what) + " has shape " + to_string(t->shape()) +
                    ", expected a scalar or " + std::to_string(count) + " values",
                ErrorCode::NotImplemented);
    return int8_zero_points(node, t, count, what, operand);
  }

  Mode mode_;
  Slots s_;
  bool trans_b_;
  std::optional<QPanels> packed_;
};

}  // namespace

void register_cpu_gemm_integer(KernelRegistry& r) {
  auto factory = [](Mode mode) {
    return KernelFactory([mode](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
      return std::make_unique<QMatMulKernel>(sig, mode);
    });
  };
  r.add("MatMulInteger", dtypes_of_input({DType::Int8, DType::UInt8}), factory(Mode::Integer));
  r.add("QLinearMatMul", qlinear_matmul_support, factory(Mode::QLinear));
  r.add("MatMulIntegerToFloat", dtypes_of_input({DType::Int8, DType::UInt8}),
        factory(Mode::ToFloat), "com.microsoft");
  r.add("DynamicQuantizeMatMul", dtypes_of_input({DType::Float32}), factory(Mode::DynamicToFloat),
        "com.microsoft");
  r.add("QGemm", dtypes_of_input({DType::Int8, DType::UInt8}), factory(Mode::QGemm),
        "com.microsoft");
}

}  // namespace quilt::cpu
