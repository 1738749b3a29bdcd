// CPU kernels of the reduce family that work along one axis: ArgMax, ArgMin, TopK, CumSum.
//
// Each views its input as [outer, n, inner] around the axis. Loops walk whole inner rows so
// memory is read in order, and split the work over outer slices and blocks of the inner row.
#include <algorithm>
#include <numeric>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/wrapping.hpp"

namespace quilt::cpu {

void register_cpu_reduce_index(KernelRegistry& r);
void run_in_float32(KernelContext& ctx, const KernelFn& fn);  // normalization_float16.cpp

namespace {

struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisView view_at(const std::vector<int64_t>& shape, int64_t axis) {
  AxisView v;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < axis)
      v.outer *= shape[static_cast<size_t>(i)];
    else if (i == axis)
      v.n = shape[static_cast<size_t>(i)];
    else
      v.inner *= shape[static_cast<size_t>(i)];
  }
  return v;
}

int64_t axis_attr(const KernelContext& ctx, int64_t def) {
  int64_t axis = ctx.node.attr_int("axis", def);
  return axis < 0 ? axis + ctx.input(0).rank() : axis;
}

// Splits outer x inner into tasks of whole slices and blocks of the inner row.
template <class Fn>
void for_blocks(const ThreadPool& pool, const AxisView& v, int64_t work_per_item, Fn fn) {
  const int64_t block = std::min<int64_t>(std::max<int64_t>(v.inner, 1), 1024);
  const int64_t blocks = (v.inner + block - 1) / block;
  pool.parallel_for(v.outer * blocks,
                    std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work_per_item * block)),
                    [&](int64_t b, int64_t e) {
                      for (int64_t t = b; t < e; ++t) {
                        const int64_t o = t / blocks, c0 = (t % blocks) * block;
                        fn(o, c0, std::min(block, v.inner - c0));
                      }
                    });
}

// ---- ArgMax / ArgMin ----

template <class T, bool Max>
void arg_reduce(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const AxisView v = view_at(x.shape(), axis_attr(ctx, 0));
  const bool last = ctx.node.attr_int("select_last_index", 0) != 0;
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  if (v.n == 0) ctx.node.fail("cannot take an arg-reduction over an empty axis");
  const T* src = x.data<T>();
  int64_t* dst = y.data<int64_t>();
  for_blocks(ctx.pool, v, v.n, [&](int64_t o, int64_t c0, int64_t len) {
    std::vector<T> best(src + o * v.n * v.inner + c0, src + o * v.n * v.inner + c0 + len);
    int64_t* idx = dst + o * v.inner + c0;
    std::fill(idx, idx + len, 0);
    for (int64_t k = 1; k < v.n; ++k) {
      const T* row = src + (o * v.n + k) * v.inner + c0;
      for (int64_t t = 0; t < len; ++t) {
        const bool better = Max ? (last ? row[t] >= best[t] : row[t] > best[t])
                                : (last ? row[t] <= best[t] : row[t] < best[t]);
        if (better) {
          best[t] = row[t];
          idx[t] = k;
        }
      }
    }
  });
}

template <bool Max>
void run_arg_reduce(KernelContext& ctx) {
  switch (ctx.input(0).dtype()) {
    case DType::Float16:  // exact: comparisons of widened values order them the same way
      return run_in_float32(ctx, run_arg_reduce<Max>);
    case DType::Float32:
      return arg_reduce<float, Max>(ctx);
    case DType::Float64:
      return arg_reduce<double, Max>(ctx);
    case DType::Int32:
      return arg_reduce<int32_t, Max>(ctx);
    case DType::Int64:
      return arg_reduce<int64_t, Max>(ctx);
    default:
      ctx.node.fail("unsupported dtype");
  }
}

// ---- TopK ----

