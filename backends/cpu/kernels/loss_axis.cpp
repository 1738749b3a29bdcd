// CPU kernels of the loss family's ops that work along one axis: Hardmax, LRN (across channels)
// and CumProd.
//
// Each views its input as [outer, n, inner] around the axis and walks blocks of the inner row so
// memory is read in order; tasks are outer slices times inner blocks.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/wrapping.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

void register_cpu_loss_axis(KernelRegistry& r);
void run_in_float32(KernelContext& ctx, const KernelFn& fn);  // normalization_float16.cpp

namespace {

struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisView view_at(const std::vector<int64_t>& shape, int64_t axis) {
  AxisView v;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    const int64_t d = shape[static_cast<size_t>(i)];
    if (i < axis)
      v.outer *= d;
    else if (i == axis)
      v.n = d;
    else
      v.inner *= d;
  }
  return v;
}

// Calls fn(o, c0, len) for every outer slice o and block [c0, c0 + len) of the inner row,
// spread over the pool; work_per_item is the cost of one inner element (e.g. n).
template <class Fn>
void for_blocks(const ThreadPool& pool, const AxisView& v, int64_t work_per_item, Fn fn) {
  if (v.outer == 0 || v.inner == 0) return;
  const int64_t block = std::min<int64_t>(v.inner, 1024);
  const int64_t blocks = (v.inner + block - 1) / block;
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work_per_item * block));
  pool.parallel_for(v.outer * blocks, grain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / blocks, c0 = (t % blocks) * block;
      fn(o, c0, std::min(block, v.inner - c0));
    }
  });
}

// float16 is stored as uint16_t bits: these read and write every supported element type.
struct Half {
  uint16_t bits;
};
template <class T>
using Storage = std::conditional_t<std::is_same_v<T, Half>, uint16_t, T>;
template <class T>
double widen(Storage<T> v) {
  if constexpr (std::is_same_v<T, Half>)
    return half_to_float(v);
  else
    return static_cast<double>(v);
}

// ---- Hardmax ----

// 1 at the first maximum along the axis, 0 elsewhere. NaN counts as larger than any number
// (numpy.argmax, which the spec's reference uses).
template <class T>
void hardmax(KernelContext& ctx, const AxisView& v) {
  using S = Storage<T>;
  const S* x = ctx.input(0).data<S>();
  S* y = ctx.output(0).data<S>();
  S one;
  if constexpr (std::is_same_v<T, Half>)
    one = 0x3c00;
  else
    one = S(1);
  for_blocks(ctx.pool, v, v.n, [&](int64_t o, int64_t c0, int64_t len) {
    if (v.n == 0) return;
    std::vector<int64_t> best(static_cast<size_t>(len), 0);
    const S* base = x + o * v.n * v.inner + c0;
    for (int64_t k = 1; k < v.n; ++k) {
      const S* row = base + k * v.inner;
      for (int64_t i = 0; i < len; ++i) {
        const double cur = widen<T>(row[i]), top = widen<T>(base[best[i] * v.inner + i]);
        if (!std::isnan(top) && (cur > top || std::isnan(cur))) best[i] = k;
      }
    }
    S* out = y + o * v.n * v.inner + c0;
    for (int64_t i = 0; i < len; ++i) out[best[i] * v.inner + i] = one;
  });
}

void run_hardmax(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  AxisView v;
  if (ctx.node.opset < 13) {  // coerced to [prod(dims[:axis]), prod(dims[axis:])]
    int64_t axis = ctx.node.attr_int("axis", 1);
    if (axis < 0) axis += x.rank();
    for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? v.outer : v.n) *= x.dim(i);
  } else {
    int64_t axis = ctx.node.attr_int("axis", -1);
    v = view_at(x.shape(), axis < 0 ? axis + x.rank() : axis);
  }
  switch (x.dtype()) {
    case DType::Float32:
      return hardmax<float>(ctx, v);
    case DType::Float64:
      return hardmax<double>(ctx, v);
    case DType::Float16:
      return hardmax<Half>(ctx, v);
    default:
      ctx.node.fail(std::string("unsupported dtype ") + dtype_name(x.dtype()));
  }
}

// ---- LRN ----

