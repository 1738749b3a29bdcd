// CPU kernels of the quantization op family: QuantizeLinear, DequantizeLinear and
// DynamicQuantizeLinear here; MatMulInteger and QLinearMatMul in gemm_integer.cpp, ConvInteger and
// QLinearConv in conv_integer.cpp.
//
// QuantizeLinear divides in the precision the spec names (the `precision` attribute, else the
// scale's type; float16 division is a float32 division rounded to float16, which is correctly
// rounded) and rounds half to even with saturation. float8 outputs take the quotient's one
// rounding to float8 (nearest even, the `saturate` attribute deciding overflow, like Cast), as
// onnx's reference does; float8 zero points must be 0 (nonzero ones are refused). int4/uint4
// (packed two per byte) saturate to [-8, 7] / [0, 15], int2/uint2 (four per byte) to [-2, 1] /
// [0, 3]. float4e2m1 outputs take the quotient's one rounding to nearest even, saturating at +-6
// (ml_dtypes' cast, as onnx's reference does); its zero points must be 0 like float8's.
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/broadcast.hpp"
#include "backends/cpu/kernels/quantization_common.hpp"
#include "core/element.hpp"
#include "core/float8.hpp"
#include "core/ops/quantization_layout.hpp"

namespace quilt::cpu {

namespace {

// Calls fn(element_begin, count, param_begin, param_step) over runs of x's elements that share
// one parameter (param_step 0) or walk the parameters one by one (param_step 1, blocked).
template <class Fn>
void for_each_param_run(const ThreadPool& pool, const QuantLayout& l, int64_t numel, Fn&& fn) {
  if (numel == 0) return;
  if (l.kind == QuantLayout::Kind::PerTensor) {
    pool.parallel_for(numel, kElementwiseGrain, [&](int64_t b, int64_t e) { fn(b, e - b, 0, 0); });
    return;
  }
  const int64_t rows = l.outer * l.dim;
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, l.inner));
  const int64_t nb = l.blocks();
  pool.parallel_for(rows, grain, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const int64_t o = r / l.dim, a = r % l.dim;
      if (l.kind == QuantLayout::Kind::PerAxis)
        fn(r * l.inner, l.inner, a, 0);
      else
        fn(r * l.inner, l.inner, (o * nb + a / l.block) * l.inner, 1);
    }
  });
}

QuantLayout layout_of(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const int64_t block_size = n.opset >= 21 ? n.attr_int("block_size", 0) : 0;
  QuantLayout l;
  std::string err = quant_layout(n, ctx.input(0).shape(), ctx.input(1).shape(),
                                 n.attr_int("axis", 1), block_size, l);
  if (!err.empty()) n.fail(err);
  if (ctx.has_input(2) && ctx.input(2).numel() != ctx.input(1).numel())
    n.fail("zero point has shape " + to_string(ctx.input(2).shape()) +
           ", expected the scale's shape " + to_string(ctx.input(1).shape()));
  return l;
}

// ---- QuantizeLinear ----

// The division's precision: the precision attribute (opset 23+), else the scale's type. When x
// and the scale differ without the attribute, the spec (scale's type) and onnx's reference
// (numpy promotion) disagree, so such nodes are refused.
DType quantize_precision(const Node& n, DType x, DType scale, std::string* reason) {
  const int64_t p = n.opset >= 23 ? n.attr_int("precision", 0) : 0;
  if (p == static_cast<int64_t>(DType::Float32) || p == static_cast<int64_t>(DType::Float16))
    return static_cast<DType>(p);
  if (p != 0) {
    *reason = "precision " + std::to_string(p) + " is not supported (float32 and float16 are)";
    return DType::Undefined;
  }
  if (x != DType::Undefined && scale != DType::Undefined && x != scale) {
    *reason = std::string("x is ") + dtype_name(x) + " but y_scale " + dtype_name(scale) +
              ": set the precision attribute to say which type divides";
    return DType::Undefined;
  }
  return scale;
}

