// MatMulInteger and QLinearMatMul on the integer GEMM (backends/cpu/qgemm.hpp): A's rows are
// broadcast as uint8 (int8 ones shifted by 128) against B in panels as int8 (uint8 ones shifted
// by 128); the zero points and the shifts are corrected exactly in the store. Constant 2-D
// weights B are packed once, when the kernel is created. QLinearMatMul requantizes in the store:
// y = saturate(round_half_even(acc * a_scale * b_scale[j] / y_scale) + y_zero_point), the
// multiplier computed in the scales' type and the product taken in double, as onnx's reference
// does.
#include <optional>
#include <string>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/matmul_batch.hpp"
#include "backends/cpu/kernels/quantization_common.hpp"
#include "backends/cpu/qgemm.hpp"

namespace quilt::cpu {
namespace {

// Input slots of the two ops.
struct Slots {
  size_t a, a_zp, b, b_zp;
};
constexpr Slots kMatMulInteger{0, 2, 1, 3};
constexpr Slots kQLinearMatMul{0, 2, 3, 5};

class QMatMulKernel : public Kernel {
 public:
  QMatMulKernel(const NodeSignature& sig, bool qlinear)
      : qlinear_(qlinear), s_(qlinear ? kQLinearMatMul : kMatMulInteger) {
    const Tensor* b = s_.b < sig.constants.size() ? sig.constants[s_.b] : nullptr;
    if (b && b->rank() == 2 && (b->dtype() == DType::Int8 || b->dtype() == DType::UInt8))
      packed_ = QPanels::pack(b->raw_data(), b->dtype() == DType::Int8, b->dim(0), b->dim(1),
                              b->dim(1), false, false);
  }

  void run(KernelContext& ctx) const override {
    const Node& node = ctx.node;
    const Tensor& a = ctx.input(s_.a);
    const Tensor& b = ctx.input(s_.b);
    Tensor& y = ctx.output_uninitialized(0);
    if (y.numel() == 0) return;
    const auto [m, k, n] = matmul_dims(a.shape(), b.shape());
    if (qlinear_)
      require_one_value(ctx,
                        {{1, "a_scale"}, {2, "a_zero_point"}, {6, "y_scale"}, {7, "y_zero_point"}});
    const std::vector<int32_t> a_zp =
        zero_points(node, ctx.optional_input(s_.a_zp), qlinear_ ? 1 : m, "a_zero_point", a.dtype());
    const std::vector<int32_t> b_zp =
        zero_points(node, ctx.optional_input(s_.b_zp), n, "b_zero_point", b.dtype());
    const bool a_signed = a.dtype() == DType::Int8, b_signed = b.dtype() == DType::Int8;
    const int64_t total_rows = a.numel() / k;
    const QRows rows = QRows::pack(a.raw_data(), a_signed, total_rows, k, k, true, &ctx.pool);
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
    if (qlinear_) {
      if (ctx.input(4).numel() != 1 && ctx.input(4).numel() != n)
        node.fail("b_scale has " + std::to_string(ctx.input(4).numel()) +
                  " values, expected 1 or " + std::to_string(n) + " (one per column of b)");
      mult = requant_multipliers(ctx.input(1), ctx.input(4), ctx.input(6), n);
      store.kind = y.dtype() == DType::Int8 ? QStore::Kind::Int8 : QStore::Kind::UInt8;
      store.scale = mult.data();
      store.zero_point = int_values(&ctx.input(7), 1)[0];
    }
    store.ldc = n;
    const size_t esize = y.dtype() == DType::Int32 ? 4 : 1;
    const bool packed = packed_ && b.rank() == 2 && packed_->depth() == k && packed_->cols() == n;
    for_each_product(a.shape(), b.shape(), b.numel(),
                     [&](int64_t ao, int64_t bo, int64_t yo, int64_t count) {
                       if (count < 0) count = total_rows;
                       std::optional<QPanels> own;
                       if (!packed)
                         own = QPanels::pack(static_cast<const uint8_t*>(b.raw_data()) + bo,
                                             b_signed, k, n, n, false, false);
                       QStore s = store;
                       s.c = static_cast<uint8_t*>(y.raw_data()) + yo * esize;
                       qgemm(qgemm_isa(), rows, ao / k, count, row_off.data() + ao / k,
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

  bool qlinear_;
  Slots s_;
  std::optional<QPanels> packed_;
};

}  // namespace

void register_cpu_gemm_integer(KernelRegistry& r) {
  r.add("MatMulInteger", dtypes_of_input({DType::Int8, DType::UInt8}),
        KernelFactory([](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
          return std::make_unique<QMatMulKernel>(sig, false);
        }));
  r.add("QLinearMatMul", qlinear_matmul_support,
        KernelFactory([](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
          return std::make_unique<QMatMulKernel>(sig, true);
        }));
}

}  // namespace quilt::cpu