template <class T>
void topk(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = axis_attr(ctx, -1);
  const AxisView v = view_at(x.shape(), axis);
  const int64_t k = ctx.output_shape(0)[static_cast<size_t>(axis)];
  const bool largest = ctx.node.opset < 11 || ctx.node.attr_int("largest", 1) != 0;
  Tensor& values = ctx.output(0);
  Tensor& indices = ctx.output(1);
  if (values.numel() == 0) return;
  const T* src = x.data<T>();
  T* out_v = values.data<T>();
  int64_t* out_i = indices.data<int64_t>();
  // Ties go to the lower index, as in onnxruntime. The result is always sorted, which is one of
  // the orders sorted = 0 allows.
  auto before = [largest](std::pair<T, int64_t> a, std::pair<T, int64_t> b) {
    if (a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
    return a.second < b.second;
  };
  const int64_t slices = v.outer * v.inner;
  ctx.pool.parallel_for(
      slices, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, v.n)), [&](int64_t b, int64_t e) {
        std::vector<std::pair<T, int64_t>> items(static_cast<size_t>(v.n));
        for (int64_t s = b; s < e; ++s) {
          const int64_t o = s / v.inner, i = s % v.inner;
          const T* in = src + o * v.n * v.inner + i;
          for (int64_t j = 0; j < v.n; ++j) items[j] = {in[j * v.inner], j};
          std::partial_sort(items.begin(), items.begin() + k, items.end(), before);
          const int64_t base = o * k * v.inner + i;
          for (int64_t j = 0; j < k; ++j) {
            out_v[base + j * v.inner] = items[j].first;
            out_i[base + j * v.inner] = items[j].second;
          }
        }
      });
}

std::string topk_support(const NodeSignature& sig) {
  std::string r = dtypes_of_input({DType::Float32, DType::Float64, DType::Float16, DType::Int32,
                                   DType::Int64, DType::UInt64})(sig);
  if (!r.empty()) return r;
  if (sig.inputs.size() > 1 && sig.inputs[1].dtype != DType::Undefined &&
      sig.inputs[1].dtype != DType::Int64)
    return std::string("K is ") + dtype_name(sig.inputs[1].dtype) + ", expected int64";
  return "";
}

void run_topk(KernelContext& ctx) {
  switch (ctx.input(0).dtype()) {
    case DType::Float16:  // exact: float16 values survive the round trip through float32
      return run_in_float32(ctx, run_topk);
    case DType::Float32:
      return topk<float>(ctx);
    case DType::Float64:
      return topk<double>(ctx);
    case DType::UInt64:
      return topk<uint64_t>(ctx);
    case DType::Int32:
      return topk<int32_t>(ctx);
    case DType::Int64:
      return topk<int64_t>(ctx);
    default:
      ctx.node.fail("unsupported dtype");
  }
}

// ---- CumSum ----

template <class T>
void cumsum(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& a = ctx.input(1);
  if (a.numel() != 1) ctx.node.fail("axis must hold exactly one value");
  int64_t axis = a.dtype() == DType::Int32 ? a.data<int32_t>()[0] : a.data<int64_t>()[0];
  if (axis < -x.rank() || axis >= x.rank())
    ctx.node.fail("axis " + std::to_string(axis) + " is out of range for rank " +
                  std::to_string(x.rank()));
  if (axis < 0) axis += x.rank();
  const AxisView v = view_at(x.shape(), axis);
  const bool exclusive = ctx.node.attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.node.attr_int("reverse", 0) != 0;
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  for_blocks(ctx.pool, v, v.n, [&](int64_t o, int64_t c0, int64_t len) {
    auto at = [&](int64_t k) { return (o * v.n + k) * v.inner + c0; };
    for (int64_t s = 0; s < v.n; ++s) {
      const int64_t k = reverse ? v.n - 1 - s : s;
      T* out = dst + at(k);
      if (s == 0) {
        for (int64_t t = 0; t < len; ++t) out[t] = exclusive ? T(0) : src[at(k) + t];
        continue;
      }
      const int64_t prev = reverse ? k + 1 : k - 1;
      const T* before = dst + at(prev);
      const T* add = src + at(exclusive ? prev : k);
      for (int64_t t = 0; t < len; ++t) out[t] = wrapping_add(before[t], add[t]);
    }
  });
}

void run_cumsum(KernelContext& ctx) {
  switch (ctx.input(0).dtype()) {
    case DType::Float32:
      return cumsum<float>(ctx);
    case DType::Float64:
      return cumsum<double>(ctx);
    case DType::Int32:
      return cumsum<int32_t>(ctx);
    case DType::Int64:
      return cumsum<int64_t>(ctx);
    default:
      ctx.node.fail("unsupported dtype");
  }
}

}  // namespace

void register_cpu_reduce_index(KernelRegistry& r) {
  const std::vector<DType> arg_types = {DType::Float32, DType::Float64, DType::Float16,
                                        DType::Int32, DType::Int64};
  r.add("ArgMax", dtypes_of_input(arg_types), run_arg_reduce<true>);
  r.add("ArgMin", dtypes_of_input(arg_types), run_arg_reduce<false>);
  r.add("TopK", topk_support, run_topk);
  r.add("CumSum", dtypes_of_input({DType::Float32, DType::Float64, DType::Int32, DType::Int64}),
        run_cumsum);
}

}  // namespace quilt::cpu
