// Gemm and MatMul on OpenBLAS sgemm (float32); Gemm also for float64 and MatMul for float64 and
// 32/64-bit integers, with plain loops.
#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include "backends/cpu/blas.hpp"
#include "backends/cpu/gemm_packed.hpp"
#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/matmul_batch.hpp"
#include "backends/cpu/kernels/wrapping.hpp"

namespace quilt::cpu {
namespace {

using Vec8 = float __attribute__((vector_size(32)));

Vec8 load8(const float* p) {
  Vec8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

float dot(const float* a, const float* b, int64_t n) {
  Vec8 acc0 = {}, acc1 = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 += load8(a + i) * load8(b + i);
    acc1 += load8(a + i + 8) * load8(b + i + 8);
  }
  acc0 += acc1;
  float sum = 0.f;
  for (int j = 0; j < 8; ++j) sum += acc0[j];
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y (1 x n) = alpha * a (1 x k) * op(B) + beta * y. BLAS GEMM with one row is far from
// memory bandwidth, and single-row products (a batch-1 classifier, a decoder step) are common.
void gemv(const float* a, const float* b, bool trans_b, int64_t k, int64_t n, float alpha,
          float beta, float* y, const ThreadPool& pool) {
  if (trans_b) {  // B is (n x k): one dot product per output
    pool.parallel_for(n, std::max<int64_t>(1, 32768 / std::max<int64_t>(k, 1)),
                      [&](int64_t begin, int64_t end) {
                        for (int64_t j = begin; j < end; ++j) {
                          const float v = alpha * dot(a, b + j * k, k);
                          y[j] = beta == 0.f ? v : v + beta * y[j];
                        }
                      });
    return;
  }
  // B is (k x n): accumulate rows of B over a block of columns.
  pool.parallel_for(n, std::max<int64_t>(64, 32768 / std::max<int64_t>(k, 1)),
                    [&](int64_t begin, int64_t end) {
                      float* yb = y + begin;
                      const int64_t len = end - begin;
                      for (int64_t j = 0; j < len; ++j) yb[j] = beta == 0.f ? 0.f : beta * yb[j];
                      for (int64_t i = 0; i < k; ++i) {
                        const float av = alpha * a[i];
                        const float* brow = b + i * n + begin;
                        for (int64_t j = 0; j < len; ++j) yb[j] += av * brow[j];
                      }
                    });
}

// Strides of C seen as (M, N): a broadcast dim has stride 0.
std::pair<int64_t, int64_t> c_strides(const Tensor& c) {
  std::vector<int64_t> cs = c.shape();
  while (cs.size() < 2) cs.insert(cs.begin(), 1);
  return {cs[0] == 1 ? 0 : cs[1], cs[1] == 1 ? 0 : 1};
}

// float64 Gemm with plain loops (BLAS is loaded for sgemm only).
void run_gemm_f64(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* c = ctx.optional_input(2);
  const bool ta = node.attr_int("transA", 0) != 0;
  const bool tb = node.attr_int("transB", 0) != 0;
  const double alpha = node.attr_float("alpha", 1.f);
  const double beta = node.attr_float("beta", 1.f);
  Tensor& y = ctx.output(0);
  const int64_t m = y.dim(0), n = y.dim(1);
  const int64_t k = ta ? a.dim(0) : a.dim(1), lda = a.dim(1), ldb = b.dim(1);
  const double* ap = a.data<double>();
  const double* bp = b.data<double>();
  double* yp = y.data<double>();
  std::vector<double> acc(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double av = ta ? ap[p * lda + i] : ap[i * lda + p];
      for (int64_t j = 0; j < n; ++j) acc[j] += av * (tb ? bp[j * ldb + p] : bp[p * ldb + j]);
    }
    for (int64_t j = 0; j < n; ++j) yp[i * n + j] = alpha * acc[j];
  }
  if (c && beta != 0.0 && c->numel() > 0) {
    const auto [row_stride, col_stride] = c_strides(*c);
    const double* cp = c->data<double>();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) yp[i * n + j] += beta * cp[i * row_stride + j * col_stride];
  }
}

// Y = alpha * op(A) * op(B) + beta * C, with C broadcast to (M, N).
void run_gemm(KernelContext& ctx) {
  if (ctx.input(0).dtype() == DType::Float64) return run_gemm_f64(ctx);
  const Node& node = ctx.node;
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* c = ctx.optional_input(2);
  const bool ta = node.attr_int("transA", 0) != 0;
  const bool tb = node.attr_int("transB", 0) != 0;
  const float alpha = node.attr_float("alpha", 1.f);
  const float beta = node.attr_float("beta", 1.f);
  Tensor& y = ctx.output(0);
  const int64_t m = y.dim(0), n = y.dim(1);
  const int64_t k = ta ? a.dim(0) : a.dim(1);
  float* yp = y.data<float>();
  float gemm_beta = 0.f;
  if (c && beta != 0.f && c->numel() > 0) {
    const auto [row_stride, col_stride] = c_strides(*c);
    const float* cp = c->data<float>();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) yp[i * n + j] = beta * cp[i * row_stride + j * col_stride];
    gemm_beta = 1.f;
  }
  if (m == 1) {  // op(A) is one contiguous row whether or not A is transposed
    gemv(a.data<float>(), b.data<float>(), tb, k, n, alpha, gemm_beta, yp, ctx.pool);
  } else {
    sgemm(ta, tb, m, n, k, alpha, a.data<float>(), a.dim(1), b.data<float>(), b.dim(1), gemm_beta,
          yp, n);
  }
  if (!ctx.activation.none())
    ctx.pool.parallel_for(
        m, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)),
        [&](int64_t lo, int64_t hi) { ctx.activation.apply(yp + lo * n, (hi - lo) * n); });
}

