// onnxruntime's com.microsoft QLinear* ops, as its quantizer (QOperator format) writes them:
// the inputs dequantized ((x - zero_point) * scale, float32), the op computed in float, the result
// quantized with QuantizeLinear's rounding (round half to even, saturate). Their semantics from
// onnxruntime's contrib-op documentation; onnxruntime's own kernels use other float formulas
// (precomputed scale ratios, their own exp), so a result can differ from its by one step where
// the value lies at a rounding tie.
//
// QLinearSigmoid and QLinearLeakyRelu map each of the 256 input values through a table made per
// run; QLinearAdd and QLinearMul broadcast; QLinearGlobalAveragePool and QLinearReduceMean sum
// exactly in int64;
// QLinearSoftmax takes exp from a table of the 256 differences from the row's maximum;
// QLinearConcat and QLinearWhere requantize each input through a table. (QLinearAveragePool is in
// pool.cpp.)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/broadcast.hpp"
#include "backends/cpu/kernels/quantization_common.hpp"

namespace quilt::cpu {
namespace {

// v as a float in a register: keeps the compiler from fusing the product that made it into the
// next addition (-ffp-contract=fast), which would round differently from dequantize-then-add.
inline float rounded(float v) {
  asm("" : "+x"(v));
  return v;
}

std::string int8_data(const NodeSignature& sig) {
  return dtypes_of_input({DType::Int8, DType::UInt8})(sig);
}

// ---- QLinearAdd, QLinearMul ----

template <class T, bool kMul>
void qlinear_binary(KernelContext& ctx) {
  const QParam pa = qparam(ctx, 1, 2, "A_scale", "A_zero_point");
  const QParam pb = qparam(ctx, 4, 5, "B_scale", "B_zero_point");
  const QParam pc = qparam(ctx, 6, 7, "C_scale", "C_zero_point");
  const Tensor& b = ctx.input(3);
  if (b.dtype() != ctx.input(0).dtype())
    ctx.node.fail(std::string("B is ") + dtype_name(b.dtype()) + " but A is " +
                      dtype_name(ctx.input(0).dtype()),
                  ErrorCode::InvalidArgument);
  const Tensor& a = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t n = y.numel();
  const bool a_full = a.numel() == n && a.shape() == y.shape(), a_one = a.numel() == 1;
  const bool b_full = b.numel() == n && b.shape() == y.shape(), b_one = b.numel() == 1;
  if ((a_full || a_one) && (b_full || b_one)) {
    // Eight at a time: both operands dequantized (each product rounded to float before the
    // sum, as the scalar form), then quantize_f32_run.
    const T* ap = a.data<T>();
    const T* bp = b.data<T>();
    T* yp = y.data<T>();
    const float cz = static_cast<float>(pc.zero_point);
    ctx.pool.parallel_for(n, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      alignas(32) float buf[256];
      auto load8 = [](const T* p, int64_t step) {
        if (!step) return _mm256_set1_epi32(int32_t{p[0]});
        const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
        return std::is_signed_v<T> ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v);
      };
      for (int64_t c = lo; c < hi; c += 256) {
        const int64_t m = std::min<int64_t>(256, hi - c);
        int64_t i = 0;
        for (; i + 8 <= m; i += 8) {
          __m256 da = _mm256_mul_ps(
              _mm256_cvtepi32_ps(_mm256_sub_epi32(load8(ap + (a_full ? c + i : 0), a_full),
                                                  _mm256_set1_epi32(pa.zero_point))),
              _mm256_set1_ps(pa.scale));
          __m256 db = _mm256_mul_ps(
              _mm256_cvtepi32_ps(_mm256_sub_epi32(load8(bp + (b_full ? c + i : 0), b_full),
                                                  _mm256_set1_epi32(pb.zero_point))),
              _mm256_set1_ps(pb.scale));
          asm("" : "+x"(da), "+x"(db));  // no fused multiply-add: each product is rounded
          _mm256_store_ps(buf + i, kMul ? _mm256_mul_ps(da, db) : _mm256_add_ps(da, db));
        }
        for (; i < m; ++i) {
          const float da = rounded(
              static_cast<float>(int32_t{ap[a_full ? c + i : 0]} - pa.zero_point) * pa.scale);
          const float db = rounded(
              static_cast<float>(int32_t{bp[b_full ? c + i : 0]} - pb.zero_point) * pb.scale);
          buf[i] = kMul ? da * db : da + db;
        }
        quantize_f32_run(buf, m, &pc.scale, &cz, 0, yp + c);
      }
    });
    return;
  }
  broadcast_binary<T, T, T>(ctx.pool, a, b, y, [=](T x, T w) {
    const float da = rounded(static_cast<float>(int32_t{x} - pa.zero_point) * pa.scale);
    const float db = rounded(static_cast<float>(int32_t{w} - pb.zero_point) * pb.scale);
    const float v = kMul ? da * db : da + db;
    return saturate_round<T>(v / pc.scale, pc.zero_point);
  });
}