std::string quantize_support(const NodeSignature& sig) {
  const Node& n = sig.node;
  if (unholdable_input(sig, 0) || unholdable_input(sig, 1))
    return "x or y_scale has an element type Quilt cannot hold (bfloat16?)";
  if (unholdable_input(sig, 2)) return "y_zero_point has an element type Quilt cannot hold";
  const DType x = sig.inputs[0].dtype, s = sig.inputs[1].dtype;
  if (!dtype_in(x, {DType::Float32, DType::Float16}))
    return std::string("x is ") + dtype_name(x) + "; the CPU kernel supports float32, float16";
  if (!dtype_in(s, {DType::Float32, DType::Float16}))
    return std::string("y_scale is ") + dtype_name(s) +
           "; the CPU kernel supports float32, float16";
  std::string reason;
  quantize_precision(n, x, s, &reason);
  return reason;
}

// What an integer QuantizeLinear reads besides x: the division's precision, the parameters'
// layout, the scales and the zero points.
struct QuantizeParams {
  DType prec;
  QuantLayout l;
  std::vector<float> scale;
  std::vector<int64_t> zp;
};

// float_zero_point: the zero point is float4e2m1 (checked to be 0 by the caller), read as 0s.
QuantizeParams quantize_params(const KernelContext& ctx, bool float_zero_point = false) {
  const Tensor& s = ctx.input(1);
  std::string reason;
  const DType prec = quantize_precision(ctx.node, ctx.input(0).dtype(), s.dtype(), &reason);
  if (!reason.empty()) ctx.node.fail(reason, ErrorCode::NotImplemented);
  return {prec, layout_of(ctx), float_values(s),
          int_values(float_zero_point ? nullptr : ctx.optional_input(2), s.numel())};
}

template <class Y>
void quantize(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const QuantizeParams qp = quantize_params(ctx);
  Y* y = ctx.output(0).data<Y>();
  const bool x_half = x.dtype() == DType::Float16;
  const float* xf = x_half ? nullptr : x.data<float>();
  const uint16_t* xh = x_half ? x.data<uint16_t>() : nullptr;
  const bool half_div = qp.prec == DType::Float16;
  if constexpr (sizeof(Y) == 1) {
    if (!x_half && !half_div) {
      const std::vector<float> zpf(qp.zp.begin(), qp.zp.end());
      for_each_param_run(ctx.pool, qp.l, x.numel(),
                         [&](int64_t e, int64_t n, int64_t p, int64_t step) {
                           quantize_f32_run(xf + e, n, qp.scale.data() + p, zpf.data() + p,
                                            static_cast<int>(step), y + e);
                         });
      return;
    }
  }
  for_each_param_run(ctx.pool, qp.l, x.numel(), [&](int64_t e, int64_t n, int64_t p, int64_t step) {
    for (int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<size_t>(p + i * step);
      float v = x_half ? half_to_float(xh[e + i]) : xf[e + i];
      float q;
      if (half_div)
        q = round_to_half(round_to_half(v) / qp.scale[k]);
      else
        q = v / qp.scale[k];
      y[e + i] = saturate_round<Y>(q, qp.zp[k]);
    }
  });
}

// A float8 or float4e2m1 zero point must be all zeros (the only value the spec's float
// quantization uses; onnx's reference ignores a float4e2m1 one when dequantizing).
void require_zero_float_zero_point(const KernelContext& ctx) {
  const Tensor* z = ctx.optional_input(2);
  if (!z) return;
  for (int64_t i = 0; i < z->numel(); ++i)
    if (element_value(*z, i).value_or(1) != 0)
      ctx.node.fail(std::string("a nonzero ") + dtype_name(z->dtype()) +
                        " zero point is not supported (element " + std::to_string(i) + ")",
                    ErrorCode::NotImplemented);
}

