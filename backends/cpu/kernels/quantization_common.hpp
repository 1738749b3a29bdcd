// Helpers shared by the quantization kernels: reading scale / zero-point tensors into plain
// vectors, round-half-to-even with saturation, the support checks for element types Quilt
// cannot hold, and what the integer products share.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/kernel.hpp"
#include "core/half.hpp"
#include "core/int4.hpp"

namespace quilt::cpu {

// A value of a float32 or float16 tensor as float.
inline float load_float(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::Float16) return half_to_float(t.data<uint16_t>()[i]);
  return t.data<float>()[i];
}

inline std::vector<float> float_values(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = load_float(t, i);
  return out;
}

// Integer tensor values (int2/uint2/int4/uint4/int8/uint8/int16/uint16/int32) as int64; `count`
// zeros when absent.
inline std::vector<int64_t> int_values(const Tensor* t, int64_t count) {
  if (!t) return std::vector<int64_t>(static_cast<size_t>(count), 0);
  std::vector<int64_t> out(static_cast<size_t>(t->numel()));
  for (int64_t i = 0; i < t->numel(); ++i) {
    int64_t v = 0;
    switch (t->dtype()) {
      case DType::Int8:
        v = t->data<int8_t>()[i];
        break;
      case DType::UInt8:
        v = t->data<uint8_t>()[i];
        break;
      case DType::Int16:
        v = t->data<int16_t>()[i];
        break;
      case DType::UInt16:
        v = t->data<uint16_t>()[i];
        break;
      case DType::Int32:
        v = t->data<int32_t>()[i];
        break;
      case DType::Int4:
      case DType::UInt4:
      case DType::Int2:
      case DType::UInt2:
        v = packed_int_get(t->data<uint8_t>(), i, t->dtype());
        break;
      default:
        throw Error(ErrorCode::NotImplemented, std::string("zero point of dtype ") +
                                                   dtype_name(t->dtype()) + " is not supported");
    }
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

// Rounds to float16 precision and back.
inline float round_to_half(float v) {
  return half_to_float(float_to_half(v));
}

// saturate(round_half_even(q) + zero_point) into T's range; NaN gives the zero point.
template <class T>
inline T saturate_round(double q, int64_t zero_point) {
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
  double v = std::nearbyint(q);  // the default rounding mode: to nearest, ties to even
  if (std::isnan(v)) v = 0;
  v = std::clamp(v + static_cast<double>(zero_point), lo, hi);
  return static_cast<T>(v);
}

// True when input i's element type is one the model declares but Quilt cannot hold (float4,
// float8e8m0, 2-bit): the importer gives those dtype Undefined with a known shape. An
// Undefined dtype with unknown shape is merely not inferred yet and is checked at run time.
inline bool unholdable_input(const NodeSignature& sig, size_t i) {
  return i < sig.inputs.size() && sig.node.has_input(i) &&
         sig.inputs[i].dtype == DType::Undefined && sig.inputs[i].has_shape;
}

inline bool dtype_in(DType d, std::initializer_list<DType> allowed) {
  return d == DType::Undefined || std::find(allowed.begin(), allowed.end(), d) != allowed.end();
}

// Number of elements of input i when its shape is known at creation, else -1.
inline int64_t known_numel(const NodeSignature& sig, size_t i) {
  if (i >= sig.inputs.size() || !sig.inputs[i].is_static()) return -1;
  int64_t n = 1;
  for (int64_t d : sig.inputs[i].dims) n *= d;
  return n;
}

// ---- the integer products (gemm_integer.cpp, conv_integer.cpp) ----

// Per-output-channel (or per-column) multipliers a_scale * b_scale[j] / y_scale.
inline std::vector<float> requant_multipliers(const Tensor& a_scale, const Tensor& b_scale,
                                              const Tensor& y_scale, int64_t count) {
  const bool half = b_scale.dtype() == DType::Float16;
  const float as = load_float(a_scale, 0), ys = load_float(y_scale, 0);
  std::vector<float> m(static_cast<size_t>(count));
  for (int64_t j = 0; j < count; ++j) {
    const float bs = load_float(b_scale, b_scale.numel() == 1 ? 0 : j);
    const float v = half ? round_to_half(round_to_half(as * bs) / ys) : as * bs / ys;
    m[static_cast<size_t>(j)] = v;
  }
  return m;
}

// An int8/uint8 zero point as int32 values: {0} when absent, else its one value or its `count`
// values (one per row, column or channel). Its type must be its operand's.
inline std::vector<int32_t> int8_zero_points(const Node& node, const Tensor* t, int64_t count,
                                             const char* what, DType operand) {
  if (!t) return {0};
  if (t->dtype() != operand)
    node.fail(std::string(what) + " is " + dtype_name(t->dtype()) + " but its operand is " +
                  dtype_name(operand),
              ErrorCode::InvalidArgument);
  if (t->numel() != 1 && t->numel() != count)
    node.fail(
        std::string(what) + " has shape " + to_string(t->shape()) + ", expected " +
            (count == 1 ? std::string("one value") : "1 or " + std::to_string(count) + " values"),
        ErrorCode::InvalidArgument);
  std::vector<int32_t> zp(static_cast<size_t>(t->numel()));
  for (int64_t i = 0; i < t->numel(); ++i)
    zp[static_cast<size_t>(i)] =
        t->dtype() == DType::Int8 ? t->data<int8_t>()[i] : t->data<uint8_t>()[i];
  return zp;
}

// A per-tensor scale (float32) and zero point (absent: 0; else of input data_input's type) at
// inputs s and z, as onnxruntime's com.microsoft QLinear* ops take them.
struct QParam {
  float scale;
  int32_t zero_point;
};

inline QParam qparam(const KernelContext& ctx, size_t s, size_t z, const char* scale_name,
                     const char* zp_name, size_t data_input = 0) {
  const Tensor& st = ctx.input(s);
  if (st.numel() != 1 || st.dtype() != DType::Float32)
    ctx.node.fail(std::string(scale_name) + " is " + dtype_name(st.dtype()) + " " +
                      to_string(st.shape()) + ", expected one float32 value (per tensor)",
                  ErrorCode::InvalidArgument);
  const DType data = ctx.input(data_input).dtype();
  const std::vector<int32_t> zp =
      int8_zero_points(ctx.node, ctx.optional_input(z), 1, zp_name, data);
  return {st.data<float>()[0], zp[0]};
}

inline std::string int8_input(const NodeSignature& sig, size_t i, const char* what) {
  if (unholdable_input(sig, i))
    return std::string(what) + " has a float8 type, which Quilt's tensors cannot hold";
  if (!dtype_in(sig.inputs[i].dtype, {DType::Int8, DType::UInt8}))
    return std::string(what) + " is " + dtype_name(sig.inputs[i].dtype) + ", expected int8/uint8";
  return "";
}

inline std::string per_tensor(const NodeSignature& sig, size_t i, const char* what) {
  const int64_t n = known_numel(sig, i);
  if (n > 1)
    return std::string(what) + " has " + std::to_string(n) +
           " values; the CPU kernel supports per-tensor values only here";
  return "";
}

inline std::string qlinear_matmul_support(const NodeSignature& sig) {
  for (auto [i, what] : {std::pair<size_t, const char*>{0, "a"}, {3, "b"}, {7, "y_zero_point"}})
    if (auto r = int8_input(sig, i, what); !r.empty()) return r;
  for (size_t i : {1, 4, 6})
    if (unholdable_input(sig, i) ||
        !dtype_in(sig.inputs[i].dtype, {DType::Float32, DType::Float16}))
      return "scales must be float32 or float16 (bfloat16 cannot be held)";
  // onnx's reference broadcasts a 1-D a/y scale along columns, the spec along rows: refused.
  for (auto [i, what] : {std::pair<size_t, const char*>{1, "a_scale"},
                         {2, "a_zero_point"},
                         {6, "y_scale"},
                         {7, "y_zero_point"}})
    if (auto r = per_tensor(sig, i, what); !r.empty()) return r;
  return "";
}

inline std::string qlinear_conv_support(const NodeSignature& sig) {
  for (auto [i, what] : {std::pair<size_t, const char*>{0, "x"},
                         {2, "x_zero_point"},
                         {3, "w"},
                         {5, "w_zero_point"},
                         {7, "y_zero_point"}})
    if (auto r = int8_input(sig, i, what); !r.empty()) return r;
  for (size_t i : {1, 4, 6})
    if (!dtype_in(sig.inputs[i].dtype, {DType::Float32})) return "scales must be float32";
  for (auto [i, what] : {std::pair<size_t, const char*>{1, "x_scale"},
                         {2, "x_zero_point"},
                         {6, "y_scale"},
                         {7, "y_zero_point"}})
    if (auto r = per_tensor(sig, i, what); !r.empty()) return r;
  return "";
}

// Fails naming the input unless each listed input holds one value (per-tensor parameters).
inline void require_one_value(const KernelContext& ctx,
                              std::initializer_list<std::pair<size_t, const char*>> inputs) {
  for (auto [i, what] : inputs)
    if (ctx.input(i).numel() != 1)
      ctx.node.fail(std::string(what) + " has " + std::to_string(ctx.input(i).numel()) +
                        " values; the CPU kernel supports one (per tensor)",
                    ErrorCode::NotImplemented);
}

// y[i] = saturate(round_half_even(x[i] / scale) + zp) into int8/uint8 (Y), vectorised; scale
// and zp hold one value (step 0) or n (step 1). NaN gives the zero point.
template <class Y>
void quantize_f32_run(const float* x, int64_t n, const float* scale, const float* zp, int step,
                      Y* y);

// DynamicQuantizeLinear's uint8 quantization of x (count values) into y: its scale and zero point.
std::pair<float, uint8_t> dynamic_quantize_u8(const float* x, int64_t count, uint8_t* y,
                                              const ThreadPool& pool);

void register_cpu_gemm_integer(KernelRegistry& r);
void register_cpu_quantization_contrib(KernelRegistry& r);
void register_cpu_matmul_nbits(KernelRegistry& r);
void register_cpu_conv_integer(KernelRegistry& r);

}  // namespace quilt::cpu
