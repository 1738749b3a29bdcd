// numpy matmul's shapes, shared by MatMul (gemm.cpp) and the integer products
// (gemm_integer.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace quilt::cpu {

// numpy matmul batching: 1-D operands are promoted to matrices, batch dims broadcast. Calls
// fn(a_offset, b_offset, y_offset) in elements for each (m x k) * (k x n) product.
template <class Fn>
void for_each_product(std::vector<int64_t> as, std::vector<int64_t> bs, int64_t b_numel, Fn&& fn) {
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (b_numel == k * n) {
    // B is shared by every batch of A: fold A's batch dims into M.
    fn(int64_t{0}, int64_t{0}, int64_t{0}, -1);
    return;
  }
  // Walk the output batch index, mapping it into A's and B's.
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
    fn(ao, bo, t * m * n, m);
    for (size_t i = nb; i-- > 0;) {
      if (++idx[i] < out_batch[i]) break;
      idx[i] = 0;
    }
  }
}

// (m, k, n) of a numpy matmul of these shapes.
inline std::array<int64_t, 3> matmul_dims(const std::vector<int64_t>& as,
                                          const std::vector<int64_t>& bs) {
  const int64_t m = as.size() == 1 ? 1 : as[as.size() - 2];
  return {m, as.back(), bs.size() == 1 ? 1 : bs.back()};
}

}  // namespace quilt::cpu
