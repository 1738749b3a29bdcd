// Elements of the 4-bit integer types (DType::Int4, DType::UInt4), packed two per byte as ONNX
// stores them: element i in the low nibble of byte i / 2 when i is even, the high one when odd.
#pragma once

#include <algorithm>
#include <cstdint>

namespace quilt {

// Element i of packed 4-bit data, sign-extended for int4.
inline int32_t int4_get(const uint8_t* data, int64_t i, bool is_signed) {
  const uint8_t nibble = (data[i >> 1] >> ((i & 1) * 4)) & 0xF;
  return is_signed ? (nibble ^ 8) - 8 : nibble;
}

// Sets element i (its low 4 bits) without touching the other nibble of its byte.
inline void int4_set(uint8_t* data, int64_t i, int32_t value) {
  const int shift = static_cast<int>(i & 1) * 4;
  uint8_t& b = data[i >> 1];
  b = static_cast<uint8_t>((b & ~(0xF << shift)) | ((value & 0xF) << shift));
}

// The range of int4 ([-8, 7]) or uint4 ([0, 15]).
inline int32_t int4_min(bool is_signed) {
  return is_signed ? -8 : 0;
}
inline int32_t int4_max(bool is_signed) {
  return is_signed ? 7 : 15;
}
inline int32_t int4_saturate(int64_t v, bool is_signed) {
  return static_cast<int32_t>(std::clamp<int64_t>(v, int4_min(is_signed), int4_max(is_signed)));
}

}  // namespace quilt