// Gemm with constant float32 weights B, alpha 1 and a bias C that is absent or a constant row
// ([N] or [1, N]): B is packed once at creation and beta * C becomes the tiles' column bias.
// Other Gemms run run_gemm.
class GemmKernel : public Kernel {
 public:
  explicit GemmKernel(const NodeSignature& sig) {
    const Node& node = sig.node;
    const Tensor* b = sig.constants.size() > 1 ? sig.constants[1] : nullptr;
    const Tensor* c = sig.constants.size() > 2 ? sig.constants[2] : nullptr;
    const bool has_c = sig.inputs.size() > 2 && !node.inputs[2].empty();
    if (!b || b->dtype() != DType::Float32 || b->rank() != 2 ||
        sig.inputs[0].dtype != DType::Float32 || node.attr_float("alpha", 1.f) != 1.f)
      return;
    const bool tb = node.attr_int("transB", 0) != 0;
    const int64_t k = tb ? b->dim(1) : b->dim(0), n = tb ? b->dim(0) : b->dim(1);
    const float beta = node.attr_float("beta", 1.f);
    if (has_c && beta != 0.f) {
      if (!c || c->dtype() != DType::Float32 || c->numel() != n ||
          (c->rank() == 2 && c->dim(0) != 1) || c->rank() > 2)
        return;
      bias_.resize(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) bias_[static_cast<size_t>(j)] = beta * c->data<float>()[j];
    }
    // A fused Add's row (GPT-2: Gemm -> Add(bias), input 3 after fusion) is constant too: it
    // joins beta * C here, once, instead of on every run.
    if (const Tensor* fused = sig.constants.size() > 3 ? sig.constants[3] : nullptr) {
      if (fused->dtype() != DType::Float32 || fused->numel() != n) return;
      bias_.resize(static_cast<size_t>(n), 0.f);
      for (int64_t j = 0; j < n; ++j) bias_[static_cast<size_t>(j)] += fused->data<float>()[j];
    }
    trans_a_ = node.attr_int("transA", 0) != 0;
    packed_ = std::make_unique<PackedB>(b->data<float>(), k, n, b->dim(1), tb, sig.bf16);
    // With A's static shape fitting, run() always takes the packed path.
    const TypeShape& a = sig.inputs[0];
    owns_b_ = a.has_shape && a.dims.size() == 2 && (trans_a_ ? a.dims[0] : a.dims[1]) == k;
  }
  bool reads_constant(size_t i) const override { return !(owns_b_ && i == 1); }
  void run(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const int64_t k = packed_ ? packed_->depth() : 0;
    if (!packed_ || a.dtype() != DType::Float32 || a.rank() != 2 ||
        (trans_a_ ? a.dim(0) : a.dim(1)) != k)
      return run_unpacked(ctx);
    Tensor& y = ctx.output_uninitialized(0);
    if (y.numel() == 0) return;
    const int64_t m = trans_a_ ? a.dim(1) : a.dim(0), n = packed_->cols();
    gemm_packed_b(a.data<float>(), a.dim(1), trans_a_, m, *packed_, y.data<float>(), n,
                  bias_.empty() ? nullptr : bias_.data(), ctx.activation, ctx.pool);
  }