void quantize_float8(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  std::string reason;
  const DType prec = quantize_precision(ctx.node, x.dtype(), s.dtype(), &reason);
  if (!reason.empty()) ctx.node.fail(reason, ErrorCode::NotImplemented);
  require_zero_float_zero_point(ctx);
  const QuantLayout l = layout_of(ctx);
  const std::vector<float> scale = float_values(s);
  const MiniFloatFormat& f = *minifloat_format(ctx.output(0).dtype());
  const bool saturate = ctx.node.attr_int("saturate", 1) != 0;
  uint8_t* y = ctx.output(0).data<uint8_t>();
  const bool half_div = prec == DType::Float16;
  for_each_param_run(ctx.pool, l, x.numel(), [&](int64_t e, int64_t n, int64_t p, int64_t step) {
    for (int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<size_t>(p + i * step);
      const float v = load_float(x, e + i);
      const float q = half_div ? round_to_half(round_to_half(v) / scale[k]) : v / scale[k];
      y[e + i] = static_cast<uint8_t>(minifloat_from(f, q, saturate));
    }
  });
}

// Packed y (int4/uint4/int2/uint2, float4e2m1): each element quantized into a byte of its own
// first (tasks of the parallel runs may share a packed byte), then packed.
void quantize_packed(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& yt = ctx.output(0);
  const DType yd = yt.dtype();
  const bool is_float = yd == DType::Float4E2M1;
  if (is_float) require_zero_float_zero_point(ctx);
  const QuantizeParams qp = quantize_params(ctx, is_float);
  const bool half_div = qp.prec == DType::Float16;
  std::vector<uint8_t> q(static_cast<size_t>(x.numel()));
  for_each_param_run(ctx.pool, qp.l, x.numel(), [&](int64_t e, int64_t n, int64_t p, int64_t step) {
    for (int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<size_t>(p + i * step);
      const float v = load_float(x, e + i);
      const float d = half_div ? round_to_half(round_to_half(v) / qp.scale[k]) : v / qp.scale[k];
      uint32_t code;
      if (is_float) {
        code = minifloat_from(kE2M1, d, true);
      } else {
        const int64_t r = saturate_round<int16_t>(d, qp.zp[k]);  // rounded, zero point added
        code =
            static_cast<uint32_t>(std::clamp<int64_t>(r, packed_int_min(yd), packed_int_max(yd)));
      }
      q[static_cast<size_t>(e + i)] = static_cast<uint8_t>(code);
    }
  });
  ctx.pool.parallel_for(
      static_cast<int64_t>(yt.nbytes()), kElementwiseGrain, [&](int64_t b, int64_t e) {
        pack_codes(q.data(), x.numel(), dtype_packed_bits(yd), yt.data<uint8_t>(), b, e);
      });
}

void run_quantize(KernelContext& ctx) {
  const DType x = ctx.input(0).dtype(), s = ctx.input(1).dtype();
  if ((x != DType::Float32 && x != DType::Float16) || (s != DType::Float32 && s != DType::Float16))
    ctx.node.fail(std::string("x is ") + dtype_name(x) + " and y_scale " + dtype_name(s) +
                      "; the CPU kernel supports float32 and float16",
                  ErrorCode::NotImplemented);
  switch (ctx.output(0).dtype()) {
    case DType::Int8:
      return quantize<int8_t>(ctx);
    case DType::UInt8:
      return quantize<uint8_t>(ctx);
    case DType::Int16:
      return quantize<int16_t>(ctx);
    case DType::UInt16:
      return quantize<uint16_t>(ctx);
    case DType::Float8E4M3FN:
    case DType::Float8E4M3FNUZ:
    case DType::Float8E5M2:
    case DType::Float8E5M2FNUZ:
      return quantize_float8(ctx);
    case DType::Int4:
    case DType::UInt4:
    case DType::Int2:
    case DType::UInt2:
    case DType::Float4E2M1:
      return quantize_packed(ctx);
    default:
      ctx.node.fail(
          std::string("quantizing to ") + dtype_name(ctx.output(0).dtype()) + " is not supported",
          ErrorCode::NotImplemented);
  }
}

// ---- DequantizeLinear ----

