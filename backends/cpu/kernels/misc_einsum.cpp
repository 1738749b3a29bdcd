// The CPU Einsum kernel.
//
// Operands are contracted left to right. Before each contraction, each side gets its diagonals
// taken (repeated subscripts), the subscripts nobody needs any more summed out, and its dims
// permuted to [batch, free, contracted] / [batch, contracted, free], so the contraction is a
// batched GEMM (OpenBLAS for float32, a plain loop otherwise). Dims of size 1 are dropped first:
// that is what broadcasting them means.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "backends/cpu/blas.hpp"
#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/broadcast.hpp"
#include "backends/cpu/kernels/wrapping.hpp"
#include "core/ops/misc_einsum.hpp"

namespace quilt::cpu {

void register_cpu_misc_einsum(KernelRegistry& r);

namespace {

// Move-only: `data` may point into `storage`, which a copy would not follow.
template <class T>
struct Operand {
  Operand() = default;
  Operand(Operand&&) noexcept = default;
  Operand& operator=(Operand&&) noexcept = default;
  Operand(const Operand&) = delete;
  Operand& operator=(const Operand&) = delete;

  std::vector<T> storage;  // owned data, unless `data` points into an input
  const T* data = nullptr;
  std::vector<int> labels;  // one per dim; may repeat only before the first reduce
  std::vector<int64_t> dims;
};

bool contains(const std::vector<int>& v, int l) {
  return std::find(v.begin(), v.end(), l) != v.end();
}

// out[target] = sum over the other subscripts of op (diagonals where subscripts repeat).
// Every target label must be one of op's labels.
template <class T>
Operand<T> reduce_to(Operand<T> op, const std::vector<int>& target,
                     const std::vector<int64_t>& sizes) {
  Operand<T> out;
  out.labels = target;
  for (int l : target) out.dims.push_back(sizes[static_cast<size_t>(l)]);
  if (op.labels == target) return op;  // nothing to do: keep the data
  int64_t out_numel = 1;
  for (int64_t d : out.dims) out_numel *= d;
  out.storage.assign(static_cast<size_t>(out_numel), T(0));
  out.data = out.storage.data();

  // The iteration space: op's distinct labels, with summed strides for repeated ones.
  std::vector<int> space;
  std::vector<int64_t> extent, src_stride, dst_stride;
  int64_t stride = 1;
  std::vector<int64_t> op_strides(op.dims.size());
  for (size_t d = op.dims.size(); d-- > 0;) {
    op_strides[d] = stride;
    stride *= op.dims[d];
  }
  for (size_t d = 0; d < op.labels.size(); ++d) {
    auto it = std::find(space.begin(), space.end(), op.labels[d]);
    if (it == space.end()) {
      space.push_back(op.labels[d]);
      extent.push_back(op.dims[d]);
      src_stride.push_back(op_strides[d]);
    } else {
      src_stride[static_cast<size_t>(it - space.begin())] += op_strides[d];
    }
  }
  int64_t total = 1;
  for (int64_t e : extent) total *= e;
  if (total == 0) return out;
  std::vector<int64_t> out_strides(target.size());
  stride = 1;
  for (size_t d = target.size(); d-- > 0;) {
    out_strides[d] = stride;
    stride *= out.dims[d];
  }
  for (int l : space) {
    auto it = std::find(target.begin(), target.end(), l);
    dst_stride.push_back(
        it == target.end() ? 0 : out_strides[static_cast<size_t>(it - target.begin())]);
  }
  const size_t r = space.size();
  T* dst = out.storage.data();
  if (r == 0) {
    dst[0] = op.data[0];
    return out;
  }
  // Odometer over the space, innermost label last.
  std::vector<int64_t> idx(r, 0);
  int64_t s = 0, o = 0;
  const int64_t inner = extent[r - 1], si = src_stride[r - 1], oi = dst_stride[r - 1];
  for (int64_t done = 0; done < total; done += inner) {
    for (int64_t i = 0; i < inner; ++i)
      dst[o + i * oi] = wrapping_add(dst[o + i * oi], op.data[s + i * si]);
    for (size_t d = r - 1; d-- > 0;) {
      ++idx[d];
      s += src_stride[d];
      o += dst_stride[d];
      if (idx[d] < extent[d]) break;
      s -= idx[d] * src_stride[d];
      o -= idx[d] * dst_stride[d];
      idx[d] = 0;
    }
  }
  return out;
}

// c[b] = a[b] (m x k) * b[b] (k x n) for every batch b, c zero-initialised.
template <class T>
void batched_gemm(const ThreadPool& pool, int64_t batch, int64_t m, int64_t n, int64_t k,
                  const T* a, const T* b, T* c) {
  if (m == 0 || n == 0 || k == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t i = 0; i < batch; ++i)
      sgemm(false, false, m, n, k, 1.0f, a + i * m * k, k, b + i * k * n, n, 0.0f, c + i * m * n,
            n);
  } else {
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n * k));
    pool.parallel_for(batch * m, grain, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t bi = row / m, i = row % m;
        const T* ar = a + bi * m * k + i * k;
        const T* bb = b + bi * k * n;
        T* cr = c + bi * m * n + i * n;
        for (int64_t p = 0; p < k; ++p) {
          const T av = ar[p];
          const T* br = bb + p * n;
          for (int64_t j = 0; j < n; ++j) cr[j] = wrapping_add(cr[j], wrapping_mul(av, br[j]));
        }
      }
    });
  }
}