template <bool kMul>
void run_qlinear_binary(KernelContext& ctx) {
  if (ctx.input(0).dtype() == DType::Int8) return qlinear_binary<int8_t, kMul>(ctx);
  qlinear_binary<uint8_t, kMul>(ctx);
}

// ---- QLinearSigmoid, QLinearLeakyRelu: a table of the 256 values ----

template <class T, class F>
void qlinear_table(KernelContext& ctx, F f) {
  const QParam px = qparam(ctx, 1, 2, "X_scale", "X_zero_point");
  const QParam py = qparam(ctx, 3, 4, "Y_scale", "Y_zero_point");
  T table[256];
  for (int v = 0; v < 256; ++v) {
    const T x = static_cast<T>(static_cast<uint8_t>(v));
    const float dx = static_cast<float>(int32_t{x} - px.zero_point) * px.scale;
    table[v] = saturate_round<T>(f(dx) / py.scale, py.zero_point);
  }
  const Tensor& x = ctx.input(0);
  const auto* xp = static_cast<const uint8_t*>(x.raw_data());
  T* y = ctx.output(0).data<T>();
  ctx.pool.parallel_for(x.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = table[xp[i]];
  });
}

template <class F>
void run_qlinear_table(KernelContext& ctx, F f) {
  if (ctx.input(0).dtype() == DType::Int8) return qlinear_table<int8_t>(ctx, f);
  qlinear_table<uint8_t>(ctx, f);
}

void run_qlinear_sigmoid(KernelContext& ctx) {
  // In double, rounded once to float.
  run_qlinear_table(ctx, [](float x) {
    return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x))));
  });
}

void run_qlinear_leaky_relu(KernelContext& ctx) {
  const float alpha = ctx.node.attr_float("alpha", 0.01f);
  run_qlinear_table(ctx, [alpha](float x) { return x >= 0 ? x : x * alpha; });
}

// ---- QLinearGlobalAveragePool ----

// y = saturate(round_half_even(sum(x - x_zp) * x_scale / count / y_scale) + y_zp), the sum exact
// and the rest in double.
template <class T>
void qlinear_global_pool(KernelContext& ctx) {
  const QParam px = qparam(ctx, 1, 2, "x_scale", "x_zero_point");
  const QParam py = qparam(ctx, 3, 4, "y_scale", "y_zero_point");
  const Tensor& x = ctx.input(0);
  const bool last = ctx.node.attr_int("channels_last", 0) != 0;
  const int64_t batch = x.dim(0), channels = last ? x.dim(x.rank() - 1) : x.dim(1);
  const int64_t count = batch * channels == 0 ? 0 : x.numel() / (batch * channels);
  const T* xp = x.data<T>();
  T* y = ctx.output(0).data<T>();
  auto finish = [&](int64_t sum) {
    const double v = static_cast<double>(sum - static_cast<int64_t>(px.zero_point) * count) *
                     static_cast<double>(px.scale) / static_cast<double>(count) /
                     static_cast<double>(py.scale);
    return saturate_round<T>(count == 0 ? 0.0 : v, py.zero_point);
  };
  ctx.pool.parallel_for(batch * channels, std::max<int64_t>(1, 4096 / std::max<int64_t>(count, 1)),
                        [&](int64_t b, int64_t e) {
                          for (int64_t r = b; r < e; ++r) {
                            const int64_t nb = r / channels, c = r % channels;
                            int64_t sum = 0;
                            if (last) {
                              const T* base = xp + nb * count * channels + c;
                              for (int64_t i = 0; i < count; ++i) sum += base[i * channels];
                            } else {
                              const T* base = xp + r * count;
                              for (int64_t i = 0; i < count; ++i) sum += base[i];
                            }
                            y[r] = finish(sum);
                          }
                        });
}