 private:
  // run_gemm, then a fused bias and activation in that order.
  static void run_unpacked(KernelContext& ctx) {
    if (!ctx.bias) return run_gemm(ctx);
    const Activation act = ctx.activation;
    ctx.activation = Activation{};
    run_gemm(ctx);
    Tensor& y = ctx.output(0);
    const int64_t n = y.dim(1);
    const float* bias = ctx.bias->data<float>();
    float* yp = y.data<float>();
    for (int64_t i = 0; i < y.dim(0); ++i) {
      for (int64_t j = 0; j < n; ++j) yp[i * n + j] += bias[j];
      act.apply(yp + i * n, n);
    }
  }
  std::unique_ptr<PackedB> packed_;
  std::vector<float> bias_;  // beta * C and a fused bias, both constant
  bool trans_a_ = false;
  bool owns_b_ = false;
};

// y (m x n) = a (m x k) * b (k x n), row-major, for the dtypes the packed GEMM does not take. The
// i-k-j order keeps the inner loop contiguous (and vectorisable). Integers wrap around
// (wrapping.hpp), as in onnxruntime: with plain `+=` and `*` an int32 product that overflowed was
// undefined behaviour (fuzz_run, UBSan: 2 * -2147483648).
template <class T>
void naive_matmul(const T* a, const T* b, T* y, int64_t m, int64_t k, int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    T* yrow = y + i * n;
    std::fill(yrow, yrow + n, T(0));
    for (int64_t p = 0; p < k; ++p) {
      const T av = a[i * k + p];
      const T* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) yrow[j] = wrapping_add(yrow[j], wrapping_mul(av, brow[j]));
    }
  }
}

// float32: products on Quilt's packed GEMM. Several products (attention heads) run one per
// thread; one product is split across the pool. A fused bias (a row added to every row) goes
// before the fused activation.
void matmul_f32(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& y = ctx.output_uninitialized(0);
  if (y.numel() == 0) return;
  // Plain variables, not a structured binding: the lambdas below capture them, which clang
  // before 16 refuses for bindings (the fuzz build uses Debian's clang 15).
  const auto dims = matmul_dims(a.shape(), b.shape());
  const int64_t k = dims[1], n = dims[2];
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  struct Product {
    int64_t ao, bo, yo, rows;
  };
  std::vector<Product> products;
  for_each_product(a.shape(), b.shape(), b.numel(),
                   [&](int64_t ao, int64_t bo, int64_t yo, int64_t rows) {
                     products.push_back({ao, bo, yo, rows < 0 ? y.numel() / n : rows});
                   });
  const Activation none;
  const Activation& act = ctx.bias ? none : ctx.activation;
  if (products.size() == 1 || ctx.pool.threads() == 1) {
    for (const Product& p : products)
      gemm_raw(ap + p.ao, k, p.rows, k, bp + p.bo, n, n, yp + p.yo, n, act, ctx.pool);
  } else {
    static const ThreadPool serial(1);
    ctx.pool.parallel_for(static_cast<int64_t>(products.size()), 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const Product& p = products[static_cast<size_t>(i)];
        gemm_raw(ap + p.ao, k, p.rows, k, bp + p.bo, n, n, yp + p.yo, n, act, serial);
      }
    });
  }
  if (ctx.bias) {
    const float* bias = ctx.bias->data<float>();
    ctx.pool.parallel_for(y.numel() / n, std::max<int64_t>(1, 16384 / n),
                          [&](int64_t lo, int64_t hi) {
                            for (int64_t r = lo; r < hi; ++r) {
                              float* row = yp + r * n;
                              for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
                              ctx.activation.apply(row, n);
                            }
                          });
  }
}

