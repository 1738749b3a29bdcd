// CPU kernels of Softmax and LogSoftmax (float32; float16 through float32), numerically stable: the
// row maximum is subtracted before exp. Opset < 13 coerces the input to a matrix at `axis`; opset
// 13 works along that one axis.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/avx512.hpp"
#include "backends/cpu/gcc12_avx512.hpp"
#include "backends/cpu/kernel.hpp"

namespace quilt::cpu {

void register_cpu_softmax(KernelRegistry& r);
void run_in_float32(KernelContext& ctx, const KernelFn& fn);  // normalization_float16.cpp

namespace {

int64_t grain_for(int64_t per_item) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, per_item));
}

// Eight floats as one value (GCC/Clang vector extensions): plain loops with float selects do not
// vectorise under the default -ftrapping-math, these do.
using F8 = float __attribute__((vector_size(32)));
using I8 = int32_t __attribute__((vector_size(32)));
constexpr int64_t kF8 = 8;

F8 load8(const float* p, int64_t n = kF8) {
  F8 v{};
  std::memcpy(&v, p, static_cast<size_t>(n) * sizeof(float));
  return v;
}
void store8(float* p, F8 v, int64_t n = kF8) {
  std::memcpy(p, &v, static_cast<size_t>(n) * sizeof(float));
}

// exp(x) within 1e-7 relative: x = n ln2 + r with |r| <= ln2 / 2, exp(r) by a degree-7 minimax
// polynomial (the Cephes coefficients), 2^n built in the exponent bits. Below ln(FLT_MIN) it
// returns exactly 0, so masked -inf logits give zeros; NaN stays NaN.
F8 exp8(F8 x) {
  constexpr float kLo = -87.33654f, kHi = 88.37626f;
  F8 c = x < kLo ? F8{} + kLo : x;
  c = c > kHi ? F8{} + kHi : c;
  c = c == c ? c : F8{};  // NaN -> 0 keeps the int conversion defined
  const F8 t = c * 1.44269504088896341f;
  const I8 ni = __builtin_convertvector(t + (t < 0 ? F8{} - 0.5f : F8{} + 0.5f), I8);
  const F8 n = __builtin_convertvector(ni, F8);
  const F8 r = c - n * 0.693359375f + n * 2.12194440e-4f;
  F8 p = F8{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const I8 bits = (ni + 127) << 23;
  F8 scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const F8 y = x < kLo ? F8{} : p * scale;
  return x == x ? y : x;
}

// out[i] = exp(in[i] - sub(i)) for i < n; sub(i) gives the subtrahend of the 8 elements at i.
template <class Sub>
void exp_minus(const float* in, float* out, int64_t n, Sub sub) {
  int64_t i = 0;
  for (; i + kF8 <= n; i += kF8) store8(out + i, exp8(load8(in + i) - sub(i, kF8)));
  if (i < n) store8(out + i, exp8(load8(in + i, n - i) - sub(i, n - i)), n - i);
}

// Largest of n > 0 floats (NaN inputs give NaN outputs anyway).
float max_of(const float* x, int64_t n) {
  F8 m = F8{} + x[0];
  int64_t i = 0;
  for (; i + kF8 <= n; i += kF8) {
    const F8 v = load8(x + i);
    m = v > m ? v : m;
  }
  float mx = x[0];
  for (int j = 0; j < kF8; ++j) mx = std::max(mx, m[j]);
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  return mx;
}

// Sum of n floats: 8 float lanes over chunks of 512 (64 values per lane in float), chunk totals
// in double. Vectorises, and stays close to a double sum.
double sum_of(const float* x, int64_t n) {
  constexpr int64_t kChunk = 512;
  double total = 0;
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t m = std::min(kChunk, n - c);
    F8 lanes{};
    int64_t i = 0;
    for (; i + kF8 <= m; i += kF8) lanes += load8(x + c + i);
    if (i < m) lanes += load8(x + c + i, m - i);
    double chunk = 0;
    for (int j = 0; j < kF8; ++j) chunk += lanes[j];
    total += chunk;
  }
  return total;
}