void run_qlinear_global_pool(KernelContext& ctx) {
  if (ctx.input(0).dtype() == DType::Int8) return qlinear_global_pool<int8_t>(ctx);
  qlinear_global_pool<uint8_t>(ctx);
}

// ---- QLinearReduceMean ----

// The same arithmetic over the `axes` (ReduceMean-13's attribute; none: every axis): each output
// element's sum exact in int64, gathered in one pass over x.
template <class T>
void qlinear_reduce_mean(KernelContext& ctx) {
  const QParam px = qparam(ctx, 1, 2, "data_scale", "data_zero_point");
  const QParam py = qparam(ctx, 3, 4, "reduced_scale", "reduced_zero_point");
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), !ctx.node.has_attr("axes"));
  for (int64_t a : ctx.node.attr_ints("axes")) {
    if (a < -rank || a >= rank)
      ctx.node.fail(
          "axes holds " + std::to_string(a) + ", out of range for rank " + std::to_string(rank),
          ErrorCode::InvalidArgument);
    reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  }
  // Output index of each input element: walk x's index, with stride 0 along reduced axes.
  std::vector<int64_t> out_stride(static_cast<size_t>(rank), 0);
  int64_t out_count = 1;
  for (int64_t d = rank; d-- > 0;) {
    if (reduced[static_cast<size_t>(d)]) continue;
    out_stride[static_cast<size_t>(d)] = out_count;
    out_count *= x.dim(d);
  }
  const int64_t count = out_count == 0 ? 0 : x.numel() / out_count;
  std::vector<int64_t> sums(static_cast<size_t>(out_count), 0), idx(static_cast<size_t>(rank), 0);
  const T* xp = x.data<T>();
  int64_t o = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    sums[static_cast<size_t>(o)] += xp[i];
    for (int64_t d = rank; d-- > 0;) {  // next index, row-major
      const auto u = static_cast<size_t>(d);
      o += out_stride[u];
      if (++idx[u] < x.dim(d)) break;
      o -= out_stride[u] * idx[u];
      idx[u] = 0;
    }
  }
  T* y = ctx.output(0).data<T>();
  for (int64_t r = 0; r < out_count; ++r) {
    const double v = static_cast<double>(sums[static_cast<size_t>(r)] -
                                         static_cast<int64_t>(px.zero_point) * count) *
                     static_cast<double>(px.scale) / static_cast<double>(count) /
                     static_cast<double>(py.scale);
    y[r] = saturate_round<T>(count == 0 ? 0.0 : v, py.zero_point);
  }
}

void run_qlinear_reduce_mean(KernelContext& ctx) {
  if (ctx.input(0).dtype() == DType::Int8) return qlinear_reduce_mean<int8_t>(ctx);
  qlinear_reduce_mean<uint8_t>(ctx);
}

// ---- QLinearSoftmax ----