void run_matmul(KernelContext& ctx);

// MatMul: with constant float32 weights B (K x N), B is packed once at creation.
class MatMulKernel : public Kernel {
 public:
  explicit MatMulKernel(const NodeSignature& sig) {
    const Tensor* b = sig.constants.size() > 1 ? sig.constants[1] : nullptr;
    if (b && b->dtype() == DType::Float32 && b->rank() == 2 &&
        sig.inputs[0].dtype == DType::Float32) {
      packed_ = std::make_unique<PackedB>(b->data<float>(), b->dim(0), b->dim(1), b->dim(1), false,
                                          sig.bf16);
      const TypeShape& a = sig.inputs[0];
      owns_b_ = a.has_shape && a.dims.size() >= 2 && a.dims.back() == b->dim(0);
    }
  }
  bool reads_constant(size_t i) const override { return !(owns_b_ && i == 1); }
  void run(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    if (a.dtype() != DType::Float32) {
      if (!ctx.activation.none() || ctx.bias) ctx.node.fail("a fused activation needs float32");
      return run_matmul(ctx);
    }
    if (!packed_ || a.rank() < 2 || a.shape().back() != packed_->depth()) return matmul_f32(ctx);
    Tensor& y = ctx.output_uninitialized(0);
    if (y.numel() == 0) return;
    const int64_t k = packed_->depth(), n = packed_->cols();
    gemm_packed_b(a.data<float>(), k, false, a.numel() / k, *packed_, y.data<float>(), n,
                  ctx.bias ? ctx.bias->data<float>() : nullptr, ctx.activation, ctx.pool);
  }

 private:
  std::unique_ptr<PackedB> packed_;
  bool owns_b_ = false;
};

// MatMul in float64 and the integer types (float32 is matmul_f32).
template <class T>
void matmul(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  // Plain variables, not a structured binding: the lambdas below capture them, which clang
  // before 16 refuses for bindings (the fuzz build uses Debian's clang 15).
  const auto dims = matmul_dims(a.shape(), b.shape());
  const int64_t k = dims[1], n = dims[2];
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  T* yp = y.data<T>();
  for_each_product(a.shape(), b.shape(), b.numel(),
                   [&](int64_t ao, int64_t bo, int64_t yo, int64_t rows) {
                     // rows < 0: one product with every row of A.
                     naive_matmul(ap + ao, bp + bo, yp + yo, rows < 0 ? y.numel() / n : rows, k, n);
                   });
}

void run_matmul(KernelContext& ctx) {
  switch (ctx.input(0).dtype()) {
    case DType::Float64:
      return matmul<double>(ctx);
    case DType::Int32:
      return matmul<int32_t>(ctx);
    case DType::Int64:
      return matmul<int64_t>(ctx);
    case DType::UInt32:
      return matmul<uint32_t>(ctx);
    case DType::UInt64:
      return matmul<uint64_t>(ctx);
    default:
      return matmul_f32(ctx);
  }
}

}  // namespace

void register_cpu_gemm(KernelRegistry& r) {
  r.add("Gemm", dtypes_of_input({DType::Float32, DType::Float64}),
        KernelFactory([](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
          return std::make_unique<GemmKernel>(sig);
        }));
  r.accept_fused_bias("Gemm", 3);  // after A, B, C
  r.accept_fused_activation("Gemm");
  r.add("MatMul",
        dtypes_of_input({DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt32,
                         DType::UInt64}),
        KernelFactory([](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
          return std::make_unique<MatMulKernel>(sig);
        }));
  r.accept_fused_activation("MatMul");
  r.accept_fused_bias("MatMul", 2);
}

}  // namespace quilt::cpu