// One Softmax row on 16 lanes: the same steps as the 8-lane form in softmax() (max, exp of the
// difference, a sum kept in double per 512 values, one scale), the exp from avx512.hpp.
// ViT-B/16's 12 Softmaxes over 197-wide rows took 2.7 ms per run with the 8-lane form (ONNX
// Runtime: 0.84).
QUILT_GCC12_AVX512_BEGIN  // backends/cpu/gcc12_avx512.hpp
__attribute__((target("avx512f"))) void softmax_row16(const float* in, float* out, int64_t n) {
  // The first value starts every lane, as max_of: NaN inputs give NaN outputs either way.
  __m512 m = _mm512_set1_ps(in[0]);
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_mask_loadu_ps(m, lanes16(i, n), in + i);
    m = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, m, _CMP_GT_OQ), m, v);
  }
  const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(m));
  double sum = 0;
  for (int64_t c = 0; c < n; c += 512) {
    __m512 lanes = _mm512_setzero_ps();
    for (int64_t i = c; i < std::min(n, c + 512); i += 16) {
      const __mmask16 k = lanes16(i, n);
      const __m512 e = exp_v16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, in + i), mx));
      _mm512_mask_storeu_ps(out + i, k, e);
      lanes = _mm512_add_ps(lanes, _mm512_maskz_mov_ps(k, e));
    }
    sum += _mm512_reduce_add_ps(lanes);
  }
  const __m512 scale = _mm512_set1_ps(static_cast<float>(1.0 / sum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes16(i, n);
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, out + i), scale));
  }
}
QUILT_GCC12_AVX512_END

template <bool Log>
void softmax(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::Float16) return run_in_float32(ctx, softmax<Log>);
  const bool coerce_2d = ctx.node.opset < 13;
  int64_t axis = ctx.node.attr_int("axis", coerce_2d ? 1 : -1);
  if (axis < 0) axis += x.rank();
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i < axis)
      outer *= x.dim(i);
    else if (i == axis || coerce_2d)
      n *= x.dim(i);
    else
      inner *= x.dim(i);
  }
  Tensor& y = ctx.output_uninitialized(0);
  if (y.numel() == 0) return;
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  if (inner == 1) {
    const bool wide = !Log && has_avx512f();
    ctx.pool.parallel_for(outer, grain_for(n), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* in = src + r * n;
        float* out = dst + r * n;
        if (wide) {
          softmax_row16(in, out, n);
          continue;
        }
        const float mx = max_of(in, n);
        exp_minus(in, out, n, [mx](int64_t, int64_t) { return F8{} + mx; });
        const double sum = sum_of(out, n);
        if (Log) {
          // x - max is exact for nearby values; folding max and log(sum) first would round
          // away the small log(sum) when max is large.
          const auto log_sum = static_cast<float>(std::log(sum));
          for (int64_t i = 0; i < n; ++i) out[i] = (in[i] - mx) - log_sum;
        } else {
          const auto k = static_cast<float>(1.0 / sum);
          for (int64_t i = 0; i < n; ++i) out[i] *= k;
        }
      }
    });
    return;
  }
  // Axis not innermost: walk rows of `inner` so reads stay contiguous.
  const int64_t block = std::min<int64_t>(inner, 1024), blocks = (inner + block - 1) / block;
  ctx.pool.parallel_for(outer * blocks, grain_for(n * block), [&](int64_t begin, int64_t end) {
    std::vector<float> mx(static_cast<size_t>(block));
    std::vector<double> sum(static_cast<size_t>(block));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t o = task / blocks, c0 = (task % blocks) * block;
      const int64_t len = std::min(block, inner - c0);
      const float* in = src + o * n * inner + c0;
      float* out = dst + o * n * inner + c0;
      std::copy(in, in + len, mx.begin());
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t k = 1; k < n; ++k)
        for (int64_t t = 0; t < len; ++t) mx[t] = std::max(mx[t], in[k * inner + t]);
      for (int64_t k = 0; k < n; ++k) {
        float* row = out + k * inner;
        exp_minus(in + k * inner, row, len, [&](int64_t i, int64_t m) { return load8(&mx[i], m); });
        for (int64_t t = 0; t < len; ++t) sum[t] += row[t];
      }
      if (Log) {
        for (int64_t t = 0; t < len; ++t) sum[t] = std::log(sum[t]);
        for (int64_t k = 0; k < n; ++k)
          for (int64_t t = 0; t < len; ++t)
            out[k * inner + t] = (in[k * inner + t] - mx[t]) - static_cast<float>(sum[t]);
      } else {
        for (int64_t t = 0; t < len; ++t) mx[t] = static_cast<float>(1.0 / sum[t]);
        for (int64_t k = 0; k < n; ++k)
          for (int64_t t = 0; t < len; ++t) out[k * inner + t] *= mx[t];
      }
    }
  });
}

}  // namespace

void register_cpu_softmax(KernelRegistry& r) {
  const SupportFn floats = dtypes_of_input({DType::Float32, DType::Float16});
  r.add("Softmax", floats, softmax<false>);
  r.add("LogSoftmax", floats, softmax<true>);
}

}  // namespace quilt::cpu
