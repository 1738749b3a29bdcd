// One element of a numeric tensor as a number, whatever its dtype: for code that reads a few
// values (constants at load, host kernels) rather than streaming them.
#pragma once

#include <optional>

#include "core/float8.hpp"
#include "core/half.hpp"
#include "core/int4.hpp"
#include "quilt/quilt.hpp"

namespace quilt {

// Element i of t (long double holds every int64 and uint64 exactly; float16, bfloat16, the
// float8 types and float4e2m1 decoded; the packed integer types read); nullopt for a string tensor
// or a dtype Quilt does not know.
inline std::optional<long double> element_value(const Tensor& t, int64_t i) {
  const void* p = t.raw_data();
  switch (t.dtype()) {
    case DType::Float32:
      return static_cast<const float*>(p)[i];
    case DType::Float64:
      return static_cast<const double*>(p)[i];
    case DType::Float16:
      return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::BFloat16:
      return bfloat16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::Int8:
      return static_cast<const int8_t*>(p)[i];
    case DType::Int16:
      return static_cast<const int16_t*>(p)[i];
    case DType::Int32:
      return static_cast<const int32_t*>(p)[i];
    case DType::Int64:
      return static_cast<const int64_t*>(p)[i];
    case DType::UInt8:
      return static_cast<const uint8_t*>(p)[i];
    case DType::UInt16:
      return static_cast<const uint16_t*>(p)[i];
    case DType::UInt32:
      return static_cast<const uint32_t*>(p)[i];
    case DType::UInt64:
      return static_cast<const uint64_t*>(p)[i];
    case DType::Bool:
      return static_cast<const uint8_t*>(p)[i] != 0;
    case DType::Float8E8M0:
      return e8m0_to_float(static_cast<const uint8_t*>(p)[i]);
    case DType::Float4E2M1:
      return minifloat_to_double(kE2M1, packed_code(static_cast<const uint8_t*>(p), i, 4));
    case DType::Int4:
    case DType::UInt4:
    case DType::Int2:
    case DType::UInt2:
      return packed_int_get(static_cast<const uint8_t*>(p), i, t.dtype());
    default:
      if (const MiniFloatFormat* f = minifloat_format(t.dtype()); f && is_float8(t.dtype()))
        return minifloat_to_double(*f, static_cast<const uint8_t*>(p)[i]);
      return std::nullopt;
  }
}

}  // namespace quilt