std::string dequantize_support(const NodeSignature& sig) {
  if (unholdable_input(sig, 0) || unholdable_input(sig, 2))
    return "x or x_zero_point has an element type Quilt cannot hold";
  if (unholdable_input(sig, 1)) return "x_scale has an element type Quilt cannot hold (bfloat16?)";
  if (sig.node.opset >= 23 && sig.node.attr_int("output_dtype", 0) == 16)
    return "output_dtype bfloat16 is not supported (float32 and float16 are)";
  const DType x = sig.inputs[0].dtype;
  if (!dtype_in(
          x, {DType::Int8, DType::UInt8, DType::Int16, DType::UInt16, DType::Int32,
              DType::Float8E4M3FN, DType::Float8E4M3FNUZ, DType::Float8E5M2, DType::Float8E5M2FNUZ,
              DType::Int4, DType::UInt4, DType::Int2, DType::UInt2, DType::Float4E2M1}))
    return std::string("x is ") + dtype_name(x) +
           "; the CPU kernel supports int2, uint2, int4, uint4, int8, uint8, int16, uint16, "
           "int32, float8, float4e2m1";
  if (!dtype_in(sig.inputs[1].dtype, {DType::Float32, DType::Float16}))
    return std::string("x_scale is ") + dtype_name(sig.inputs[1].dtype) +
           "; the CPU kernel supports float32, float16";
  return "";
}

// (x - zero_point) * scale: exact differences of 8/16-bit values times the scale in float32 (one
// rounding; a float16 output is then correctly rounded too since float32 has > 2 * 11 + 2 bits).
// int32 differences need 33 bits, so they go through double.
// Packed stands for packed int4/uint4/int2/uint2 x (read with packed_int_get).
struct Packed {};

template <class X, class O>
void dequantize(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  const QuantLayout l = layout_of(ctx);
  const std::vector<float> scale = float_values(s);
  const std::vector<int64_t> zp = int_values(ctx.optional_input(2), s.numel());
  using Stored = std::conditional_t<std::is_same_v<X, Packed>, uint8_t, X>;
  const Stored* xp = x.data<Stored>();
  const DType xd = x.dtype();
  O* y = ctx.output(0).data<O>();
  for_each_param_run(ctx.pool, l, x.numel(), [&](int64_t e, int64_t n, int64_t p, int64_t step) {
    for (int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<size_t>(p + i * step);
      float v;
      if constexpr (std::is_same_v<X, Packed>)
        v = static_cast<float>(packed_int_get(xp, e + i, xd) - static_cast<int32_t>(zp[k])) *
            scale[k];
      else if constexpr (sizeof(X) >= 4)
        v = static_cast<float>(static_cast<double>(static_cast<int64_t>(xp[e + i]) - zp[k]) *
                               static_cast<double>(scale[k]));
      else
        v = static_cast<float>(static_cast<int32_t>(xp[e + i]) - static_cast<int32_t>(zp[k])) *
            scale[k];
      if constexpr (std::is_same_v<O, float>)
        y[e + i] = v;
      else
        y[e + i] = float_to_half(v);
    }
  });
}

// float8 or float4e2m1 x: its exact value times the scale in float32, rounded once (a float16
// output is then rounded again, as for the integer types above).
template <class O>
void dequantize_float8(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  require_zero_float_zero_point(ctx);
  const QuantLayout l = layout_of(ctx);
  const std::vector<float> scale = float_values(s);
  const MiniFloatFormat& f = *minifloat_format(x.dtype());
  const bool packed = x.dtype() == DType::Float4E2M1;
  const uint8_t* xp = x.data<uint8_t>();
  O* y = ctx.output(0).data<O>();
  for_each_param_run(ctx.pool, l, x.numel(), [&](int64_t e, int64_t n, int64_t p, int64_t step) {
    for (int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<size_t>(p + i * step);
      const uint32_t bits = packed ? packed_code(xp, e + i, 4) : xp[e + i];
      const float v = minifloat_to_float(f, bits) * scale[k];
      if constexpr (std::is_same_v<O, float>)
        y[e + i] = v;
      else
        y[e + i] = float_to_half(v);
    }
  });
}