// y = quantize(exp(x - max) / sum exp(x - max)) along the axis. x - max only takes the 256
// values -d * x_scale (d = max - x), so exp comes from a table made per run, in double.
template <class T>
void qlinear_softmax(KernelContext& ctx) {
  const QParam px = qparam(ctx, 1, 2, "X_scale", "x_zero_point");
  const QParam py = qparam(ctx, 3, 4, "y_scale", "y_zero_point");
  const Tensor& x = ctx.input(0);
  const bool coerce_2d = ctx.node.attr_int("opset", 13) < 13;
  int64_t axis = ctx.node.attr_int("axis", coerce_2d ? 1 : -1);
  if (axis < 0) axis += x.rank();
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d < axis)
      outer *= x.dim(d);
    else if (d == axis || coerce_2d)
      len *= x.dim(d);
    else
      inner *= x.dim(d);
  }
  double table[256];
  for (int d = 0; d < 256; ++d)
    table[d] = std::exp(-static_cast<double>(d) * static_cast<double>(px.scale));
  const T* xp = x.data<T>();
  T* yp = ctx.output(0).data<T>();
  const float ys = py.scale;
  ctx.pool.parallel_for(outer * inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(len, 1)),
                        [&](int64_t b, int64_t e) {
                          for (int64_t r = b; r < e; ++r) {
                            const int64_t base = (r / inner) * len * inner + r % inner;
                            const T* xr = xp + base;
                            T* yr = yp + base;
                            int32_t m = std::numeric_limits<T>::min();
                            for (int64_t k = 0; k < len; ++k)
                              m = std::max<int32_t>(m, xr[k * inner]);
                            double sum = 0;
                            for (int64_t k = 0; k < len; ++k) sum += table[m - xr[k * inner]];
                            // The softmax as a float32 value, then QuantizeLinear's float division.
                            for (int64_t k = 0; k < len; ++k)
                              yr[k * inner] = saturate_round<T>(
                                  static_cast<float>(table[m - xr[k * inner]] / sum) / ys,
                                  py.zero_point);
                          }
                        });
}

void run_qlinear_softmax(KernelContext& ctx) {
  if (ctx.input(0).dtype() == DType::Int8) return qlinear_softmax<int8_t>(ctx);
  qlinear_softmax<uint8_t>(ctx);
}

// ---- QLinearConcat, QLinearWhere ----

// table[v] = the byte v (of type T) dequantized with `from` and quantized with `to`.
template <class T>
void requant_table(const QParam& from, const QParam& to, T* table) {
  for (int v = 0; v < 256; ++v) {
    const T q = static_cast<T>(static_cast<uint8_t>(v));
    const float d = static_cast<float>(int32_t{q} - from.zero_point) * from.scale;
    table[v] = saturate_round<T>(d / to.scale, to.zero_point);
  }
}

// (Y_scale, Y_zero_point, then X, X_scale, X_zero_point per input): each X requantized to Y's
// scale and zero point (through a table of its 256 values, or copied when they are the same),
// then Concat.
template <class T>
void qlinear_concat(KernelContext& ctx) {
  const QParam py = qparam(ctx, 0, 1, "Y_scale", "Y_zero_point", 2);
  Tensor& y = ctx.output(0);
  const size_t count = (ctx.num_inputs() - 2) / 3;
  const int64_t rank = y.rank();
  int64_t axis = ctx.node.attr_int("axis", 0);
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) outer *= y.dim(d);
    if (d > axis) inner *= y.dim(d);
  }
  struct Part {
    const uint8_t* data;
    int64_t block;  // elements per outer index: its axis length * inner
    bool copy;
    T table[256];
  };
  std::vector<Part> parts(count);
  for (size_t i = 0; i < count; ++i) {
    const size_t at = 2 + 3 * i;
    const Tensor& x = ctx.input(at);
    const std::string k = std::to_string(i);
    if (x.dtype() != y.dtype())
      ctx.node.fail("X " + k + " is " + dtype_name(x.dtype()) + ", expected " +
                        dtype_name(y.dtype()) + " (Y_zero_point's type)",
                    ErrorCode::InvalidArgument);
    const QParam px =
        qparam(ctx, at + 1, at + 2, ("X_scale " + k).c_str(), ("X_zero_point " + k).c_str(), at);
    Part& p = parts[i];
    p.data = static_cast<const uint8_t*>(x.raw_data());
    p.block = x.dim(axis) * inner;
    p.copy = px.scale == py.scale && px.zero_point == py.zero_point;
    if (!p.copy) requant_table(px, py, p.table);
  }
  auto* yp = static_cast<uint8_t*>(y.raw_data());
  const int64_t row = y.numel() / std::max<int64_t>(outer, 1);
  ctx.pool.parallel_for(outer, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(row, 1)),
                        [&](int64_t b, int64_t e) {
                          for (int64_t o = b; o < e; ++o) {
                            uint8_t* dst = yp + o * row;
                            for (const Part& p : parts) {
                              const uint8_t* s = p.data + o * p.block;
                              if (p.copy) {
                                std::copy(s, s + p.block, dst);
                              } else {
                                T* d = reinterpret_cast<T*>(dst);
                                for (int64_t j = 0; j < p.block; ++j) d[j] = p.table[s[j]];
                              }
                              dst += p.block;
                            }
                          }
                        });
}

