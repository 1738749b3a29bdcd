// Gemm and MatMul on OpenBLAS sgemm.
#include <algorithm>

#include "backends/cpu/blas.hpp"
#include "backends/cpu/kernel.hpp"

namespace quilt::cpu {
namespace {

// Y = alpha * op(A) * op(B) + beta * C, with C broadcast to (M, N).
void run_gemm(KernelContext& ctx) {
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
    // Strides of C seen as (M, N): a broadcast dim has stride 0.
    std::vector<int64_t> cs = c->shape();
    while (cs.size() < 2) cs.insert(cs.begin(), 1);
    const int64_t row_stride = cs[0] == 1 ? 0 : cs[1];
    const int64_t col_stride = cs[1] == 1 ? 0 : 1;
    const float* cp = c->data<float>();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) yp[i * n + j] = beta * cp[i * row_stride + j * col_stride];
    gemm_beta = 1.f;
  }
  sgemm(ta, tb, m, n, k, alpha, a.data<float>(), a.dim(1), b.data<float>(), b.dim(1), gemm_beta, yp,
        n);
}

// numpy matmul: 1-D operands are promoted to matrices, batch dims broadcast.
void run_matmul(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& y = ctx.output(0);
  std::vector<int64_t> as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  if (y.numel() == 0) return;
  if (bs.size() == 2) {
    // B is shared by every batch of A: fold A's batch dims into M, one GEMM.
    sgemm(false, false, y.numel() / n, n, k, 1.f, ap, k, bp, n, 0.f, yp, n);
    return;
  }
  // Broadcast batch dims: walk the output batch index, mapping it into A's and B's.
  const size_t rank = std::max(as.size(), bs.size());
  while (as.size() < rank) as.insert(as.begin(), 1);
  while (bs.size() < rank) bs.insert(bs.begin(), 1);
  const size_t nb = rank - 2;
  std::vector<int64_t> out_batch(nb), a_stride(nb), b_stride(nb);
  int64_t sa = m * k, sb = k * n, batches = 1;
  for (size_t i = nb; i-- > 0;) {
    out_batch[i] = std::max(as[i], bs[i]);
    a_stride[i] = as[i] == 1 ? 0 : sa;
    b_stride[i] = bs[i] == 1 ? 0 : sb;
    sa *= as[i];
    sb *= bs[i];
    batches *= out_batch[i];
  }
  std::vector<int64_t> idx(nb, 0);
  for (int64_t t = 0; t < batches; ++t) {
    int64_t ao = 0, bo = 0;
    for (size_t i = 0; i < nb; ++i) {
      ao += idx[i] * a_stride[i];
      bo += idx[i] * b_stride[i];
    }
    sgemm(false, false, m, n, k, 1.f, ap + ao, k, bp + bo, n, 0.f, yp + t * m * n, n);
    for (size_t i = nb; i-- > 0;) {
      if (++idx[i] < out_batch[i]) break;
      idx[i] = 0;
    }
  }
}

}  // namespace

void register_cpu_gemm(KernelRegistry& r) {
  r.add("Gemm", float_only(), run_gemm);
  r.add("MatMul", float_only(), run_matmul);
}

}  // namespace quilt::cpu