template <class X>
void dequantize_to(KernelContext& ctx) {
  const DType out = ctx.output(0).dtype();
  if (out == DType::Float32) return dequantize<X, float>(ctx);
  if (out == DType::Float16) return dequantize<X, uint16_t>(ctx);
  ctx.node.fail(std::string("dequantizing to ") + dtype_name(out) + " is not supported",
                ErrorCode::NotImplemented);
}

void run_dequantize(KernelContext& ctx) {
  const DType s = ctx.input(1).dtype();
  if (s != DType::Float32 && s != DType::Float16)
    ctx.node.fail(std::string("x_scale is ") + dtype_name(s) + ", expected float32 or float16",
                  ErrorCode::NotImplemented);
  switch (ctx.input(0).dtype()) {
    case DType::Int8:
      return dequantize_to<int8_t>(ctx);
    case DType::UInt8:
      return dequantize_to<uint8_t>(ctx);
    case DType::Int16:
      return dequantize_to<int16_t>(ctx);
    case DType::UInt16:
      return dequantize_to<uint16_t>(ctx);
    case DType::Int32:
      return dequantize_to<int32_t>(ctx);
    case DType::Int4:
    case DType::UInt4:
    case DType::Int2:
    case DType::UInt2:
      return dequantize_to<Packed>(ctx);
    case DType::Float8E4M3FN:
    case DType::Float8E4M3FNUZ:
    case DType::Float8E5M2:
    case DType::Float8E5M2FNUZ:
    case DType::Float4E2M1: {
      const DType out = ctx.output(0).dtype();
      if (out == DType::Float32) return dequantize_float8<float>(ctx);
      if (out == DType::Float16) return dequantize_float8<uint16_t>(ctx);
      ctx.node.fail(std::string("dequantizing to ") + dtype_name(out) + " is not supported",
                    ErrorCode::NotImplemented);
    }
    default:
      ctx.node.fail(std::string("x is ") + dtype_name(ctx.input(0).dtype()) +
                        "; the CPU kernel supports int8, uint8, int16, uint16, int32",
                    ErrorCode::NotImplemented);
  }
}

// ---- DynamicQuantizeLinear ----

void run_dynamic_quantize(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  uint8_t* y = ctx.output(0).data<uint8_t>();
  const auto [scale, zp] = dynamic_quantize_u8(x.data<float>(), x.numel(), y, ctx.pool);
  if (ctx.wants_output(1)) ctx.output(1).data<float>()[0] = scale;
  if (ctx.wants_output(2)) ctx.output(2).data<uint8_t>()[0] = zp;
}

}  // namespace

// saturate(round_half_even(x[i] / scale) + zp) for float32 x into int8/uint8, 32 at a time: the
// same division (correctly rounded) and rounding as saturate_round, NaN giving the zero point.
// scale and zp hold one value (step 0) or one per element (step 1, a blocked layout).
template <class Y>
void quantize_f32_run(const float* x, int64_t n, const float* scale, const float* zp, int step,
                      Y* y) {
  constexpr bool u8 = std::is_same_v<Y, uint8_t>;
  const __m256 lo = _mm256_set1_ps(u8 ? 0.f : -128.f), hi = _mm256_set1_ps(u8 ? 255.f : 127.f);
  auto eight = [&](int64_t i) {
    const __m256 s = step ? _mm256_loadu_ps(scale + i) : _mm256_set1_ps(scale[0]);
    const __m256 z = step ? _mm256_loadu_ps(zp + i) : _mm256_set1_ps(zp[0]);
    __m256 q = _mm256_div_ps(_mm256_loadu_ps(x + i), s);
    q = _mm256_and_ps(q, _mm256_cmp_ps(q, q, _CMP_ORD_Q));  // NaN -> 0
    q = _mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(q, z), lo), hi);
    return _mm256_cvtps_epi32(q);
  };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    // In range already, so the saturating packs only narrow; then undo their lane interleave.
    const __m256i ab = _mm256_packs_epi32(eight(i), eight(i + 8));
    const __m256i cd = _mm256_packs_epi32(eight(i + 16), eight(i + 24));
    const __m256i v = u8 ? _mm256_packus_epi16(ab, cd) : _mm256_packs_epi16(ab, cd);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  for (; i < n; ++i)
    y[i] = saturate_round<Y>(x[i] / scale[step ? i : 0], static_cast<int64_t>(zp[step ? i : 0]));
}