template <class T>
void einsum(KernelContext& ctx, const EinsumEquation& eq, const std::vector<int64_t>& sizes) {
  const size_t num = eq.inputs.size();
  std::vector<Operand<T>> ops(num);
  for (size_t t = 0; t < num; ++t) {
    const Tensor& x = ctx.input(t);
    ops[t].data = x.data<T>();
    // Dims of size 1 broadcast: drop them (the layout does not change).
    for (size_t d = 0; d < eq.inputs[t].size(); ++d)
      if (x.dim(static_cast<int64_t>(d)) != 1) {
        ops[t].labels.push_back(eq.inputs[t][d]);
        ops[t].dims.push_back(x.dim(static_cast<int64_t>(d)));
      }
  }
  // Labels still needed after operand t: the output's and those of later operands.
  auto needed_after = [&](size_t t) {
    std::vector<int> keep = eq.output;
    for (size_t u = t + 1; u < num; ++u)
      for (int l : ops[u].labels)
        if (!contains(keep, l)) keep.push_back(l);
    return keep;
  };
  auto distinct_in = [](const Operand<T>& op, const std::vector<int>& a,
                        const std::vector<int>& b) {
    std::vector<int> out;
    for (int l : op.labels)
      if ((contains(a, l) || contains(b, l)) && !contains(out, l)) out.push_back(l);
    return out;
  };

  Operand<T> acc;
  if (num == 1) {
    acc = std::move(ops[0]);
  } else {
    const std::vector<int> first = distinct_in(ops[0], needed_after(0), ops[1].labels);
    acc = reduce_to(std::move(ops[0]), first, sizes);
    for (size_t t = 1; t < num; ++t) {
      const std::vector<int> keep = needed_after(t);
      const std::vector<int> b_labels = distinct_in(ops[t], keep, acc.labels);
      Operand<T> b = reduce_to(std::move(ops[t]), b_labels, sizes);
      std::vector<int> a_labels = distinct_in(acc, keep, b.labels);
      std::vector<int> batch, free_a, free_b, contracted;
      for (int l : a_labels) {
        if (contains(b.labels, l))
          (contains(keep, l) ? batch : contracted).push_back(l);
        else
          free_a.push_back(l);
      }
      for (int l : b.labels)
        if (!contains(a_labels, l)) free_b.push_back(l);
      auto product = [&](const std::vector<int>& ls) {
        int64_t p = 1;
        for (int l : ls) p *= sizes[static_cast<size_t>(l)];
        return p;
      };
      std::vector<int> a_order = batch, b_order = batch;
      a_order.insert(a_order.end(), free_a.begin(), free_a.end());
      a_order.insert(a_order.end(), contracted.begin(), contracted.end());
      b_order.insert(b_order.end(), contracted.begin(), contracted.end());
      b_order.insert(b_order.end(), free_b.begin(), free_b.end());
      Operand<T> a = reduce_to(std::move(acc), a_order, sizes);
      b = reduce_to(std::move(b), b_order, sizes);
      const int64_t nb = product(batch), m = product(free_a), n = product(free_b),
                    k = product(contracted);
      Operand<T> c;
      c.labels = batch;
      c.labels.insert(c.labels.end(), free_a.begin(), free_a.end());
      c.labels.insert(c.labels.end(), free_b.begin(), free_b.end());
      for (int l : c.labels) c.dims.push_back(sizes[static_cast<size_t>(l)]);
      c.storage.assign(static_cast<size_t>(nb * m * n), T(0));
      c.data = c.storage.data();
      batched_gemm<T>(ctx.pool, nb, m, n, k, a.data, b.data, c.storage.data());
      acc = std::move(c);
    }
  }
  // Output labels of size 1 were dropped everywhere; the rest are in acc.
  std::vector<int> present;
  for (int l : eq.output)
    if (contains(acc.labels, l)) present.push_back(l);
  Operand<T> result = reduce_to(std::move(acc), present, sizes);
  Tensor& y = ctx.output(0);
  std::copy_n(result.data, y.numel(), y.data<T>());
}

}  // namespace

void register_cpu_misc_einsum(KernelRegistry& r) {
  using EinsumTypes = TypeList<float, double, int32_t, int64_t, uint32_t, uint64_t>;
  r.add(
      "Einsum",
      [](const NodeSignature& sig) -> std::string {
        for (const auto& in : sig.inputs)
          if (in.dtype != DType::Undefined && !visit_dtype(in.dtype, EinsumTypes{}, [](auto) {}))
            return std::string("Einsum on ") + dtype_name(in.dtype) +
                   " is not supported (float, double, int32, int64, uint32, uint64 are)";
        return "";
      },
      [](KernelContext& ctx) {
        std::vector<int64_t> ranks;
        std::vector<std::vector<int64_t>> shapes;
        for (size_t i = 0; i < ctx.num_inputs(); ++i) {
          shapes.push_back(ctx.input(i).shape());
          ranks.push_back(ctx.input(i).rank());
        }
        EinsumEquation eq;
        std::string err = parse_einsum(ctx.node.attr_string("equation", ""), ranks, eq);
        if (err.empty())
          err = [&] {
            std::vector<int64_t> sizes;
            std::string e = einsum_label_sizes(eq, shapes, sizes);
            if (!e.empty()) return e;
            visit_dtype(ctx.input(0).dtype(), EinsumTypes{},
                        [&](auto tag) { einsum<decltype(tag)>(ctx, eq, sizes); });
            return std::string();
          }();
        if (!err.empty()) ctx.node.fail(err, ErrorCode::Runtime);
      });
}

}  // namespace quilt::cpu
