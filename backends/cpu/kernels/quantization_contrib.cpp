// onnxruntime's com.microsoft QLinear* ops, as its quantizer (QOperator format) writes them:
// the inputs dequantized ((x - zero_point) * scale, float32), the op computed in float, the result
// quantized with QuantizeLinear's rounding (round half to even, saturate). Their semantics from
// onnxruntime's contrib-op documentation; onnxruntime's own kernels use other float formulas
// (precomputed scale ratios, their own exp), so a result can differ from its by one step where
// the value lies at a rounding tie.
//
// QLinearSigmoid and QLinearLeakyRelu map each of the 256 input values through a table made per
// run; QLinearAdd and QLinearMul broadcast; QLinearGlobalAveragePool sums exactly in int64.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/broadcast.hpp"
#include "backends/cpu/kernels/quantization_common.hpp"

namespace quilt::cpu {
namespace {

// A per-tensor scale (float32) and zero point (absent: 0) at inputs s and z.
struct QParam {
  float scale;
  int32_t zero_point;
};

QParam qparam(const KernelContext& ctx, size_t s, size_t z, const char* scale_name,
              const char* zp_name) {
  const Tensor& st = ctx.input(s);
  if (st.numel() != 1 || st.dtype() != DType::Float32)
    ctx.node.fail(std::string(scale_name) + " is " + dtype_name(st.dtype()) + " " +
                      to_string(st.shape()) + ", expected one float32 value (per tensor)",
                  ErrorCode::InvalidArgument);
  const DType data = ctx.input(0).dtype();
  const std::vector<int32_t> zp =
      int8_zero_points(ctx.node, ctx.optional_input(z), 1, zp_name, data);
  return {st.data<float>()[0], zp[0]};
}

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

}  // namespace

void register_cpu_quantization_contrib(KernelRegistry& r) {
  const std::string ms = "com.microsoft";
  r.add("QLinearAdd", int8_data, run_qlinear_binary<false>, ms);
  r.add("QLinearMul", int8_data, run_qlinear_binary<true>, ms);
  r.add("QLinearSigmoid", int8_data, run_qlinear_sigmoid, ms);
  r.add("QLinearLeakyRelu", int8_data, run_qlinear_leaky_relu, ms);
  r.add("QLinearGlobalAveragePool", int8_data, run_qlinear_global_pool, ms);
}

}  // namespace quilt::cpu