void run_qlinear_concat(KernelContext& ctx) {
  if (ctx.output(0).dtype() == DType::Int8) return qlinear_concat<int8_t>(ctx);
  qlinear_concat<uint8_t>(ctx);
}

// Z = where(condition, X, Y), each of X and Y requantized to Z's scale and zero point through a
// table; numpy broadcasting of the three.
template <class T>
void qlinear_where(KernelContext& ctx) {
  const QParam px = qparam(ctx, 2, 3, "x_scale", "x_zero_point", 1);
  const QParam py = qparam(ctx, 5, 6, "y_scale", "y_zero_point", 1);
  const QParam pz = qparam(ctx, 7, 8, "z_scale", "z_zero_point", 1);
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(4);
  if (y.dtype() != x.dtype())
    ctx.node.fail(
        std::string("Y is ") + dtype_name(y.dtype()) + " but X is " + dtype_name(x.dtype()),
        ErrorCode::InvalidArgument);
  T tx[256], ty[256];
  requant_table(px, pz, tx);
  requant_table(py, pz, ty);
  Tensor& out = ctx.output_uninitialized(0);
  BroadcastPlan plan(out.shape(), {&c.shape(), &x.shape(), &y.shape()});
  const bool* pc = c.data<bool>();
  const auto* xb = static_cast<const uint8_t*>(x.raw_data());
  const auto* yb = static_cast<const uint8_t*>(y.raw_data());
  T* po = out.data<T>();
  parallel_runs(ctx.pool, plan, kElementwiseGrain,
                [&](int64_t o, const int64_t* off, int64_t n, const int64_t* s) {
                  const bool* cc = pc + off[0];
                  const uint8_t* xx = xb + off[1];
                  const uint8_t* yy = yb + off[2];
                  for (int64_t i = 0; i < n; ++i)
                    po[o + i] = cc[i * s[0]] ? tx[xx[i * s[1]]] : ty[yy[i * s[2]]];
                });
}

void run_qlinear_where(KernelContext& ctx) {
  if (ctx.input(1).dtype() == DType::Int8) return qlinear_where<int8_t>(ctx);
  qlinear_where<uint8_t>(ctx);
}

std::string where_support(const NodeSignature& sig) {
  if (sig.inputs.size() < 2 || !dtype_in(sig.inputs[1].dtype, {DType::Int8, DType::UInt8}))
    return "X must be int8 or uint8";
  if (sig.inputs[0].dtype != DType::Bool && sig.inputs[0].dtype != DType::Undefined)
    return "condition must be bool";
  return "";
}

std::string concat_support(const NodeSignature& sig) {
  if (sig.inputs.size() < 2 || !dtype_in(sig.inputs[1].dtype, {DType::Int8, DType::UInt8}))
    return "Y_zero_point must be int8 or uint8";
  return "";
}

}  // namespace

void register_cpu_quantization_contrib(KernelRegistry& r) {
  const std::string ms = "com.microsoft";
  r.add("QLinearAdd", int8_data, run_qlinear_binary<false>, ms);
  r.add("QLinearMul", int8_data, run_qlinear_binary<true>, ms);
  r.add("QLinearSigmoid", int8_data, run_qlinear_sigmoid, ms);
  r.add("QLinearLeakyRelu", int8_data, run_qlinear_leaky_relu, ms);
  r.add("QLinearGlobalAveragePool", int8_data, run_qlinear_global_pool, ms);
  r.add("QLinearSoftmax", int8_data, run_qlinear_softmax, ms);
  r.add("QLinearReduceMean", int8_data, run_qlinear_reduce_mean, ms);
  r.add("QLinearConcat", concat_support, run_qlinear_concat, ms);
  r.add("QLinearWhere", where_support, run_qlinear_where, ms);
}

}  // namespace quilt::cpu