// y = x / (bias + alpha / size * sum of x^2 over the channel window) ^ beta, with the window
// [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] clipped to the channels. The scale is
// computed in double.
template <class T>
void lrn(KernelContext& ctx) {
  const Tensor& xt = ctx.input(0);
  const double alpha = ctx.node.attr_float("alpha", 1e-4f);
  const double beta = ctx.node.attr_float("beta", 0.75f);
  const double bias = ctx.node.attr_float("bias", 1.0f);
  const int64_t size = ctx.node.attr_int("size", 1);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  const AxisView v = view_at(xt.shape(), 1);
  const T* x = xt.data<T>();
  T* y = ctx.output(0).data<T>();
  // Work per element: the channels in the window, at most all of them (size may be huge).
  for_blocks(ctx.pool, v, v.n * std::min(size, v.n), [&](int64_t o, int64_t c0, int64_t len) {
    std::vector<double> sum(static_cast<size_t>(len));
    const T* xs = x + o * v.n * v.inner + c0;
    T* ys = y + o * v.n * v.inner + c0;
    for (int64_t c = 0; c < v.n; ++c) {
      std::fill(sum.begin(), sum.end(), 0.0);
      const int64_t lo = std::max<int64_t>(0, c - before), hi = std::min(v.n - 1, c + after);
      for (int64_t k = lo; k <= hi; ++k)
        for (int64_t i = 0; i < len; ++i) {
          const double e = xs[k * v.inner + i];
          sum[i] += e * e;
        }
      for (int64_t i = 0; i < len; ++i)
        ys[c * v.inner + i] =
            static_cast<T>(xs[c * v.inner + i] / std::pow(bias + alpha / size * sum[i], beta));
    }
  });
}

void run_lrn(KernelContext& ctx) {
  switch (ctx.input(0).dtype()) {
    case DType::Float32:
      return lrn<float>(ctx);
    case DType::Float64:
      return lrn<double>(ctx);
    case DType::Float16:
      return run_in_float32(ctx, run_lrn);
    default:
      ctx.node.fail(std::string("unsupported dtype ") + dtype_name(ctx.input(0).dtype()));
  }
}

// ---- CumProd ----

// Products in the element type, one step at a time like numpy.cumprod: integers wrap around
// (wrapping.hpp), float16 rounds after every product (the float32 product of two float16
// values is exact, so this is float16 multiplication).
template <class T>
Storage<T> multiply(Storage<T> a, Storage<T> b) {
  if constexpr (std::is_same_v<T, Half>) {
    return float_to_half(half_to_float(a) * half_to_float(b));
  } else {
    return wrapping_mul(a, b);
  }
}

template <class T>
void cumprod(KernelContext& ctx, int64_t axis) {
  using S = Storage<T>;
  const Tensor& xt = ctx.input(0);
  const AxisView v = view_at(xt.shape(), axis);
  const bool exclusive = ctx.node.attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.node.attr_int("reverse", 0) != 0;
  S one;
  if constexpr (std::is_same_v<T, Half>)
    one = 0x3c00;
  else
    one = S(1);
  const S* src = xt.data<S>();
  S* dst = ctx.output(0).data<S>();
  for_blocks(ctx.pool, v, v.n, [&](int64_t o, int64_t c0, int64_t len) {
    auto at = [&](int64_t k) { return (o * v.n + k) * v.inner + c0; };
    for (int64_t s = 0; s < v.n; ++s) {
      const int64_t k = reverse ? v.n - 1 - s : s;
      S* out = dst + at(k);
      if (s == 0) {
        for (int64_t i = 0; i < len; ++i) out[i] = exclusive ? one : src[at(k) + i];
        continue;
      }
      const int64_t prev = reverse ? k + 1 : k - 1;
      const S* before = dst + at(prev);
      const S* factor = src + at(exclusive ? prev : k);
      for (int64_t i = 0; i < len; ++i) out[i] = multiply<T>(before[i], factor[i]);
    }
  });
}

void run_cumprod(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& a = ctx.input(1);
  if (a.numel() != 1) ctx.node.fail("axis must hold exactly one value", ErrorCode::InvalidArgument);
  int64_t axis = a.dtype() == DType::Int32 ? a.data<int32_t>()[0] : a.data<int64_t>()[0];
  if (axis < -x.rank() || axis >= x.rank())
    ctx.node.fail(
        "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()),
        ErrorCode::InvalidArgument);
  if (axis < 0) axis += x.rank();
  switch (x.dtype()) {
    case DType::Float32:
      return cumprod<float>(ctx, axis);
    case DType::Float64:
      return cumprod<double>(ctx, axis);
    case DType::Float16:
      return cumprod<Half>(ctx, axis);
    case DType::Int32:
      return cumprod<int32_t>(ctx, axis);
    case DType::Int64:
      return cumprod<int64_t>(ctx, axis);
    case DType::UInt32:
      return cumprod<uint32_t>(ctx, axis);
    case DType::UInt64:
      return cumprod<uint64_t>(ctx, axis);
    default:
      ctx.node.fail(std::string("unsupported dtype ") + dtype_name(x.dtype()));
  }
}

}  // namespace

void register_cpu_loss_axis(KernelRegistry& r) {
  const std::vector<DType> floats = {DType::Float32, DType::Float64, DType::Float16};
  r.add("Hardmax", dtypes_of_input(floats), run_hardmax);
  r.add("LRN", dtypes_of_input(floats), run_lrn);
  r.add("CumProd",
        dtypes_of_input({DType::Float32, DType::Float64, DType::Float16, DType::Int32, DType::Int64,
                         DType::UInt32, DType::UInt64}),
        run_cumprod);
}

}  // namespace quilt::cpu