template void quantize_f32_run<uint8_t>(const float*, int64_t, const float*, const float*, int,
                                        uint8_t*);
template void quantize_f32_run<int8_t>(const float*, int64_t, const float*, const float*, int,
                                       int8_t*);

// uint8 quantization over [min(0, min x), max(0, max x)] in float32. When that range is empty
// (x all zeros) the spec's formula divides by zero; like onnxruntime (whose formula onnx's
// reference quotes) the scale is then 1. y and the zero point are 0 whatever the scale.
std::pair<float, uint8_t> dynamic_quantize_u8(const float* xp, int64_t count, uint8_t* y,
                                              const ThreadPool& pool) {
  // min(0, min x) and max(0, max x), NaNs skipped (as std::min/max with the bound first), over
  // chunks of the pool, eight lanes at a time.
  const int64_t chunks =
      std::max<int64_t>(1, std::min<int64_t>(pool.threads() * 4, count / kElementwiseGrain));
  std::vector<float> los(static_cast<size_t>(chunks), 0.f), his(static_cast<size_t>(chunks), 0.f);
  pool.parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t b = count * c / chunks, e = count * (c + 1) / chunks;
      __m256 vlo = _mm256_setzero_ps(), vhi = _mm256_setzero_ps();
      int64_t i = b;
      for (; i + 8 <= e; i += 8) {
        const __m256 v = _mm256_loadu_ps(xp + i);
        vlo = _mm256_min_ps(v, vlo);  // a NaN v keeps the bound
        vhi = _mm256_max_ps(v, vhi);
      }
      alignas(32) float l8[8], h8[8];
      _mm256_store_ps(l8, vlo);
      _mm256_store_ps(h8, vhi);
      float lo = 0, hi = 0;
      for (int k = 0; k < 8; ++k) {
        lo = std::min(lo, l8[k]);
        hi = std::max(hi, h8[k]);
      }
      for (; i < e; ++i) {
        lo = std::min(lo, xp[i]);
        hi = std::max(hi, xp[i]);
      }
      los[static_cast<size_t>(c)] = lo;
      his[static_cast<size_t>(c)] = hi;
    }
  });
  const float lo = *std::min_element(los.begin(), los.end());
  const float hi = *std::max_element(his.begin(), his.end());
  const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  const float zp_f = std::clamp(0.0f - lo / scale, 0.0f, 255.0f);
  const auto zp = static_cast<int64_t>(std::nearbyint(zp_f));
  const float zpf = static_cast<float>(zp);
  pool.parallel_for(count, kElementwiseGrain, [&](int64_t b, int64_t e) {
    quantize_f32_run(xp + b, e - b, &scale, &zpf, 0, y + b);
  });
  return {scale, static_cast<uint8_t>(zp)};
}

void register_cpu_quantization(KernelRegistry& r) {
  for (const char* domain : {"", "com.microsoft"}) {
    r.add("QuantizeLinear", quantize_support, run_quantize, domain);
    r.add("DequantizeLinear", dequantize_support, run_dequantize, domain);
  }
  r.add("DynamicQuantizeLinear", float_only(), run_dynamic_quantize);
  register_cpu_gemm_integer(r);
  register_cpu_conv_integer(r);
  register_cpu_quantization_contrib(r);
  register_cpu_matmul_nbits(r);
}

}  // namespace quilt::cpu
